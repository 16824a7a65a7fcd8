"""Fleet: the one API of shoal -- tasks, agents, leases, and the work-stealing claim.

The problem
-----------
Several agents share a body of work. Each can do some of it (its skills) and is best at
some of it (its domains). Work arrives in bursts, often routed to one agent, and takes
wildly different times. We want three things at once: no agent idle while another has a
backlog it could help with; no task handed to two agents; and no task lost when an agent
dies holding it. And we want it with no central dispatcher in the loop: an agent asks for
work when it has room, and the answer is decided there and then, atomically, in the store.

Designs we did not take
-----------------------
* Push routing on a timer (a router hands out tasks every N minutes): agents sit idle
  between rounds while others are buried, and a task pushed to a busy agent stays there.
* One shared queue, first come first served: fair, but throws away affinity -- the agent
  that spawned a task, or the one that knows its domain, gets no preference.
* Per-agent queues with lock-free deques, as in a language runtime: our agents are
  processes on several hosts and our "deque" must survive them, so the store is the deque
  and one short transaction replaces the compare-and-swap.

The claim cascade
-----------------
``claim(agent, n)`` runs one transaction that takes the first of these that yields work:

0. Expire due leases. A lease past its expiry is lost even if no monitor has run; its task
   is pending again (or dead) before anyone looks for work. (Invariant 6: correctness
   never depends on the monitor.)
1. At capacity? An agent holding ``max_concurrent`` leases gets nothing: reason ``busy``.
2. Own queue, head. Tasks routed or assigned to the agent, or spawned by it, highest
   priority first and newest first among equals. LIFO for the owner: an agent finishes what
   it just spawned (depth-first), and a deferred continuation comes back to the front.
3. Pool, best score. Tasks that belong to no one, ranked by priority, domain affinity and
   age (see ``policy``), over the tasks whose skills the agent has. Two indexed look-ups
   per skill set, whatever the size of the pool.
4. Steal, tail. Only when 2 and 3 gave nothing: from the busiest victim at work (more than
   ``steal_threshold`` tasks queued -- 0 by default, so an agent that runs dry takes even a
   busy peer's only queued task; ties broken at random) take one task, the lowest-priority
   oldest eligible one -- the one the victim would reach last. The anti-thrashing rules
   bound it: only priority numbers >= ``steal_min_priority``, never a task stolen before,
   never a pinned one, skills and domain must fit (or the task is simple: priority >=
   ``cross_domain_priority``, no skills), and at most ``max_steals_per_agent`` per thief and
   ``max_steals_per_cycle`` fleet-wide per ``rebalance_interval``.
5. Nothing: the agent is marked ``idle`` (reason ``empty``). A caller may wait for a change
   in the fleet and ask again (``claim(..., wait=seconds)``).

Steps 3 and 4 pass over work the locality rules keep for its own domain for a while
(``domain_wait``: an idle agent of that domain is about to take it; ``locality_wait``: delay
scheduling), and say in the claim when the first of it is free to take (``retry_at``). With
``order = longest_first`` every step ranks equal priorities longest expected first.

The orderings that must hold: a task leaves ``pending`` only inside one write transaction
that also writes its lease and its event (so no task is handed out twice and every change
is logged); the owner takes from the head and thieves from the tail (so an owner and a
thief contend only when a queue is nearly empty); and stealing happens only when an agent
has nothing of its own and the pool is dry (so when the load is balanced, stealing costs
nothing).

The hub's jobs -- ``rebalance`` (move queued tasks to agents idle for a while), ``reap``
(expire leases, mark silent agents offline, end idle ephemeral agents, flag stalled tasks)
and ``assess`` (recommend spawning or retiring agents) -- make recovery timely and the
fleet's size right; none of them is needed for correctness.

Invariants (checked by the contract suite on every store)
---------------------------------------------------------
I1 a task has at most one live lease; only its token may change it.
I2 every task is in exactly one state; none is lost, none completes twice.
I3 no agent holds more than max_concurrent leases; live non-managers <= max_agents.
I4 a stolen task is never stolen again; a pinned task is never stolen.
I5 every state change appends exactly one event, in the same transaction.
I6 an expired lease is claimable at claim time, monitor or not.
I7 bad input changes nothing and says what was wrong and how to fix it.
"""

from __future__ import annotations

import functools
import json
import os
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar, cast

from shoal import policy
from shoal._cascade import Holds, pool_candidates, steal_tail
from shoal._checks import (
    MAX_BATCH,
    check_lease,
    check_n,
    check_post,
    check_text,
    draft_of,
    parse_agent_status,
    parse_state,
)
from shoal.clock import Clock, SystemClock
from shoal.errors import (
    BadInput,
    DependencyCycle,
    FleetFull,
    InvalidTransition,
    LeaseLost,
    UnknownAgent,
    UnknownTask,
    WriteConflict,
)
from shoal.model import (
    MAX_ID,
    Agent,
    AgentLoad,
    AgentStatus,
    Assessment,
    BatchCompletion,
    Candidate,
    Claim,
    Completion,
    Event,
    FleetStatus,
    Lease,
    Move,
    NewTask,
    Probe,
    ReapReport,
    Registration,
    Task,
    TaskDetail,
    TaskState,
    as_task_ids,
    check_agent_id,
    check_count,
    check_json,
    iso_time,
    normalize_names,
    parse_duration,
)
from shoal.settings import Settings
from shoal.stores import init_store_url, open_store
from shoal.stores.base import Store, StoreTx

__all__ = ["Fleet"]

_EXPIRE_PER_CLAIM = 100  # leases a claim expires before looking for work; reap takes all
_SEEN_RESOLUTION = 1.0  # seconds: how stale last_seen may get before a claim rewrites it


class _DryRun(Exception):
    """Raised inside a write transaction to roll back a dry run."""


_Method = TypeVar("_Method", bound=Callable[..., Any])
#: How many times a call is run again after a WriteConflict before it gives up.
_CONFLICT_RETRIES = 5


def _rerun_on_conflict(method: _Method) -> _Method:
    """Run the call again when a shared store aborted it for crossing another writer (a
    deadlock PostgreSQL broke). Nothing of the aborted run was kept, so running it again is
    safe; a short random pause keeps the two from crossing again."""

    @functools.wraps(method)
    def rerun(self: Fleet, *args: Any, **kwargs: Any) -> Any:
        for attempt in range(_CONFLICT_RETRIES):
            try:
                return method(self, *args, **kwargs)
            except WriteConflict:
                if attempt == _CONFLICT_RETRIES - 1:
                    raise
                time.sleep(self.rng.uniform(0.001, 0.005) * 2**attempt)
        raise AssertionError("unreachable")

    return cast(_Method, rerun)


