"""The memory store's data: task rows and the indexes that answer a claim's questions.

``memory.py`` runs the store verbs over this; here are the rows, the indexes over them --
tasks by (agent, state), and the pool in score-key order per skill set (and per skill set
and domain), the same look-ups the SQL stores make with their partial indexes -- and the
small conversions from a row to what the Fleet sees. Every index changes in one place,
``Index.move``, so a row and its index entries cannot disagree.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from typing import Any

from shoal import policy
from shoal.model import Agent, Candidate, Event, Schedule, Task, TaskState
from shoal.policy import Locality
from shoal.settings import Settings

__all__ = [
    "CLAIMED",
    "GROUPS_META",
    "PENDING",
    "TASK_FIELDS",
    "Data",
    "Index",
    "Placed",
    "PoolSlot",
    "Row",
    "by_id",
    "candidate_of",
    "events_after",
    "frozen_json",
    "index_fields",
    "is_held",
    "is_ready",
    "longest_key",
    "longest_slot",
    "order_fields",
    "pool_entry",
    "pool_slots",
    "prunable",
    "prune_preview",
]


@dataclass(slots=True)
class Row:
    """A task as the memory store keeps it: the public fields plus the bookkeeping."""

    task: Task
    skillset: int
    pool_key: float
    seq: int
    token: str | None = None


Placed = tuple[str | None, TaskState]  # (agent -- None for the pool --, state)
PoolSlot = tuple[int, str | None]  # (skill set, domain -- None for "any domain")


@dataclass(slots=True)
class Index:
    """Secondary indexes over the task rows, kept by ``move`` and undone with the journal.

    ``placed`` answers "the pending tasks of this queue", "the pool", "this agent's leases";
    ``state`` counts by state and lists the claimed tasks; ``pool`` holds each pool task by
    ``policy.pool_order`` in sorted lists, per skill set and per (skill set, domain), so the
    best pool tasks are the heads of a few lists; ``longest`` holds the pool tasks that have
    an expected duration per skill set, by priority and then longest first.
    """

    placed: dict[Placed, set[int]] = field(default_factory=dict)
    state: dict[TaskState, set[int]] = field(default_factory=dict)
    pool: dict[PoolSlot, list[tuple[Any, ...]]] = field(default_factory=dict)
    longest: dict[int, list[tuple[Any, ...]]] = field(default_factory=dict)

    def ids(self, agent: str | None, state: TaskState) -> set[int]:
        return self.placed.get((agent, state), _EMPTY)

    def in_state(self, state: TaskState) -> set[int]:
        return self.state.get(state, _EMPTY)

    def move(self, task_id: int, old: Row | None, new: Row | None) -> None:
        """The row of ``task_id`` changes from ``old`` to ``new`` (None: absent)."""
        if old is not None and new is not None and index_fields(old) == index_fields(new):
            return
        if old is not None:
            self._drop(task_id, old)
        if new is not None:
            self._add(task_id, new)

    def _add(self, task_id: int, row: Row) -> None:
        t = row.task
        self.placed.setdefault((t.agent, t.state), set()).add(task_id)
        self.state.setdefault(t.state, set()).add(task_id)
        for slot in pool_slots(row):
            bisect.insort(self.pool.setdefault(slot, []), pool_entry(row, task_id))
        if longest_slot(row):
            bisect.insort(self.longest.setdefault(row.skillset, []), longest_key(row, task_id))

    def _drop(self, task_id: int, row: Row) -> None:
        t = row.task
        self.placed[(t.agent, t.state)].discard(task_id)
        self.state[t.state].discard(task_id)
        for slot in pool_slots(row):
            keys = self.pool[slot]
            at = bisect.bisect_left(keys, pool_entry(row, task_id))
            del keys[at]
        if longest_slot(row):
            longest = self.longest[row.skillset]
            del longest[bisect.bisect_left(longest, longest_key(row, task_id))]


def index_fields(row: Row) -> tuple[object, ...]:
    t = row.task
    return (t.agent, t.state, row.pool_key, row.skillset, t.domain, t.expected_duration)


def longest_slot(row: Row) -> bool:
    """In the pool, with an expected duration: ranked by ``longest`` too."""
    t = row.task
    return t.state is TaskState.PENDING and t.agent is None and t.expected_duration is not None


def pool_entry(row: Row, task_id: int) -> tuple[Any, ...]:
    """Where a pool task sits in its slots' lists: ``policy.pool_order``, best first."""
    t = row.task
    return policy.pool_order(t.priority, t.expected_duration, row.pool_key, task_id, False)


def longest_key(row: Row, task_id: int) -> tuple[Any, ...]:
    """Where a task with an expected duration sits in its skill set's longest-first index."""
    t = row.task
    return policy.pool_order(t.priority, t.expected_duration, row.pool_key, task_id, True)


