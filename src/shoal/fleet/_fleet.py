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

``Fleet`` is one class built of parts (``_verbbase`` says why), each in its own module:

- here: opening and closing a fleet, posting work, reading tasks, the leases an agent holds
  and its heartbeat, the claim, and finishing work (complete, fail, release, defer);
- ``_agentverbs`` (``AgentVerbs``): the agent registry -- register, agent(s), set_status,
  pause, resume -- and ``probe``;
- ``_operatorverbs`` (``OperatorVerbs``): the operator's verbs on tasks (cancel, set_priority,
  retry), the hub's jobs (rebalance, reap, assess), prune, status, pending_by_domain,
  events, wait_for_change, settings and configure, and the access tokens;
- ``_verbbase`` (``FleetBase``): the attributes they share (``_store``, ``clock``, ``rng``).

Invariants (checked by the contract suite on every store; each with the function and the
test that enforce it in docs/ARCHITECTURE.md, "Invariants")
---------------------------------------------------------------------------------------
I1 a task has at most one live lease; only its token may change it.
I2 every task is in exactly one state; none is lost, none completes twice.
I3 no agent holds more than max_concurrent leases; seats (non-managers neither offline nor
   terminated) <= max_agents.
I4 a stolen task is never stolen again; a pinned task is never stolen.
I5 every state change appends exactly one event, in the same transaction.
I6 an expired lease is claimable at claim time, monitor or not; so is the queue of an agent
   silent past heartbeat_timeout, which every read shows offline (``_liveness``).
