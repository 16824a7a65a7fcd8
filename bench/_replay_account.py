"""The account of a replay: what the real fleet's event log says about idleness, judged by
the simulator's own rules.

The simulator counts *eligible* idleness -- an agent free while a task it could take
waited (``shoal.sim.eligibility``) -- from snapshots it takes between events. A replay has
no snapshots, but its event log has every change that matters: a task posted (to a queue
or the pool), claimed or stolen by an agent, completed. Between two of them the fleet
stands still, so the log is cut at every change, a ``Snapshot`` is made of each stretch
and each free agent is judged by ``eligibility.classify`` -- the same code, so a
difference between the replay and the simulation is the real fleet's, not the account's.

An agent is free from the moment a task of its own completes until its next claim (and
from the start until its first): the real fleet's hand-over time, a few milliseconds per
task, counts as free time here, as it should.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from shoal.model import Agent, AgentStatus, Event, Task, TaskState
from shoal.settings import Settings
from shoal.sim.eligibility import Snapshot, classify
from shoal.sim.metrics import percentile


@dataclass(frozen=True, slots=True)
class Posted:
    """A task the replay posted: when, where (an agent's queue, or None: the pool), and
    the task as the fleet knows it (its domain, priority)."""

    task: Task
    queue: str | None


@dataclass(slots=True)
class Account:
    """Idleness over a replay, in real seconds (``Replay`` scales it)."""

    start: float
    end: float
    eligible_idle: float = 0.0  # agent-seconds free while a task it could take waited
    waiting_time: float = 0.0  # seconds during which some task waited
    eligible_gaps: list[float] = field(default_factory=list)
    overheads: list[float] = field(default_factory=list)  # a run's length beyond its sleep

    def eligible_share(self, agents: int) -> float:
        waiting = self.waiting_time * agents
        return self.eligible_idle / waiting if waiting else 0.0

    def idle_to_work_p99(self) -> float:
        return percentile(self.eligible_gaps, 99)


def account(
    events: Iterable[Event],
    posted: Mapping[int, Posted],
    agents: Sequence[Agent],
    settings: Settings,
    start: float,
    sleeps: Mapping[int, float],
) -> Account:
    """Cut the log of a replay that began at ``start`` into stretches and judge each free
    agent in each (module docstring). ``sleeps``: each task's nominal run, in seconds."""
    changes = sorted(
        (e for e in events if e.task_id in posted and e.kind in _CHANGES), key=lambda e: e.id
    )
    end = max(e.at for e in changes if e.kind == "completed")
    found = Account(start, end)
    pending: dict[int, Task] = {}
    holding: dict[str, int] = {}  # agent -> the task it runs
    claimed_at: dict[int, float] = {}
    steals: list[tuple[float, str]] = []
    eligible_from: dict[str, float] = {}
    now = start
    for event in changes:
        _stretch(found, now, event.at, pending, holding, agents, settings, steals, eligible_from)
        now = max(now, event.at)
        task_id, agent = event.task_id, event.agent
        assert task_id is not None
        if event.kind == "posted":
            entry = posted[task_id]
            pending[task_id] = _pending(entry, event.at)
        elif event.kind in ("claimed", "stolen"):
            assert agent is not None
            pending.pop(task_id, None)
            holding[agent] = task_id
            claimed_at[task_id] = event.at
            if event.kind == "stolen":
                steals.append((event.at, agent))
            _spell_over(found, agent, now, eligible_from)
        elif event.kind == "completed":
            holding = {a: t for a, t in holding.items() if t != task_id}
            found.overheads.append(event.at - claimed_at[task_id] - sleeps[task_id])
    return found


_CHANGES = frozenset({"posted", "claimed", "stolen", "completed"})


def _pending(entry: Posted, at: float) -> Task:
    task = entry.task
    return Task(
        id=task.id,
        title=task.title,
        state=TaskState.PENDING,
        priority=task.priority,
        skills=task.skills,
        domain=task.domain,
        agent=entry.queue,
        created_at=at,
        ready_at=at,
    )


def _stretch(
    found: Account,
    since: float,
    until: float,
    pending: Mapping[int, Task],
    holding: Mapping[str, int],
    agents: Sequence[Agent],
    settings: Settings,
    steals: Sequence[tuple[float, str]],
    eligible_from: dict[str, float],
) -> None:
    """The fleet stood still from ``since`` to ``until``: count who was free next to work
    it could take."""
    dt = until - since
    if dt <= 0 or not pending:
        if not pending:  # the work ran out: every spell of waiting for it is over
            for waiting in list(eligible_from):
                _spell_over(found, waiting, since, eligible_from)
        return
    found.waiting_time += dt
    depths: dict[str, int] = {}
    for task in pending.values():
        if task.agent is not None:
            depths[task.agent] = depths.get(task.agent, 0) + 1
    status = {a.id: AgentStatus.WORKING if a.id in holding else AgentStatus.IDLE for a in agents}
    snap = Snapshot(
        now=since,
        settings=settings,
        pending=list(pending.values()),
        depths=depths,
        hub=[],
        agents={a.id: Agent(a.id, domains=a.domains, status=status[a.id]) for a in agents},
        steals=steals,
        own_queue_only=False,
    )
    for agent in agents:
        if agent.id in holding:
            continue
        if classify(agent.id, snap) is None:
            _spell_over(found, agent.id, since, eligible_from)
            continue
        eligible_from.setdefault(agent.id, since)
        found.eligible_idle += dt


def _spell_over(found: Account, agent: str, at: float, eligible_from: dict[str, float]) -> None:
    began = eligible_from.pop(agent, None)
    if began is not None and at > began:
        found.eligible_gaps.append(at - began)
