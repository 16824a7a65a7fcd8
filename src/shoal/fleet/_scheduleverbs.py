"""Fleet's verbs on schedules of recurring tasks (``_schedules`` says how they work), and the
look a claim takes, now and then, to post what has fallen due.

The look must not make a claim slower: a ``Fleet`` remembers the next tick of any active
schedule and when it last asked, and asks again (one indexed read, ``next_schedule_at``)
only once that tick has come or ``SCHEDULE_LOOK`` seconds of its clock have passed -- so a
schedule another process added is seen within that time. Only when something is due does
it open a write, which posts it (``post_due``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from shoal.errors import BadInput
from shoal.fleet._conflicts import rerun_on_conflict
from shoal.fleet._schedules import (
    add_schedule_in,
    draft_of_template,
    need_schedule,
    post_due_in,
    set_schedule_state_in,
)
from shoal.fleet._verbbase import FleetBase
from shoal.model import Schedule
from shoal.task_checks import POST_FIELDS
from shoal.times import parse_moment
from shoal.validation import as_task_ids
from shoal.vocabulary import ScheduleState

__all__ = ["SCHEDULE_LOOK", "TEMPLATE_FIELDS", "ScheduleVerbs"]

#: How long (seconds of the fleet's clock) a claim trusts what it last read of the next tick.
SCHEDULE_LOOK = 5.0
#: What an occurrence may be given: post's arguments but those that name one task's place
#: in time or in the fleet -- each occurrence is a new task, posted at its tick.
TEMPLATE_FIELDS = POST_FIELDS - {"after", "parent", "key", "not_before"}


class ScheduleVerbs(FleetBase):
    """The schedule verbs of ``Fleet``; ``_post_due_lazily`` is the claim's look."""

    _schedules_due: float = -math.inf  # the next tick last read (inf: none active)
    _schedules_looked: float = -math.inf  # when it was read, on the fleet's clock

    @rerun_on_conflict
    def schedule(
        self,
        title: str,
        *,
        every: float | str | None = None,
        cron: str | None = None,
        tz: str | None = None,
        start: float | str | datetime | None = None,
        **task: Any,
    ) -> Schedule:
        """Post ``title`` again and again: ``every`` so often (90, "30m", "1d") or at the
        times a five-field ``cron`` expression names ("0 3 * * *"), read in time zone ``tz``
        (an IANA name; UTC if not given). ``task`` holds ``post``'s other arguments for
        each occurrence (priority, skills, to...; not after, parent, key or not_before).

        The first tick is ``start`` (or the first cron time from it); without one, an
        ``every`` schedule posts its first occurrence now. At most one occurrence is
        pending at a time: a tick that finds the last one unfinished posts nothing, and
        ticks nobody was there to see are not made up. Occurrences are posted by claims and
        the hub's reap as they fall due (``_schedules``), with no daemon."""
        from shoal import recurrence  # cron's reading: loaded by the verbs of schedules

        seconds, expression, zone = recurrence.check_recurrence(every, cron, tz)
        unknown = sorted(set(task) - TEMPLATE_FIELDS)
        if unknown:
            raise BadInput(
                f"a schedule's task takes no {', '.join(unknown)}",
                hint="each occurrence is a new task posted at its tick; give the first tick "
                "with start (--at/--in), and post's other arguments as usual",
            )
        template = _template(title, task)
        draft = draft_of_template(template)
        template["title"] = draft.title  # as every occurrence will have them
        if "priority" in template:
            template["priority"] = draft.priority
        begin = parse_moment(start, "start") if start is not None else None
        with self._store.write() as tx:
            made = add_schedule_in(
                tx, self.clock.now(), template, draft, seconds, expression, zone, begin
            )
        self._schedules_due = -math.inf  # look again at the next claim
        return made

    def schedules(self) -> list[Schedule]:
        """Every schedule, by id (cancelled ones too)."""
        with self._store.read() as tx:
            return tx.list_schedules()

    def get_schedule(self, schedule_id: int) -> Schedule:
        """The schedule with that id."""
        (checked,) = _ids(schedule_id)
        with self._store.read() as tx:
            return need_schedule(tx, checked)

    def pause_schedule(self, schedule_id: int) -> Schedule:
        """Post no occurrence until ``resume_schedule``; one already posted stays."""
        return self._set_schedule_state(schedule_id, ScheduleState.PAUSED)

    def resume_schedule(self, schedule_id: int) -> Schedule:
        """Post occurrences again, from the next tick still to come."""
        return self._set_schedule_state(schedule_id, ScheduleState.ACTIVE)

    def cancel_schedule(self, schedule_id: int) -> Schedule:
        """End a schedule for good; occurrences already posted stay tasks like any other."""
        return self._set_schedule_state(schedule_id, ScheduleState.CANCELLED)

    @rerun_on_conflict
    def _set_schedule_state(self, schedule_id: int, state: ScheduleState) -> Schedule:
        (checked,) = _ids(schedule_id)
        with self._store.write() as tx:
            changed = set_schedule_state_in(tx, self.clock.now(), checked, state)
        self._schedules_due = -math.inf
        return changed

    @rerun_on_conflict
    def post_due(self) -> list[int]:
        """Post every occurrence due now (the claim's look and the hub's reap do it without
        being asked): the tasks posted."""
        with self._store.write() as tx:
            now = self.clock.now()
            posted = post_due_in(tx, now)
            due = tx.next_schedule_at()
        self._schedules_due = math.inf if due is None else due
        self._schedules_looked = now
        return posted

    def _post_due_lazily(self) -> None:
        """The claim's look (module docstring): post what is due, asking the store only
        when the tick last read has come or it was read too long ago."""
        now = self.clock.now()
        if now < self._schedules_due and abs(now - self._schedules_looked) < SCHEDULE_LOOK:
            return
        with self._store.read() as tx:
            due = tx.next_schedule_at()
        self._schedules_due = math.inf if due is None else due
        self._schedules_looked = now
        if due is not None and due <= now:
            self.post_due()


def _ids(schedule_id: object) -> tuple[int, ...]:
    """A schedule id checked as task ids are (whole numbers from 1)."""
    if isinstance(schedule_id, bool) or not isinstance(schedule_id, int | str):
        raise BadInput(f"a schedule id is a whole number, not {schedule_id!r}")
    return as_task_ids(str(schedule_id), "schedule")


def _template(title: str, task: dict[str, Any]) -> dict[str, Any]:
    """The post arguments an occurrence gets, as JSON: what was given, less the defaults
    (checked by the caller through ``draft_of_template``)."""
    given = {key: value for key, value in task.items() if not _default(value)}
    if isinstance(given.get("skills"), Iterable) and not isinstance(given["skills"], str):
        given["skills"] = list(given["skills"])
    try:
        return dict(json.loads(json.dumps({"title": title, **given}, allow_nan=False)))
    except (TypeError, ValueError) as exc:
        raise BadInput(f"a schedule's task must be JSON: {exc}") from None


def _default(value: object) -> bool:
    """Left out of a template: what post would take anyway (None, False, empty)."""
    if value is None or value is False:
        return True
    return isinstance(value, str | tuple | list) and len(value) == 0