I7 bad input changes nothing and says what was wrong and how to fix it.
"""

from __future__ import annotations

import math
import random
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from shoal import policy
from shoal.clock import Clock, SystemClock, monotonic
from shoal.clock import wait as wait_for
from shoal.errors import BadInput, LeaseLost, UnknownTask
from shoal.fleet._agents import heartbeat_in
from shoal.fleet._agentverbs import AgentVerbs
from shoal.fleet._claiming import claim_direct, claim_in, preview_in
from shoal.fleet._conflicts import rerun_on_conflict
from shoal.fleet._liveness import SettleFirst, settle_in
from shoal.fleet._operatorverbs import OperatorVerbs
from shoal.fleet._posting import Moment, insert_task
from shoal.fleet._scheduleverbs import ScheduleVerbs
from shoal.fleet._transitions import (
    after_letting_go,
    count_failure,
    end_lease,
    held_task,
    live_agent,
    need_task,
    refuse_cycle,
    refuse_ended,
    release_dependents,
)
from shoal.fleet._whyverbs import WhyVerbs
from shoal.limits import MAX_LISTED, MAX_READY, TASK_HISTORY
from shoal.model import (
    BatchCompletion,
    Claim,
    Completion,
    EventCount,
    Lease,
    NewTask,
    Task,
    TaskDetail,
)
from shoal.stores import init_store_url, open_store
from shoal.stores.base import Finishing, Store, StoreTx
from shoal.text import shown_url
from shoal.validation import (
    as_task_ids,
    check_agent_id,
    check_count,
    check_labels,
    check_lease,
    check_n,
    check_post,
    check_result,
    check_sizes,
    check_text,
    check_wait,
    draft_of,
    parse_state,
)
from shoal.vocabulary import ClaimReason, EventKind, TaskState

__all__ = ["Fleet"]

#: ``post``'s defaults, for ``post_new``'s keywords.
_POST_DEFAULTS: dict[str, Any] = {
    "body": "",
    "payload": None,
    "priority": 5,
    "skills": None,
    "domain": None,
    "to": None,
    "after": None,
    "parent": None,
    "pinned": False,
    "expected_duration": None,
    "lease_ttl": None,
    "max_attempts": None,
    "key": None,
    "not_before": None,
    "retry_delay": None,
    "group": None,
    "labels": None,
}
_Result = TypeVar("_Result")


class Fleet(AgentVerbs, OperatorVerbs, ScheduleVerbs, WhyVerbs):
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
    def where(self) -> str:
        """The store's URL fit to show (a banner, a message, ``--json``): without the
        password or token ``url`` may hold, which opens the fleet but is nobody's to see."""
        return shown_url(self._store.url)

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
        group: str | None = None,
        labels: Iterable[str] | str | None = None,
    ) -> Task:
        """Add a task to the fleet and return it.

        It goes to the pool, or to the queue of agent ``to``. With ``parent`` set to a task
        an agent holds, it goes to the head of that agent's queue (the agent finishes what it
        spawned). With ``after`` it stays ``blocked`` until every listed task is done.
        ``pinned`` keeps it in ``to``'s queue: never stolen, never returned to the pool.
        A repeated ``key`` returns the task first posted with it and adds nothing.
        ``not_before`` (epoch seconds, an aware datetime or ISO 8601 text) keeps it from
        being claimed before then; ``retry_delay`` is its own first retry backoff.
        ``group`` names its concurrency group (``set_group`` caps how many are held).
        ``labels`` are free names to find it by (``tasks(label=...)``); they route nothing.
        A payload or body larger than the fleet takes (``max_payload_bytes``,
        ``max_body_bytes``) is refused with ``TooLarge`` and adds nothing.
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
            group,
            labels,
        )
        return self._post_draft(draft)[0]

    def post_new(self, title: str, **fields: Any) -> tuple[Task, bool]:
        """``post`` (the same keywords), and whether this call made the task: False when
        ``key`` named a task posted before, which is returned instead. The answer comes
        from the transaction that wrote (or found) the task, so of many posts racing with
        one key exactly one is told it made it (the HTTP API's one ``201 Created``)."""
        given = {**_POST_DEFAULTS, **fields}
        return self._post_draft(check_post(title, **given))

    @rerun_on_conflict
    def _post_draft(self, draft: NewTask) -> tuple[Task, bool]:
        with self._store.write() as tx:
            if draft.key is not None and (existing := tx.task_by_key(draft.key)) is not None:
                return existing, False
            settings = tx.load_settings()
            check_sizes(draft, settings.max_payload_bytes, settings.max_body_bytes)
            task_id = insert_task(tx, draft, self.clock.now(), settings)
            task = tx.get_task(task_id)
            assert task is not None
            return task, True

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
            for i, draft in enumerate(drafts):
                where = f"task {i} of the batch: " if len(drafts) > 1 else ""
                check_sizes(draft, settings.max_payload_bytes, settings.max_body_bytes, where)
            moment = Moment(tx.next_seqs(len(drafts))) if len(drafts) > 1 else None
            for index, draft in enumerate(drafts):
                if draft.key is not None and (existing := tx.task_by_key(draft.key)) is not None:
                    ids.append(existing.id)
                else:
                    place = None if moment is None else (moment, index)
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
        label: str | None = None,
    ) -> list[Task]:
        """Tasks newest first, optionally only those in ``state``, of ``agent`` or
        carrying ``label``.

        A listing: no task's payload or result is read, however large -- each is None, and
        ``Task.has_payload``/``has_result`` say whether it holds one. ``get`` reads a task
        whole."""
        wanted = parse_state(state) if state is not None else None
        if agent is not None:
            check_agent_id(agent)
        limit = check_count(limit, "limit", 1, MAX_LISTED)
        (below,) = as_task_ids([before], "before") if before is not None else (None,)
        (tag,) = check_labels(label) if label is not None else (None,)
        with self._store.read() as tx:
            return tx.list_tasks(wanted, agent, limit, below, label=tag)

    def ready(self, agent: str | None = None, *, limit: int = 20) -> list[Task]:
        """Pending tasks in the order a claim would take them.

        For an agent: its own queue head, then the pool tasks it can do by score (steals
        are not previewed). Without one: the pool by score, then every agent's queue. Tasks
        still waiting out a retry backoff or a not_before are not ready, so not listed.
        A listing, as ``tasks`` is: no payload or result is read.
        """
        limit = check_count(limit, "limit", 1, MAX_READY)
        if agent is not None:
            check_agent_id(agent)
        with self._store.read() as tx:
            return preview_in(tx, self.clock.now(), agent, limit)

    def event_counts(
        self, start: float, width: float, *, agent: str | None = None
    ) -> list[EventCount]:
        """The log since ``start`` counted per bucket of ``width`` seconds, kind and detail
        (``EventCount``; only ``agent``'s own events when given) -- the dashboard's charts.
        The store counts (one row per bucket, kind and detail come back) and reads only the
        window's events; at most ``MAX_BUCKETS`` buckets up to now."""
        start, width = _window(start, width, self.clock.now())
        if agent is not None:
            check_agent_id(agent)
        with self._store.read() as tx:
            return tx.event_counts(start, width, agent)

    def steals_from(self, start: float, width: float, agent: str) -> list[tuple[int, int]]:
        """(bucket, count) of tasks stolen from ``agent``'s queue since ``start``, per
        bucket of ``width`` seconds as ``event_counts`` has them."""
        start, width = _window(start, width, self.clock.now())
        check_agent_id(agent)
        with self._store.read() as tx:
            return tx.steals_from(start, width, agent)

    # ------------------------------------------------------------------ leases

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

        A lease that has already expired is not renewed: its task goes back to pending. An
        agent coming back from offline needs a free seat under max_agents, else
        ``FleetFull`` (it stays offline; docs/ARCHITECTURE.md, "Liveness and seats").
        """
        check_agent_id(agent_id)

        def beat(settle: bool) -> list[Lease]:
            with self._store.write() as tx:
                return heartbeat_in(tx, self.clock.now(), agent_id, self.rng, settle=settle)

        return self._settling(beat, refuse=True)

    # ------------------------------------------------------------------ the claim

    @rerun_on_conflict
    def claim(self, agent_id: str, n: int = 1, *, wait: float | str = 0.0) -> Claim:
        """Take up to ``n`` tasks for ``agent_id`` by the claim cascade (module docstring).

        Returns the leases and their tasks, or none with the reason: ``busy`` (at
        max_concurrent), ``paused`` (the circuit breaker holds the agent; ``retry_at`` says
        until when) or ``empty`` (nothing this agent can do now; ``retry_at``, if set, says
        when something it passed over is free to take). With ``wait`` > 0 an empty claim
        waits up to that many seconds for the fleet to change and tries again.

        Agents silent past heartbeat_timeout are written down offline first, their queues
        back in the pool for this claim to find; an agent coming back from offline needs a
        free seat under max_agents, else ``FleetFull`` (docs/ARCHITECTURE.md, "Liveness and
        seats").
        """
        check_agent_id(agent_id)
        n = check_n(n)
        deadline = monotonic(self.clock) + check_wait(wait)
        while True:
            self._post_due_lazily()  # recurring tasks that fell due (_scheduleverbs)
            direct = claim_direct(self._store, agent_id, n, self.clock.now(), self._token)
            if direct is not None:
                return direct[1]
            claim = self._settling(
                lambda settle: self._claim_once(agent_id, n, settle), refuse=True
            )
            remaining = deadline - monotonic(self.clock)
            if claim or claim.reason is not ClaimReason.EMPTY or remaining <= 0:
                return claim
            pause = min(remaining, 1.0)
            if claim.retry_at is not None:  # work passed over is free to take then
                pause = min(pause, max(0.0, claim.retry_at - self.clock.now()))
            wait_for(self.clock, self._store.wait_for_change, pause)

    def _claim_once(self, agent_id: str, n: int, settle: bool) -> Claim:
        with self._store.write() as tx:
            claim = self._claim(tx, agent_id, n, self.clock.now(), strict=True, settle=settle)
        assert claim is not None
        return claim

    def _claim(
        self,
        tx: StoreTx,
        agent_id: str,
        n: int,
        now: float,
        *,
        strict: bool,
        completed: bool = False,
        settle: bool = True,
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
            settle=settle,
        )

    def _settling(self, run: Callable[[bool], _Result], *, refuse: bool) -> _Result:
        """``run(True)``; if it asked for the fleet-wide part of liveness first
        (``_liveness.SettleFirst``: a silent agent to mark offline, or its own agent back
        from offline), that part in an exclusive transaction of its own, then ``run(False)``.
        An agent that found no seat is refused ``FleetFull`` if ``refuse``; else (a
        completion, which must stand) the call runs again and the agent stays offline."""
        try:
            return run(True)
        except SettleFirst as first:
            with self._store.write(exclusive=True) as tx:
                refusal = settle_in(tx, self.clock.now(), first.agent_id)
            if refusal is not None and refuse:
                raise refusal from None
        return run(False)

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
            self._post_due_lazily()
        finishing = [Finishing(lease.task_id, lease.token, result)]
        direct = claim_direct(
            self._store, lease.agent, then_claim, self.clock.now(), self._token, finishing
        )
        if direct is not None:
            ((task,), claimed) = direct
            return Completion(task, False, (), claimed if then_claim else None)

        def finish(settle: bool) -> Completion:
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
                        tx, holder or "", then_claim, now, strict=False, completed=True,
                        settle=settle,
                    )  # fmt: skip
                else:
                    after_letting_go(tx, holder, now, completed=True)
                done = written or need_task(tx, task_id)  # nothing after the finish changes it
                return Completion(done, False, tuple(released), next_claim)

        return self._settling(finish, refuse=False)

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
            self._post_due_lazily()
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
        return self._settling(
            lambda settle: self._complete_many_once(outcomes, items, then_claim, settle),
            refuse=False,
        )

    def _complete_many_once(
        self,
        outcomes: Sequence[tuple[Lease, Any]],
        items: Sequence[Finishing],
        then_claim: int,
        settle: bool,
    ) -> BatchCompletion:
        completed: list[int] = []
        already: list[int] = []
        lost: list[tuple[int, str]] = []
        released: list[int] = []
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
                next_claim = self._claim(
                    tx, holder, then_claim, now, strict=False, completed=True, settle=settle
                )
            elif then_claim and holder is not None:
                next_claim = self._claim(tx, holder, then_claim, now, strict=False, settle=settle)
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
            place = policy.queue_place(True, tx.next_seq())  # work it started: in front
            tx.requeue_task(task.id, policy.return_queue(task), place, True, None, now, now)
            tx.append_event(now, EventKind.RELEASED, task.id, task.agent, None)
            after_letting_go(tx, task.agent, now)
            return need_task(tx, task.id)

    @rerun_on_conflict
    def defer(self, lease: Lease, after: Sequence[int]) -> Task:
        """Put a held task aside until the tasks in ``after`` are done (a continuation).

        The task is ``blocked`` until then, and comes back to the front of the same agent's
        queue (its own work, ahead of what others sent it); the attempt is not counted.
        Typical use: post children with ``parent=``, then defer on them (fork-join).
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
            place = policy.queue_place(True, tx.next_seq())  # its own work: in front
            if waiting:  # and in front again when it is freed (policy.place_when_ready)
                tx.block_task(task.id, holder, place, waiting, now)
            else:
                tx.requeue_task(task.id, holder, place, True, None, now, now)
            tx.append_event(now, EventKind.DEFERRED, task.id, holder, data)
            after_letting_go(tx, holder, now)
            return need_task(tx, task.id)


#: Buckets ``Fleet.event_counts`` counts at most (a week by the hour is 168).
MAX_BUCKETS = 2000


def _window(start: float, width: float, now: float) -> tuple[float, float]:
    """``start`` and ``width`` checked: finite, a positive width, at most ``MAX_BUCKETS``
    buckets from ``start`` to ``now``."""
    if not (math.isfinite(start) and math.isfinite(width)) or width <= 0:
        raise BadInput(f"a window needs a finite start and a positive width, not {start}, {width}")
    if (now - start) / width > MAX_BUCKETS:
        raise BadInput(
            f"that window has more than {MAX_BUCKETS} buckets",
            hint="count over a shorter time or in wider buckets",
        )
    return float(start), float(width)
