"""The memory store: the executable reference for what every store must do.

Plain Python under one lock, written to be obviously right first. Atomicity comes from an
undo journal -- every change records how to take itself back, and a transaction that
raises is rolled back entry by entry, so a refused call changes nothing here exactly as it
changes nothing in SQLite.

The simulator runs whole nights of a fleet on this store, so the hot questions of a claim
are answered from indexes, not by scanning every task: tasks by (agent, state) -- a queue,
the pool, an agent's leases -- and the pool in score-key order per skill set (and per
skill set and domain), the same two look-ups the SQL stores make with their indexes. Every
index changes in one place (``Index.move``), through the journal like everything else.

One fleet per ``MemoryStore`` object; ``memory://name`` URLs opened in the same process
share it, so several threads (or several ``Fleet`` objects) can work on one fleet.

The transaction is built in three layers, one module each, as ``SqlTx`` is:
``MemoryTxBase`` (``_memtxbase``) holds the undo journal, the one place a task row changes,
and the settings and counters; ``MemoryReads`` (``_memreads``) adds the verbs that read --
agents, tasks, the claim cascade's candidate queries; ``_MemoryTx`` here adds the
transitions, history and the event log. The rows and their indexes are ``_memdata``'s.
"""

from __future__ import annotations

import bisect
import functools
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from shoal._log import get_logger
from shoal.model import Candidate, Event, EventCount, Task, TaskState, count_detail
from shoal.stores._memdata import (
    CLAIMED,
    GROUPS_META,
    PENDING,
    Data,
    Row,
    by_id,
    candidate_of,
    events_after,
    frozen_json,
    prunable,
    prune_preview,
)
from shoal.stores._memreads import MemoryReads
from shoal.stores._memschedules import MemorySchedules
from shoal.stores.base import (
    Capabilities,
    DirectOutcome,
    Finished,
    Finishing,
    LeaseGrant,
    NewTask,
    TaskEdit,
)

__all__ = ["MemoryStore"]

_REGISTRY: dict[str, MemoryStore] = {}
_REGISTRY_LOCK = threading.Lock()

log = get_logger(__name__)


class MemoryStore:
    """A fleet in this process's memory. See the module docstring."""

    # One lock in one process: Python's lock is not FIFO, but holds are microseconds.
    capabilities = Capabilities(shared=False, durable=False, notifies=True, fair=False)

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self.created = True
        self._data = Data()
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)

    @classmethod
    def open(cls, url: str) -> MemoryStore:
        """``memory://`` is a new private fleet; ``memory://name`` is shared in this process."""
        name = url[len("memory://") :]
        if not name:
            log.debug("opened a private fleet in memory")
            return cls(url)
        with _REGISTRY_LOCK:
            if name not in _REGISTRY:
                log.debug("opened the in-memory fleet %r (new)", name)
                _REGISTRY[name] = cls(url)
                return _REGISTRY[name]
            log.debug("opened the in-memory fleet %r (shared in this process)", name)
            store = _REGISTRY[name]
            store.created = False
            return store

    @contextmanager
    def write(self, *, exclusive: bool = False) -> Iterator[_MemoryTx]:
        with self._lock:
            tx = _MemoryTx(self._data, writable=True)
            try:
                yield tx
            except BaseException:
                tx.rollback()
                raise
            if tx.journal:
                self._data.version += 1
                self._changed.notify_all()

    @contextmanager
    def read(self) -> Iterator[_MemoryTx]:
        with self._lock:
            yield _MemoryTx(self._data, writable=False)

    def claim_directly(
        self,
        agent_id: str,
        n: int,
        now: float,
        tokens: Sequence[str],
        finishing: Sequence[Finishing] = (),
    ) -> DirectOutcome | None:
        """In memory the general path costs no round trips: nothing to shorten."""
        return None

    def wait_for_change(self, timeout: float) -> bool:
        with self._lock:
            seen = self._data.version
            return self._changed.wait_for(lambda: self._data.version != seen, timeout=timeout)

    def close(self) -> None:
        pass