def pool_slots(row: Row) -> list[PoolSlot]:
    t = row.task
    if t.state is not TaskState.PENDING or t.agent is not None:
        return []
    return (
        [(row.skillset, None)]
        if t.domain is None
        else [(row.skillset, None), (row.skillset, t.domain)]
    )


_EMPTY: set[int] = set()


@dataclass(slots=True)
class Data:
    tasks: dict[int, Row] = field(default_factory=dict)
    index: Index = field(default_factory=Index)
    agents: dict[str, Agent] = field(default_factory=dict)
    deps: dict[int, list[int]] = field(default_factory=dict)  # task -> what it waits on
    dependents: dict[int, list[int]] = field(default_factory=dict)  # task -> who waits on it
    skillsets: dict[int, tuple[str, ...]] = field(default_factory=dict)
    keys: dict[str, int] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    meta: dict[str, str] = field(default_factory=dict)
    schedules: dict[int, Schedule] = field(default_factory=dict)  # never deleted: ids by count
    settings: Settings = field(default_factory=Settings)
    seq: int = 0
    last_task_id: int = 0
    last_event_id: int = 0  # events are numbered apart from their place: a prune leaves gaps
    version: int = 0


PENDING = TaskState.PENDING
#: The meta record that holds the groups' limits, as a JSON object of name to limit.
GROUPS_META = "group_limits"
CLAIMED = TaskState.CLAIMED
TASK_FIELDS = frozenset(Task.__dataclass_fields__)


def candidate_of(row: Row) -> Candidate:
    t = row.task
    return Candidate(
        t.id,
        t.title,
        t.priority,
        t.domain,
        t.agent,
        t.pinned,
        t.created_at,
        t.lease_ttl,
        t.attempts,
        row.skillset,
        t.expected_duration,
        t.ready_at,
        t.group,
    )


def order_fields(row: Row) -> tuple[int, float | None, int]:
    return (row.task.priority, row.task.expected_duration, row.seq)


def is_ready(row: Row, now: float) -> bool:
    return (row.task.ready_at or 0.0) <= now


def is_held(row: Row, held: Locality) -> bool:
    t = row.task
    if t.group is not None and t.group in held.full_groups:
        return True
    return held.holds(t.domain, row.skillset, policy.ready_time(t.ready_at, t.created_at))


def by_id(row: Row) -> int:
    return row.task.id


def frozen_json(value: Any) -> Any:
    """A private copy of a JSON value, as SQLite would store it (tuples become lists)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return json.loads(json.dumps(value))


def events_after(events: list[Event], since: int) -> list[Event]:
    """The log after event id ``since`` (ids rise along the list, with gaps where a prune
    deleted some)."""
    return events[bisect.bisect_right(events, since, key=lambda e: e.id) :]


# History (the store verbs of Fleet.prune): the rules of the SQL's prunable_tasks and
# prune_preview, over the rows.


def _finished_before(data: Data, cutoff: float) -> list[int]:
    """Tasks that finished before ``cutoff``, oldest finished first; never the newest."""
    newest = max(data.tasks, default=0)
    old = [
        (row.task.finished_at, task_id)
        for task_id, row in data.tasks.items()
        if row.task.finished_at is not None and row.task.finished_at < cutoff and task_id < newest
    ]
    return [task_id for _, task_id in sorted(old)]


def _may_go(data: Data, task_id: int, leaving: set[int]) -> bool:
    """A done task may go; a dead or cancelled one when every task waiting on it that
    stays (is not in ``leaving``) is done."""
    if data.tasks[task_id].task.state is TaskState.DONE:
        return True
    return all(
        data.tasks[waiter].task.state is TaskState.DONE
        for waiter in data.dependents.get(task_id, ())
        if waiter in data.tasks and waiter not in leaving
    )


def prunable(data: Data, cutoff: float, limit: int) -> list[int]:
    """Up to ``limit`` tasks a prune to ``cutoff`` may delete now (``prunable_tasks``)."""
    free = (i for i in _finished_before(data, cutoff) if _may_go(data, i, set()))
    return [i for i, _ in zip(free, range(limit), strict=False)]


def prune_preview(data: Data, cutoff: float) -> tuple[int, int]:
    """(tasks, events) a prune to ``cutoff`` would delete over all its batches: batch after
    batch goes until none may, as a task going frees the dead or cancelled ones it waited
    on."""
    candidates = _finished_before(data, cutoff)
    gone: set[int] = set()
    while True:
        more = [i for i in candidates if i not in gone and _may_go(data, i, gone)]
        if not more:
            break
        gone.update(more)
    newest = data.events[-1].id if data.events else 0
    events = sum(
        1
        for e in data.events
        if e.task_id in gone
        or (e.task_id is None and e.at < cutoff and (e.id < newest or bool(gone)))
    )
    return len(gone), events
