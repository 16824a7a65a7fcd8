"""The discrete-event engine: the real ``Fleet`` on a memory store, in virtual time.

Nothing here decides who gets which task. Simulated agents call the ``Fleet`` API as real
agents do -- ``claim``, ``complete(then_claim=1)``, ``post(parent=...)``, ``defer`` -- and
the hub calls ``post(to=...)`` and ``rebalance``; the fleet's own claim cascade and policy
answer. The engine only keeps a calendar of what happens next (a task finishes, work
arrives, the router or the rebalance runs, an idle agent polls), moves the fleet's
``ManualClock`` to the next event, and takes notes for the metrics.

Events at the same moment run in a fixed order -- arrivals, the router, finishes, the
rebalance, polls -- and ties among agents follow a generator seeded with the run's seed,
so a run is a function of (workload, baseline, seed).
"""

from __future__ import annotations

import heapq
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from shoal import policy as rules
from shoal.clock import ManualClock
from shoal.fleet import Fleet
from shoal.model import Claim, Lease, Move, TaskState
from shoal.settings import Settings
from shoal.sim.baselines import Baseline
from shoal.sim.eligibility import CAUSES, Snapshot, classify
from shoal.sim.workloads import TaskSpec, Workload, split_model

__all__ = ["Segment", "Simulation", "Trace"]

# Event kinds, in the order they run when they fall on the same moment.
_ARRIVE, _ROUTE, _FINISH, _REBALANCE, _POLL = range(5)
_HORIZON = 60 * 86400.0  # a run that has not finished after 60 virtual days is stuck
_LONG_LEASE = 30 * 86400.0  # no failures are simulated: a lease never runs out mid-task


@dataclass(frozen=True, slots=True)
class Segment:
    """One stretch of one agent running one task (a fork-join task runs twice: its first
    part, then its join -- in a pool-only fleet, as a task of its own)."""

    agent: str
    task_id: int
    title: str
    domain: str | None
    start: float  # seconds from the run's start
    end: float
    source: str  # queue | pool | steal
    moved: bool  # the rebalance moved it to this agent's queue
    in_domain: bool | None  # None: the task has no domain
    warmup: float  # of the stretch: the warm-up and cold start of a task started cold
    join: bool = False  # the join part of a fork-join task (else its first part, or all)


@dataclass(frozen=True, slots=True)
class TimedMove:
    at: float
    move: Move


@dataclass(slots=True)
class Trace:
    """What happened in one run, for the metrics and the chart."""

    workload: Workload
    baseline: Baseline
    seed: int
    segments: list[Segment] = field(default_factory=list)
    gaps: list[float] = field(default_factory=list)  # spells of being free while work waited
    waits: list[float] = field(default_factory=list)  # a task ready -> claimed
    moves: list[TimedMove] = field(default_factory=list)
    steals: int = 0
    idle_while_waiting: float = 0.0  # agent-seconds free while some task waited
    waiting_time: float = 0.0  # seconds during which some task waited
    eligible_idle: float = 0.0  # agent-seconds free while a task the agent could take waited
    eligible_gaps: list[float] = field(default_factory=list)  # such spells, until work came
    #: eligible_idle by what held the work back (see shoal.sim.eligibility)
    held_by: dict[str, float] = field(default_factory=lambda: dict.fromkeys(CAUSES, 0.0))
    makespan: float = 0.0
    wall: float = 0.0

    @property
    def tasks(self) -> int:
        """How many tasks the workload has (each is done once per run)."""
        return len(self.workload.tasks)


@dataclass(slots=True)
class _Run:
    task_id: int
    spec: TaskSpec
    join: bool
    lease: Lease


@dataclass(slots=True)
class _Agent:
    id: str
    domains: tuple[str, ...]
    running: _Run | None = None
    gap_from: float | None = None  # since when it has been free while work waited
    eligible_from: float | None = None  # ... while work it could take waited
    poll_gen: int = 0  # a poll scheduled under an older generation is void
    empty_polls: int = 0
    said_idle: bool = False


