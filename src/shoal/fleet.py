"""Fleet: the one API of shoal -- tasks, agents, leases, and the work-stealing claim.

Every face (the CLI, the MCP server, the worker, the simulator) drives the fleet through
this class, and every method is one store transaction: it checks its input first
(``validation``; bad input never opens a transaction), then composes the transitions of
``_transitions`` (and ``_posting``, ``_claiming``) inside the transaction, so each call
either happens whole, with its events, or not at all. The claim cascade -- own queue, pool,
steal -- and why it is built so is the essay at the top of ``_claiming``.

The hub's jobs -- ``rebalance`` (move queued tasks to agents idle for a while), ``reap``
(expire leases, mark silent agents offline, end idle ephemeral agents, flag stalled tasks)
and ``assess`` (recommend spawning or retiring agents) -- make recovery timely and the
fleet's size right; none of them is needed for correctness. ``prune`` lets history end
(``_pruning``): the hub runs it too, when the fleet keeps history for a while only.

Invariants (checked by the contract suite on every store; each with the function and the
test that enforce it in docs/ARCHITECTURE.md, "Invariants")
---------------------------------------------------------------------------------------
I1 a task has at most one live lease; only its token may change it.
I2 every task is in exactly one state; none is lost, none completes twice.
I3 no agent holds more than max_concurrent leases; live non-managers <= max_agents.
I4 a stolen task is never stolen again; a pinned task is never stolen.
I5 every state change appends exactly one event, in the same transaction.
I6 an expired lease is claimable at claim time, monitor or not.
I7 bad input changes nothing and says what was wrong and how to fix it.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from shoal import policy
from shoal._agents import heartbeat_in, pause_in, register_in, set_status_in
from shoal._claiming import claim_direct, claim_in, preview_in, rebalance_in
from shoal._conflicts import rerun_on_conflict
from shoal._hub import assess_in, reap_in, status_in
from shoal._posting import insert_task
from shoal._pruning import Pruned, prune_age, prune_batch_in, prune_cutoff, squasher
from shoal._tokens import authenticate_in, create_token_in, revoke_token_in, tokens_in
from shoal._transitions import (
    after_letting_go,
    count_failure,
    end_lease,
    flag_stuck,
    held_task,
    live_agent,
    need_task,
    refuse_cycle,
    refuse_ended,
    release_dependents,
    resume_agent,
    unknown_agent,
)
from shoal.access import Credential, check_token_id, parse_role
from shoal.clock import Clock, SystemClock, monotonic
from shoal.clock import wait as wait_for
from shoal.errors import (
    BadInput,
    InvalidTransition,
    LeaseLost,
    UnknownTask,
)
from shoal.limits import (
    MAX_DURATION,
    MAX_EVENTS,
    MAX_LISTED,
    MAX_PRUNE_BATCH,
    MAX_READY,
    PRUNE_BATCH,
    TASK_HISTORY,
)
from shoal.model import (
    Agent,
    Assessment,
    BatchCompletion,
    Claim,
    Completion,
    Event,
    FleetStatus,
    Lease,
    Move,
    Probe,
    PruneReport,
    ReapReport,
    Registration,
    Task,
    TaskDetail,
)
from shoal.settings import Settings
from shoal.stores import init_store_url, open_store
from shoal.stores.base import Finishing, Store, StoreTx
from shoal.times import iso_time
from shoal.validation import (
    MAX_ID,
    as_task_ids,
    check_agent_id,
    check_count,
    check_lease,
    check_max_concurrent,
    check_n,
    check_post,
    check_result,
    check_text,
    check_wait,
    draft_of,
    normalize_names,
    parse_agent_status,
    parse_duration,
    parse_priority,
    parse_state,
)
from shoal.vocabulary import AgentStatus, ClaimReason, EventKind, TaskState

__all__ = ["Fleet"]


class _DryRun(Exception):
    """Raised inside a write transaction to roll back a dry run."""


class Fleet:
    """A fleet of agents and the tasks they share, on one store.

    Open one with ``Fleet.open(url)``; a ``Fleet`` may be shared by the threads of one
    process, and any number of processes (or hosts, with PostgreSQL) may open the same
    fleet at once. Every method is one transaction.
    """

    def __init__(self, store: Store, clock: Clock | None = None, rng: random.Random | None = None):
        self._store = store
        self.clock: Clock = clock or SystemClock()
        self.rng = rng or random.Random()

    @staticmethod
    def _token() -> str:
        # A lease token fences off stale holders, and over MCP it is also the proof that a
        # caller may act on a task it does not hold (I8): an MCP client sees the tokens of
        # the tasks it claims, so they must not let it guess anyone else's. They come from
        # the OS's generator (secrets), never from a seeded one whose state a few hundred
        # outputs give away; it costs about a microsecond a claim.
        return secrets.token_hex(8)

    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        create: bool = True,
        read_only: bool = False,
    ) -> Fleet:
        """Open the fleet at ``url`` (``memory://``, ``sqlite:///path``).

        Without a URL: ``$SHOAL_STORE``, else ``.shoal/fleet.db`` in the nearest folder that
        has one. ``create=False`` refuses to create a fleet that does not exist yet (the CLI
        uses it so a mistyped path is an error, not a new empty fleet). ``read_only=True``
        is for looking (the CLI's list, status, events...): on SQLite the fleet opens
        without the writer queue, so a stuck writer cannot hold it up, and works on a
        read-only disk; it creates nothing, and any change raises ``StoreError``. Other
        stores open as usual.
        """
        store = open_store(url, create=create and not read_only, read_only=read_only)
        return cls(store, clock=clock, rng=rng)

    @classmethod
    def init(cls, url: str | None = None, *, clock: Clock | None = None) -> Fleet:
        """Create (or upgrade) a fleet: at ``url``, ``$SHOAL_STORE``, or ``.shoal/fleet.db``
        in the current folder. ``fleet.created`` says whether it is new."""
        return cls(open_store(url or init_store_url(), create=True), clock=clock)

    @property
    def url(self) -> str:
        return self._store.url

    @property
    def created(self) -> bool:
        """Whether opening this fleet created its store (or upgraded its schema)."""
        return self._store.created

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Fleet({self._store.url!r})"

    # ------------------------------------------------------------------ posting work

    @rerun_on_conflict
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
        with self._store.write() as tx:
            if draft.key is not None and (existing := tx.task_by_key(draft.key)) is not None:
                return existing
            task_id = insert_task(tx, draft, self.clock.now(), tx.load_settings())
            task = tx.get_task(task_id)
            assert task is not None
            return task

    @rerun_on_conflict
    def post_many(self, tasks: Iterable[Mapping[str, Any]]) -> list[int]:
        """Post many tasks in one transaction; returns their ids in order.

        Each mapping holds ``post``'s arguments (``title`` and any keywords). All are checked
        before anything is written, and either all are posted or none. A batch is one moment:
        an owner takes the tasks it puts in its queue in the order they are listed (the first
        at the head), as a claim from the pool would, and thieves take the last-listed first.
        """
        drafts = [draft_of(spec, i) for i, spec in enumerate(tasks)]
        ids: list[int] = []
        with self._store.write() as tx:
            now = self.clock.now()
            settings = tx.load_settings()
            # Queue places, largest (the head) for the first listed.
            places = tx.next_seqs(len(drafts))[::-1] if len(drafts) > 1 else [None] * len(drafts)
            for draft, place in zip(drafts, places, strict=True):
                if draft.key is not None and (existing := tx.task_by_key(draft.key)) is not None:
                    ids.append(existing.id)
                else:
                    ids.append(insert_task(tx, draft, now, settings, place))
        return ids

    # ------------------------------------------------------------------ reading tasks

    def by_key(self, key: str) -> Task | None:
        """The task posted with idempotency key ``key``, if any."""
        with self._store.read() as tx:
            return tx.task_by_key(check_text(key, "key", 256, line=True))

    def get(self, task_id: int) -> Task:
        """The task with that id."""
        with self._store.read() as tx:
            return need_task(tx, task_id)

    def show(self, task_id: int, *, events: int = 50) -> TaskDetail:
        """A task with its dependencies, dependents and latest events."""
        with self._store.read() as tx:
            task = need_task(tx, task_id)
            history = tx.events(0, task_id, None, TASK_HISTORY)[-events:] if events > 0 else []
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
        if agent is not None:
            check_agent_id(agent)
        limit = check_count(limit, "limit", 1, MAX_LISTED)
        (below,) = as_task_ids([before], "before") if before is not None else (None,)
        with self._store.read() as tx:
            return tx.list_tasks(wanted, agent, limit, below)

    def ready(self, agent: str | None = None, *, limit: int = 20) -> list[Task]:
        """Pending tasks in the order a claim would take them.

        For an agent: its own queue head, then the pool tasks it can do by score (steals
        are not previewed). Without one: the pool by score, then every agent's queue. Tasks
        still waiting out a retry backoff or a not_before are not ready, so not listed.
        """
        limit = check_count(limit, "limit", 1, MAX_READY)
        if agent is not None:
            check_agent_id(agent)
        with self._store.read() as tx:
            return preview_in(tx, self.clock.now(), agent, limit)

    # ------------------------------------------------------------------ agents

    @rerun_on_conflict
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
        role = check_text(role, "role", 64, line=True) or "worker"
        check_max_concurrent(max_concurrent)
        with self._store.write(exclusive=True) as tx:
            now = self.clock.now()
            return register_in(
                tx,
                now,
                agent_id,
                role=role,
                skill_names=skill_names,
                domain_names=domain_names,
                max_concurrent=max_concurrent,
                manager=manager,
                ephemeral=ephemeral,
            )

    def agent(self, agent_id: str) -> Agent:
        """The agent with that id (terminated ones included)."""
        check_agent_id(agent_id)
        with self._store.read() as tx:
            agent = tx.get_agent(agent_id)
            if agent is None:
                raise unknown_agent(agent_id)
            return agent

    def agents(self) -> list[Agent]:
        """Every agent the fleet has seen, by id."""
        with self._store.read() as tx:
            return tx.list_agents()

    @rerun_on_conflict
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
        check_agent_id(agent_id)
        reason = check_text(why, "why", 200, line=True) if why is not None else None
        if new_status is AgentStatus.OVERLOADED:
            raise BadInput(
                "overloaded is set by the circuit breaker, not by request",
                hint="an agent is paused after failure_streak failures in a row",
            )
        with self._store.write(exclusive=True) as tx:
            now = self.clock.now()
            return set_status_in(tx, now, agent_id, new_status, reason, release)

    @rerun_on_conflict
    def pause(self, agent_id: str, *, for_: float | str = 3600.0) -> Agent:
        """Hold an agent for ``for_`` (seconds or 30m, 2h) or until ``resume``: its claims
        get nothing (reason ``paused``), its queue goes back to the pool, and the leases it
        holds run on. The circuit breaker's own hold, asked for by a person (status
        ``overloaded``, event ``agent.paused`` with ``by: request``)."""
        check_agent_id(agent_id)
        seconds = parse_duration(for_, "for")
        if not 0 < seconds <= MAX_DURATION:
            raise BadInput(
                f"a pause must last more than 0 and at most 10 years, not {for_!r}",
                hint="e.g. 30m, 2h, 1d; resume sooner with `shoal agent resume`",
            )
        with self._store.write(exclusive=True) as tx:
            return pause_in(tx, self.clock.now(), agent_id, seconds)

    @rerun_on_conflict
    def resume(self, agent_id: str) -> Agent:
        """Let an agent the circuit breaker paused claim again now (its failure count starts
        over). Resuming an agent that is not paused changes nothing."""
        check_agent_id(agent_id)
        with self._store.write(exclusive=True) as tx:
            now = self.clock.now()
            agent = live_agent(tx, agent_id)
            if agent.paused_until is None:
                return agent
            return resume_agent(tx, agent, now, "request")

    @rerun_on_conflict
    def probe(self) -> Probe:
        """Prove the store takes a write (it records when it was last probed), and read its
        server's clock in the same transaction: what ``shoal doctor`` checks."""
        with self._store.write() as tx:
            now = self.clock.now()
            tx.set_meta("last_probe", iso_time(now) or "")
            return Probe(now, tx.server_time())

    def leases(self, agent_id: str) -> list[Lease]:
        """The leases ``agent_id`` holds now, oldest claim first (read only: nothing is
        renewed). For a face that acts for the agent it has already checked."""
        check_agent_id(agent_id)
        with self._store.read() as tx:
            agent = live_agent(tx, agent_id)
            return [
                Lease(task.id, agent.id, token, task.lease_expires or 0.0)
                for task, token in tx.held_leases(agent.id)
            ]

    @rerun_on_conflict
    def heartbeat(self, agent_id: str) -> list[Lease]:
        """Say the agent is alive and extend every lease it holds; returns the renewed leases.

        A lease that has already expired is not renewed: its task goes back to pending.
        """
        check_agent_id(agent_id)
        with self._store.write() as tx:
            now = self.clock.now()
            return heartbeat_in(tx, now, agent_id, self.rng)

    # ------------------------------------------------------------------ the claim

    @rerun_on_conflict
    def claim(self, agent_id: str, n: int = 1, *, wait: float | str = 0.0) -> Claim:
        """Take up to ``n`` tasks for ``agent_id`` by the claim cascade (module docstring).

        Returns the leases and their tasks, or none with the reason: ``busy`` (at
        max_concurrent), ``paused`` (the circuit breaker holds the agent; ``retry_at`` says
        until when) or ``empty`` (nothing this agent can do now; ``retry_at``, if set, says
        when something it passed over is free to take). With ``wait`` > 0 an empty claim
        waits up to that many seconds for the fleet to change and tries again.
        """
        check_agent_id(agent_id)
        n = check_n(n)
        deadline = monotonic(self.clock) + check_wait(wait)
        while True:
            direct = claim_direct(self._store, agent_id, n, self.clock.now(), self._token)
            if direct is not None:
                return direct[1]
            with self._store.write() as tx:
                claim = self._claim(tx, agent_id, n, self.clock.now(), strict=True)
            assert claim is not None
            remaining = deadline - monotonic(self.clock)
            if claim or claim.reason is not ClaimReason.EMPTY or remaining <= 0:
                return claim
            pause = min(remaining, 1.0)
            if claim.retry_at is not None:  # work passed over is free to take then
                pause = min(pause, max(0.0, claim.retry_at - self.clock.now()))
            wait_for(self.clock, self._store.wait_for_change, pause)

    def _claim(
        self,
        tx: StoreTx,
        agent_id: str,
        n: int,
        now: float,
        *,
        strict: bool,
        completed: bool = False,
    ) -> Claim | None:
        """The claim cascade (``_claiming.claim_in``) with this fleet's randomness and
        tokens."""
        return claim_in(
            tx,
            agent_id,
            n,
            now,
            strict=strict,
            rng=self.rng,
            token=self._token,
            completed=completed,
        )

    # ------------------------------------------------------------------ finishing work

    @rerun_on_conflict
    def complete(self, lease: Lease, result: Any = None, *, then_claim: int = 0) -> Completion:
        """Finish a task. With ``then_claim`` > 0, claim the agent's next tasks in the same
        transaction (one commit per task for a busy worker).

        A second complete with the same lease reports ``already_done`` and changes nothing;
        a stale or foreign lease raises ``LeaseLost``.
        """
        check_lease(lease)
        check_result(result)
        if then_claim:
            check_n(then_claim)
        finishing = [Finishing(lease.task_id, lease.token, result)]
        direct = claim_direct(
            self._store, lease.agent, then_claim, self.clock.now(), self._token, finishing
        )
        if direct is not None:
            ((task,), claimed) = direct
            return Completion(task, False, (), claimed if then_claim else None)
        with self._store.write() as tx:
            now = self.clock.now()
            finished = tx.finish_leased(finishing, now)
            if not finished:  # not a live lease: say why, or recognise a repeat
                return Completion(held_task(tx, lease, now, done_ok=True), already_done=True)
            ((task_id, holder, has_dependents, written),) = finished
            tx.append_event(now, EventKind.COMPLETED, task_id, holder, None)
            released = release_dependents(tx, task_id, now) if has_dependents else []
            next_claim = None
            if then_claim:
                next_claim = self._claim(
                    tx, holder or "", then_claim, now, strict=False, completed=True
                )
            else:
                after_letting_go(tx, holder, now, completed=True)
            done = written or need_task(tx, task_id)  # nothing after the finish changes it
            return Completion(done, False, tuple(released), next_claim)

    @rerun_on_conflict
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
            check_result(result)
        if then_claim:
            check_n(then_claim)
        agents = {lease.agent for lease, _ in outcomes if lease.agent}
        if len(agents) > 1:
            raise BadInput("complete_many takes the leases of one agent at a time")
        items = [Finishing(lease.task_id, lease.token, result) for lease, result in outcomes]
        if len(agents) == 1 and len({lease.task_id for lease, _ in outcomes}) == len(outcomes):
            direct = claim_direct(
                self._store, next(iter(agents)), then_claim, self.clock.now(), self._token, items
            )
            if direct is not None:
                finished_tasks, claimed = direct
                ids = tuple(task.id for task in finished_tasks)
                return BatchCompletion(ids, next=claimed if then_claim else None)
        completed, already, lost, released = [], [], [], []
        with self._store.write() as tx:
            now = self.clock.now()
            holder: str | None = None  # who really holds them, not what the leases claim
            finished = {done.task_id: done for done in tx.finish_leased(items, now)}
            for lease, _ in outcomes:
                if lease.task_id not in finished:  # not a live lease: say why, or a repeat
                    try:
                        task = held_task(tx, lease, now, done_ok=True)
                    except LeaseLost as exc:
                        lost.append((lease.task_id, exc.message))
                    else:
                        already.append(task.id)
                    continue
                done = finished.pop(lease.task_id)
                agent, has_dependents = done.holder, done.has_dependents
                if holder is not None and agent is not None and agent != holder:
                    raise BadInput("complete_many takes the leases of one agent at a time")
                holder = agent or holder
                tx.append_event(now, EventKind.COMPLETED, lease.task_id, agent, None)
                completed.append(lease.task_id)
                if has_dependents:
                    released += release_dependents(tx, lease.task_id, now)
            next_claim = None
            if then_claim and holder is not None and completed:
                next_claim = self._claim(tx, holder, then_claim, now, strict=False, completed=True)
            elif then_claim and holder is not None:
                next_claim = self._claim(tx, holder, then_claim, now, strict=False)
            elif completed:
                after_letting_go(tx, holder, now, completed=True)
        return BatchCompletion(
            tuple(completed), tuple(already), tuple(lost), tuple(released), next_claim
        )

    @rerun_on_conflict
    def fail(self, lease: Lease, error: str = "", *, retry: bool = True) -> Task:
        """Report that the task failed. It goes back to pending while attempts remain (and
        ``retry`` is true), ready again after a retry backoff (``policy.retry_backoff``),
        else it is dead. Returns the task as it now is.

        The failure also counts against the agent: ``failure_streak`` failures in a row
        pause it (the circuit breaker), and its queue goes back to the pool.
        """
        check_lease(lease)
        error = check_text(error, "error", 100_000)
        with self._store.write() as tx:
            now = self.clock.now()
            settings = tx.load_settings()
            task = held_task(tx, lease, now)
            end_lease(
                tx,
                task,
                now,
                settings,
                retry=retry,
                kind=EventKind.FAILED,
                error=error,
                rng=self.rng,
                backoff=True,
            )
            if task.agent is not None:
                count_failure(tx, task.agent, now, settings)
            after_letting_go(tx, task.agent, now)
            return need_task(tx, task.id)

    @rerun_on_conflict
    def release(self, lease: Lease) -> Task:
        """Give a task back untouched: pending again (pool, or its pinned agent), and the
        attempt is not counted."""
        check_lease(lease)
        with self._store.write() as tx:
            now = self.clock.now()
            task = held_task(tx, lease, now)
            tx.requeue_task(task.id, policy.return_queue(task), tx.next_seq(), True, None, now, now)
            tx.append_event(now, EventKind.RELEASED, task.id, task.agent, None)
            after_letting_go(tx, task.agent, now)
            return need_task(tx, task.id)

    @rerun_on_conflict
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
        with self._store.write() as tx:
            now = self.clock.now()
            task = held_task(tx, lease, now)
            found = tx.get_tasks(deps, share=True)
            missing = [d for d in deps if d not in found]
            if missing:
                raise UnknownTask(f"unknown dependencies: {', '.join(map(str, missing))}")
            refuse_ended(found.values())
            refuse_cycle(tx, task.id, deps)
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
            tx.append_event(now, EventKind.DEFERRED, task.id, holder, data)
            after_letting_go(tx, holder, now)
            return need_task(tx, task.id)

    @rerun_on_conflict
    def cancel(self, task_id: int) -> Task:
        """Cancel a task that is not finished. A holder's lease on it is revoked."""
        with self._store.write(exclusive=True) as tx:
            now = self.clock.now()
            task = need_task(tx, task_id)
            if task.state.finished:
                raise InvalidTransition(
                    f"task {task_id} is already {task.state.value}; there is nothing to cancel",
                    hint="`shoal retry` brings back a dead or cancelled task",
                )
            tx.cancel_task(task_id, now)
            tx.append_event(
                now, EventKind.CANCELLED, task_id, task.agent, {"was": task.state.value}
            )
            flag_stuck(tx, task_id, TaskState.CANCELLED, now)
            if task.state is TaskState.CLAIMED:
                after_letting_go(tx, task.agent, now)
            return need_task(tx, task_id)

    @rerun_on_conflict
    def set_priority(self, task_id: int, priority: int | str) -> Task:
        """Give a task that is not finished a new priority (1..9 or a name); claims rank it
        by the new one from now on, with the age it already had."""
        number = parse_priority(priority)
        with self._store.write(exclusive=True) as tx:
            now = self.clock.now()
            task = need_task(tx, task_id)
            if task.state.finished:
                raise InvalidTransition(
                    f"task {task_id} is already {task.state.value}; its priority no longer matters",
                    hint="`shoal retry` brings back a dead or cancelled task first",
                )
            if task.priority == number:
                return task
            key = policy.pool_key(number, task.created_at, tx.load_settings().aging)
            tx.set_priority(task_id, number, key, now)
            tx.append_event(
                now,
                EventKind.REPRIORITIZED,
                task_id,
                task.agent,
                {"from": task.priority, "to": number},
            )
            return need_task(tx, task_id)

    @rerun_on_conflict
    def retry(self, task_id: int) -> Task:
        """Make a task claimable now: a dead (or cancelled) task comes back to pending with
        fresh attempts; a pending task waiting out its retry backoff or its ``not_before``
        skips the rest of the wait (retry now)."""
        with self._store.write(exclusive=True) as tx:
            now = self.clock.now()
            task = need_task(tx, task_id)
            if task.waiting(now):
                assert task.ready_at is not None
                tx.set_ready_at(task_id, now)
                data = {"was": "pending", "skipped": round(task.ready_at - now, 3)}
                tx.append_event(now, EventKind.RETRIED, task_id, task.agent, data)
                return need_task(tx, task_id)
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
                now,
                EventKind.RETRIED,
                task_id,
                dest,
                {"was": task.state.value, "state": state.value},
            )
            return need_task(tx, task_id)

    # ------------------------------------------------------------------ the hub's jobs

    @rerun_on_conflict
    def rebalance(self, *, dry_run: bool = False) -> list[Move]:
        """Move queued tasks from overloaded agents to agents idle for a while.

        Agents idle at least ``idle_min_for_rebalance`` receive, busiest compatible victim
        first, the lowest-priority stealable tasks of queues deeper than ``busy_threshold``,
        within the steal caps. Moved tasks are marked stolen and never move again. With
        ``dry_run`` nothing changes and the moves that would be made are returned.
        """
        moves: list[Move] = []
        try:
            with self._store.write(exclusive=True) as tx:
                moves = rebalance_in(tx, self.clock.now(), self.rng)
                if dry_run:
                    raise _DryRun
        except _DryRun:
            pass
        return moves

    @rerun_on_conflict
    def reap(self) -> ReapReport:
        """One monitor pass: expire leases, mark silent agents offline (their queues go back
        to the pool), terminate ephemeral agents idle (or offline) too long, flag stalled
        tasks."""
        with self._store.write(exclusive=True) as tx:
            now = self.clock.now()
            return reap_in(tx, now, self.rng)

    @rerun_on_conflict
    def assess(self) -> Assessment:
        """Assess the workload and recommend spawning or retiring agents (and with what
        skills). The result is kept as the fleet's last assessment."""
        with self._store.write(exclusive=True) as tx:
            now = self.clock.now()
            return assess_in(tx, now)

    def prune(
        self,
        older_than: float | str | None = None,
        *,
        batch: int = PRUNE_BATCH,
        limit: int | None = None,
        dry_run: bool = False,
        squash: bool = False,
    ) -> PruneReport:
        """Delete history: tasks that finished (done, dead, cancelled) more than
        ``older_than`` ago (seconds, or "30d"), with their events, and events of no task
        as old. Without ``older_than``: the fleet's ``history_retention`` (0 keeps all).

        Never live work, never the steal window, never a dead or cancelled task a live one
        waits on (``_pruning`` says what stays and why). Runs in batches of ``batch`` tasks,
        one short transaction each, so claims go on meanwhile; ``limit`` stops after about
        that many tasks and events of no task (the report says ``more``). ``dry_run``
        counts what would go and changes nothing.

        ``squash`` (the git store only) then replaces the branch's history by one commit
        holding the fleet as it is, so what was pruned stops taking room in the repository
        too (``squash_history``).
        """
        if squash and dry_run:
            raise BadInput(
                "--squash and --dry-run do not go together",
                hint="look first with --dry-run, then squash",
            )
        squash_history = squasher(self._store) if squash else None
        report = self._prune(older_than, batch=batch, limit=limit, dry_run=dry_run)
        return report if squash_history is None else replace(report, squashed=squash_history())

    def _prune(
        self, older_than: float | str | None, *, batch: int, limit: int | None, dry_run: bool
    ) -> PruneReport:
        age = None if older_than is None else prune_age(older_than)
        batch = check_count(batch, "batch", 1, MAX_PRUNE_BATCH)
        limit = None if limit is None else check_count(limit, "limit", 1, MAX_ID)
        with self._store.read() as tx:
            settings = tx.load_settings()
            age = settings.history_retention if age is None else age
            if not age:
                return PruneReport(dry_run=dry_run)
            cutoff = prune_cutoff(self.clock.now(), age, settings)
            if dry_run:
                tasks, events = tx.prune_preview(cutoff)
                return PruneReport(cutoff, tasks, events, dry_run=True)
        tasks = events = rows = 0
        while True:
            got = self._prune_batch(cutoff, batch)
            tasks, events = tasks + got.tasks, events + got.events
            rows += got.tasks + got.untasked
            if not got.more:
                return PruneReport(cutoff, tasks, events)
            if limit is not None and rows >= limit:
                return PruneReport(cutoff, tasks, events, more=True)

    @rerun_on_conflict
    def _prune_batch(self, cutoff: float, batch: int) -> Pruned:
        """One batch of ``prune``: fleet-wide, so nothing changes under it (``_pruning``)."""
        with self._store.write(exclusive=True) as tx:
            return prune_batch_in(tx, self.clock.now(), cutoff, batch)

    def status(self) -> FleetStatus:
        """A snapshot: agents with their load and current tasks, queue depths, counts by
        state, capacity, stalled tasks and the last assessment."""
        with self._store.read() as tx:
            now = self.clock.now()
            return status_in(tx, now)

    def pending_by_domain(self) -> dict[str | None, int]:
        """Pending tasks counted by domain (None: of no domain), for dashboards and metrics."""
        with self._store.read() as tx:
            return tx.pending_by_domain()

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
        limit = check_count(limit, "limit", 1, MAX_EVENTS)
        (task_id,) = as_task_ids([task], "task") if task is not None else (None,)
        if agent is not None:
            check_agent_id(agent)
        with self._store.read() as tx:
            found = tx.events(since, task_id, agent, limit, newest)
        return found[::-1] if newest else found

    def wait_for_change(self, timeout: float) -> bool:
        """Block until the fleet may have changed (or ``timeout`` seconds pass)."""
        return self._store.wait_for_change(timeout)

    # ------------------------------------------------------------------ settings

    def settings(self) -> Settings:
        with self._store.read() as tx:
            return tx.load_settings()

    @rerun_on_conflict
    def configure(self, /, **changes: object) -> Settings:
        """Change fleet settings at run time; each value is checked, and all or none apply.

        Changing ``aging`` re-keys every waiting task in the same transaction (roughly a
        second per quarter of a million tasks), and claims wait for it.
        """
        with self._store.write(exclusive=True) as tx:
            now = self.clock.now()
            old = tx.load_settings()
            new = old.replace(**changes)
            if new == old:
                return new
            tx.save_settings(new)
            if new.aging != old.aging:
                tx.rekey_pool({i: policy.pool_key(p, c, new.aging) for i, p, c in tx.keyed_tasks()})
            diff = {k: v for k, v in new.to_dict().items() if old.to_dict()[k] != v}
            tx.append_event(now, EventKind.CONFIGURED, None, None, diff)
            return new

    # ------------------------------------------------------------------ access tokens

    @rerun_on_conflict
    def create_token(
        self, role: str, *, agent: str | None = None, name: str = ""
    ) -> tuple[Credential, str]:
        """A new access token for ``shoal serve`` (``shoal.access``): its description, and
        the secret, which the fleet does not keep and nobody can show again. An ``agent``
        token names the one agent it may act as."""
        kind = parse_role(role)
        if (agent is None) == (kind == "agent"):
            raise BadInput(
                "an agent token names its agent, and only an agent token does",
                hint="shoal token create --role agent --agent ID, or leave --agent out",
            )
        if agent is not None:
            check_agent_id(agent)
        label = check_text(name, "token name", 200, line=True)
        with self._store.write(exclusive=True) as tx:
            return create_token_in(tx, self.clock.now(), kind, agent, label)

    def tokens(self) -> list[Credential]:
        """The fleet's access tokens, oldest first (never their secrets)."""
        with self._store.read() as tx:
            return tokens_in(tx)

    @rerun_on_conflict
    def revoke_token(self, token_id: str) -> Credential:
        """End the token ``token_id``: from the next request on, it opens nothing."""
        check_token_id(token_id)
        with self._store.write(exclusive=True) as tx:
            return revoke_token_in(tx, token_id)

    def authenticate(self, token: str) -> Credential | None:
        """The credential ``token`` proves, or None if it is not one of the fleet's."""
        with self._store.read() as tx:
            return authenticate_in(tx, token)
