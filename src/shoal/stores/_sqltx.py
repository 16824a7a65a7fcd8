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
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from shoal.model import Agent, Candidate, Event, NewTask, QueueDepth, Task, TaskState
from shoal.policy import Locality, StealFilter
from shoal.settings import Settings
from shoal.stores._sqlrows import (
    STATUSES,
    RowOrder,
    agent_of,
    best_first,
    candidate_of,
    longest_first,
    split_skills,
    unheld_params,
)
from shoal.stores.base import ClaimContext, Finished, Finishing, LeaseGrant

if TYPE_CHECKING:
    from shoal.stores._sqlstore import SqlStore

__all__ = ["SqlTx"]

_STATES = {s.value: s for s in TaskState}
EventRow = tuple[float, str, int | None, str | None, str | None]
#: Where a lease's token is in a row of the task columns and then the token.
_TOKEN = 28
_EVENT_COLUMNS = ("at", "kind", "task", "agent", "data")
#: How many columns the ``agent`` fragment has.
_AGENT_COLUMNS = 15


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


#: Agents by the columns they were made from: a claimer's row is the same claim after
#: claim (``last_seen`` moves once a second), and an Agent is a frozen value of its row.
_CLAIMERS: dict[tuple[Any, ...], Agent] = {}
_CLAIMERS_MAX = 1024


def _claimer(row: Sequence[Any]) -> Agent:
    """``agent_of`` the agent columns at the head of ``row``, made once per distinct row."""
    key = tuple(row[:_AGENT_COLUMNS])
    agent = _CLAIMERS.get(key)
    if agent is None:
        agent = agent_of(key)
        if len(_CLAIMERS) >= _CLAIMERS_MAX:
            _CLAIMERS.clear()
        _CLAIMERS[key] = agent
    return agent


