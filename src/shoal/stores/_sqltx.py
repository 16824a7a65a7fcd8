"""The store verbs, once for every SQL dialect.

Each SQL dialect keeps its statements by name (``_sql``), with the same names and the same
parameters in both: ``SqlTx`` turns a verb into its named statement and the rows back into
model values. What a dialect does its own way it says through its ``Dialect`` (see
``_sqlstore``): lists as JSON or as arrays, a statement over many rows, the pool steps per
skill set on SQLite (so each reads one range of its partial index), and whether writers run
side by side -- then a claim locks its agent's row first, posts with one key take turns,
and so do thieves. Read-only transactions run the statements without their locking clauses.

Verbs that make work available (a task posted pending, requeued, freed, moved, revived, or
new settings) call ``_work_appeared``, so a store that wakes waiting agents says so at
commit.

The verbs are in three layers, one module each: ``SqlTxBase`` (``_sqltxbase``) runs the
named statements and holds what is written just before commit; ``SqlReads``
(``_sqlreads``) adds the verbs that read -- agents, tasks, the claim cascade's candidate
queries; ``SqlTx`` here adds the transitions, the event log and history.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from shoal.model import Candidate, Event, EventCount, NewTask, Task, TaskState
from shoal.stores._sqlreads import SqlReads
from shoal.stores._sqlrows import candidate_of
from shoal.stores._sqlschedules import SqlSchedules
from shoal.stores.base import Finished, Finishing, LeaseGrant, TaskEdit

__all__ = ["SqlTx"]


#: The JSON of event data seen lately: most events carry the same few small mappings (a
#: claim's source and attempt), and encoding them again costs more than finding them.
_EVENT_JSON: dict[tuple[Any, ...], str] = {}
_EVENT_JSON_MAX = 512


def _event_json(data: Mapping[str, Any]) -> str:
    try:  # keyed with the types too: 1, 1.0 and True are equal keys but different JSON
        key = (*data.items(), *map(type, data.values()))
        text = _EVENT_JSON.get(key)
    except TypeError:  # a list or a mapping among the values: not a key
        return json.dumps(data)
    if text is None:
        text = json.dumps(data)
        if len(_EVENT_JSON) >= _EVENT_JSON_MAX:
            _EVENT_JSON.clear()
        _EVENT_JSON[key] = text
    return text


class SqlTx(SqlReads, SqlSchedules):
    """One transaction of a ``SqlStore``: the store verbs (see ``StoreTx``) as named
    statements on one connection."""

    __slots__ = ()

    # tasks: transitions ----------------------------------------------------------------

    def _skillset_id(self, skills: tuple[str, ...]) -> int:
        for sid, known in list(self._s._skillsets.items()):  # ids never change once given
            if known == skills:
                return sid
        text = ",".join(skills)
        row = self._one("skillset_id", {"skills": text})
        if row is None:
            row = self._one("insert_skillset", {"skills": text})
        return int(row[0])

    def insert_task(self, task: NewTask) -> int:
        row = self._one(
            "insert_task",
            {
                "title": task.title,
                "body": task.body,
                "payload": None if task.payload is None else json.dumps(task.payload),
                "priority": task.priority,
                "skillset": self._skillset_id(task.skills),
                "domain": task.domain,
                "state": task.state.value,
                "agent": task.agent,
                "pinned": task.pinned,
                "parent": task.parent,
                "key": task.key,
                "max_attempts": task.max_attempts,
                "lease_ttl": task.lease_ttl,
                "expected_duration": task.expected_duration,
                "waiting_on": task.waiting_on,
                "pool_key": task.pool_key,
                "seq": task.seq,
                "created_at": task.created_at,
                "ready_at": task.ready_at,
                "retry_delay": task.retry_delay,
                "group": task.group,
                "labels": json.dumps(task.labels),
                "posted_by": task.posted_by,
            },
        )
        if task.state is TaskState.PENDING:
            self._work_appeared()
        return int(row[0])

    def set_group_limit(self, name: str, most: int | None) -> bool:
        if most is None:
            return bool(self._all("clear_group_limit", {"name": name}))
        had = name in self.group_limits()
        self._run("set_group_limit", {"name": name, "max": most})
        return had

    def add_deps(self, task_id: int, depends_on: Sequence[int]) -> None:
        self._many("add_deps", {"task": task_id}, ("depends_on",), [(d,) for d in depends_on])
        self._run("mark_depended_on", {"ids": self._list(depends_on)})

    def deps_of(self, task_id: int) -> list[int]:
        return [r[0] for r in self._all("deps_of", {"task": task_id})]

    def dependents_of(self, task_id: int) -> list[int]:
        return [r[0] for r in self._all("dependents_of", {"task": task_id})]

    def lease_tasks(self, agent_id: str, grants: Sequence[LeaseGrant], now: float) -> list[Task]:
        if len(grants) == 1:  # the common claim: no lists to pass
            ((task_id, token, expires, stolen),) = grants
            one = {
                "id": task_id,
                "agent": agent_id,
                "token": token,
                "expires": expires,
                "stolen": stolen,
                "now": now,
            }
            return [self._task(row) for row in self._all("lease_task", one)]
        if not grants:
            return []
        ids, tokens, expires_at, stolen_flags = zip(*grants, strict=True)
        params = {
            "agent": agent_id,
            "ids": self._list(ids),
            "tokens": self._list(tokens),
            "expires": self._list(expires_at),
            "stolen": self._list(stolen_flags),
            "now": now,
        }
        rows = self._all("lease_tasks", params)
        order = {grant[0]: i for i, grant in enumerate(grants)}
        return [self._task(r) for r in sorted(rows, key=lambda r: order[r[0]])]

    def set_lease_expiry(self, task_id: int, expires: float) -> None:
        self._run("set_lease_expiry", {"id": task_id, "expires": expires})

    def finish_leased(self, items: Sequence[Finishing], now: float) -> list[Finished]:
        results = [None if result is None else json.dumps(result) for _, _, result in items]
        if len(items) == 1:  # the common completion: no lists to pass
            ((task_id, token, _),) = items
            one = {"id": task_id, "token": token, "result": results[0], "now": now}
            rows = self._all("finish_leased_one", one)
        elif items:
            params = {
                "ids": self._list([task_id for task_id, _, _ in items]),
                "tokens": self._list([token for _, token, _ in items]),
                "results": self._list(results),
                "now": now,
            }
            rows = self._all("finish_leased", params)
        else:
            rows = []
        self._finished_moved("done", len(rows))
        if len(items) == 1:  # the statement returns the task too: no second read of it
            return [Finished(r[0], r[1], bool(r[2]), self._task(r[3:])) for r in rows]
        return [Finished(r[0], r[1], bool(r[2])) for r in rows]

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
        params = {
            "id": task_id,
            "agent": agent_id,
            "seq": seq,
            "refund": int(refund_attempt),
            "error": error,
            "now": now,
            "ready_at": ready_at,
        }
        self._run("requeue_task", params)
        self._work_appeared()

    def bury_task(self, task_id: int, error: str | None, now: float) -> None:
        buried = self._count("bury_task", {"id": task_id, "error": error, "now": now})
        self._finished_moved("dead", buried)

    def block_task(
        self, task_id: int, agent_id: str, seq: int, waiting_on: int, now: float
    ) -> None:
        params = {"id": task_id, "agent": agent_id, "seq": seq, "waiting_on": waiting_on}
        self._run("block_task", {**params, "now": now})

    def release_dependents(self, task_id: int) -> list[tuple[int, int]]:
        rows = self._all("release_dependents", {"task": task_id})
        return sorted((int(r[0]), int(r[2])) for r in rows if r[1] == 0)

    def ready_task(self, task_id: int, agent_id: str | None, seq: int, now: float) -> None:
        self._run("ready_task", {"id": task_id, "agent": agent_id, "seq": seq, "now": now})
        self._work_appeared()

    def set_ready_at(self, task_id: int, ready_at: float) -> None:
        self._run("set_ready_at", {"id": task_id, "ready_at": ready_at})
        self._work_appeared()

    def bound_tasks(self, agent_id: str, limit: int) -> list[Candidate]:
        rows = self._all("bound_tasks", {"agent": agent_id, "limit": limit})
        return [candidate_of(r) for r in rows]

    def move_task(
        self, task_id: int, agent_id: str | None, seq: int, stolen: bool, now: float
    ) -> None:
        params = {"id": task_id, "agent": agent_id, "seq": seq, "stolen": stolen, "now": now}
        self._run("move_task", params)
        self._work_appeared()

    def cancel_task(self, task_id: int, now: float) -> None:
        self._finished_moved("cancelled", self._count("cancel_task", {"id": task_id, "now": now}))

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
        params = {
            "id": task_id,
            "state": state.value,
            "agent": agent_id,
            "seq": seq,
            "waiting_on": waiting_on,
            "pool_key": pool_key,
            "now": now,
        }
        if self._moved is not None:  # it leaves dead or cancelled
            (was,) = self._one("finished_state", {"id": task_id})
            self._finished_moved(was, -1)
        self._run("revive_task", params)
        if state is TaskState.PENDING:
            self._work_appeared()

    def mark_stalled(self, task_id: int, now: float) -> None:
        self._run("mark_stalled", {"id": task_id, "now": now})

    def set_priority(self, task_id: int, priority: int, pool_key: float, now: float) -> None:
        args = {"id": task_id, "priority": priority, "pool_key": pool_key, "now": now}
        self._run("set_priority", args)

    def edit_task(self, task_id: int, edit: TaskEdit, now: float) -> None:
        args = {
            **edit._asdict(),
            "skillset": self._skillset_id(edit.skills),
            "labels": json.dumps(edit.labels),
            "id": task_id,
            "now": now,
        }
        del args["skills"]
        self._run("edit_task", args)

    def rekey_pool(self, keys: Mapping[int, float]) -> None:
        self._many("set_pool_keys", {}, ("id", "pool_key"), list(keys.items()))

    def keyed_tasks(self) -> list[tuple[int, int, float]]:
        return [(r[0], r[1], r[2]) for r in self._all("keyed_tasks")]

    # the event log ---------------------------------------------------------------------

    def append_event(
        self,
        at: float,
        kind: str,
        task_id: int | None,
        agent_id: str | None,
        data: Mapping[str, Any] | None,
    ) -> None:
        """Held back and written together just before commit, in the order appended."""
        self._events.append((at, kind, task_id, agent_id, _event_json(data) if data else None))

    def events(
        self,
        since: int,
        task_id: int | None,
        agent_id: str | None,
        limit: int,
        newest: bool = False,
    ) -> list[Event]:
        # Named in full, so that every statement's name appears where it runs.
        of_task = "events_of_task_newest" if newest else "events_of_task"
        of_agent = "events_of_agent_newest" if newest else "events_of_agent"
        every = "events_newest" if newest else "events"
        self.flush_events()
        settled = self._one("events_settled", {"grace": self._d.event_grace})
        until = int(settled[0] or 0) if settled else 0
        params = {"since": since, "until": until, "limit": limit}
        if task_id is not None:
            rows = self._all(of_task, {**params, "task": task_id, "agent": agent_id})
        elif agent_id is not None:
            rows = self._all(of_agent, {**params, "agent": agent_id})
        else:
            rows = self._all(every, params)
        return [Event(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]) if r[5] else {}) for r in rows]

    def event_counts(self, start: float, width: float, agent_id: str | None) -> list[EventCount]:
        params = {"first": self._first_event_at(start), "start": start, "width": width}
        rows = self._all("event_counts", {**params, "agent": agent_id})
        return [EventCount(int(r[0]), r[1], r[2], int(r[3])) for r in rows]

    def steals_from(self, start: float, width: float, agent_id: str) -> list[tuple[int, int]]:
        rows = self._all("steals_from", {"start": start, "width": width, "agent": agent_id})
        return sorted((int(r[0]), int(r[1])) for r in rows)

    def _first_event_at(self, start: float) -> int:
        """The id of the log's first event at or after ``start``, found by bisecting the
        ids (the primary key; times rise with them, but for writers a moment apart): about
        twenty lookups of one row for a log of a million, where an index on time would cost
        every claim and completion a page write."""
        first, last = self._one("event_bounds")
        if first is None:
            return 0
        low, high = int(first), int(last) + 1
        while low < high:
            middle = (low + high) // 2
            row = self._one("event_at_or_after", {"id": middle})
            if row is None or row[1] >= start:
                high = middle
            else:
                low = int(row[0]) + 1
        return low

    # history ---------------------------------------------------------------------------

    def prunable_tasks(self, cutoff: float, limit: int) -> list[int]:
        return [r[0] for r in self._all("prunable_tasks", {"cutoff": cutoff, "limit": limit})]

    def prune_tasks(self, task_ids: Sequence[int]) -> tuple[int, int]:
        if not task_ids:
            return 0, 0
        self.flush_events()  # the log's newest entry is then one this batch keeps
        ids = {"ids": self._list(task_ids)}
        events = [r[0] for r in self._all("prune_task_events", ids)]
        self._run("prune_deps", ids)
        states = Counter(r[0] for r in self._all("prune_tasks", ids))
        for state, pruned in states.items():
            self._finished_moved(state, -pruned)
        self._pruned(events)
        return states.total(), len(events)

    def prune_events(self, cutoff: float, limit: int) -> int:
        rows = self._all("prune_untasked_events", {"cutoff": cutoff, "limit": limit})
        self._pruned([r[0] for r in rows])
        return len(rows)

    def _pruned(self, event_ids: list[int]) -> None:
        """Where writers run side by side, a reader of the log waits at a gap in event ids
        for the writer that took them to commit; it must know that a gap a prune left is no
        such gap. The highest event id ever pruned says so (see events_settled)."""
        if not event_ids or not self._d.side_by_side:
            return
        mark = max(event_ids)
        known = self.get_meta("pruned_events")
        if known is None or int(known) < mark:
            self.set_meta("pruned_events", str(mark))

    def prune_preview(self, cutoff: float) -> tuple[int, int]:
        tasks, events = self._one("prune_preview", {"cutoff": cutoff})
        return int(tasks), int(events)