class Fleet:
    """A fleet of agents and the tasks they share, on one store.

    Open one with ``Fleet.open(url)``; a ``Fleet`` may be shared by the threads of one
    process, and any number of processes (or hosts, with PostgreSQL) may open the same
    fleet at once. Every method is one transaction.
    """

    def __init__(self, store: Store, clock: Clock | None = None, rng: random.Random | None = None):
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self.rng = rng or random.Random()
        # Lease tokens fence off stale holders; they are not secrets (anyone who can open
        # the store can change it), so a per-process generator seeded from the OS will do,
        # without a system call per claim.
        self._tokens = random.Random(os.urandom(32))

    def _token(self) -> str:
        return f"{self._tokens.getrandbits(64):016x}"

    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        create: bool = True,
    ) -> Fleet:
        """Open the fleet at ``url`` (``memory://``, ``sqlite:///path``).

        Without a URL: ``$SHOAL_STORE``, else ``.shoal/fleet.db`` in the nearest folder that
        has one. ``create=False`` refuses to create a fleet that does not exist yet (the CLI
        uses it so a mistyped path is an error, not a new empty fleet).
        """
        return cls(open_store(url, create=create), clock=clock, rng=rng)

    @classmethod
    def init(cls, url: str | None = None, *, clock: Clock | None = None) -> Fleet:
        """Create (or upgrade) a fleet: at ``url``, ``$SHOAL_STORE``, or ``.shoal/fleet.db``
        in the current folder. ``fleet.store.created`` says whether it is new."""
        return cls(open_store(url or init_store_url(), create=True), clock=clock)

    @property
    def url(self) -> str:
        return self.store.url

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Fleet({self.store.url!r})"

    # ------------------------------------------------------------------ posting work

    @_rerun_on_conflict
    def post(
        self,
        title: str,
        *,
        body: str = "",
        payload: Any = None,
        priority: int | str = 5,
        skills: Iterable[str] | str | None = None,
        domain: str | None = None,
        to: str | None = None,
        after: Sequence[int] | None = None,
        parent: int | None = None,
        pinned: bool = False,
        expected_duration: float | str | None = None,
        lease_ttl: float | str | None = None,
        max_attempts: int | None = None,
        key: str | None = None,
        not_before: float | str | datetime | None = None,
        retry_delay: float | str | None = None,
    ) -> Task:
        """Add a task to the fleet and return it.

        It goes to the pool, or to the queue of agent ``to``. With ``parent`` set to a task
        an agent holds, it goes to the head of that agent's queue (the agent finishes what it
        spawned). With ``after`` it stays ``blocked`` until every listed task is done.
        ``pinned`` keeps it in ``to``'s queue: never stolen, never returned to the pool.
        A repeated ``key`` returns the task first posted with it and adds nothing.
        ``not_before`` (epoch seconds, an aware datetime or ISO 8601 text) keeps it from
        being claimed before then; ``retry_delay`` is its own first retry backoff.
        """
        draft = check_post(
            title,
            body,
            payload,
            priority,
            skills,
            domain,
            to,
            after,
            parent,
            pinned,
            expected_duration,
            lease_ttl,
            max_attempts,
            key,
            not_before,
            retry_delay,
        )
        with self.store.write() as tx:
            if draft.key is not None and (existing := tx.task_by_key(draft.key)) is not None:
                return existing
            task_id = self._insert(tx, draft, self.clock.now(), tx.load_settings())
            task = tx.get_task(task_id)
            assert task is not None
            return task

    @_rerun_on_conflict
    def post_many(self, tasks: Iterable[Mapping[str, Any]]) -> list[int]:
        """Post many tasks in one transaction; returns their ids in order.

        Each mapping holds ``post``'s arguments (``title`` and any keywords). All are checked
        before anything is written, and either all are posted or none. A batch is one moment:
        an owner takes the tasks it puts in its queue in the order they are listed (the first
        at the head), as a claim from the pool would, and thieves take the last-listed first.
        """
        drafts = [draft_of(spec, i) for i, spec in enumerate(tasks)]
        ids: list[int] = []
        with self.store.write() as tx:
            now = self.clock.now()
            settings = tx.load_settings()
            # Queue places, largest (the head) for the first listed.
            places = tx.next_seqs(len(drafts))[::-1] if len(drafts) > 1 else [None] * len(drafts)
            for draft, place in zip(drafts, places, strict=True):
                if draft.key is not None and (existing := tx.task_by_key(draft.key)) is not None:
                    ids.append(existing.id)
                else:
                    ids.append(self._insert(tx, draft, now, settings, place))
        return ids

    def _insert(
        self, tx: StoreTx, draft: NewTask, now: float, settings: Settings, place: int | None = None
    ) -> int:
        """Route, block and insert one checked task, with its event; a queue-bound task goes
        to ``place`` in its queue (default: the head)."""
        dest = draft.agent
        if dest is not None:
            agent = self._live_agent(tx, dest)
            if not policy.is_present(agent) and not draft.pinned:
                away = "paused by the circuit breaker" if agent.paused(now) else "offline"
                raise BadInput(
                    f"agent {dest!r} is {away}; nothing would work its queue",
                    hint="post to the pool or to a present agent, or pin it to wait for this one",
                )
            if not policy.can_do(agent.skills, draft.skills):
                lacking = sorted(set(draft.skills) - set(agent.skills))
                raise BadInput(
                    f"agent {dest!r} lacks the skills this task requires: {', '.join(lacking)}",
                    hint="route it to an agent with those skills, or post it to the pool",
                )
        if draft.parent is not None:
            parent_task = tx.get_task(draft.parent)
            if parent_task is None:
                raise UnknownTask(
                    f"parent task {draft.parent} does not exist",
                    hint="give the id of a task in this fleet (see `shoal list`)",
                )
            if dest is None and parent_task.state is TaskState.CLAIMED and parent_task.agent:
                spawner = tx.get_agent(parent_task.agent)
                # Work-first: the spawner's own queue, at the head -- if it can do the child
                # and is there to (a paused spawner's children go to the pool).
                if (
                    spawner is not None
                    and policy.is_present(spawner)
                    and policy.can_do(spawner.skills, draft.skills)
                ):
                    dest = spawner.id
        waiting = 0
        if draft.after:
            deps = tx.get_tasks(draft.after, share=True)
            missing = [d for d in draft.after if d not in deps]
            if missing:
                raise UnknownTask(
                    f"unknown dependencies: {', '.join(map(str, missing))}",
                    hint="`after` must list ids of tasks already in this fleet",
                )
            _refuse_ended(deps.values())
            waiting = sum(1 for d in deps.values() if d.state is not TaskState.DONE)
        new = replace(
            draft,
            agent=dest,
            state=TaskState.BLOCKED if waiting else TaskState.PENDING,
            waiting_on=waiting,
            created_at=now,
            # Aging counts from when it is ready: a task posted for later gains nothing
            # while it waits for its moment.
            pool_key=policy.pool_key(
                draft.priority, max(now, draft.ready_at or now), settings.aging
            ),
            # A place in a queue matters only in a queue; the pool orders by pool_key.
            seq=(place if place is not None else tx.next_seq()) if dest is not None else 0,
            # Ready now, or at its not_before; blocked, it keeps only the not_before.
            ready_at=draft.ready_at if waiting else max(now, draft.ready_at or now),
        )
        task_id = tx.insert_task(new)
        if draft.after:
            tx.add_deps(task_id, draft.after)
        data: dict[str, Any] = {"priority": new.priority, "state": new.state.value}
        if dest is not None:
            data["to"] = dest
        if new.ready_at is not None and new.ready_at > now:
            data["not_before"] = iso_time(new.ready_at)
        if draft.after:
            data["after"] = list(draft.after)
        tx.append_event(now, "posted", task_id, dest, data)
        return task_id

    # ------------------------------------------------------------------ reading tasks

    def by_key(self, key: str) -> Task | None:
        """The task posted with idempotency key ``key``, if any."""
        with self.store.read() as tx:
            return tx.task_by_key(check_text(key, "key", 256))

    def get(self, task_id: int) -> Task:
        """The task with that id."""
        with self.store.read() as tx:
            return _need_task(tx, task_id)

    def show(self, task_id: int, *, events: int = 50) -> TaskDetail:
        """A task with its dependencies, dependents and latest events."""
        with self.store.read() as tx:
            task = _need_task(tx, task_id)
            history = tx.events(0, task_id, None, 100_000)[-events:] if events > 0 else []
            return TaskDetail(
                task, tuple(tx.deps_of(task_id)), tuple(tx.dependents_of(task_id)), tuple(history)
            )

    def tasks(
        self,
        *,
        state: TaskState | str | None = None,
        agent: str | None = None,
        limit: int = 100,
        before: int | None = None,
    ) -> list[Task]:
        """Tasks newest first, optionally only those in ``state`` or of ``agent``."""
        wanted = parse_state(state) if state is not None else None
        limit = check_count(limit, "limit", 1, 1_000_000)
        (below,) = as_task_ids([before], "before") if before is not None else (None,)
        with self.store.read() as tx:
            return tx.list_tasks(wanted, agent, limit, below)

    def ready(self, agent: str | None = None, *, limit: int = 20) -> list[Task]:
        """Pending tasks in the order a claim would take them.

        For an agent: its own queue head, then the pool tasks it can do by score (steals
        are not previewed). Without one: the pool by score, then every agent's queue. Tasks
        still waiting out a retry backoff or a not_before are not ready, so not listed.
        """
        limit = check_count(limit, "limit", 1, 100_000)
        with self.store.read() as tx:
            now = self.clock.now()
            settings = tx.load_settings()
            skillsets = tx.skillsets()
            longest = policy.longest_first(settings)
            if agent is not None:
                who = self._live_agent(tx, agent)
                own = tx.queue_head(who.id, limit, longest, now)
                eligible = policy.eligible_skillsets(skillsets, who.skills)
                held = policy.NOTHING_HELD
                pool = pool_candidates(tx, who.domains, eligible, limit, longest, held, now)
                order = own + policy.rank_pool(pool, who.domains, settings.aging, limit, longest)
            else:
                every = sorted(skillsets)
                pool = pool_candidates(tx, (), every, limit, longest, policy.NOTHING_HELD, now)
                order = policy.rank_pool(pool, (), settings.aging, limit, longest)
                for queue in tx.queue_depths():
                    if len(order) >= limit:
                        break
                    order += tx.queue_head(queue.agent, limit - len(order), longest, now)
            ids = [c.id for c in order[:limit]]
            found = tx.get_tasks(ids)
            return [found[i] for i in ids]

    # ------------------------------------------------------------------ agents

    @_rerun_on_conflict
    def register(
        self,
        agent_id: str,
        *,
        role: str = "worker",
        skills: Iterable[str] | str | None = None,
        domains: Iterable[str] | str | None = None,
        max_concurrent: int = 1,
        manager: bool = False,
        ephemeral: bool = False,
    ) -> Registration:
        """Join the fleet (or update a live registration).

        Live non-manager agents may not exceed ``max_agents``; terminated agents do not count,
        re-registering a live agent updates it, and managers are always admitted. A
        terminated id registered again starts a new incarnation.
        """
        check_agent_id(agent_id)
        skill_names = normalize_names(skills, "skill")
        domain_names = normalize_names(domains, "domain")
        role = check_text(role, "role", 64) or "worker"
        if isinstance(max_concurrent, bool) or not isinstance(max_concurrent, int):
            raise BadInput(f"max_concurrent must be a whole number, not {max_concurrent!r}")
        if not 1 <= max_concurrent <= MAX_BATCH:
            raise BadInput(
                f"max_concurrent must be between 1 and {MAX_BATCH}, not {max_concurrent}",
                hint="it is how many tasks this agent may hold at once",
            )
        with self.store.write(exclusive=True) as tx:
            now = self.clock.now()
            settings = tx.load_settings()
            agents = tx.list_agents()
            existing = next((a for a in agents if a.id == agent_id), None)
            live_workers = [a for a in agents if a.status.live and not a.manager]
            counted = existing is not None and existing.status.live and not existing.manager
            if not manager and not counted and len(live_workers) >= settings.max_agents:
                offline = sum(1 for a in live_workers if a.status is AgentStatus.OFFLINE)
                silent = f", {offline} of them offline" if offline else ""
                raise FleetFull(
                    f"fleet is full: {len(live_workers)} of {settings.max_agents} agents are live"
                    f"{silent}; agent {agent_id!r} was not registered",
                    hint=f"raise the limit (`shoal config set max_agents "
                    f"{settings.max_agents + 1}`) or terminate an agent "
                    f"(`shoal set-status AGENT terminated`)",
                )
            if existing is not None and existing.status.live:
                status = existing.status
                if status is AgentStatus.OFFLINE:
                    status = self._present_status(tx, existing, now)
                agent = replace(existing, status=status)
                kind = "agent.updated"
            else:
                agent = Agent(
                    id=agent_id,
                    status=AgentStatus.IDLE,
                    idle_since=now,
                    registered_at=now,
                    incarnation=existing.incarnation + 1 if existing else 1,
                )
                kind = "agent.registered"
            agent = replace(
                agent,
                role=role,
                skills=skill_names,
                domains=domain_names,
                max_concurrent=max_concurrent,
                manager=manager,
                ephemeral=ephemeral,
                last_seen=now,
            )
            if existing is not None and kind == "agent.updated":
                agent = _with_idle_since(agent, existing, now)
            tx.save_agent(agent)
            tx.append_event(now, kind, None, agent_id, _agent_data(agent))
            created = kind == "agent.registered"
            # Live workers now: the others, and this one unless it is a manager.
            live = sum(1 for a in live_workers if a.id != agent_id) + (0 if manager else 1)
            saved = tx.get_agent(agent_id)
            assert saved is not None
            return Registration(saved, created, live, settings.max_agents)

    def agent(self, agent_id: str) -> Agent:
        """The agent with that id (terminated ones included)."""
        with self.store.read() as tx:
            agent = tx.get_agent(agent_id)
            if agent is None:
                raise _unknown_agent(agent_id)
            return agent

    def agents(self) -> list[Agent]:
        """Every agent the fleet has seen, by id."""
        with self.store.read() as tx:
            return tx.list_agents()

    @_rerun_on_conflict
    def set_status(
        self,
        agent_id: str,
        status: AgentStatus | str,
        *,
        why: str | None = None,
        release: bool = False,
    ) -> Agent:
        """Report an agent's status (idle, working, waiting, offline, terminated).

        Entering ``idle`` stamps ``idle_since``; leaving it clears it. An agent that holds
        tasks is not idle: that is refused (naming them) unless ``release``, which gives
        them back first, untouched (with any status: an agent leaving for a while can give
        back its work at once). ``terminated`` is final: the agent's leases are released
        (not counted as failures) and its queue goes back to the pool, except tasks pinned
        to it. ``offline`` sends its queue back too (its leases run on unless ``release``:
        it may return before they expire). ``why`` goes in the termination's event (a worker
        leaving when idle says so). ``overloaded`` is the circuit breaker's to set; a paused
        agent is resumed with ``resume``.
        """
        new_status = parse_agent_status(status)
        reason = check_text(why, "why", 200) if why is not None else None
        if new_status is AgentStatus.OVERLOADED:
            raise BadInput(
                "overloaded is set by the circuit breaker, not by request",
                hint="an agent is paused after failure_streak failures in a row",
            )
        with self.store.write(exclusive=True) as tx:
            now = self.clock.now()
            agent = self._live_agent(tx, agent_id)
            going = new_status in (AgentStatus.OFFLINE, AgentStatus.TERMINATED)
            if agent.paused(now) and not going:
                raise InvalidTransition(
                    f"agent {agent_id!r} is paused by the circuit breaker after failing task "
                    f"after task (for {_wait_words((agent.paused_until or now) - now)} more)",
                    hint=f"fix what makes its tasks fail, then `shoal agent resume {agent_id}`",
                )
            if new_status is AgentStatus.IDLE and not release:
                held = [task.id for task, _ in tx.held_leases(agent_id)]
                if held:
                    raise InvalidTransition(
                        f"agent {agent_id!r} holds tasks {', '.join(map(str, held))}; an agent "
                        "that holds work is not idle",
                        hint="complete, fail or release them first, or pass --release "
                        "(release=True) to give them back untouched",
                    )
            if release:
                self._release_held(tx, agent_id, now, f"agent set {new_status.value}")
            if new_status is AgentStatus.TERMINATED:
                self._terminate(tx, agent, now, reason or "terminated by request")
            else:
                updated = _with_idle_since(
                    replace(agent, status=new_status, last_seen=now), agent, now
                )
                tx.save_agent(updated)
                if new_status is not agent.status:
                    data = {"from": agent.status.value, "to": new_status.value}
                    tx.append_event(now, "agent.status", None, agent_id, data)
                    if new_status is AgentStatus.OFFLINE:
                        self._return_queue(tx, agent, now, "agent offline")
            saved = tx.get_agent(agent_id)
            assert saved is not None
            return saved

    @_rerun_on_conflict
    def resume(self, agent_id: str) -> Agent:
        """Let an agent the circuit breaker paused claim again now (its failure count starts
        over). Resuming an agent that is not paused changes nothing."""
        with self.store.write(exclusive=True) as tx:
            now = self.clock.now()
            agent = self._live_agent(tx, agent_id)
            if agent.paused_until is None:
                return agent
            return self._resume(tx, agent, now, "request")

    @_rerun_on_conflict
    def probe(self) -> Probe:
        """Prove the store takes a write (it records when it was last probed), and read its
        server's clock in the same transaction: what ``shoal doctor`` checks."""
        with self.store.write() as tx:
            now = self.clock.now()
            tx.set_meta("last_probe", iso_time(now) or "")
            return Probe(now, tx.server_time())

    def leases(self, agent_id: str) -> list[Lease]:
        """The leases ``agent_id`` holds now, oldest claim first (read only: nothing is
        renewed). For a face that acts for the agent it has already checked."""
        with self.store.read() as tx:
            agent = self._live_agent(tx, agent_id)
            return [
                Lease(task.id, agent.id, token, task.lease_expires or 0.0)
                for task, token in tx.held_leases(agent.id)
            ]

    @_rerun_on_conflict
    def heartbeat(self, agent_id: str) -> list[Lease]:
        """Say the agent is alive and extend every lease it holds; returns the renewed leases.

        A lease that has already expired is not renewed: its task goes back to pending.
        """
        with self.store.write() as tx:
            now = self.clock.now()
            settings = tx.load_settings()
            self._expire_due(tx, now, settings, _EXPIRE_PER_CLAIM)
            agent = self._live_agent(tx, agent_id, lock=True)
            if agent.status is AgentStatus.OFFLINE:
                back = self._present_status(tx, agent, now)
                tx.save_agent(
                    _with_idle_since(replace(agent, status=back, last_seen=now), agent, now)
                )
                tx.append_event(
                    now, "agent.status", None, agent_id, {"from": "offline", "to": back.value}
                )
            else:
                tx.save_agent(replace(agent, last_seen=now))
            leases = []
            for task, token in tx.held_leases(agent_id, lock=True):
                expires = policy.lease_expiry(now, task.lease_ttl, settings)
                tx.set_lease_expiry(task.id, expires)
                leases.append(Lease(task.id, agent_id, token, expires))
            return leases

    # ------------------------------------------------------------------ the claim

    @_rerun_on_conflict
    def claim(self, agent_id: str, n: int = 1, *, wait: float | str = 0.0) -> Claim:
        """Take up to ``n`` tasks for ``agent_id`` by the claim cascade (module docstring).

        Returns the leases and their tasks, or none with the reason: ``busy`` (at
        max_concurrent), ``paused`` (the circuit breaker holds the agent; ``retry_at`` says
        until when) or ``empty`` (nothing this agent can do now; ``retry_at``, if set, says
        when something it passed over is free to take). With ``wait`` > 0 an empty claim
        waits up to that many seconds for the fleet to change and tries again.
        """
        n = check_n(n)
        deadline = time.monotonic() + parse_duration(wait, "wait")
        while True:
            with self.store.write() as tx:
                claim = self._claim(tx, agent_id, n, self.clock.now(), strict=True)
            assert claim is not None
            remaining = deadline - time.monotonic()
            if claim or claim.reason != "empty" or remaining <= 0:
                return claim
            pause = min(remaining, 1.0)
            if claim.retry_at is not None:  # work passed over is free to take then
                pause = min(pause, max(0.0, claim.retry_at - self.clock.now()))
            self.store.wait_for_change(pause)

    def _claim(
        self,
        tx: StoreTx,
        agent_id: str,
        n: int,
        now: float,
        strict: bool,
        *,
        completed: bool = False,
    ) -> Claim | None:
        """The cascade, inside the caller's transaction.

        For an unknown or terminated agent: ``UnknownAgent`` if ``strict``, else None (a
        completion that also asked for more work must not fail because of it).
        ``completed``: the agent has just completed a task (which ends a failure streak).
        """
        context = tx.claim_context(agent_id, now)
        if context is None or context.agent.status is AgentStatus.TERMINATED:
            if strict:
                self._live_agent(tx, agent_id)  # raises the right error
            return None
        settings = context.settings
        if context.leases_due:  # step 0: expire due leases (the monitor may not be running)
            self._expire_due(tx, now, settings, _EXPIRE_PER_CLAIM)
            context = tx.claim_context(agent_id, now)
            assert context is not None
        agent = context.agent
        if completed:
            agent = self._end_streak(tx, agent)
        if agent.paused_until is not None:  # the circuit breaker
            if agent.paused(now):
                self._touch(tx, agent, now, AgentStatus.OVERLOADED)  # alive, and asking
                return Claim(reason="paused", retry_at=agent.paused_until)
            agent = self._resume(tx, agent, now, "cooldown")
        room = policy.claim_room(context.held, agent.max_concurrent, n)
        if room == 0:  # step 1: at capacity
            self._touch(tx, agent, now, AgentStatus.WORKING)
            return Claim(reason="busy")
        longest = policy.longest_first(settings)
        holds = Holds(tx, agent, settings, now, context.skillsets)
        # step 2: own queue, head
        own = tx.queue_head(agent.id, room, longest, now) if agent.queued else []
        picked = [(t, "queue") for t in own]
        if len(picked) < room:  # step 3: the pool, best score
            eligible = policy.eligible_skillsets(context.skillsets, agent.skills)
            want = room - len(picked)
            if eligible:
                candidates = holds.pick(
                    lambda held: pool_candidates(
                        tx, agent.domains, eligible, want, longest, held, now
                    )
                )
                best = policy.rank_pool(candidates, agent.domains, settings.aging, want, longest)
                picked += [(t, "pool") for t in best]
        if not picked:  # step 4: steal, only when the own queue and the pool gave nothing
            picked = [(t, "steal") for t in self._steal(tx, agent, now, settings, holds)]
        if not picked:  # step 5: nothing -- idle, until the first waiting task is due
            self._touch(tx, agent, now, AgentStatus.IDLE)
            eligible = policy.eligible_skillsets(context.skillsets, agent.skills)
            due = tx.next_ready(agent.id, eligible, now)
            retry_at = min((t for t in (holds.retry_at, due) if t is not None), default=None)
            return Claim(reason="empty", retry_at=retry_at)
        return self._lease(tx, agent, picked, now, settings)

    def _lease(
        self,
        tx: StoreTx,
        agent: Agent,
        picked: Sequence[tuple[Candidate, str]],
        now: float,
        settings: Settings,
    ) -> Claim:
        """Give ``agent`` a lease on each picked task, with one event each."""
        grants, sources = [], {}
        for chosen, source in picked:
            expires = policy.lease_expiry(now, chosen.lease_ttl, settings)
            grants.append((chosen.id, self._token(), expires, source == "steal"))
            sources[chosen.id] = (source, chosen.agent)
        tasks = tx.lease_tasks(agent.id, grants, now)
        for task in tasks:
            source, victim = sources[task.id]
            data: dict[str, Any] = {"source": source, "attempt": task.attempts}
            if source == "steal":
                data["from"] = victim
            kind = "stolen" if source == "steal" else "claimed"
            tx.append_event(now, kind, task.id, agent.id, data)
        self._touch(tx, agent, now, AgentStatus.WORKING)
        leases = tuple(
            Lease(t.id, agent.id, token, expires)
            for t, (_, token, expires, _) in zip(tasks, grants, strict=True)
        )
        return Claim(
            leases,
            tuple(tasks),
            tuple(sources[t.id][0] for t in tasks),
            origins=tuple(sources[t.id][1] for t in tasks),
        )

    def _steal(
        self, tx: StoreTx, thief: Agent, now: float, settings: Settings, holds: Holds
    ) -> list[Candidate]:
        """Step 4: one tail task from the busiest eligible victim, within the caps."""
        rules = policy.steal_filter(thief, settings, holds.skillsets)
        if not rules.skillsets:
            return []
        victims = policy.claim_victims(tx.queue_depths(), thief.id, settings, self.rng)
        if not victims:
            return []
        window = tx.window_thieves(now - settings.rebalance_interval)
        if policy.steal_budget(window, thief.id, settings) <= 0:
            return []
        for victim in victims:
            taken = holds.pick(functools.partial(steal_tail, tx, victim, rules, now=now))
            if taken:
                return taken
        return []

    # ------------------------------------------------------------------ finishing work

    @_rerun_on_conflict
    def complete(self, lease: Lease, result: Any = None, *, then_claim: int = 0) -> Completion:
        """Finish a task. With ``then_claim`` > 0, claim the agent's next tasks in the same
        transaction (one commit per task for a busy worker).

        A second complete with the same lease reports ``already_done`` and changes nothing;
        a stale or foreign lease raises ``LeaseLost``.
        """
        check_lease(lease)
        check_json(result, "result")
        if then_claim:
            check_n(then_claim)
        with self.store.write() as tx:
            now = self.clock.now()
            finished = tx.finish_leased([(lease.task_id, lease.token, result)], now)
            if not finished:  # not a live lease: say why, or recognise a repeat
                return Completion(self._held(tx, lease, now, done_ok=True), already_done=True)
            ((task_id, holder, has_dependents),) = finished
            tx.append_event(now, "completed", task_id, holder, None)
            released = self._release_dependents(tx, task_id, now) if has_dependents else []
            next_claim = None
            if then_claim:
                next_claim = self._claim(
                    tx, holder or "", then_claim, now, strict=False, completed=True
                )
            else:
                self._after_letting_go(tx, holder, now, completed=True)
            return Completion(_need_task(tx, task_id), False, tuple(released), next_claim)

    @_rerun_on_conflict
    def complete_many(
        self, outcomes: Sequence[tuple[Lease, Any]], *, then_claim: int = 0
    ) -> BatchCompletion:
        """Finish several tasks in one transaction; each lease is checked on its own.

        Leases that are lost are reported in ``lost`` and do not stop the others. With
        ``then_claim``, the agent that held the finished tasks claims its next ones in the
        same transaction (if none finished, nothing is claimed: ``next`` is None).
        """
        if not outcomes and not then_claim:
            return BatchCompletion()
        for lease, result in outcomes:
            check_lease(lease)
            check_json(result, "result")
        if then_claim:
            check_n(then_claim)
        agents = {lease.agent for lease, _ in outcomes if lease.agent}
        if len(agents) > 1:
            raise BadInput("complete_many takes the leases of one agent at a time")
        completed, already, lost, released = [], [], [], []
        with self.store.write() as tx:
            now = self.clock.now()
            holder: str | None = None  # who really holds them, not what the leases claim
            items = [(lease.task_id, lease.token, result) for lease, result in outcomes]
            finished = {task: (agent, deps) for task, agent, deps in tx.finish_leased(items, now)}
            for lease, _ in outcomes:
                if lease.task_id not in finished:  # not a live lease: say why, or a repeat
                    try:
                        task = self._held(tx, lease, now, done_ok=True)
                    except LeaseLost as exc:
                        lost.append((lease.task_id, exc.message))
                    else:
                        already.append(task.id)
                    continue
                agent, has_dependents = finished.pop(lease.task_id)
                if holder is not None and agent is not None and agent != holder:
                    raise BadInput("complete_many takes the leases of one agent at a time")
                holder = agent or holder
                tx.append_event(now, "completed", lease.task_id, agent, None)
                completed.append(lease.task_id)
                if has_dependents:
                    released += self._release_dependents(tx, lease.task_id, now)
            next_claim = None
            if then_claim and holder is not None and completed:
                next_claim = self._claim(tx, holder, then_claim, now, strict=False, completed=True)
            elif then_claim and holder is not None:
                next_claim = self._claim(tx, holder, then_claim, now, strict=False)
            elif completed:
                self._after_letting_go(tx, holder, now, completed=True)
        return BatchCompletion(
            tuple(completed), tuple(already), tuple(lost), tuple(released), next_claim
        )

    @_rerun_on_conflict
    def fail(self, lease: Lease, error: str = "", *, retry: bool = True) -> Task:
        """Report that the task failed. It goes back to pending while attempts remain (and
        ``retry`` is true), ready again after a retry backoff (``policy.retry_backoff``),
        else it is dead. Returns the task as it now is.

        The failure also counts against the agent: ``failure_streak`` failures in a row
        pause it (the circuit breaker), and its queue goes back to the pool.
        """
        check_lease(lease)
        error = check_text(error, "error", 100_000)
        with self.store.write() as tx:
            now = self.clock.now()
            settings = tx.load_settings()
            task = self._held(tx, lease, now)
            self._end_lease(
                tx, task, now, settings, retry=retry, kind="failed", error=error, backoff=True
            )
            if task.agent is not None:
                self._count_failure(tx, task.agent, now, settings)
            self._after_letting_go(tx, task.agent, now)
            return _need_task(tx, task.id)

    @_rerun_on_conflict
    def release(self, lease: Lease) -> Task:
        """Give a task back untouched: pending again (pool, or its pinned agent), and the
        attempt is not counted."""
        check_lease(lease)
        with self.store.write() as tx:
            now = self.clock.now()
            task = self._held(tx, lease, now)
            tx.requeue_task(task.id, policy.return_queue(task), tx.next_seq(), True, None, now, now)
            tx.append_event(now, "released", task.id, task.agent, None)
            self._after_letting_go(tx, task.agent, now)
            return _need_task(tx, task.id)

    @_rerun_on_conflict
    def defer(self, lease: Lease, after: Sequence[int]) -> Task:
        """Put a held task aside until the tasks in ``after`` are done (a continuation).

        The task is ``blocked`` until then, and comes back at the head of the same agent's
        queue; the attempt is not counted. Typical use: post children with ``parent=``, then
        defer on them (fork-join).
        """
        check_lease(lease)
        deps = as_task_ids(after, "after")
        if not deps:
            raise BadInput("defer needs at least one task id in `after`")
        with self.store.write() as tx:
            now = self.clock.now()
            task = self._held(tx, lease, now)
            found = tx.get_tasks(deps, share=True)
            missing = [d for d in deps if d not in found]
            if missing:
                raise UnknownTask(f"unknown dependencies: {', '.join(map(str, missing))}")
            _refuse_ended(found.values())
            self._refuse_cycle(tx, task.id, deps)
            existing = set(tx.deps_of(task.id))
            new_deps = [d for d in deps if d not in existing]
            if new_deps:
                tx.add_deps(task.id, new_deps)
            waiting = sum(1 for d in deps if found[d].state is not TaskState.DONE)
            holder = task.agent
            assert holder is not None
            data = {"after": list(deps), "waiting_on": waiting}
            if waiting:
                tx.block_task(task.id, holder, waiting, now)
            else:
                tx.requeue_task(task.id, holder, tx.next_seq(), True, None, now, now)
            tx.append_event(now, "deferred", task.id, holder, data)
            self._after_letting_go(tx, holder, now)
            return _need_task(tx, task.id)

    @_rerun_on_conflict
    def cancel(self, task_id: int) -> Task:
        """Cancel a task that is not finished. A holder's lease on it is revoked."""
        with self.store.write(exclusive=True) as tx:
            now = self.clock.now()
            task = _need_task(tx, task_id)
            if task.state.finished:
                raise InvalidTransition(
                    f"task {task_id} is already {task.state.value}; there is nothing to cancel",
                    hint="`shoal retry` brings back a dead or cancelled task",
                )
            tx.cancel_task(task_id, now)
            tx.append_event(now, "cancelled", task_id, task.agent, {"was": task.state.value})
            self._flag_stuck(tx, task_id, TaskState.CANCELLED, now)
            if task.state is TaskState.CLAIMED:
                self._after_letting_go(tx, task.agent, now)
            return _need_task(tx, task_id)

    @_rerun_on_conflict
    def retry(self, task_id: int) -> Task:
        """Make a task claimable now: a dead (or cancelled) task comes back to pending with
        fresh attempts; a pending task waiting out its retry backoff or its ``not_before``
        skips the rest of the wait (retry now)."""
        with self.store.write(exclusive=True) as tx:
            now = self.clock.now()
            task = _need_task(tx, task_id)
            if task.waiting(now):
                assert task.ready_at is not None
                tx.set_ready_at(task_id, now)
                data = {"was": "pending", "skipped": round(task.ready_at - now, 3)}
                tx.append_event(now, "retried", task_id, task.agent, data)
                return _need_task(tx, task_id)
            if task.state not in (TaskState.DEAD, TaskState.CANCELLED):
                raise InvalidTransition(
                    f"task {task_id} is {task.state.value}; only dead or "
                    "cancelled tasks, or pending ones waiting to be ready, are retried",
                    hint="a pending or claimed task is still live; wait for it or cancel it first",
                )
            deps = tx.get_tasks(tx.deps_of(task_id))
            waiting = sum(1 for d in deps.values() if d.state is not TaskState.DONE)
            state = TaskState.BLOCKED if waiting else TaskState.PENDING
            dest = task.agent if task.pinned else None
            key = policy.pool_key(task.priority, task.created_at, tx.load_settings().aging)
            tx.revive_task(task_id, state, dest, tx.next_seq(), waiting, key, now)
            tx.append_event(
                now, "retried", task_id, dest, {"was": task.state.value, "state": state.value}
            )
            return _need_task(tx, task_id)

    # ------------------------------------------------------------------ the hub's jobs

    @_rerun_on_conflict
    def rebalance(self, *, dry_run: bool = False) -> list[Move]:
        """Move queued tasks from overloaded agents to agents idle for a while.

        Agents idle at least ``idle_min_for_rebalance`` receive, busiest compatible victim
        first, the lowest-priority stealable tasks of queues deeper than ``busy_threshold``,
        within the steal caps. Moved tasks are marked stolen and never move again. With
        ``dry_run`` nothing changes and the moves that would be made are returned.
        """
        moves: list[Move] = []
        try:
            with self.store.write(exclusive=True) as tx:
                moves = self._rebalance(tx)
                if dry_run:
                    raise _DryRun
        except _DryRun:
            pass
        return moves

    def _rebalance(self, tx: StoreTx) -> list[Move]:
        now = self.clock.now()
        settings = tx.load_settings()
        self._expire_due(tx, now, settings, _EXPIRE_PER_CLAIM)
        idle = sorted(
            (a for a in tx.list_agents() if policy.idle_long_enough(a, now, settings)),
            key=lambda a: (a.idle_since or now, a.id),
        )
        if not idle:
            return []
        window = tx.window_thieves(now - settings.rebalance_interval)
        depth = {queue.agent: queue.depth for queue in tx.queue_depths()}
        skillsets = tx.skillsets()
        moves: list[Move] = []
        for thief in idle:
            budget = policy.steal_budget(window, thief.id, settings)
            if budget <= 0:
                continue
            rules = policy.steal_filter(thief, settings, skillsets)
            for victim in policy.order_victims(
                depth.items(), thief.id, settings.busy_threshold, self.rng
            ):
                take = min(budget, depth[victim] - settings.busy_threshold)
                for task in tx.steal_tail(victim, rules, policy.NOTHING_HELD, take, now):
                    tx.move_task(task.id, thief.id, tx.next_seq(), True, now)
                    data = {"from": victim, "by": "rebalance"}
                    tx.append_event(now, "stolen", task.id, thief.id, data)
                    window.append(thief.id)
                    depth[victim] -= 1
                    depth[thief.id] = depth.get(thief.id, 0) + 1
                    budget -= 1
                    moves.append(Move(task.id, task.title, task.priority, victim, thief.id))
                if budget <= 0:
                    break
        return moves

    @_rerun_on_conflict
    def reap(self) -> ReapReport:
        """One monitor pass: expire leases, mark silent agents offline (their queues go back
        to the pool), terminate ephemeral agents idle (or offline) too long, flag stalled
        tasks."""
        with self.store.write(exclusive=True) as tx:
            now = self.clock.now()
            settings = tx.load_settings()
            expired, dead = self._expire_due(tx, now, settings, None)
            offline, returned, terminated, resumed = [], [], [], []
            for agent in tx.list_agents():
                if policy.is_silent(agent, now, settings):
                    tx.save_agent(replace(agent, status=AgentStatus.OFFLINE, idle_since=None))
                    silent = round(now - agent.last_seen, 3)
                    tx.append_event(
                        now,
                        "agent.offline",
                        None,
                        agent.id,
                        {"from": agent.status.value, "silent_for": silent},
                    )
                    offline.append(agent.id)
                    returned += self._return_queue(tx, agent, now, "agent offline")
                elif policy.idle_expired(agent, now, settings):
                    self._terminate(tx, agent, now, "idle past idle_timeout")
                    terminated.append(agent.id)
                elif policy.is_zombie(agent, now, settings):
                    self._terminate(tx, agent, now, "offline past idle_timeout")
                    terminated.append(agent.id)
                elif policy.pause_over(agent, now):
                    self._resume(tx, agent, now, "cooldown")
                    resumed.append(agent.id)
            stalled = []
            for task in tx.claimed_tasks():
                if policy.is_stalled(task, now, settings):
                    tx.mark_stalled(task.id, now)
                    running = round(now - (task.claimed_at or now), 3)
                    tx.append_event(
                        now,
                        "stalled",
                        task.id,
                        task.agent,
                        {"running_for": running, "expected": task.expected_duration},
                    )
                    stalled.append(task.id)
            return ReapReport(
                tuple(expired),
                tuple(dead),
                tuple(offline),
                tuple(returned),
                tuple(terminated),
                tuple(stalled),
                tuple(resumed),
            )

    @_rerun_on_conflict
    def assess(self) -> Assessment:
        """Assess the workload and recommend spawning or retiring agents (and with what
        skills). The result is kept as the fleet's last assessment."""
        with self.store.write(exclusive=True) as tx:
            now = self.clock.now()
            settings = tx.load_settings()
            counts = tx.state_counts()
            result = policy.assess(
                pending=counts.get("pending", 0),
                in_progress=counts.get("claimed", 0),
                blocked=counts.get("blocked", 0),
                agents=tx.list_agents(),
                demand=tx.pending_demand(),
                settings=settings,
                now=now,
                stuck=len(tx.stuck_tasks(1_000_000)),
            )
            tx.set_meta("last_assessment", json.dumps(result.to_dict()))
            data = {"workload": result.workload, "recommendation": result.recommendation}
            tx.append_event(now, "assessed", None, None, data)
            return result

    def status(self) -> FleetStatus:
        """A snapshot: agents with their load and current tasks, queue depths, counts by
        state, capacity, stalled tasks and the last assessment."""
        with self.store.read() as tx:
            now = self.clock.now()
            settings = tx.load_settings()
            agents = tx.list_agents()
            claimed = tx.claimed_tasks()
            by_agent: dict[str, list[Task]] = {}
            for task in claimed:
                by_agent.setdefault(task.agent or "", []).append(task)
            raw = tx.get_meta("last_assessment")
            waiting, next_ready = tx.waiting_tasks(now)
            return FleetStatus(
                at=now,
                agents=tuple(AgentLoad(a, tuple(by_agent.get(a.id, ()))) for a in agents),
                counts=tx.state_counts(),
                pool=tx.pool_depth(),
                live=sum(1 for a in agents if a.status.live and not a.manager),
                max_agents=settings.max_agents,
                stalled=tuple(t for t in claimed if t.stalled_at is not None),
                assessment=Assessment.from_dict(json.loads(raw)) if raw else None,
                stuck=tuple(tx.stuck_tasks(1000)),
                waiting=waiting,
                next_ready=next_ready,
            )

    def events(
        self,
        since: int = 0,
        *,
        task: int | None = None,
        agent: str | None = None,
        limit: int = 1000,
        newest: bool = False,
    ) -> list[Event]:
        """The log, oldest first: events after id ``since``, optionally of one task or agent.
        With ``newest``, the last ``limit`` of those (still oldest first: a tail)."""
        since = check_count(since, "since", 0, MAX_ID)
        limit = check_count(limit, "limit", 1, 100_000_000)
        (task_id,) = as_task_ids([task], "task") if task is not None else (None,)
        with self.store.read() as tx:
            found = tx.events(since, task_id, agent, limit, newest)
        return found[::-1] if newest else found

    def wait_for_change(self, timeout: float) -> bool:
        """Block until the fleet may have changed (or ``timeout`` seconds pass)."""
        return self.store.wait_for_change(timeout)

    # ------------------------------------------------------------------ settings

    def settings(self) -> Settings:
        with self.store.read() as tx:
            return tx.load_settings()

    @_rerun_on_conflict
    def configure(self, **changes: object) -> Settings:
        """Change fleet settings at run time; each value is checked, and all or none apply.

        Changing ``aging`` re-keys every waiting task in the same transaction (roughly a
        second per quarter of a million tasks), and claims wait for it.
        """
        with self.store.write(exclusive=True) as tx:
            now = self.clock.now()
            old = tx.load_settings()
            new = old.replace(**changes)
            if new == old:
                return new
            tx.save_settings(new)
            if new.aging != old.aging:
                tx.rekey_pool({i: policy.pool_key(p, c, new.aging) for i, p, c in tx.keyed_tasks()})
            diff = {k: v for k, v in new.to_dict().items() if old.to_dict()[k] != v}
            tx.append_event(now, "configured", None, None, diff)
            return new

    # ------------------------------------------------------------------ internals

    def _live_agent(self, tx: StoreTx, agent_id: str, *, lock: bool = False) -> Agent:
        agent = tx.get_agent(agent_id, lock=lock)
        if agent is None:
            raise _unknown_agent(agent_id)
        if agent.status is AgentStatus.TERMINATED:
            raise UnknownAgent(
                f"agent {agent_id!r} is terminated",
                hint=f"register it again (`shoal register {agent_id}`) to start a new incarnation",
            )
        return agent

    def _touch(self, tx: StoreTx, agent: Agent, now: float, status: AgentStatus) -> None:
        """Record that the agent was seen, and its status after a claim.

        ``last_seen`` is written at most once per ``_SEEN_RESOLUTION`` seconds when nothing
        else changes: liveness is judged over heartbeat_timeout (90 s), so a busy agent does
        not pay a write per claim for it.
        """
        idle_since = policy.idle_since_after(agent.status, agent.idle_since, status, now)
        fresh = now - agent.last_seen < _SEEN_RESOLUTION
        if status is not agent.status or idle_since != agent.idle_since or not fresh:
            tx.save_agent(replace(agent, status=status, idle_since=idle_since, last_seen=now))
        if status is AgentStatus.IDLE and agent.status is not AgentStatus.IDLE:
            tx.append_event(now, "agent.idle", None, agent.id, {"from": agent.status.value})
        elif agent.status is AgentStatus.OFFLINE and status is not AgentStatus.OFFLINE:
            data = {"from": "offline", "to": status.value}  # it is back
            tx.append_event(now, "agent.status", None, agent.id, data)

    def _present_status(self, tx: StoreTx, agent: Agent, now: float) -> AgentStatus:
        """The status of an agent that is back: working if it holds leases, else waiting --
        or still overloaded, if the circuit breaker's pause has not run out."""
        if agent.paused(now):
            return AgentStatus.OVERLOADED
        return AgentStatus.WORKING if tx.held_leases(agent.id) else AgentStatus.WAITING

    def _after_letting_go(
        self, tx: StoreTx, agent_id: str | None, now: float, *, completed: bool = False
    ) -> None:
        """After an agent's lease ends: waiting (between tasks) once it holds nothing. A
        completion ends its failure streak; a paused agent stays paused."""
        context = tx.claim_context(agent_id, now) if agent_id else None
        if context is None:
            return
        agent = context.agent
        if not agent.status.live:
            return
        if completed:
            agent = self._end_streak(tx, agent)
        if agent.status is AgentStatus.OVERLOADED:
            return
        status = AgentStatus.WORKING if context.held else AgentStatus.WAITING  # (back, if offline)
        self._touch(tx, agent, now, status)

    def _held(self, tx: StoreTx, lease: Lease, now: float, done_ok: bool = False) -> Task:
        """The task ``lease`` covers, if the lease is still good; else ``LeaseLost``."""
        found = tx.leased_task(lease.task_id)
        if found is None:
            raise UnknownTask(
                f"task {lease.task_id} does not exist", hint="check the id (see `shoal list`)"
            )
        task, token = found
        if token is None or token != lease.token:
            raise LeaseLost(_why_lost(task, lease), hint="claim a new task with `shoal claim`")
        if task.state is TaskState.DONE and done_ok:
            return task
        if task.state is not TaskState.CLAIMED:
            raise LeaseLost(
                f"lease lost: task {task.id} is {task.state.value} now",
                hint="the lease ended; claim a new task",
            )
        assert task.lease_expires is not None
        if task.lease_expires <= now:
            ago = now - task.lease_expires
            raise LeaseLost(
                f"lease lost: your lease on task {task.id} expired {ago:.0f}s ago and the task "
                "is going back to pending",
                hint="heartbeat more often than lease_ttl, or post with a longer lease_ttl; "
                "claim a new task",
            )
        return task

    def _release_dependents(self, tx: StoreTx, task_id: int, now: float) -> list[int]:
        """A task is done: dependents waiting on nothing else become pending, in the same
        transaction, at the head of the queue they were bound for -- or in the pool, if that
        agent has gone away (offline or terminated) and the task is not pinned to it."""
        freed = tx.release_dependents(task_id)
        if not freed:
            return freed
        tasks = tx.get_tasks(freed)
        present: dict[str, bool] = {}
        for dep in freed:
            task = tasks[dep]
            dest = task.agent
            if dest is not None and not task.pinned:
                if dest not in present:
                    agent = tx.get_agent(dest)
                    present[dest] = agent is not None and policy.is_present(agent)
                if not present[dest]:
                    dest = None
            tx.ready_task(dep, dest, tx.next_seq(), now)
            tx.append_event(now, "ready", dep, dest, {"after": task_id})
        return freed

    def _end_lease(
        self,
        tx: StoreTx,
        task: Task,
        now: float,
        settings: Settings,
        *,
        retry: bool,
        kind: str,
        error: str | None,
        backoff: bool = False,
    ) -> TaskState:
        """A claim that failed or expired: back to pending while attempts last, else dead.

        With ``backoff`` (a reported failure) the task is ready again only after its retry
        backoff. An expired lease is retried at once: its agent died or hung, which says
        nothing against the task, and a dead agent's work should come back promptly.
        """
        state = policy.state_after_failure(task, settings, retry)
        data: dict[str, Any] = {"attempt": task.attempts, "error": error}
        if state is TaskState.PENDING:
            ready = now
            if backoff:
                ready += policy.retry_backoff(task.attempts, task.retry_delay, settings, self.rng)
                data["ready_at"] = iso_time(ready)
            dest = policy.return_queue(task)
            tx.requeue_task(task.id, dest, tx.next_seq(), False, error, now, ready)
            tx.append_event(now, kind, task.id, task.agent, data)
        else:
            tx.bury_task(task.id, error, now)
            tx.append_event(now, "dead", task.id, task.agent, {**data, "cause": kind})
            self._flag_stuck(tx, task.id, TaskState.DEAD, now)
        return state

    def _flag_stuck(self, tx: StoreTx, task_id: int, state: TaskState, now: float) -> None:
        """Tasks blocked on one that just died or was cancelled will wait until it is
        retried: say so in their history (they stay blocked; `retry` frees them)."""
        for dep in tx.dependents_of(task_id):
            waiting = tx.get_task(dep)
            if waiting is not None and waiting.state is TaskState.BLOCKED:
                data = {"on": task_id, "because": state.value}
                tx.append_event(now, "stuck", dep, waiting.agent, data)

    def _expire_due(
        self, tx: StoreTx, now: float, settings: Settings, limit: int | None
    ) -> tuple[list[int], list[int]]:
        """Step 0: every lease past its expiry ends, as a failed attempt."""
        expired: list[int] = []
        dead: list[int] = []
        while True:
            batch = tx.expired_leases(now, limit or 500)
            for task in batch:
                error = f"lease expired (held by {task.agent})"
                state = self._end_lease(
                    tx, task, now, settings, retry=True, kind="expired", error=error
                )
                (expired if state is TaskState.PENDING else dead).append(task.id)
            if limit is not None or len(batch) < 500:
                return expired, dead

    def _return_queue(self, tx: StoreTx, agent: Agent, now: float, why: str) -> list[int]:
        """An agent is going away: its queue, and the blocked work bound for it, goes to the
        pool -- all but the tasks pinned to it, which wait for it to come back."""
        returned = []
        while True:
            bound = tx.bound_tasks(agent.id, 500)
            for task in bound:
                tx.move_task(task.id, None, tx.next_seq(), False, now)
                tx.append_event(now, "returned", task.id, agent.id, {"why": why})
                returned.append(task.id)
            if len(bound) < 500:
                return returned

    def _terminate(self, tx: StoreTx, agent: Agent, now: float, why: str) -> None:
        self._release_held(tx, agent.id, now, why)
        self._return_queue(tx, agent, now, why)
        gone = replace(agent, status=AgentStatus.TERMINATED, idle_since=None, paused_until=None)
        tx.save_agent(replace(gone, last_seen=now))
        tx.append_event(now, "agent.terminated", None, agent.id, {"why": why})

    def _release_held(self, tx: StoreTx, agent_id: str, now: float, why: str) -> list[int]:
        """Give back every task ``agent_id`` holds, untouched (no attempt counted)."""
        released = []
        for task, _ in tx.held_leases(agent_id):
            dest = policy.return_queue(task)
            tx.requeue_task(task.id, dest, tx.next_seq(), True, None, now, now)
            tx.append_event(now, "released", task.id, agent_id, {"why": why})
            released.append(task.id)
        return released

    def _count_failure(self, tx: StoreTx, agent_id: str, now: float, settings: Settings) -> None:
        """One more failure in a row for ``agent_id``; at ``failure_streak``, the circuit
        breaker pauses it for ``pause_cooldown`` and sends its queue back to the pool."""
        agent = tx.get_agent(agent_id, lock=True)
        if agent is None or not agent.status.live:
            return
        agent = replace(agent, failures=agent.failures + 1)
        if not policy.breaker_trips(agent.failures, settings) or agent.paused(now):
            tx.save_agent(agent)
            return
        until = now + settings.pause_cooldown
        paused = replace(agent, status=AgentStatus.OVERLOADED, paused_until=until, idle_since=None)
        tx.save_agent(paused)
        data = {"failures": agent.failures, "until": iso_time(until), "from": agent.status.value}
        tx.append_event(now, "agent.paused", None, agent_id, data)
        self._return_queue(tx, agent, now, "agent paused")

    def _end_streak(self, tx: StoreTx, agent: Agent) -> Agent:
        """A completion: the agent's failure count starts over (``policy.streak_ends``)."""
        if not policy.streak_ends(agent):
            return agent
        ended = replace(agent, failures=0)
        tx.save_agent(ended)
        return ended

    def _resume(self, tx: StoreTx, agent: Agent, now: float, by: str) -> Agent:
        """End an agent's pause: it may claim again, its failure count starts over."""
        status = agent.status
        if status is AgentStatus.OVERLOADED:
            status = AgentStatus.WORKING if tx.held_leases(agent.id) else AgentStatus.WAITING
        resumed = replace(agent, status=status, failures=0, paused_until=None)
        tx.save_agent(resumed)
        tx.append_event(now, "agent.resumed", None, agent.id, {"by": by})
        return resumed

    def _refuse_cycle(self, tx: StoreTx, task_id: int, deps: Iterable[int]) -> None:
        """Refuse dependencies through which ``task_id`` would end up waiting on itself."""
        seen: set[int] = set()
        frontier = list(deps)
        while frontier:
            current = frontier.pop()
            if current == task_id:
                raise DependencyCycle(
                    f"task {task_id} cannot wait on {', '.join(map(str, deps))}: "
                    "that would make it wait on itself",
                    hint="drop the dependency that leads back to this task",
                )
            if current not in seen:
                seen.add(current)
                frontier += tx.deps_of(current)


