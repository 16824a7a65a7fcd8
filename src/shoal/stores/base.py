"""The store contract: the domain verbs ``Fleet`` needs, and nothing else.

A store keeps tasks, agents, dependencies, settings and the event log, and gives ``Fleet``
transactions over them. It makes no decisions: which task an agent gets, whether a steal
is allowed, what a failure becomes -- all of that is ``Fleet`` asking ``policy``. A store
answers candidate queries fast (indexed, never a scan of every pending task) and applies
the named transitions atomically.

Only ``Fleet`` calls a store. Faces and the runtime go through ``Fleet``; an import-linter
contract in pyproject.toml fails the build if they reach past it.

The memory store is the reference: one contract suite (tests/contract) runs unchanged on
every store, and a stateful test drives memory and SQLite side by side. Where stores
differ, they say so in ``capabilities``, and the tests read that instead of checking types.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, NamedTuple, Protocol

from shoal._values import value
from shoal.model import (
    Agent,
    Candidate,
    Event,
    EventCount,
    NewTask,
    QueueDepth,
    Schedule,
    Task,
    TaskState,
)
from shoal.policy import Locality, StealFilter
from shoal.settings import Settings

__all__ = [
    "Capabilities",
    "ClaimContext",
    "DirectOutcome",
    "Finished",
    "Finishing",
    "LeaseGrant",
    "NewTask",
    "Store",
    "StoreTx",
    "TaskEdit",
]


class LeaseGrant(NamedTuple):
    """One lease a claim writes (``StoreTx.lease_tasks``): the task, its fencing token, when
    the lease expires, and whether the task was stolen to get it."""

    task_id: int
    token: str
    expires: float
    stolen: bool


class TaskEdit(NamedTuple):
    """A task's fields after ``Fleet.edit`` (``StoreTx.edit_task``): every editable field,
    changed or not, and the pool key that goes with its priority."""

    title: str
    body: str
    priority: int
    pool_key: float
    skills: tuple[str, ...]
    domain: str | None
    labels: tuple[str, ...]
    expected_duration: float | None


class Finishing(NamedTuple):
    """One completion to write (``StoreTx.finish_leased``), if ``token`` is still the task's
    live lease."""

    task_id: int
    token: str
    result: Any


class DirectOutcome(NamedTuple):
    """What ``Store.claim_directly`` did: the tasks it finished (in the order asked) and
    the leases it granted, in claim order, each as (task, token, source, origin queue)."""

    finished: tuple[Task, ...]
    granted: tuple[tuple[Task, str, str, str | None], ...]


class Finished(NamedTuple):
    """One completion ``finish_leased`` wrote: the task, who held it, and whether other
    tasks wait on it (so their dependencies must be looked at) -- and the finished task as
    written, where the store had it at hand (else None: read it if it is wanted)."""

    task_id: int
    holder: str | None
    has_dependents: bool
    task: Task | None = None


@value
class Capabilities:
    """What a store can do, declared so that callers and tests need not guess from its type."""

    #: Several processes (or hosts) may open the same fleet at once.
    shared: bool
    #: Survives the process that wrote it.
    durable: bool
    #: Wakes waiting agents when work arrives (else they poll for changes).
    notifies: bool
    #: Writers are served in arrival order, so none can starve under contention.
    fair: bool
    #: Runs the everyday claim in one step (``Store.claim_directly``).
    direct_claims: bool = False


@value
class ClaimContext:
    """What a claim needs to know before it looks for work, read in one go."""

    agent: Agent
    held: int  # leases the agent holds (expired or not)
    leases_due: bool  # some lease in the fleet ran out at or before `now`
    skillsets: Mapping[int, tuple[str, ...]]  # every skill set tasks have required, by id
    settings: Settings
    #: Another agent that should be heard from (idle, working, waiting, paused) has been
    #: silent past heartbeat_timeout: offline in all but the writing (policy.is_silent).
    silent_peers: bool = False


class StoreTx(Protocol):
    """One transaction. Verbs read or change the fleet; nothing is visible to others until
    the transaction ends without error, and on error nothing at all has changed."""

    # settings and counters
    def load_settings(self) -> Settings: ...
    def save_settings(self, settings: Settings) -> None: ...
    def next_seq(self) -> int:
        """A number larger than any before it, for a task's place in a queue
        (``policy.queue_place``: the head is the largest place)."""
        ...

    def next_seqs(self, count: int) -> list[int]:
        """``count`` such numbers at once, in increasing order."""
        ...

    def get_meta(self, key: str) -> str | None: ...
    def server_time(self) -> float | None:
        """The store server's clock (epoch seconds), if the store has a server; else None."""
        ...

    def set_meta(self, key: str, value: str) -> None: ...

    # agents
    def get_agent(self, agent_id: str, *, lock: bool = False) -> Agent | None:
        """The agent; with ``lock``, this transaction is about to change it, and a store
        whose writers run side by side keeps others from changing it until commit."""
        ...

    def list_agents(self) -> list[Agent]: ...
    def save_agent(self, agent: Agent) -> None:
        """Insert or update every field but ``queued``, which the store derives."""
        ...

    def claim_context(self, agent_id: str, now: float) -> ClaimContext | None:
        """The agent (None if unknown), its lease count, whether any lease is due to expire,
        the skill sets and the settings -- all a claim reads before choosing, in one go."""
        ...

    def queue_depths(self) -> list[QueueDepth]:
        """Every agent with a non-empty queue: how many pending tasks, and its status."""
        ...

    def idle_agents(self) -> list[Agent]:
        """The agents whose status is idle (for domain first: who is about to take work)."""
        ...

    # tasks: reads
    def get_task(self, task_id: int) -> Task | None: ...
    def get_tasks(self, task_ids: Sequence[int], *, share: bool = False) -> dict[int, Task]:
        """Tasks by id; with ``share``, the transaction relies on their state (dependencies
        of a post or defer), which then may not change under it until commit."""
        ...

    def listed_tasks(self, task_ids: Sequence[int]) -> dict[int, Task]:
        """Tasks by id as a listing reads them: without payload or result (``Task.left_out``)."""
        ...

    def leased_task(self, task_id: int) -> tuple[Task, str | None] | None:
        """A task with the token of its current (or last) lease, to check a caller's lease."""
        ...

    def task_by_key(self, key: str) -> Task | None: ...
    def list_tasks(
        self,
        state: TaskState | None,
        agent: str | None,
        limit: int,
        before: int | None,
        *,
        label: str | None = None,
    ) -> list[Task]:
        """Tasks newest first, optionally of one state, one agent or carrying one label,
        ids below ``before``. A listing: no payload or result is read, however large
        (``Task.left_out``)."""
        ...

    def held_leases(self, agent_id: str, *, lock: bool = False) -> list[tuple[Task, str]]:
        """The tasks ``agent_id`` holds a lease on (expired or not), each with its lease
        token, oldest claim first. With ``lock`` (to renew them), a store whose writers run
        side by side may leave out a task another writer is ending right now."""
        ...

    def claimed_tasks(self) -> list[Task]:
        """Every claimed task by id, as a listing reads them (no payload or result)."""
        ...

    def expired_leases(self, now: float, limit: int) -> list[Task]:
        """Claimed tasks whose lease ran out at or before ``now``, soonest first."""
        ...

    def state_counts(self) -> dict[str, int]: ...
    def pool_depth(self) -> int: ...
    def waiting_tasks(self, now: float) -> tuple[int, float | None]:
        """How many pending tasks are not ready by ``now``, and when the first one is."""
        ...

    def stuck_tasks(self, limit: int) -> list[int]:
        """Blocked tasks waiting on a dead or cancelled one: they wait until it is retried."""
        ...

    def pending_demand(self) -> dict[tuple[str, ...], int]:
        """Pending tasks counted by the skill set they require."""
        ...

    def pending_by_domain(self) -> dict[str | None, int]:
        """Pending tasks counted by domain (None: tasks of no domain)."""
        ...

    # the claim cascade's candidate queries (the steps of _claiming.claim_in)
    # Every candidate query leaves out tasks not ready by ``now`` (``ready_at`` later: a
    # retry backoff or a not_before still running).
    def queue_head(
        self,
        agent_id: str,
        limit: int,
        longest: bool,
        now: float,
        full: frozenset[str] = frozenset(),
        joins: bool = False,
    ) -> list[Candidate]:
        """The own queue step, its head: highest priority first, then largest place (``seq``)
        first; with ``longest``, longest expected before place (``policy.queue_order``).
        Tasks of the groups in ``full`` are left out (so are they in every candidate query:
        ``Locality.full_groups``). It reads the places of ``policy.place_band(joins)``: the
        queue without its ready joins, or (``joins``) only them."""
        ...

    def skillsets(self) -> dict[int, tuple[str, ...]]:
        """Every skill set tasks have required, by id."""
        ...

    def pool_best(
        self,
        skillsets: Sequence[int],
        domain: str | None,
        limit: int,
        held: Locality,
        now: float,
    ) -> list[Candidate]:
        """The pool step: the top pool tasks by static key among ``skillsets`` (and ``domain``
        if given), best first, leaving out those ``held`` holds back."""
        ...

    def pool_longest(
        self, skillsets: Sequence[int], limit: int, held: Locality, now: float
    ) -> list[Candidate]:
        """The pool step, longest first: pool tasks with an expected duration among
        ``skillsets``, by priority, then longest, then static key; ``held`` as above."""
        ...

    def steal_tail(
        self, victim: str, rules: StealFilter, held: Locality, limit: int, now: float
    ) -> list[Candidate]:
        """The steal step: the tail of ``victim``'s queue that ``rules`` allow and ``held``
        does not hold back -- lowest priority first, then smallest place (``seq``) first; with
        ``rules.longest``, longest expected before place (``policy.tail_order``). It reads the
        places of ``policy.place_band(rules.joins)``, as ``queue_head`` does."""
        ...

    def next_ready(self, agent_id: str, skillsets: Sequence[int], now: float) -> float | None:
        """When the first task that is pending but not ready by ``now`` becomes ready, among
        ``agent_id``'s queue and the pool tasks of ``skillsets`` (None: there is none)."""
        ...

    def window_thieves(self, since: float) -> list[str]:
        """The thief of every steal since ``since`` (claim-time steals and rebalance moves)."""
        ...

    # concurrency groups
    def group_limits(self, *, lock: bool = False) -> dict[str, int]:
        """Every group's limit, by name (a group not in it has none). With ``lock``, the
        limits and the held counts read after it stay true until the transaction ends:
        where writers run side by side, every group's row is locked, in name order."""
        ...

    def held_by_group(self, now: float) -> dict[str, int]:
        """How many tasks of each group are held (claimed) under a lease not yet due at
        ``now`` (``_timing.lease_due``: a due lease runs nothing, and the next claim takes it
        back, so it holds no room whether or not a claim has ended it yet); groups holding
        none left out."""
        ...

    def set_group_limit(self, name: str, most: int | None) -> bool:
        """Set a group's limit, or with None clear it: whether the group had one before."""
        ...

    # tasks: transitions
    def insert_task(self, task: NewTask) -> int: ...
    def add_deps(self, task_id: int, depends_on: Sequence[int]) -> None: ...
    def deps_of(self, task_id: int) -> list[int]: ...
    def dependents_of(self, task_id: int) -> list[int]: ...
    def lease_tasks(self, agent_id: str, grants: Sequence[LeaseGrant], now: float) -> list[Task]:
        """pending -> claimed by ``agent_id`` for each grant, one more attempt each; returns
        the claimed tasks in the order of ``grants``."""
        ...

    def set_lease_expiry(self, task_id: int, expires: float) -> None: ...
    def finish_leased(self, items: Sequence[Finishing], now: float) -> list[Finished]:
        """claimed -> done for each (task id, token, result) whose token is the task's live
        lease at ``now`` -- a compare-and-set; the others are left alone. Returns (task id,
        holder, whether other tasks depend on it) for each finished task."""
        ...

    def requeue_task(
        self,
        task_id: int,
        agent_id: str | None,
        seq: int,
        refund_attempt: bool,
        error: str | None,
        now: float,
        ready_at: float,
    ) -> None:
        """claimed -> pending in ``agent_id``'s queue (None: the pool); the lease ends, and
        it is ready at ``ready_at`` (``now``, or later after a failure's retry backoff)."""
        ...

    def bury_task(self, task_id: int, error: str | None, now: float) -> None:
        """claimed -> dead."""
        ...

    def block_task(
        self, task_id: int, agent_id: str, seq: int, waiting_on: int, now: float
    ) -> None:
        """claimed -> blocked, to come back to ``agent_id``'s queue at place ``seq`` (a
        deferred continuation); not ready any more (``ready_at`` None)."""
        ...

    def release_dependents(self, task_id: int) -> list[tuple[int, int]]:
        """``task_id`` is done: count it off its blocked dependents; return those now free,
        each with its queue place (``seq``), by id."""
        ...

    def ready_task(self, task_id: int, agent_id: str | None, seq: int, now: float) -> None:
        """blocked -> pending at place ``seq`` in ``agent_id``'s queue (None: the pool), ready
        now -- or at the not_before it was posted with, if that is later."""
        ...

    def set_ready_at(self, task_id: int, ready_at: float) -> None:
        """A pending task becomes ready at ``ready_at`` (retry now: the wait is skipped)."""
        ...

    def bound_tasks(self, agent_id: str, limit: int) -> list[Candidate]:
        """Unpinned tasks that are queued for ``agent_id`` or blocked and bound for its
        queue, oldest first: what must move when the agent goes away."""
        ...

    def move_task(
        self, task_id: int, agent_id: str | None, seq: int, stolen: bool, now: float
    ) -> None:
        """A pending task changes queue (rebalance, or back to the pool)."""
        ...

    def cancel_task(self, task_id: int, now: float) -> None: ...
    def revive_task(
        self,
        task_id: int,
        state: TaskState,
        agent_id: str | None,
        seq: int,
        waiting_on: int,
        pool_key: float,
        now: float,
    ) -> None:
        """dead or cancelled -> pending (or blocked on ``waiting_on`` deps), attempts reset,
        its pool key recomputed (the aging setting may have changed since it ended)."""
        ...

    def mark_stalled(self, task_id: int, now: float) -> None: ...
    def set_priority(self, task_id: int, priority: int, pool_key: float, now: float) -> None:
        """Give a live task a new priority and the pool key that goes with it."""
        ...

    def edit_task(self, task_id: int, edit: TaskEdit, now: float) -> None:
        """Rewrite what a task that is not finished says and how it ranks (``Fleet.edit``);
        its place, lease and state stay as they are."""
        ...

    def rekey_pool(self, keys: Mapping[int, float]) -> None: ...
    def keyed_tasks(self) -> list[tuple[int, int, float]]:
        """(id, priority, created_at) of every unfinished task, to recompute pool keys."""
        ...

    # history (Fleet.prune): what finished long ago goes, in batches
    def prunable_tasks(self, cutoff: float, limit: int) -> list[int]:
        """Up to ``limit`` tasks that finished before ``cutoff`` and may go now, oldest
        finished first: a done task, or a dead or cancelled one that no task still in the
        fleet and not done waits on. Never the newest task (SQLite would give its id again)."""
        ...

    def prune_tasks(self, task_ids: Sequence[int]) -> tuple[int, int]:
        """Delete these finished tasks (never one that is not finished), their events and
        their dependency rows, both ways; returns (tasks, events) deleted. Events appended
        before in this transaction are written first, so the log's newest entry stays."""
        ...

    def prune_events(self, cutoff: float, limit: int) -> int:
        """Delete up to ``limit`` events of no task logged before ``cutoff``, oldest first,
        never the newest of the log; returns how many."""
        ...

    def prune_preview(self, cutoff: float) -> tuple[int, int]:
        """(tasks, events) a prune to ``cutoff`` would delete over all its batches, as the
        fleet is now -- a dry run."""
        ...

    # schedules: recurring tasks (``_schedules``); none is ever deleted
    def add_schedule(self, schedule: Schedule) -> int:
        """Keep a new schedule (its ``id`` is ignored); returns the id the store gave it."""
        ...

    def get_schedule(self, schedule_id: int) -> Schedule | None:
        """The schedule; in a write, a store whose writers run side by side locks it."""
        ...

    def list_schedules(self) -> list[Schedule]:
        """Every schedule, by id."""
        ...

    def save_schedule(self, schedule: Schedule) -> None:
        """Write what changes in a schedule's life: state, next tick, latest occurrence,
        counts (its task, recurrence and zone never change)."""
        ...

    def due_schedules(self, now: float, limit: int) -> list[Schedule]:
        """Active schedules whose next tick is at or before ``now``, soonest first. A store
        whose writers run side by side locks them, leaving out any another writer holds
        (it is posting that one), so each occurrence is posted once."""
        ...

    def next_schedule_at(self) -> float | None:
        """The earliest next tick of an active schedule (None: none is active) -- one
        indexed read, what a claim asks now and then."""
        ...

    # the event log
    def append_event(
        self,
        at: float,
        kind: str,
        task_id: int | None,
        agent_id: str | None,
        data: Mapping[str, Any] | None,
    ) -> None:
        """Log one state change. A store may hold events back and write them together before
        the transaction commits, but they get ids in the order they were appended."""
        ...

    def events(
        self,
        since: int,
        task_id: int | None,
        agent_id: str | None,
        limit: int,
        newest: bool = False,
    ) -> list[Event]:
        """Events with id > ``since``, oldest first -- or, with ``newest``, the last
        ``limit`` of them, newest first."""
        ...

    def event_counts(self, start: float, width: float, agent_id: str | None) -> list[EventCount]:
        """The events logged at or after ``start`` (only ``agent_id``'s, when given),
        counted per bucket of ``width`` seconds (bucket 0 starts at ``start``), kind and
        ``model.count_detail``. Read from the window's first event on: that event is
        found through the log's ids, never by reading the older log."""
        ...

    def steals_from(self, start: float, width: float, agent_id: str) -> list[tuple[int, int]]:
        """(bucket, steals) of tasks taken from ``agent_id``'s queue at or after ``start``,
        buckets as ``event_counts``'s (the steals' index on time)."""
        ...


