"""A recurring task's value, ``Schedule``: what ``Fleet.schedule`` made and the claims
post from.

It is ``shoal.model``'s value (``model`` exports it, and that is where to import it
from); it lives here, as the hub's reports live in ``_reports``, because it needs nothing
else of the model and keeps ``model`` a reading.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shoal._values import value
from shoal.times import iso_time
from shoal.vocabulary import ScheduleState

__all__ = ["Schedule"]


@value
class Schedule:
    """Recurring work: a task posted again and again, ``every`` so many seconds or at the
    times a ``cron`` expression names (read in time zone ``tz``). ``task`` holds the post
    arguments each occurrence gets (``title`` and the rest). ``next_at`` is the next tick;
    ``last_task`` the latest occurrence posted -- while it is unfinished, a tick posts
    nothing (``skipped`` counts those), so work never piles up while nobody works it."""

    id: int
    task: Mapping[str, Any]
    every: float | None
    cron: str | None
    tz: str | None
    state: ScheduleState
    next_at: float
    created_at: float
    last_task: int | None = None
    posted: int = 0
    skipped: int = 0

    @property
    def title(self) -> str:
        return str(self.task.get("title", ""))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "state": self.state.value,
            "every": self.every,
            "cron": self.cron,
            "tz": self.tz,
            "next_at": iso_time(self.next_at),
            "last_task": self.last_task,
            "posted": self.posted,
            "skipped": self.skipped,
            "created_at": iso_time(self.created_at),
            "task": dict(self.task),
        }