def _need_task(tx: StoreTx, task_id: int) -> Task:
    (task_id,) = as_task_ids([task_id], "task id")
    task = tx.get_task(task_id)
    if task is None:
        raise UnknownTask(f"there is no task {task_id}", hint="check the id (see `shoal list`)")
    return task


def _refuse_ended(deps: Iterable[Task]) -> None:
    """Waiting on a dead or cancelled task would wait forever (unless someone retries it)."""
    ended = [d for d in deps if d.state in (TaskState.DEAD, TaskState.CANCELLED)]
    if ended:
        which = ", ".join(f"{d.id} ({d.state.value})" for d in ended)
        raise InvalidTransition(
            f"cannot wait on tasks that will never finish: {which}",
            hint="retry them first (`shoal retry ID`), or leave them out of `after`",
        )


def _wait_words(seconds: float) -> str:
    """A wait for people: 45s, 4m, 2h."""
    if seconds < 90:
        return f"{max(seconds, 0):.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _unknown_agent(agent_id: str) -> UnknownAgent:
    return UnknownAgent(
        f"there is no agent {agent_id!r} in this fleet",
        hint=f"register it first: `shoal register {agent_id}` (see `shoal agents`)",
    )


def _with_idle_since(agent: Agent, before: Agent, now: float) -> Agent:
    """``agent`` with the idle_since bookkeeping of a change from ``before``."""
    since = policy.idle_since_after(before.status, before.idle_since, agent.status, now)
    return replace(agent, idle_since=since)


def _agent_data(agent: Agent) -> dict[str, Any]:
    return {
        "role": agent.role,
        "skills": list(agent.skills),
        "domains": list(agent.domains),
        "max_concurrent": agent.max_concurrent,
        "manager": agent.manager,
        "ephemeral": agent.ephemeral,
        "incarnation": agent.incarnation,
    }


def _why_lost(task: Task, lease: Lease) -> str:
    """Words for a lease whose token is not the task's current one, saying what became of
    the task (not guessing why: a typo and an expired lease look the same from here)."""
    if task.state is TaskState.CLAIMED:
        return (
            f"lease lost: task {task.id} is held by agent {task.agent!r} under a different "
            "token (check the token; if your lease ran out, the task was claimed again)"
        )
    if task.state is TaskState.DONE:
        return f"lease lost: task {task.id} was already completed under another lease"
    return f"lease lost: task {task.id} is {task.state.value} now; that token is not its lease"
