"""The schedule verbs of ``SqlTx`` (see ``StoreTx``, "schedules"): recurring tasks, as
named statements over the ``schedules`` table (migration 10)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from shoal.model import Schedule
from shoal.stores._sqltxbase import SqlTxBase
from shoal.vocabulary import ScheduleState

__all__ = ["SqlSchedules"]


def _schedule(row: Sequence[Any]) -> Schedule:
    return Schedule(
        id=int(row[0]),
        task=json.loads(row[1]),
        every=row[2],
        cron=row[3],
        tz=row[4],
        state=ScheduleState(row[5]),
        next_at=float(row[6]),
        created_at=float(row[7]),
        last_task=None if row[8] is None else int(row[8]),
        posted=int(row[9]),
        skipped=int(row[10]),
    )


class SqlSchedules(SqlTxBase):
    """The schedule verbs, as named statements."""

    __slots__ = ()

    def add_schedule(self, schedule: Schedule) -> int:
        params = self._schedule_params(schedule)
        del params["id"]
        return int(self._one("insert_schedule", params)[0])

    def get_schedule(self, schedule_id: int) -> Schedule | None:
        row = self._one("get_schedule", {"id": schedule_id})
        return None if row is None else _schedule(row)

    def list_schedules(self) -> list[Schedule]:
        return [_schedule(row) for row in self._all("list_schedules")]

    def save_schedule(self, schedule: Schedule) -> None:
        params = self._schedule_params(schedule)
        for unchanged in ("template", "every", "cron", "tz", "created_at"):
            del params[unchanged]
        self._run("save_schedule", params)

    def due_schedules(self, now: float, limit: int) -> list[Schedule]:
        return [_schedule(r) for r in self._all("due_schedules", {"now": now, "limit": limit})]

    def next_schedule_at(self) -> float | None:
        row = self._one("next_schedule_at")
        return None if row is None or row[0] is None else float(row[0])

    @staticmethod
    def _schedule_params(schedule: Schedule) -> dict[str, Any]:
        return {
            "id": schedule.id,
            "template": json.dumps(dict(schedule.task), ensure_ascii=False, sort_keys=True),
            "every": schedule.every,
            "cron": schedule.cron,
            "tz": schedule.tz,
            "state": schedule.state.value,
            "next_at": schedule.next_at,
            "created_at": schedule.created_at,
            "last_task": schedule.last_task,
            "posted": schedule.posted,
            "skipped": schedule.skipped,
        }