class Simulation:
    """One run of ``workload`` under ``baseline``; ``run()`` returns its ``Trace``."""

    def __init__(
        self,
        workload: Workload,
        baseline: Baseline,
        seed: int = 0,
        settings: Mapping[str, object] | None = None,
    ) -> None:
        model, fleet_settings = split_model(settings)  # the work's own (a cold start), the fleet's
        workload = replace(workload, **model) if model else workload  # type: ignore[arg-type]
        self.workload = workload
        self.baseline = baseline
        self.clock = ManualClock(workload.start)
        self.rng = random.Random(f"sim-{seed}")
        self.fleet = Fleet.open("memory://", clock=self.clock, rng=random.Random(seed))
        Settings().replace(**fleet_settings)  # refused alike, whichever baseline runs
        self.settings: Settings = self.fleet.configure(
            **{
                "lease_ttl": _LONG_LEASE,
                "heartbeat_timeout": _LONG_LEASE,  # nor does an agent die: none goes silent
                "max_agents": len(workload.agents),
                **baseline.settings,
                **(fleet_settings if baseline.tunable else {}),
            }
        )
        self.agents = {a.id: _Agent(a.id, a.domains) for a in workload.agents}
        for spec in workload.agents:
            self.fleet.register(spec.id, domains=spec.domains)
        self.trace = Trace(workload, baseline, seed)
        self._calendar: list[tuple[float, int, int, Any]] = []
        self._seq = 0
        self._now = 0.0  # seconds from the start
        self._spec: dict[int, int] = {}  # task id -> index in workload.tasks
        self._ready_at: dict[int, float] = {}
        self._deferred: set[int] = set()  # tasks whose next run is their join part
        #: A pool-only fleet's forks (spec index -> children still running): the join is
        #: posted to the pool when the last of them is done, as a chord's callback is.
        self._chords: dict[int, int] = {}
        self._parent = {c: i for i, t in enumerate(workload.tasks) for c in t.children}
        self._started_by: dict[int, str] = {}  # spec index -> the agent of its first part
        self._moved: set[int] = set()
        self._steals: list[tuple[float, str]] = []  # (fleet time, thief): the caps' window
        self._hub: list[tuple[int, float]] = []  # (spec index, arrived at): waiting to be routed
        self._waiting = 0  # tasks ready to run and not running (at the hub, in queues, pool)
        self._free = len(self.agents)
        self._done = 0

    # ------------------------------------------------------------------ the calendar

    def _at(self, when: float, kind: int, payload: Any = None) -> None:
        self._seq += 1
        heapq.heappush(self._calendar, (when, kind, self._seq, payload))

    def run(self) -> Trace:
        began = time.perf_counter()
        by_time: dict[float, list[int]] = {}
        for index in self.workload.roots:
            by_time.setdefault(self.workload.tasks[index].arrival or 0.0, []).append(index)
        for when, indices in sorted(by_time.items()):
            self._at(when, _ARRIVE, indices)
        if self.baseline.routed:
            self._at(0.0, _ROUTE)
        if self.baseline.rebalance_interval is not None:
            self._at(self.baseline.rebalance_interval, _REBALANCE)
        for agent in self.agents.values():
            self._at(0.0, _POLL, (agent.id, agent.poll_gen))
        total = len(self.workload.tasks)
        while self._done < total:
            if not self._calendar:
                raise RuntimeError(
                    f"{self.workload.name}/{self.baseline.name}: {total - self._done} tasks "
                    "can never run (nothing left on the calendar)"
                )
            when, kind, _, payload = heapq.heappop(self._calendar)
            if when > _HORIZON:
                raise RuntimeError(f"{self.workload.name}/{self.baseline.name} did not finish")
            self._advance(when)
            if kind == _ARRIVE:
                self._arrive(payload)
            elif kind == _ROUTE:
                self._route()
            elif kind == _FINISH:
                self._finish(self.agents[payload])
            elif kind == _REBALANCE:
                self._rebalance()
            else:
                agent_id, gen = payload
                agent = self.agents[agent_id]
                if gen == agent.poll_gen and agent.running is None:
                    self._try_claim(agent)
        self.trace.makespan = max((s.end for s in self.trace.segments), default=0.0)
        self.trace.wall = time.perf_counter() - began
        self.fleet.close()
        return self.trace

    def _advance(self, when: float) -> None:
        """Let time pass to ``when`` (state is constant in between), counting idleness."""
        dt = when - self._now
        if dt > 0 and self._waiting > 0:
            self.trace.idle_while_waiting += self._free * dt
            self.trace.waiting_time += dt
            if self._free:
                self._count_eligible(when)
        self._now = when
        self.clock.set(self.workload.start + when)

    def _count_eligible(self, until: float) -> None:
        """Free agents from now to ``until``: which of them could have taken waiting work,
        and what held it back (``shoal.sim.eligibility``)."""
        start = self.workload.start
        pending = self.fleet.tasks(state=TaskState.PENDING, limit=1_000_000)
        depths: dict[str, int] = {}
        for task in pending:
            if task.agent is not None:
                depths[task.agent] = depths.get(task.agent, 0) + 1
        snap = Snapshot(
            now=start + self._now,
            settings=self.settings,
            pending=pending,
            depths=depths,
            hub=[self.workload.tasks[i].home for i, _ in self._hub],
            agents={a.id: a for a in self.fleet.agents()},
            steals=self._steals,
            own_queue_only=self.baseline.own_queue_only,
        )
        for agent in self.agents.values():
            if agent.running is not None:
                continue
            held = classify(agent.id, snap)
            if held is None:
                self._end_eligible(agent)
                continue
            if agent.eligible_from is None:
                agent.eligible_from = self._now
            self.trace.eligible_idle += until - self._now
            for cause, seconds in held.split(snap.now, start + until):
                self.trace.held_by[cause] += seconds

    def _end_eligible(self, agent: _Agent) -> None:
        """An agent's spell of being free while work it could take waited is over."""
        if agent.eligible_from is not None:
            if self._now > agent.eligible_from:
                self.trace.eligible_gaps.append(self._now - agent.eligible_from)
            agent.eligible_from = None

    # ------------------------------------------------------------------ work waiting

    def _more_waiting(self, n: int) -> None:
        if n > 0 and self._waiting == 0:
            for agent in self.agents.values():
                if agent.running is None:
                    agent.gap_from = self._now
        self._waiting += n

    def _less_waiting(self, n: int) -> None:
        self._waiting -= n
        if self._waiting == 0:  # the work ran out before these free agents got any of it
            for agent in self.agents.values():
                self._end_gap(agent)
                self._end_eligible(agent)

    def _end_gap(self, agent: _Agent) -> None:
        """An agent's spell of being free while work waited is over; note how long it was."""
        if agent.gap_from is not None:
            if self._now > agent.gap_from:  # a hand-off at the same moment is no idle spell
                self.trace.gaps.append(self._now - agent.gap_from)
            agent.gap_from = None

    def _posted(self, ids: list[int], indices: list[int], ready: list[float]) -> None:
        for task_id, index, at in zip(ids, indices, ready, strict=True):
            self._spec[task_id] = index
            self._ready_at[task_id] = at

    # ------------------------------------------------------------------ the hub

    def _arrive(self, indices: list[int]) -> None:
        if self.baseline.routed:
            self._hub += [(i, self._now) for i in indices]
            self._more_waiting(len(indices))
            return
        specs = self.workload.tasks
        posts = []
        for i in indices:
            spec = specs[i]
            to = spec.home if spec.queued and self.baseline.honours_queues else None
            posts.append(_post_args(spec, to))
        ids = self.fleet.post_many(posts)
        self._posted(ids, indices, [self._now] * len(ids))
        self._more_waiting(len(ids))
        self._wake()

    def _route(self) -> None:
        """The router's round: everything at the hub goes to its home agent's queue."""
        if self._hub:
            specs = self.workload.tasks
            batch, self._hub = self._hub, []
            ids = self.fleet.post_many([_post_args(specs[i], specs[i].home) for i, _ in batch])
            self._posted(ids, [i for i, _ in batch], [at for _, at in batch])
            self._wake()
        self._at(self._now + self.baseline.router_interval, _ROUTE)

    def _rebalance(self) -> None:
        moves = self.fleet.rebalance()
        for move in moves:
            self.trace.moves.append(TimedMove(self._now, move))
            self._moved.add(move.task_id)
            self._steals.append((self.clock.now(), move.to_agent))
        if moves:
            self._wake()
        assert self.baseline.rebalance_interval is not None
        self._at(self._now + self.baseline.rebalance_interval, _REBALANCE)

    def _wake(self) -> None:
        """New work: agents that wait for it take a look now, in a seeded random order."""
        if not (self.baseline.wakes or self.baseline.own_queue_only):
            return
        free = [a for a in self.agents.values() if a.running is None]
        self.rng.shuffle(free)
        for agent in free:  # a claim starts work for its own agent only: the rest stay free
            self._try_claim(agent)

    # ------------------------------------------------------------------ agents

    def _try_claim(self, agent: _Agent) -> None:
        if self.baseline.own_queue_only and self.fleet.agent(agent.id).queued == 0:
            if not agent.said_idle:  # the idle advertisement the rebalance reads
                self.fleet.set_status(agent.id, "idle")
                agent.said_idle = True
            return
        self._take(agent, self.fleet.claim(agent.id))

    def _take(self, agent: _Agent, claim: Claim | None) -> None:
        """Start the claimed task, or arrange the next look for work."""
        if not claim:
            agent.empty_polls += 1
            agent.poll_gen += 1
            if self.baseline.polls:
                delay = rules.poll_delay(agent.empty_polls, self.settings)
                if claim is not None and claim.retry_at is not None:  # a hold runs out then
                    delay = min(delay, max(0.0, claim.retry_at - self.clock.now()))
                self._at(self._now + delay, _POLL, (agent.id, agent.poll_gen))
            return
        task, lease, source = claim.tasks[0], claim.leases[0], claim.sources[0]
        agent.empty_polls = 0
        agent.poll_gen += 1
        agent.said_idle = False
        index = self._spec[task.id]
        spec = self.workload.tasks[index]
        join = task.id in self._deferred
        duration = spec.join if join else spec.duration
        in_domain = None if spec.domain is None else spec.domain in agent.domains
        if join:  # the task's context is with the agent that ran its first part
            cold = self._started_by[index] != agent.id
        else:
            cold = in_domain is False
            self._started_by[index] = agent.id
        warmup = self.workload.off_domain_cost(duration) if cold else 0.0
        if source == "steal":
            self.trace.steals += 1
            self._steals.append((self.clock.now(), agent.id))
        self.trace.waits.append(self._now - self._ready_at[task.id])
        self._end_gap(agent)
        self._end_eligible(agent)
        self.trace.segments.append(
            Segment(
                agent.id,
                task.id,
                task.title,
                spec.domain,
                self._now,
                self._now + duration + warmup,
                source,
                task.id in self._moved,
                in_domain,
                warmup,
                join,
            )
        )
        agent.running = _Run(task.id, spec, join, lease)
        self._free -= 1
        self._less_waiting(1)
        self._at(self._now + duration + warmup, _FINISH, agent.id)

    def _finish(self, agent: _Agent) -> None:
        run = agent.running
        assert run is not None
        agent.running = None
        self._free += 1
        agent.gap_from = self._now if self._waiting > 0 else None
        if run.spec.children and not run.join:
            self._fork(agent, run)
            return
        then_claim = 0 if self.baseline.own_queue_only else 1
        done = self.fleet.complete(run.lease, then_claim=then_claim)
        self._done += 1
        joined = self._chord_done(self._spec[run.task_id])
        if done.released:
            for task_id in done.released:  # ready now; their specs are known since posting
                self._ready_at[task_id] = self._now
            self._more_waiting(len(done.released))
        if then_claim:
            self._take(agent, done.next)
        else:
            self._try_claim(agent)
        if done.released or joined:
            self._wake()

    def _fork(self, agent: _Agent, run: _Run) -> None:
        """The first part of a fork-join task is done: spawn the children, wait on them.

        shoal (and push) defer the task on its children: it comes back to its agent's queue
        when they are done. A pool-only fleet has no queues, so it does what a shared queue
        does (a chord's callback in Celery, a workflow in Oban): the first part completes,
        and the join is posted to the pool, for anyone, when the last child is done."""
        children = [self.workload.tasks[i] for i in run.spec.children]
        if self.baseline.pool_only:
            ids = self.fleet.post_many([_post_args(c, None) for c in children])
            self._posted(ids, list(run.spec.children), [self._now] * len(ids))
            self._more_waiting(len(ids))
            self._chords[self._spec[run.task_id]] = len(ids)
            self._take(agent, self.fleet.complete(run.lease, then_claim=1).next)
            self._wake()
            return
        posts = [{**_post_args(c, None), "parent": run.task_id} for c in children]
        ids = self.fleet.post_many(posts)
        self._posted(ids, list(run.spec.children), [self._now] * len(ids))
        self._more_waiting(len(ids))
        self.fleet.defer(run.lease, ids)
        self._deferred.add(run.task_id)
        self._try_claim(agent)
        self._wake()

    def _chord_done(self, index: int) -> bool:
        """Task ``index`` is done for good: in a pool-only fleet, post its parent's join to
        the pool if it was the last of its siblings (whether one was posted)."""
        parent = self._parent.get(index)
        if parent is None or parent not in self._chords:
            return False
        self._chords[parent] -= 1
        if self._chords[parent]:
            return False
        del self._chords[parent]
        (join,) = self.fleet.post_many([_post_args(self.workload.tasks[parent], None)])
        self._posted([join], [parent], [self._now])
        self._deferred.add(join)
        self._more_waiting(1)
        return True


def _post_args(spec: TaskSpec, to: str | None) -> dict[str, Any]:
    args = {"title": spec.title, "priority": spec.priority, "domain": spec.domain, "to": to}
    if spec.estimate is not None:
        args["expected_duration"] = spec.estimate
    return args