class _MemoryTx(MemoryReads, MemorySchedules):
    """One transaction over ``Data``: every change goes through ``_record`` to be undoable."""

    # tasks: transitions ----------------------------------------------------------------

    def _skillset_id(self, skills: tuple[str, ...]) -> int:
        for sid, need in self.d.skillsets.items():
            if need == skills:
                return sid
        sid = len(self.d.skillsets) + 1
        self._put(self.d.skillsets, sid, skills)
        return sid

    def insert_task(self, task: NewTask) -> int:
        old = self.d.last_task_id
        self._record(lambda: setattr(self.d, "last_task_id", old))
        task_id = self.d.last_task_id = old + 1
        public = Task(
            id=task_id,
            title=task.title,
            state=task.state,
            priority=task.priority,
            body=task.body,
            payload=frozen_json(task.payload),
            skills=task.skills,
            domain=task.domain,
            agent=task.agent,
            pinned=task.pinned,
            parent=task.parent,
            key=task.key,
            max_attempts=task.max_attempts,
            lease_ttl=task.lease_ttl,
            expected_duration=task.expected_duration,
            waiting_on=task.waiting_on,
            created_at=task.created_at,
            updated_at=task.created_at,
            ready_at=task.ready_at,
            retry_delay=task.retry_delay,
            group=task.group,
            labels=task.labels,
            posted_by=task.posted_by,
        )
        row = Row(public, self._skillset_id(task.skills), task.pool_key, task.seq)
        self._set_row(task_id, row)
        if task.key is not None:
            self._put(self.d.keys, task.key, task_id)
        return task_id

    def set_group_limit(self, name: str, most: int | None) -> bool:
        limits = self.group_limits()
        had = limits.pop(name, None) is not None
        if most is not None:
            limits[name] = most
        self.set_meta(GROUPS_META, json.dumps(dict(sorted(limits.items()))))
        return had

    def add_deps(self, task_id: int, depends_on: Sequence[int]) -> None:
        self._put(self.d.deps, task_id, [*self.d.deps.get(task_id, []), *depends_on])
        for dep in depends_on:
            self._put(self.d.dependents, dep, [*self.d.dependents.get(dep, []), task_id])

    def deps_of(self, task_id: int) -> list[int]:
        return sorted(self.d.deps.get(task_id, []))

    def dependents_of(self, task_id: int) -> list[int]:
        return sorted(self.d.dependents.get(task_id, []))

    def _lease_one(
        self, task_id: int, agent_id: str, token: str, expires: float, stolen: bool, now: float
    ) -> None:
        row = self.d.tasks[task_id]
        self._task(
            task_id,
            state=CLAIMED,
            agent=agent_id,
            token=token,
            lease_expires=expires,
            attempts=row.task.attempts + 1,
            claimed_at=now,
            stalled_at=None,
            stolen=row.task.stolen or stolen,
            updated_at=now,
        )

    def lease_tasks(self, agent_id: str, grants: Sequence[LeaseGrant], now: float) -> list[Task]:
        out = []
        for task_id, token, expires, stolen in grants:
            if self.d.tasks[task_id].task.state is PENDING:
                self._lease_one(task_id, agent_id, token, expires, stolen, now)
                out.append(self._public(self.d.tasks[task_id]))
        return out

    def finish_leased(self, items: Sequence[Finishing], now: float) -> list[Finished]:
        out = []
        for task_id, token, result in items:
            row = self.d.tasks.get(task_id)
            if (
                row is None
                or row.token != token
                or row.task.state is not CLAIMED
                or (row.task.lease_expires or 0.0) <= now
            ):
                continue
            self._finish_one(task_id, result, now)
            out.append(Finished(task_id, row.task.agent, bool(self.d.dependents.get(task_id))))
        return out

    def set_lease_expiry(self, task_id: int, expires: float) -> None:
        self._task(task_id, lease_expires=expires)

    def _finish_one(self, task_id: int, result: Any, now: float) -> None:
        self._task(
            task_id,
            state=TaskState.DONE,
            result=frozen_json(result),
            lease_expires=None,
            finished_at=now,
            updated_at=now,
        )

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
        task = self.d.tasks[task_id].task
        self._task(
            task_id,
            state=PENDING,
            agent=agent_id,
            seq=seq,
            lease_expires=None,
            attempts=task.attempts - 1 if refund_attempt else task.attempts,
            error=error if error is not None else task.error,
            updated_at=now,
            ready_at=ready_at,
        )

    def bury_task(self, task_id: int, error: str | None, now: float) -> None:
        task = self.d.tasks[task_id].task
        self._task(
            task_id,
            state=TaskState.DEAD,
            lease_expires=None,
            error=error if error is not None else task.error,
            finished_at=now,
            updated_at=now,
        )

    def block_task(
        self, task_id: int, agent_id: str, seq: int, waiting_on: int, now: float
    ) -> None:
        task = self.d.tasks[task_id].task
        self._task(
            task_id,
            state=TaskState.BLOCKED,
            agent=agent_id,
            seq=seq,
            waiting_on=waiting_on,
            lease_expires=None,
            attempts=task.attempts - 1,
            updated_at=now,
            ready_at=None,
        )

    def release_dependents(self, task_id: int) -> list[tuple[int, int]]:
        freed = []
        for dep in self.d.dependents.get(task_id, []):
            row = self.d.tasks[dep]
            if row.task.state is TaskState.BLOCKED:
                self._task(dep, waiting_on=row.task.waiting_on - 1)
                if row.task.waiting_on - 1 == 0:
                    freed.append((dep, row.seq))
        return sorted(freed)

    def ready_task(self, task_id: int, agent_id: str | None, seq: int, now: float) -> None:
        ready = max(now, self.d.tasks[task_id].task.ready_at or now)
        self._task(task_id, state=PENDING, agent=agent_id, seq=seq, updated_at=now, ready_at=ready)

    def set_ready_at(self, task_id: int, ready_at: float) -> None:
        if self.d.tasks[task_id].task.state is PENDING:
            self._task(task_id, ready_at=ready_at)

    def bound_tasks(self, agent_id: str, limit: int) -> list[Candidate]:
        index = self.d.index
        ids = index.ids(agent_id, PENDING) | index.ids(agent_id, TaskState.BLOCKED)
        rows = [r for r in sorted(self._rows(ids), key=by_id) if not r.task.pinned]
        return [candidate_of(r) for r in rows[:limit]]

    def move_task(
        self, task_id: int, agent_id: str | None, seq: int, stolen: bool, now: float
    ) -> None:
        task = self.d.tasks[task_id].task
        self._task(task_id, agent=agent_id, seq=seq, stolen=task.stolen or stolen, updated_at=now)

    def cancel_task(self, task_id: int, now: float) -> None:
        self._task(
            task_id, state=TaskState.CANCELLED, lease_expires=None, finished_at=now, updated_at=now
        )

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
        self._task(
            task_id,
            state=state,
            waiting_on=waiting_on,
            pool_key=pool_key,
            agent=agent_id,
            seq=seq,
            attempts=0,
            error=None,
            result=None,
            finished_at=None,
            stalled_at=None,
            lease_expires=None,
            updated_at=now,
            ready_at=now if state is PENDING else None,
        )

    def mark_stalled(self, task_id: int, now: float) -> None:
        self._task(task_id, stalled_at=now)

    def set_priority(self, task_id: int, priority: int, pool_key: float, now: float) -> None:
        self._task(task_id, priority=priority, pool_key=pool_key, updated_at=now)

    def edit_task(self, task_id: int, edit: TaskEdit, now: float) -> None:
        changes = edit._asdict()
        skillset = self._skillset_id(edit.skills)
        self._task(task_id, **changes, skillset=skillset, updated_at=now)

    def rekey_pool(self, keys: Mapping[int, float]) -> None:
        for task_id, key in keys.items():
            self._task(task_id, pool_key=key)

    def keyed_tasks(self) -> list[tuple[int, int, float]]:
        return [
            (r.task.id, r.task.priority, r.task.created_at)
            for r in sorted(self.d.tasks.values(), key=by_id)
            if not r.task.state.finished
        ]

    def leased_task(self, task_id: int) -> tuple[Task, str | None] | None:
        row = self.d.tasks.get(task_id)
        return None if row is None else (self._public(row), row.token)

    # history ---------------------------------------------------------------------------

    def prunable_tasks(self, cutoff: float, limit: int) -> list[int]:
        return prunable(self.d, cutoff, limit)

    def prune_tasks(self, task_ids: Sequence[int]) -> tuple[int, int]:
        gone = {i for i in task_ids if i in self.d.tasks and self.d.tasks[i].task.state.finished}
        d = self.d
        for task_id in sorted(gone):
            old = d.tasks[task_id]
            self._pop(d.tasks, task_id)
            self._record(functools.partial(d.index.move, task_id, None, old))
            d.index.move(task_id, old, None)
            if old.task.key is not None:
                self._pop(d.keys, old.task.key)
            for other, links in ((d.deps, d.dependents), (d.dependents, d.deps)):
                for linked in other.get(task_id, ()):  # the other end forgets it
                    if linked in links:
                        self._put(links, linked, [i for i in links[linked] if i != task_id])
                self._pop(other, task_id)
        return len(gone), self._drop_events(lambda e: e.task_id in gone)

    def prune_events(self, cutoff: float, limit: int) -> int:
        newest = self.d.events[-1].id if self.d.events else 0
        old = [e for e in self.d.events if e.task_id is None and e.at < cutoff and e.id < newest]
        ids = {e.id for e in sorted(old, key=lambda e: (e.at, e.id))[:limit]}
        return self._drop_events(lambda e: e.id in ids)

    def _drop_events(self, doomed: Callable[[Event], bool]) -> int:
        old = self.d.events
        kept = [e for e in old if not doomed(e)]
        if len(kept) < len(old):
            self._record(lambda: setattr(self.d, "events", old))
            self.d.events = kept
        return len(old) - len(kept)

    def prune_preview(self, cutoff: float) -> tuple[int, int]:
        return prune_preview(self.d, cutoff)

    # the event log ---------------------------------------------------------------------

    def append_event(
        self,
        at: float,
        kind: str,
        task_id: int | None,
        agent_id: str | None,
        data: Mapping[str, Any] | None,
    ) -> None:
        last = self.d.last_event_id
        self._record(lambda: setattr(self.d, "last_event_id", last))
        self.d.last_event_id = last + 1
        event = Event(last + 1, at, kind, task_id, agent_id, frozen_json(data or {}))
        self._append(self.d.events, event)

    def events(
        self,
        since: int,
        task_id: int | None,
        agent_id: str | None,
        limit: int,
        newest: bool = False,
    ) -> list[Event]:
        out = []
        log = events_after(self.d.events, since)
        for event in reversed(log) if newest else log:
            if (task_id is None or event.task_id == task_id) and (
                agent_id is None or event.agent == agent_id
            ):
                out.append(event)
                if len(out) >= limit:
                    break
        return out

    def event_counts(self, start: float, width: float, agent_id: str | None) -> list[EventCount]:
        counts: Counter[tuple[int, str, str]] = Counter()
        for event in self.d.events[_first_at(self.d.events, start) :]:
            if event.at >= start and (agent_id is None or event.agent == agent_id):
                bucket = int((event.at - start) // width)
                counts[bucket, event.kind, count_detail(event.kind, event.data)] += 1
        return [EventCount(b, k, d, n) for (b, k, d), n in counts.items()]

    def steals_from(self, start: float, width: float, agent_id: str) -> list[tuple[int, int]]:
        counts: Counter[int] = Counter()
        for event in self.d.events[_first_at(self.d.events, start) :]:
            if event.kind == "stolen" and event.at >= start and event.data.get("from") == agent_id:
                counts[int((event.at - start) // width)] += 1
        return sorted(counts.items())


def _first_at(events: list[Event], start: float) -> int:
    """Where the log reaches ``start`` (times rise along it, as ids do)."""
    return bisect.bisect_left(events, start, key=lambda e: e.at)
