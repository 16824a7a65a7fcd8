"""The memory store's verbs that read: agents, tasks, and the claim cascade's candidate
queries (the steps of ``_claiming.claim_in``), answered from ``Data``'s indexes.

The middle layer of the memory transaction (``_memtxbase`` says how it is built).
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from shoal import policy
from shoal.model import Agent, AgentStatus, Candidate, QueueDepth, Task, TaskState
from shoal.policy import Locality, StealFilter
from shoal.stores._memdata import (
    CLAIMED,
    GROUPS_META,
    PENDING,
    Row,
    by_id,
    candidate_of,
    is_held,
    is_ready,
    order_fields,
)
from shoal.stores._memtxbase import MemoryTxBase
from shoal.stores.base import ClaimContext

__all__ = ["MemoryReads"]


class MemoryReads(MemoryTxBase):
    """The reading verbs of the memory transaction (see ``StoreTx``)."""

    # agents ----------------------------------------------------------------------------

    def _queued(self, agent_id: str) -> int:
        return len(self.d.index.ids(agent_id, PENDING))

    def _rows(self, ids: set[int]) -> list[Row]:
        tasks = self.d.tasks
        return [tasks[i] for i in ids]

    def get_agent(self, agent_id: str, *, lock: bool = False) -> Agent | None:
        agent = self.d.agents.get(agent_id)
        return None if agent is None else replace(agent, queued=self._queued(agent_id))

    def list_agents(self) -> list[Agent]:
        return [replace(a, queued=self._queued(a.id)) for _, a in sorted(self.d.agents.items())]

    def save_agent(self, agent: Agent) -> None:
        self._put(self.d.agents, agent.id, replace(agent, queued=0))

    def claim_context(self, agent_id: str, now: float) -> ClaimContext | None:
        agent = self.get_agent(agent_id)
        if agent is None:
            return None
        held = len(self.d.index.ids(agent_id, CLAIMED))
        due = any(
            (r.task.lease_expires or 0.0) <= now for r in self._rows(self.d.index.in_state(CLAIMED))
        )
        settings = self.d.settings
        silent = any(
            other.id != agent_id and policy.is_silent(other, now, settings)
            for other in self.d.agents.values()
        )
        return ClaimContext(agent, held, due, dict(self.d.skillsets), settings, silent)

    def queue_depths(self) -> list[QueueDepth]:
        agents = self.d.agents
        return sorted(
            QueueDepth(agent, len(ids), agents[agent].status)
            for (agent, state), ids in self.d.index.placed.items()
            if state is PENDING and agent is not None and ids
        )

    def idle_agents(self) -> list[Agent]:
        return [a for a in self.list_agents() if a.status is AgentStatus.IDLE]

    # tasks: reads ----------------------------------------------------------------------

    def _public(self, row: Row) -> Task:
        # Hand out copies of JSON values so a caller can never edit the store's rows.
        task = row.task
        if isinstance(task.payload, dict | list) or isinstance(task.result, dict | list):
            return replace(
                task, payload=copy.deepcopy(task.payload), result=copy.deepcopy(task.result)
            )
        return task

    @staticmethod
    def _listed(row: Row) -> Task:
        # A listing's value: the payload and the result left out, as the SQL stores do.
        task = row.task
        kept = ("payload",) * (task.payload is not None) + ("result",) * (task.result is not None)
        return replace(task, payload=None, result=None, left_out=kept)

    def get_task(self, task_id: int) -> Task | None:
        row = self.d.tasks.get(task_id)
        return None if row is None else self._public(row)

    def get_tasks(self, task_ids: Sequence[int], *, share: bool = False) -> dict[int, Task]:
        return {i: self._public(self.d.tasks[i]) for i in task_ids if i in self.d.tasks}

    def listed_tasks(self, task_ids: Sequence[int]) -> dict[int, Task]:
        return {i: self._listed(self.d.tasks[i]) for i in task_ids if i in self.d.tasks}

    def task_by_key(self, key: str) -> Task | None:
        task_id = self.d.keys.get(key)
        return None if task_id is None else self.get_task(task_id)

    def list_tasks(
        self,
        state: TaskState | None,
        agent: str | None,
        limit: int,
        before: int | None,
        *,
        label: str | None = None,
    ) -> list[Task]:
        out: list[Task] = []
        ids = self.d.tasks if state is None else self.d.index.in_state(state)
        for task_id in sorted(ids, reverse=True):
            task = self.d.tasks[task_id].task
            if before is not None and task_id >= before:
                continue
            if label is not None and label not in task.labels:
                continue
            if (state is None or task.state is state) and (agent is None or task.agent == agent):
                out.append(self._listed(self.d.tasks[task_id]))
                if len(out) >= limit:
                    break
        return out

    def held_leases(self, agent_id: str, *, lock: bool = False) -> list[tuple[Task, str]]:
        rows = self._rows(self.d.index.ids(agent_id, CLAIMED))
        rows.sort(key=lambda r: (r.task.claimed_at or 0.0, r.task.id))
        return [(self._public(r), r.token or "") for r in rows]

    def claimed_tasks(self) -> list[Task]:
        rows = sorted(self._rows(self.d.index.in_state(CLAIMED)), key=by_id)
        return [self._listed(r) for r in rows]

    def expired_leases(self, now: float, limit: int) -> list[Task]:
        rows = [
            r
            for r in self._rows(self.d.index.in_state(CLAIMED))
            if (r.task.lease_expires or 0.0) <= now
        ]
        rows.sort(key=lambda r: (r.task.lease_expires or 0.0, r.task.id))
        return [self._public(r) for r in rows[:limit]]

    def state_counts(self) -> dict[str, int]:
        return {s.value: len(self.d.index.in_state(s)) for s in TaskState}

    def pool_depth(self) -> int:
        return len(self.d.index.ids(None, PENDING))

    def waiting_tasks(self, now: float) -> tuple[int, float | None]:
        due = [
            r.task.ready_at
            for r in self._rows(self.d.index.in_state(PENDING))
            if r.task.ready_at is not None and r.task.ready_at > now
        ]
        return len(due), min(due, default=None)

    def stuck_tasks(self, limit: int) -> list[int]:
        """Blocked tasks that wait on one that ended without finishing -- or, on a git
        board, on one a person deleted by hand (a prune never deletes a task another
        waits on): it will never finish either, and asking for it by id used to fail."""
        ended = (TaskState.DEAD, TaskState.CANCELLED)
        tasks = self.d.tasks
        stuck = sorted(
            task_id
            for task_id, deps in self.d.deps.items()
            if tasks[task_id].task.state is TaskState.BLOCKED
            and any(dep not in tasks or tasks[dep].task.state in ended for dep in deps)
        )
        return stuck[:limit]

    def pending_demand(self) -> dict[tuple[str, ...], int]:
        demand: dict[tuple[str, ...], int] = {}
        for row in self._rows(self.d.index.in_state(PENDING)):
            demand[row.task.skills] = demand.get(row.task.skills, 0) + 1
        return demand

    def pending_by_domain(self) -> dict[str | None, int]:
        return dict(Counter(r.task.domain for r in self._rows(self.d.index.in_state(PENDING))))

    # candidate queries -----------------------------------------------------------------

    def queue_head(
        self,
        agent_id: str,
        limit: int,
        longest: bool,
        now: float,
        full: frozenset[str] = frozenset(),
        joins: bool = False,
    ) -> list[Candidate]:
        low, high = policy.place_band(joins)
        rows = [
            r
            for r in self._rows(self.d.index.ids(agent_id, PENDING))
            if is_ready(r, now) and r.task.group not in full and low <= r.seq <= high
        ]
        rows.sort(key=lambda r: policy.queue_order(*order_fields(r), longest))
        return [candidate_of(r) for r in rows[:limit]]

    def skillsets(self) -> dict[int, tuple[str, ...]]:
        return dict(self.d.skillsets)

    def _unheld(self, keys: list[Any], held: Locality, limit: int, now: float) -> list[Any]:
        """The first ``limit`` entries of a sorted pool list (task id last) ready by ``now``
        and not held back."""
        out = []
        for entry in keys:
            row = self.d.tasks[entry[-1]]
            if is_ready(row, now) and not is_held(row, held):
                out.append(entry)
                if len(out) >= limit:
                    break
        return out

    def pool_best(
        self,
        skillsets: Sequence[int],
        domain: str | None,
        limit: int,
        held: Locality,
        now: float,
    ) -> list[Candidate]:
        # The head of each skill set's list is its best task: merge the heads, keep the best.
        pool = self.d.index.pool
        best: list[tuple[Any, ...]] = []
        for sid in set(skillsets):
            best += self._unheld(pool.get((sid, domain), []), held, limit, now)
        best.sort()
        return [candidate_of(self.d.tasks[entry[-1]]) for entry in best[:limit]]

    def pool_longest(
        self, skillsets: Sequence[int], limit: int, held: Locality, now: float
    ) -> list[Candidate]:
        longest = self.d.index.longest
        best: list[tuple[Any, ...]] = []
        for sid in set(skillsets):
            best += self._unheld(longest.get(sid, []), held, limit, now)
        best.sort()
        return [candidate_of(self.d.tasks[entry[-1]]) for entry in best[:limit]]

    def steal_tail(
        self, victim: str, rules: StealFilter, held: Locality, limit: int, now: float
    ) -> list[Candidate]:
        low, high = policy.place_band(rules.joins)
        rows = [
            r
            for r in self._rows(self.d.index.ids(victim, PENDING))
            if low <= r.seq <= high
            and is_ready(r, now)
            and rules.matches(r.task)
            and not is_held(r, held)
        ]
        rows.sort(key=lambda r: policy.tail_order(*order_fields(r), rules.longest))
        return [candidate_of(r) for r in rows[:limit]]

    def server_time(self) -> float | None:
        return None

    # concurrency groups: the limits are one record of the fleet's meta (GROUPS_META), so
    # the git store keeps them in its meta.json with nothing of its own --------------------

    def group_limits(self, *, lock: bool = False) -> dict[str, int]:
        text = self.d.meta.get(GROUPS_META)
        return {} if not text else {str(k): int(v) for k, v in json.loads(text).items()}

    def held_by_group(self, now: float) -> dict[str, int]:
        held = Counter(
            r.task.group
            for r in self._rows(self.d.index.in_state(CLAIMED))
            if not policy.lease_due(r.task, now)
        )
        return {name: n for name, n in held.items() if name is not None}

    def next_ready(self, agent_id: str, skillsets: Sequence[int], now: float) -> float | None:
        eligible = set(skillsets)
        due = [
            r.task.ready_at
            for r in self._rows(self.d.index.in_state(PENDING))
            if r.task.ready_at is not None
            and r.task.ready_at > now
            and (r.task.agent == agent_id or (r.task.agent is None and r.skillset in eligible))
        ]
        return min(due, default=None)

    def window_thieves(self, since: float) -> list[str]:
        thieves = []
        for event in reversed(self.d.events):
            if event.at <= since:
                break
            if event.kind == "stolen" and event.agent:
                thieves.append(event.agent)
        return thieves[::-1]