class SqlTx:
    """One transaction of a ``SqlStore``: the store verbs (see ``StoreTx``) as named
    statements on one connection."""

    __slots__ = (
        "_c",
        "_d",
        "_events",
        "_json",
        "_locking",
        "_moved",
        "_none",
        "_q",
        "_s",
        "_stole",
        "_wake",
    )

    def __init__(self, store: SqlStore, conn: Any, write: bool) -> None:
        d = store._d
        self._s = store
        self._d = d
        self._c = conn
        self._q = d.queries if write else d.read_queries  # read-only: no row is locked
        self._none = d.no_params
        self._json = d.json_lists
        self._locking = d.side_by_side and write
        self._events: list[EventRow] = []
        # How this transaction moved the finished counts, where the store keeps them itself.
        self._moved: dict[str, int] | None = None if d.counts_by_trigger else {}
        self._wake = False
        self._stole = False

    # running named statements -----------------------------------------------------------

    def _one(self, name: str, params: Mapping[str, Any] | None = None) -> Any:
        return self._c.execute(self._q[name], params or self._none).fetchone()

    def _all(self, name: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        rows: list[Any] = self._c.execute(self._q[name], params or self._none).fetchall()
        return rows

    def _run(self, name: str, params: Mapping[str, Any] | None = None) -> None:
        self._c.execute(self._q[name], params or self._none)

    def _count(self, name: str, params: Mapping[str, Any] | None = None) -> int:
        """Run a statement that changes rows; how many it changed."""
        return int(self._c.execute(self._q[name], params or self._none).rowcount)

    def _many(
        self, name: str, fixed: Mapping[str, Any], names: Sequence[str], rows: Sequence[Any]
    ) -> None:
        """``name`` over many rows at once, the dialect's way (executemany or arrays)."""
        if rows:
            self._d.run_many(self._c, self._q[name], fixed, names, rows)

    def _list(self, values: Sequence[Any]) -> Any:
        """A list as the dialect passes one: a JSON array, or a list (an array)."""
        return json.dumps(list(values)) if self._json else list(values)

    def _work_appeared(self) -> None:
        """A verb made work available to claimers: a store that notifies says so at commit."""
        self._wake = True

    def finish(self) -> None:
        """Before COMMIT: write the events held back and the finished counts moved, and wake
        waiters if work appeared."""
        self.flush_events()
        self._flush_counts()
        if self._wake and self._d.capabilities.notifies:
            self._run("notify_work", {"channel": self._d.channel})

    def flush_events(self) -> None:
        """Write the events held back so far, in one go, in the order they came."""
        if self._events:
            self._many("append_events", {}, _EVENT_COLUMNS, self._events)
            self._events.clear()

    # finished counts -------------------------------------------------------------------
    # How many tasks are done, dead and cancelled is kept, since counting the history would
    # read all of it (schema version 6). Where triggers do not keep the counts, every verb
    # that moves a task into or out of a finished state says so here, and the moves are
    # written once per state just before commit (or before the counts are read).

    def _finished_moved(self, state: str, change: int) -> None:
        if self._moved is not None and change:
            self._moved[state] = self._moved.get(state, 0) + change

    def _flush_counts(self) -> None:
        if self._moved:
            for state, change in self._moved.items():
                if change:
                    self._run("count_finished", {"state": state, "change": change})
            self._moved.clear()

    # settings and counters ------------------------------------------------------------

    def load_settings(self) -> Settings:
        row = self._one("get_meta", {"key": "settings"})
        return self._parse_settings(row[0] if row else None)

    def _parse_settings(self, raw: str | None) -> Settings:
        cached_raw, cached = self._s._settings
        if raw == cached_raw:
            return cached
        settings = Settings.from_mapping(json.loads(raw)) if raw else Settings()
        self._s._settings = (raw, settings)
        return settings

    def save_settings(self, settings: Settings) -> None:
        self.set_meta("settings", json.dumps(settings.overrides(), sort_keys=True))
        self._work_appeared()  # new steal rules or limits may free work for someone

    def next_seq(self) -> int:
        return int(self._one("next_seq")[0])

    def next_seqs(self, count: int) -> list[int]:
        return self._d.seqs(self._all("next_seqs", {"count": count}), count)

    def get_meta(self, key: str) -> str | None:
        row = self._one("get_meta", {"key": key})
        return None if row is None else str(row[0])

    def server_time(self) -> float | None:
        row = self._one("server_time")  # none for an embedded store: this machine's clock
        return None if row is None or row[0] is None else float(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self._run("set_meta", {"key": key, "value": value})

    # agents ---------------------------------------------------------------------------

    def get_agent(self, agent_id: str, *, lock: bool = False) -> Agent | None:
        row = self._one("lock_agent" if lock else "get_agent", {"id": agent_id})
        return None if row is None else agent_of(row)

    def list_agents(self) -> list[Agent]:
        return [agent_of(r) for r in self._all("list_agents")]

    def save_agent(self, agent: Agent) -> None:
        """Insert or update; ``queued`` is the store's to derive and is never written."""
        self._run(
            "save_agent",
            {
                "id": agent.id,
                "role": agent.role,
                "skills": json.dumps(list(agent.skills)),
                "domains": json.dumps(list(agent.domains)),
                "max_concurrent": agent.max_concurrent,
                "manager": agent.manager,
                "ephemeral": agent.ephemeral,
                "status": agent.status.value,
                "idle_since": agent.idle_since,
                "last_seen": agent.last_seen,
                "registered_at": agent.registered_at,
                "incarnation": agent.incarnation,
                "failures": agent.failures,
                "paused_until": agent.paused_until,
            },
        )

    def claim_context(self, agent_id: str, now: float) -> ClaimContext | None:
        params = {"id": agent_id, "now": now}
        if self._locking:
            with self._d.pipeline(self._c):  # the lock, then a fresh read: one round trip
                self._run("lock_claimer", params)
                row = self._one("claim_context", params)
        else:
            row = self._one("claim_context", params)
        if row is None:
            return None
        skillsets = self._s._skillsets
        if row[17] != len(skillsets):
            self.skillsets()
        settings = self._parse_settings(row[18])
        return ClaimContext(_claimer(row), int(row[15]), bool(row[16]), dict(skillsets), settings)

    def queue_depths(self) -> list[QueueDepth]:
        return [QueueDepth(r[0], int(r[1]), STATUSES[r[2]]) for r in self._all("queue_depths")]

    def idle_agents(self) -> list[Agent]:
        return [agent_of(r) for r in self._all("idle_agents")]

    # tasks: reads ---------------------------------------------------------------------

    def task_of(self, row: Sequence[Any]) -> Task:
        """A task from the columns of the ``task`` fragment, read elsewhere (``SqlStore``)."""
        return self._task(row)

    def _task(self, row: Sequence[Any]) -> Task:
        """A task from the columns of the ``task`` fragment (positional: this is hot)."""
        skills = self._s._skillsets.get(row[5])
        if skills is None:
            self.skillsets()
            skills = self._s._skillsets[row[5]]
        return Task(
            row[0],  # id
            row[1],  # title
            _STATES[row[7]],
            row[4],  # priority
            row[2],  # body
            None if row[3] is None else json.loads(row[3]),  # payload
            skills,
            row[6],  # domain
            row[8],  # agent
            bool(row[9]),  # pinned
            bool(row[10]),  # stolen
            row[11],  # parent
            row[12],  # key
            row[13],  # attempts
            row[14],  # max_attempts
            row[15],  # lease_ttl
            row[16],  # expected_duration
            row[17],  # lease_expires
            None if row[18] is None else json.loads(row[18]),  # result
            row[19],  # error
            row[20],  # waiting_on
            row[21],  # created_at
            row[22],  # updated_at
            row[23],  # claimed_at
            row[24],  # finished_at
            row[25],  # stalled_at
            row[26],  # ready_at
            row[27],  # retry_delay
        )

    def get_task(self, task_id: int) -> Task | None:
        row = self._one("get_task", {"id": task_id})
        return None if row is None else self._task(row)

    def get_tasks(self, task_ids: Sequence[int], *, share: bool = False) -> dict[int, Task]:
        if not task_ids:
            return {}
        rows = self._all("share_tasks" if share else "get_tasks", {"ids": self._list(task_ids)})
        return {r[0]: self._task(r) for r in rows}

    def leased_task(self, task_id: int) -> tuple[Task, str | None] | None:
        row = self._one("leased_task", {"id": task_id})
        return None if row is None else (self._task(row), row[_TOKEN])

    def task_by_key(self, key: str) -> Task | None:
        if self._d.side_by_side:  # posts with one key take turns: the second finds the first
            self._run("lock_key", {"key": key})
        row = self._one("task_by_key", {"key": key})
        return None if row is None else self._task(row)

    def list_tasks(
        self, state: TaskState | None, agent: str | None, limit: int, before: int | None
    ) -> list[Task]:
        params = {
            "state": None if state is None else state.value,
            "agent": agent,
            "before": before,
            "limit": limit,
        }
        return [self._task(r) for r in self._all("list_tasks", params)]

    def held_leases(self, agent_id: str, *, lock: bool = False) -> list[tuple[Task, str]]:
        rows = self._all("held_leases" if lock else "held_leases_unlocked", {"agent": agent_id})
        return [(self._task(r), r[_TOKEN]) for r in rows]

    def claimed_tasks(self) -> list[Task]:
        return [self._task(r) for r in self._all("claimed_tasks")]

    def expired_leases(self, now: float, limit: int) -> list[Task]:
        return [self._task(r) for r in self._all("expired_leases", {"now": now, "limit": limit})]

    def state_counts(self) -> dict[str, int]:
        self._flush_counts()
        blocked, pool, queued, claimed = self._one("state_counts")
        finished = {state: int(n) for state, n in self._all("finished_counts")}
        return {
            "blocked": blocked,
            "pending": pool + queued,
            "claimed": claimed,
            "done": finished.get("done", 0),
            "dead": finished.get("dead", 0),
            "cancelled": finished.get("cancelled", 0),
        }

    def pool_depth(self) -> int:
        return int(self._one("pool_depth")[0])

    def waiting_tasks(self, now: float) -> tuple[int, float | None]:
        count, first = self._one("waiting_tasks", {"now": now})
        return int(count), first

    def stuck_tasks(self, limit: int) -> list[int]:
        return [r[0] for r in self._all("stuck_tasks", {"limit": limit})]

    def pending_demand(self) -> dict[tuple[str, ...], int]:
        return {split_skills(skills): int(n) for skills, n in self._all("pending_demand")}

    def pending_by_domain(self) -> dict[str | None, int]:
        return {domain: int(n) for domain, n in self._all("pending_by_domain")}

    # the claim cascade's candidate queries (the steps of _claiming.claim_in) -------------------

    def queue_head(self, agent_id: str, limit: int, longest: bool, now: float) -> list[Candidate]:
        name = "queue_head_longest" if longest else "queue_head"
        rows = self._all(name, {"agent": agent_id, "limit": limit, "now": now})
        return [candidate_of(r) for r in rows]

    def skillsets(self) -> dict[int, tuple[str, ...]]:
        rows = self._all("skillsets")
        cache = self._s._skillsets
        if len(rows) != len(cache):  # ids never change once given: only new ones to add
            with self._s._cache_lock:
                cache.update((sid, split_skills(skills)) for sid, skills in rows)
        return dict(cache)

    def pool_best(
        self,
        skillsets: Sequence[int],
        domain: str | None,
        limit: int,
        held: Locality,
        now: float,
    ) -> list[Candidate]:
        if domain is None:
            name, params = "pool_best", {"limit": limit, "now": now, **self._unheld(held)}
        else:
            name, params = "pool_best_in_domain", {"domain": domain, "limit": limit, "now": now}
        return [candidate_of(r) for r in self._pool(name, skillsets, params, best_first)]

    def pool_longest(
        self, skillsets: Sequence[int], limit: int, held: Locality, now: float
    ) -> list[Candidate]:
        params = {"limit": limit, "now": now, **self._unheld(held)}
        rows = self._pool("pool_longest", skillsets, params, longest_first)
        return [candidate_of(r) for r in rows]

    def _pool(
        self, name: str, skillsets: Sequence[int], params: dict[str, Any], order: RowOrder
    ) -> list[Any]:
        """A pool step over ``skillsets``: the best ``params["limit"]`` rows by ``order``,
        from one statement over the list, or -- where the dialect wants it -- from one per
        skill set (each one range of a partial index), merged."""
        if not self._d.pool_per_skillset:
            return self._all(name, {**params, "skillsets": self._list(skillsets)})
        rows: list[Any] = []
        for skillset in skillsets:
            rows += self._all(name, {**params, "skillset": skillset})
        if len(skillsets) > 1:
            rows.sort(key=order)
        return rows[: params["limit"]]

    def steal_tail(
        self, victim: str, rules: StealFilter, held: Locality, limit: int, now: float
    ) -> list[Candidate]:
        if limit <= 0 or not rules.skillsets:
            return []
        params = {
            "victim": victim,
            "min_priority": rules.min_priority,
            "skillsets": self._list(rules.skillsets),
            "domains": self._list(rules.domains),
            "cross_domain_priority": rules.cross_domain_priority,
            "free_skillset": rules.free_skillset,
            "limit": limit,
            "now": now,
            **self._unheld(held),
        }
        name = "steal_tail_longest" if rules.longest else "steal_tail"
        return [candidate_of(r) for r in self._all(name, params)]

    def _unheld(self, held: Locality) -> dict[str, Any]:
        return unheld_params(held, self._json)

    def next_ready(self, agent_id: str, skillsets: Sequence[int], now: float) -> float | None:
        params = {"agent": agent_id, "skillsets": self._list(skillsets), "now": now}
        row = self._one("next_ready", params)
        return None if row is None or row[0] is None else float(row[0])

    def window_thieves(self, since: float) -> list[str]:
        if self._d.side_by_side and not self._stole:  # steals take turns, until commit
            self._run("lock_steals", {"key": self._d.steal_key})
            self._stole = True
        self.flush_events()
        return [r[0] for r in self._all("window_thieves", {"since": since})]

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
            },
        )
        if task.state is TaskState.PENDING:
            self._work_appeared()
        return int(row[0])

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

    def block_task(self, task_id: int, agent_id: str, waiting_on: int, now: float) -> None:
        params = {"id": task_id, "agent": agent_id, "waiting_on": waiting_on, "now": now}
        self._run("block_task", params)

    def release_dependents(self, task_id: int) -> list[int]:
        rows = self._all("release_dependents", {"task": task_id})
        return sorted(r[0] for r in rows if r[1] == 0)

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
