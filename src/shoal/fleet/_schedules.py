"""Recurring tasks: the bodies of the schedule verbs, run inside the caller's transaction.

A schedule posts an occurrence of its task at each tick (``recurrence`` says when the ticks
are). Three rules shape it (docs/ARCHITECTURE.md, "Recurring tasks"):

* **At most one occurrence pending.** At a tick, if the schedule's latest occurrence is
  not finished yet, nothing is posted (``skipped`` counts the tick): a sensor every five
  minutes that nobody works does not leave a thousand copies of itself behind. Ticks
  missed while nobody looked are not made up either: the next tick is the first still to
  come.
* **No daemon.** Whoever looks posts what is due: a claim (``Fleet`` asks, now and then,
  for the next tick of any schedule -- one indexed read -- and posts only when it has
  come), and the hub's reap (``shoal monitor``, ``supervise``, ``serve``). A fleet with
  nobody claiming and no hub posts nothing, and needs nothing posted.
* **Once.** Two claims that look at the same tick post one occurrence: the store hands a
  due schedule to one writer (``StoreTx.due_schedules``), which moves its next tick in the
  same transaction as the post.

An occurrence that cannot be posted (its agent is gone, its body is now past the fleet's
cap) is missed, not retried: the tick passes, and a ``schedule.missed`` event says why.
"""

from __future__ import annotations

from typing import Any

from shoal._values import replace
from shoal.errors import InvalidTransition, ShoalError, UnknownSchedule
from shoal.fleet._posting import insert_task
from shoal.model import NewTask, Schedule
from shoal.settings import Settings
from shoal.stores.base import StoreTx
from shoal.task_checks import POST_DEFAULTS, check_post, check_sizes
from shoal.times import iso_time
from shoal.vocabulary import EventKind, ScheduleState

__all__ = [
    "DUE_PER_LOOK",
    "add_schedule_in",
    "draft_of_template",
    "need_schedule",
    "post_due_in",
    "set_schedule_state_in",
]

#: The most schedules one look posts (the rest are posted by the next look).
DUE_PER_LOOK = 100


def draft_of_template(template: dict[str, Any]) -> NewTask:
    """The task an occurrence posts, checked as ``post`` checks its arguments."""
    fields = dict(template)
    title = fields.pop("title", "")
    return check_post(title, **{**POST_DEFAULTS, **fields})


def add_schedule_in(
    tx: StoreTx,
    now: float,
    template: dict[str, Any],
    draft: NewTask,
    every: float | None,
    cron: str | None,
    tz: str | None,
    start: float | None,
) -> Schedule:
    """Keep a new schedule (its first tick at ``start`` or the first after it; ``every``
    without a start ticks now), with its event, and post what is due -- its first
    occurrence, if that is now."""
    from shoal import recurrence

    settings = tx.load_settings()
    check_sizes(draft, settings.max_payload_bytes, settings.max_body_bytes)
    first = recurrence.first_tick(every, cron, tz, now if start is None else start)
    schedule = Schedule(0, template, every, cron, tz, ScheduleState.ACTIVE, first, now)
    schedule_id = tx.add_schedule(schedule)
    data: dict[str, Any] = {"schedule": schedule_id, "title": draft.title}
    data.update({"every": every} if every is not None else {"cron": cron, "tz": tz})
    data["next_at"] = iso_time(first)
    tx.append_event(now, EventKind.SCHEDULE_ADDED, None, None, data)
    post_due_in(tx, now, settings)
    return need_schedule(tx, schedule_id)


def post_due_in(
    tx: StoreTx, now: float, settings: Settings | None = None, limit: int = DUE_PER_LOOK
) -> list[int]:
    """Post an occurrence of every schedule due by ``now`` whose latest occurrence is
    finished, and move each due schedule to its next tick; the tasks posted."""
    due = tx.due_schedules(now, limit)
    if not due:
        return []
    from shoal import recurrence  # cron's reading: loaded where a schedule is due

    settings = settings or tx.load_settings()
    posted: list[int] = []
    for schedule in due:
        after = recurrence.next_tick(
            schedule.every, schedule.cron, schedule.tz, schedule.next_at, now
        )
        last = tx.get_task(schedule.last_task) if schedule.last_task is not None else None
        if last is not None and not last.state.finished:  # one pending at most
            tx.save_schedule(replace(schedule, next_at=after, skipped=schedule.skipped + 1))
            continue
        try:
            draft = draft_of_template(dict(schedule.task))
            check_sizes(draft, settings.max_payload_bytes, settings.max_body_bytes)
            note = {"schedule": schedule.id}
            task_id = insert_task(tx, draft, now, settings, note=note)
        except ShoalError as exc:  # raised before anything of it was written
            tx.save_schedule(replace(schedule, next_at=after, skipped=schedule.skipped + 1))
            data = {"schedule": schedule.id, "error": exc.message}
            tx.append_event(now, EventKind.SCHEDULE_MISSED, None, None, data)
            continue
        tx.save_schedule(
            replace(schedule, next_at=after, last_task=task_id, posted=schedule.posted + 1)
        )
        posted.append(task_id)
    return posted


def need_schedule(tx: StoreTx, schedule_id: int) -> Schedule:
    schedule = tx.get_schedule(schedule_id)
    if schedule is None:
        raise UnknownSchedule(
            f"no schedule {schedule_id}", hint="see the fleet's schedules: shoal schedule list"
        )
    return schedule


_EVENTS = {
    ScheduleState.PAUSED: EventKind.SCHEDULE_PAUSED,
    ScheduleState.ACTIVE: EventKind.SCHEDULE_RESUMED,
    ScheduleState.CANCELLED: EventKind.SCHEDULE_CANCELLED,
}


def set_schedule_state_in(
    tx: StoreTx, now: float, schedule_id: int, state: ScheduleState
) -> Schedule:
    """Pause, resume or cancel a schedule, with its event; asking for the state it is in
    changes nothing. A resumed schedule's next tick is the first still to come (a paused
    one makes up nothing). A cancelled schedule stays cancelled; its occurrences already
    posted are tasks like any other."""
    from shoal import recurrence

    schedule = need_schedule(tx, schedule_id)
    if schedule.state is state:
        return schedule
    if schedule.state is ScheduleState.CANCELLED:
        raise InvalidTransition(
            f"schedule {schedule_id} is cancelled, for good",
            hint="add a new one: shoal add TITLE --every ... or --cron ...",
        )
    next_at = schedule.next_at
    if state is ScheduleState.ACTIVE and next_at <= now:
        next_at = recurrence.next_tick(schedule.every, schedule.cron, schedule.tz, next_at, now)
    changed = replace(schedule, state=state, next_at=next_at)
    tx.save_schedule(changed)
    data: dict[str, Any] = {"schedule": schedule_id}
    if state is ScheduleState.ACTIVE:
        data["next_at"] = iso_time(next_at)
    tx.append_event(now, _EVENTS[state], None, None, data)
    return changed
