"""The store verbs that read the same on every SQL dialect.

Each SQL store keeps its statements by name (``_sql``), with the same names and the same
parameters in every dialect: ``SqlTx`` turns a verb into its named statement and the rows
back into model values, once. A dialect's transaction class says how to run a statement
(``_one``, ``_all``, ``_run``) and writes only the verbs whose SQL or locking differs --
leasing, finishing, the pool's merge, the event log.

Verbs that make work available (a task posted pending, requeued, freed, moved, revived, or
new settings) call ``_work_appeared``, so a store that wakes waiting agents can say so at
commit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from shoal.model import Agent, AgentStatus, Candidate, QueueDepth, Task, TaskState
from shoal.settings import Settings

__all__ = ["SqlTx", "agent_of", "candidate_of", "split_skills"]

_STATES = {s.value: s for s in TaskState}
_STATUSES = {s.value: s for s in AgentStatus}
EventRow = tuple[float, str, int | None, str | None, str | None]


class _Caches(Protocol):
    """What a SQL store keeps between transactions: committed data only (cleared on
    rollback)."""

    _skillsets: dict[int, tuple[str, ...]]
    _settings: tuple[str | None, Settings]


class SqlTx:
    """The dialect-independent half of a SQL store's transaction (see the module docstring)."""

    __slots__ = ()
    _s: _Caches
    _events: list[EventRow]

    # how a dialect runs a named statement ----------------------------------------------

    def _one(self, name: str, params: Mapping[str, Any] | None = None) -> Any:
        raise NotImplementedError

    def _all(self, name: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        raise NotImplementedError

    def _run(self, name: str, params: Mapping[str, Any] | None = None) -> None:
        raise NotImplementedError

    def _work_appeared(self) -> None:
        """A verb made work available to claimers (a store that notifies says so)."""

    def skillsets(self) -> dict[int, tuple[str, ...]]:
        raise NotImplementedError

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
        return sorted(int(r[0]) for r in self._all("next_seqs", {"count": count}))

    def get_meta(self, key: str) -> str | None:
        row = self._one("get_meta", {"key": key})
        return None if row is None else str(row[0])

    def server_time(self) -> float | None:
        return None  # an embedded store runs on this machine's clock

    def set_meta(self, key: str, value: str) -> None:
        self._run("set_meta", {"key": key, "value": value})

    # agents ---------------------------------------------------------------------------

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

    def queue_depths(self) -> list[QueueDepth]:
        return [QueueDepth(r[0], int(r[1]), _STATUSES[r[2]]) for r in self._all("queue_depths")]

    def idle_agents(self) -> list[Agent]:
        return [agent_of(r) for r in self._all("idle_agents")]

    # tasks: reads ---------------------------------------------------------------------

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

    def task_by_key(self, key: str) -> Task | None:
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

    def claimed_tasks(self) -> list[Task]:
        return [self._task(r) for r in self._all("claimed_tasks")]

    def expired_leases(self, now: float, limit: int) -> list[Task]:
        return [self._task(r) for r in self._all("expired_leases", {"now": now, "limit": limit})]

    def state_counts(self) -> dict[str, int]:
        total, blocked, pool, queued, claimed = self._one("state_counts")
        ended = {state: int(n) for state, n in self._all("ended_counts")}
        dead, cancelled = ended.get("dead", 0), ended.get("cancelled", 0)
        return {
            "blocked": blocked,
            "pending": pool + queued,
            "claimed": claimed,
            "done": total - blocked - pool - queued - claimed - dead - cancelled,
            "dead": dead,
            "cancelled": cancelled,
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

    def queue_head(self, agent_id: str, limit: int, longest: bool, now: float) -> list[Candidate]:
        name = "queue_head_longest" if longest else "queue_head"
        rows = self._all(name, {"agent": agent_id, "limit": limit, "now": now})
        return [candidate_of(r) for r in rows]

    def next_ready(self, agent_id: str, skillsets: Sequence[int], now: float) -> float | None:
        params = {"agent": agent_id, "skillsets": self._id_list(skillsets), "now": now}
        row = self._one("next_ready", params)
        return None if row is None or row[0] is None else float(row[0])

    def _id_list(self, ids: Sequence[int]) -> Any:
        """A list of ids as the dialect passes one (a JSON array by default)."""
        return json.dumps(list(ids))

    def deps_of(self, task_id: int) -> list[int]:
        return [r[0] for r in self._all("deps_of", {"task": task_id})]

    def dependents_of(self, task_id: int) -> list[int]:
        return [r[0] for r in self._all("dependents_of", {"task": task_id})]

    def bound_tasks(self, agent_id: str, limit: int) -> list[Candidate]:
        rows = self._all("bound_tasks", {"agent": agent_id, "limit": limit})
        return [candidate_of(r) for r in rows]

    def keyed_tasks(self) -> list[tuple[int, int, float]]:
        return [(r[0], r[1], r[2]) for r in self._all("keyed_tasks")]

    # tasks: transitions ----------------------------------------------------------------

    def set_lease_expiry(self, task_id: int, expires: float) -> None:
        self._run("set_lease_expiry", {"id": task_id, "expires": expires})

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

    def set_ready_at(self, task_id: int, ready_at: float) -> None:
        self._run("set_ready_at", {"id": task_id, "ready_at": ready_at})
        self._work_appeared()

    def bury_task(self, task_id: int, error: str | None, now: float) -> None:
        self._run("bury_task", {"id": task_id, "error": error, "now": now})

    def block_task(self, task_id: int, agent_id: str, waiting_on: int, now: float) -> None:
        params = {"id": task_id, "agent": agent_id, "waiting_on": waiting_on, "now": now}
        self._run("block_task", params)

    def release_dependents(self, task_id: int) -> list[int]:
        rows = self._all("release_dependents", {"task": task_id})
        return sorted(r[0] for r in rows if r[1] == 0)

    def ready_task(self, task_id: int, agent_id: str | None, seq: int, now: float) -> None:
        self._run("ready_task", {"id": task_id, "agent": agent_id, "seq": seq, "now": now})
        self._work_appeared()

    def move_task(
        self, task_id: int, agent_id: str | None, seq: int, stolen: bool, now: float
    ) -> None:
        params = {"id": task_id, "agent": agent_id, "seq": seq, "stolen": stolen, "now": now}
        self._run("move_task", params)
        self._work_appeared()

    def cancel_task(self, task_id: int, now: float) -> None:
        self._run("cancel_task", {"id": task_id, "now": now})

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
        self._run("revive_task", params)
        if state is TaskState.PENDING:
            self._work_appeared()

    def mark_stalled(self, task_id: int, now: float) -> None:
        self._run("mark_stalled", {"id": task_id, "now": now})

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
        self._events.append((at, kind, task_id, agent_id, json.dumps(data) if data else None))


def agent_of(row: Sequence[Any]) -> Agent:
    """An agent from the columns of the ``agent`` fragment."""
    return Agent(
        id=row[0],
        role=row[1],
        skills=tuple(json.loads(row[2])),
        domains=tuple(json.loads(row[3])),
        max_concurrent=row[4],
        manager=bool(row[5]),
        ephemeral=bool(row[6]),
        status=_STATUSES[row[7]],
        idle_since=row[8],
        last_seen=row[9],
        registered_at=row[10],
        incarnation=row[11],
        queued=int(row[12]),
        failures=int(row[13]),
        paused_until=row[14],
    )


def candidate_of(row: Sequence[Any]) -> Candidate:
    """A candidate from the columns of the ``candidate`` fragment."""
    return Candidate(
        row[0],  # id
        row[1],  # title
        row[2],  # priority
        row[3],  # domain
        row[4],  # agent
        bool(row[5]),  # pinned
        row[6],  # created_at
        row[7],  # lease_ttl
        row[8],  # attempts
        row[9],  # skillset
        row[10],  # expected_duration
        row[11],  # ready_at
    )


def split_skills(skills: str) -> tuple[str, ...]:
    """A skill set as stored (sorted names joined by commas; '' for none)."""
    return tuple(skills.split(",")) if skills else ()
