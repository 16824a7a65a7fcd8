"""The schedule verbs of the memory store (see ``StoreTx``, "schedules"), which the git
store inherits: schedules live in ``Data.schedules``, by id, each change undoable."""

from __future__ import annotations

from dataclasses import replace

from shoal.model import Schedule
from shoal.stores._memtxbase import MemoryTxBase
from shoal.vocabulary import ScheduleState

__all__ = ["MemorySchedules"]


class MemorySchedules(MemoryTxBase):
    """Schedules in memory: few, so a scan is the index."""

    def add_schedule(self, schedule: Schedule) -> int:
        schedule_id = max(self.d.schedules, default=0) + 1  # none is ever deleted
        self._put(self.d.schedules, schedule_id, replace(schedule, id=schedule_id))
        return schedule_id

    def get_schedule(self, schedule_id: int) -> Schedule | None:
        return self.d.schedules.get(schedule_id)

    def list_schedules(self) -> list[Schedule]:
        return [self.d.schedules[key] for key in sorted(self.d.schedules)]

    def save_schedule(self, schedule: Schedule) -> None:
        old = self.d.schedules[schedule.id]
        kept = replace(schedule, task=old.task, every=old.every, cron=old.cron, tz=old.tz)
        self._put(self.d.schedules, schedule.id, kept)

    def due_schedules(self, now: float, limit: int) -> list[Schedule]:
        due = [s for s in self.d.schedules.values() if _active(s) and s.next_at <= now]
        return sorted(due, key=lambda s: (s.next_at, s.id))[:limit]

    def next_schedule_at(self) -> float | None:
        return min((s.next_at for s in self.d.schedules.values() if _active(s)), default=None)


def _active(schedule: Schedule) -> bool:
    return schedule.state is ScheduleState.ACTIVE
