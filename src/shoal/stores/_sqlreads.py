"""The store verbs that read, once for every SQL dialect: agents, tasks, and the claim
cascade's candidate queries (the steps of ``_claiming.claim_in``).

The middle layer of ``SqlTx`` (``_sqltx`` says how it is built): it stands on
``SqlTxBase``'s named statements, and turns their rows back into model values.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from itertools import repeat
from typing import Any

from shoal import policy
from shoal._values import field_names, replace
from shoal.model import Agent, Candidate, QueueDepth, Task, TaskState
from shoal.policy import HEARD_FROM, NOTHING_HELD, Locality, StealFilter
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
from shoal.stores._sqltxbase import SqlTxBase
from shoal.stores.base import ClaimContext

__all__ = ["SqlReads"]

_STATES = {s.value: s for s in TaskState}
#: Where a lease's token is in a row of the task columns and then the token.
_TOKEN = 31
#: Where a ``listed_task`` row says whether the task holds a payload (then a result).
_LISTED = 31
#: How many columns the ``agent`` fragment has.
_AGENT_COLUMNS = 15


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


#: Task's fields in the order ``_task`` gives them, each set once by ``_made_task``.
_TASK_FIELDS = (
    "id", "title", "state", "priority", "body", "payload", "skills", "domain", "agent",
    "pinned", "stolen", "parent", "key", "attempts", "max_attempts", "lease_ttl",
    "expected_duration", "lease_expires", "result", "error", "waiting_on", "created_at",
    "updated_at", "claimed_at", "finished_at", "stalled_at", "ready_at", "retry_delay",
    "group", "labels", "posted_by", "left_out",
)  # fmt: skip
if field_names(Task) != _TASK_FIELDS:
    raise ImportError("model.Task's fields changed: update _sqlreads._task and _TASK_FIELDS")
_set_field = object.__setattr__


def _made_task(values: tuple[Any, ...]) -> Task:
    """``Task(*values)``, every field given, without its generated ``__init__``: a frozen
    dataclass's sets each of its 32 fields by a call to ``object.__setattr__`` made from
    Python; here the same calls are made from C (``map``): 2.6 against 3.4 us. A Task has
    no ``__post_init__`` to skip, and ``_TASK_FIELDS`` is checked against it at import."""
    task = object.__new__(Task)
    deque(map(_set_field, repeat(task, 32), _TASK_FIELDS, values), 0)
    return task


def _labels(text: str) -> tuple[str, ...]:
    """A task's labels from their JSON: most tasks have none, and ``"[]"`` is then read
    without the JSON decoder (a claim cycle reads two tasks: 20 k instructions of its 1 M)."""
    return () if text == "[]" else tuple(json.loads(text))


class SqlReads(SqlTxBase):
    """The reading verbs of ``SqlTx`` (see ``StoreTx``), as named statements."""

    __slots__ = ()

    # agents ---------------------------------------------------------------------------

    def get_agent(self, agent_id: str, *, lock: bool = False) -> Agent | None:
        row = self._one("lock_agent" if lock else "get_agent", {"id": agent_id})
        return None if row is None else agent_of(row)

    def list_agents(self) -> list[Agent]:
        return [agent_of(r) for r in self._all("list_agents")]

    def save_agent(self, agent: Agent) -> None:
        """Insert or update; ``queued`` is the store's to derive and is never written, and
        ``heard`` (migration 8) is written apart, where the dialect says so, only when it
        changes."""
        heard = agent.last_seen if agent.status in HEARD_FROM else None
        params = {
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
            "heard": heard,
        }
        self._run("save_agent", params)
        if self._d.heard_apart:
            self._run("save_agent_heard", {"id": agent.id, "heard": heard})

    def claim_context(self, agent_id: str, now: float) -> ClaimContext | None:
        timeout = self._s._settings[1].heartbeat_timeout  # the settings read last
        params = {"id": agent_id, "now": now, "silent_before": now - timeout}
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
        silent = bool(row[19])
        if settings.heartbeat_timeout != timeout:  # asked with another timeout than these
            again = {"id": agent_id, "silent_before": now - settings.heartbeat_timeout}
            silent = bool(self._one("any_silent", again)[0])
        return ClaimContext(
            _claimer(row), int(row[15]), bool(row[16]), dict(skillsets), settings, silent
        )

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
        return _made_task(
            (
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
                row[28],  # group
                _labels(row[29]),
                row[30],  # posted_by
                None,  # left_out: read whole
            )
        )

    def _listed(self, row: Sequence[Any]) -> Task:
        """A task from the columns of the ``listed_task`` fragment: no payload or result."""
        kept = ("payload",) * bool(row[_LISTED]) + ("result",) * bool(row[_LISTED + 1])
        return replace(self._task(row), left_out=kept)

    def get_task(self, task_id: int) -> Task | None:
        row = self._one("get_task", {"id": task_id})
        return None if row is None else self._task(row)

    def get_tasks(self, task_ids: Sequence[int], *, share: bool = False) -> dict[int, Task]:
        if not task_ids:
            return {}
        rows = self._all("share_tasks" if share else "get_tasks", {"ids": self._list(task_ids)})
        return {r[0]: self._task(r) for r in rows}

    def listed_tasks(self, task_ids: Sequence[int]) -> dict[int, Task]:
        if not task_ids:
            return {}
        rows = self._all("listed_tasks", {"ids": self._list(task_ids)})
        return {r[0]: self._listed(r) for r in rows}

    def leased_task(self, task_id: int) -> tuple[Task, str | None] | None:
        row = self._one("leased_task", {"id": task_id})
        return None if row is None else (self._task(row), row[_TOKEN])

    def task_by_key(self, key: str) -> Task | None:
        if self._d.side_by_side:  # posts with one key take turns: the second finds the first
            self._run("lock_key", {"key": key})
        row = self._one("task_by_key", {"key": key})
        return None if row is None else self._task(row)

    def list_tasks(
        self,
        state: TaskState | None,
        agent: str | None,
        limit: int,
        before: int | None,
        *,
        label: str | None = None,
    ) -> list[Task]:
        params = {
            "state": None if state is None else state.value,
            "agent": agent,
            "before": before,
            "limit": limit,
            "label": label,
        }
        return [self._listed(r) for r in self._all("list_tasks", params)]

    def held_leases(self, agent_id: str, *, lock: bool = False) -> list[tuple[Task, str]]:
        rows = self._all("held_leases" if lock else "held_leases_unlocked", {"agent": agent_id})
        return [(self._task(r), r[_TOKEN]) for r in rows]

    def claimed_tasks(self) -> list[Task]:
        return [self._listed(r) for r in self._all("claimed_tasks")]

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

    def queue_head(
        self,
        agent_id: str,
        limit: int,
        longest: bool,
        now: float,
        full: frozenset[str] = frozenset(),
        joins: bool = False,
    ) -> list[Candidate]:
        name = "queue_head_longest" if longest else "queue_head"
        params = {"agent": agent_id, "limit": limit, "now": now, **_band(joins)}
        params["full_groups"] = self._list(sorted(full)) if full else self._no_groups
        rows = self._all(name, params)
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
            params["full_groups"] = self._unheld(held)["full_groups"]
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
            **_band(rules.joins),
        }
        name = "steal_tail_longest" if rules.longest else "steal_tail"
        return [candidate_of(r) for r in self._all(name, params)]

    def _unheld(self, held: Locality) -> dict[str, Any]:
        return unheld_params(held, self._json)

    @property
    def _no_groups(self) -> Any:
        """The ``full_groups`` parameter that leaves out no group (most claims)."""
        return unheld_params(NOTHING_HELD, self._json)["full_groups"]

    # concurrency groups ----------------------------------------------------------------

    def group_limits(self, *, lock: bool = False) -> dict[str, int]:
        if lock and self._locking:
            with self._d.pipeline(self._c):  # the locks, then a fresh read: one round trip
                self._run("lock_groups")
                rows = self._all("group_limits")
        else:
            rows = self._all("group_limits")
        return {name: int(most) for name, most in rows}

    def held_by_group(self, now: float) -> dict[str, int]:
        return {name: int(n) for name, n in self._all("held_by_group", {"now": now})}

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


def _band(joins: bool) -> dict[str, int]:
    """The places a candidate query reads (``policy.place_band``), as its parameters."""
    low, high = policy.place_band(joins)
    return {"place_low": low, "place_high": high}