class Store(Protocol):
    """A place a fleet lives: opened from a URL, handing out transactions."""

    url: str
    capabilities: Capabilities
    #: True when opening it created the fleet (or upgraded its schema).
    created: bool

    def write(self, *, exclusive: bool = False) -> AbstractContextManager[StoreTx]:
        """A read-write transaction. Stores with one writer at a time serialize them all;
        a store whose writers run side by side runs an ``exclusive`` one (a fleet-wide
        change: registration, status, the hub's passes, cancel, retry, settings) alone."""
        ...

    def read(self) -> AbstractContextManager[StoreTx]:
        """A read-only transaction over one consistent snapshot."""
        ...

    def claim_directly(
        self,
        agent_id: str,
        n: int,
        now: float,
        tokens: Sequence[str],
        finishing: Sequence[Finishing] = (),
    ) -> DirectOutcome | None:
        """The everyday claim in one step, where the store can run it so (PostgreSQL: one
        statement, one round trip): finish ``finishing`` (all held by ``agent_id``), then
        claim up to ``n`` tasks from the agent's own queue and the pool, with the leases'
        ``tokens``. It does exactly what ``Fleet`` would do for these cases, or nothing and
        returns None: then ``Fleet`` runs the general path (docs/ARCHITECTURE.md,
        "The claim"), which covers every case."""
        ...

    def wait_for_change(self, timeout: float) -> bool:
        """Block until another writer may have changed the fleet, or ``timeout`` passes.

        Returns False on timeout. A spurious True is allowed; callers re-check.
        """
        ...

    def close(self) -> None: ...
