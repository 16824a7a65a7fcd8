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

- here: opening and closing a fleet, posting work, reading tasks;
- ``_leaseverbs`` (``LeaseVerbs``): the verbs an agent uses while it works -- the leases it
  holds and its heartbeat, the claim, and finishing work (complete, fail, release, defer);
- ``_agentverbs`` (``AgentVerbs``): the agent registry -- register, agent(s), set_status,
  pause, resume -- and ``probe``;
- ``_operatorverbs`` (``OperatorVerbs``): the operator's verbs on tasks (cancel, set_priority,
  retry), the hub's jobs (rebalance, reap, assess), prune, status, pending_by_domain,
  events, wait_for_change, settings and configure, and the access tokens;
- ``_scheduleverbs`` (``ScheduleVerbs``): the schedules of recurring tasks, and the look a
  claim takes for those fallen due (``LeaseVerbs`` builds on it);
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
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from shoal.clock import Clock, SystemClock
from shoal.errors import BadInput
from shoal.fleet._agentverbs import AgentVerbs
from shoal.fleet._claiming import preview_in
from shoal.fleet._conflicts import rerun_on_conflict
from shoal.fleet._leaseverbs import LeaseVerbs
from shoal.fleet._operatorverbs import OperatorVerbs
from shoal.fleet._posting import Moment, insert_task
from shoal.fleet._scheduleverbs import ScheduleVerbs
from shoal.fleet._transitions import need_task
from shoal.fleet._whyverbs import WhyVerbs
from shoal.limits import MAX_LISTED, MAX_READY, TASK_HISTORY
from shoal.model import EventCount, NewTask, Task, TaskDetail
from shoal.stores import init_store_url, open_store
from shoal.stores.base import Store
from shoal.task_checks import (
    POST_DEFAULTS,
    check_labels,
    check_post,
    check_sizes,
    draft_of,
    own_keyed,
)
from shoal.text import shown_url
from shoal.validation import as_task_ids, check_agent_id, check_count, check_text, parse_state
from shoal.vocabulary import TaskState

__all__ = ["Fleet"]


class Fleet(LeaseVerbs, AgentVerbs, OperatorVerbs, ScheduleVerbs, WhyVerbs):
    """A fleet of agents and the tasks they share, on one store.

    Open one with ``Fleet.open(url)``; a ``Fleet`` may be shared by the threads of one
    process, and any number of processes (or hosts, with PostgreSQL) may open the same
    fleet at once. Every method is one transaction.
    """

    def __init__(self, store: Store, clock: Clock | None = None, rng: random.Random | None = None):
        self._store = store
        self.clock: Clock = clock or SystemClock()
        self.rng = rng or random.Random()

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
        posted_by: str | None = None,
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
        ``posted_by`` is the agent posting it through an agent's face (the faces set it,
        never the caller's text); that agent may edit it (``edit``).
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
            posted_by,
        )
        return self._post_draft(draft)[0]

    def post_new(self, title: str, **fields: Any) -> tuple[Task, bool]:
        """``post`` (the same keywords), and whether this call made the task: False when
        ``key`` named a task posted before, which is returned instead. The answer comes
        from the transaction that wrote (or found) the task, so of many posts racing with
        one key exactly one is told it made it (the HTTP API's one ``201 Created``)."""
        given = {**POST_DEFAULTS, **fields}
        return self._post_draft(check_post(title, **given))

    @rerun_on_conflict
    def _post_draft(self, draft: NewTask) -> tuple[Task, bool]:
        with self._store.write() as tx:
            if draft.key is not None and (existing := tx.task_by_key(draft.key)) is not None:
                return own_keyed(existing, draft.posted_by), False
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
                    ids.append(own_keyed(existing, draft.posted_by).id)
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
