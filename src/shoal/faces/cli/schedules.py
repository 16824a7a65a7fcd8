"""Recurring tasks on the command line: ``shoal add TITLE --every 30m`` or ``--cron "0 3 * *
*" --tz Europe/Paris`` makes a schedule (``Fleet.schedule``), and ``shoal schedule
list|pause|resume|cancel`` looks after them. Occurrences are posted by claims and the hub's
reap as they fall due; nothing here runs in the background."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click
from rich import box
from rich.table import Table
from rich.text import Text

from shoal.errors import BadInput
from shoal.faces import output, render
from shoal.faces.cli.app import App, json_option, pass_app
from shoal.model import Schedule
from shoal.settings import MAX_DURATION
from shoal.times import parse_moment
from shoal.validation import parse_duration

__all__ = ["add_schedule", "add_schedule_commands", "recurrence_text"]

#: Flags of ``add`` that place one task, which no schedule takes: each occurrence is a new
#: task, posted at its tick.
_ONE_TASK_FLAGS = (("--after", "after"), ("--parent", "parent"), ("--key", "key"))


def add_schedule(
    app: App,
    title: str,
    *,
    every: str | None,
    cron: str | None,
    tz: str | None,
    delay: str | None,
    at: str | None,
    **task: Any,
) -> None:
    """``shoal add`` with ``--every`` or ``--cron``: make a schedule. ``--in``/``--at`` set
    its first tick; ``task`` holds add's other options for each occurrence."""
    given = [flag for flag, name in _ONE_TASK_FLAGS if task.pop(name, None)]
    if given:
        raise BadInput(
            f"a recurring task takes no {', '.join(given)}: each occurrence is a new task",
            hint="leave them out, or post a one-off task without --every/--cron",
        )
    if delay is not None and at is not None:
        raise BadInput("give --in or --at, not both", hint="--in 30m, or --at 2026-12-01T09:00Z")
    fleet = app.fleet()
    start = parse_moment(at, "--at") if at is not None else None
    if delay is not None:
        wait = parse_duration(delay, "--in")
        if wait > MAX_DURATION:
            raise BadInput(f"--in {delay} is more than ten years", hint="give a nearer time")
        start = fleet.clock.now() + wait
    made = fleet.schedule(title, every=every, cron=cron, tz=tz, start=start, **task)
    app.emit(made.to_dict(), added_text(made, app.now()), env={"SHOAL_SCHEDULE": made.id})


def added_text(schedule: Schedule, now: float) -> str:
    first = f"posted task {schedule.last_task}; " if schedule.last_task is not None else ""
    return (
        f"schedule {schedule.id}: {output.one_line(schedule.title)}, "
        f"{recurrence_text(schedule)}; {first}next {render.ago(schedule.next_at, now)}"
    )


def recurrence_text(schedule: Schedule) -> str:
    """``every 30m`` / ``cron 0 3 * * * (Europe/Paris)``."""
    if schedule.every is not None:
        return f"every {_duration(schedule.every)}"
    return f"cron {schedule.cron} ({schedule.tz})"


def _duration(seconds: float) -> str:
    """A schedule's gap as it was likely given: 90s, 30m, 1h30m, 1d."""
    whole = int(seconds)
    if whole != seconds:
        return f"{seconds:g}s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, whole = divmod(whole, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def schedules_table(schedules: Sequence[Schedule], now: float) -> Table:
    table = Table(box=box.SIMPLE_HEAVY)
    for column in ("id", "state", "recurs", "next", "last task", "posted", "skipped", "title"):
        right = column in ("id", "last task", "posted", "skipped")
        table.add_column(column, justify="right" if right else "left")
    for s in schedules:
        active = s.state.value == "active"
        table.add_row(
            *(
                Text(cell)
                for cell in (
                    str(s.id),
                    s.state.value,
                    recurrence_text(s),
                    render.ago(s.next_at, now) if active else "-",
                    str(s.last_task) if s.last_task is not None else "-",
                    str(s.posted),
                    str(s.skipped),
                    output.one_line(s.title),
                )
            )
        )
    return table


@click.group(short_help="Recurring tasks: list, pause, resume, cancel.")
def schedule() -> None:
    """Schedules of recurring tasks. Make one with `shoal add TITLE --every 30m` or
    `--cron "0 3 * * *" --tz Europe/Paris`; each tick posts the task again, unless the last
    one is still unfinished (no pile-up), and ticks nobody was there to see are not made up.
    Claims and the hub (`monitor`, `supervise`, `serve`) post them as they fall due.

    \b
    e.g. shoal schedule list
         shoal schedule pause 3
    """


@schedule.command("list", short_help="Every schedule, cancelled ones too.")
@json_option
@pass_app
def schedule_list(app: App) -> None:
    """Every schedule: how it recurs, its next tick, its latest occurrence, how many it
    posted and how many ticks it skipped (the last one was still unfinished).

    \b
    e.g. shoal schedule list --json
    """
    found = app.fleet(read_only=True).schedules()
    app.emit(
        [s.to_dict() for s in found],
        schedules_table(found, app.now()),
        empty="no schedules: make one with shoal add TITLE --every 30m",
    )


def _state_command(name: str, verb: str, says: str, help_text: str) -> click.Command:
    @click.command(name, short_help=help_text)
    @click.argument("schedule_id", type=int, metavar="SCHEDULE_ID")
    @json_option
    @pass_app
    def command(app: App, schedule_id: int) -> None:
        changed = getattr(app.fleet(), verb)(schedule_id)
        text = f"schedule {changed.id} {says}: {output.one_line(changed.title)}"
        app.emit(changed.to_dict(), text)

    command.help = f"{help_text}\n\n\b\ne.g. shoal schedule {name} 3"
    return command


schedule.add_command(
    _state_command("pause", "pause_schedule", "paused", "Post nothing until resumed.")
)
schedule.add_command(
    _state_command(
        "resume", "resume_schedule", "resumed", "Post again, from the next tick to come."
    )
)
schedule.add_command(
    _state_command("cancel", "cancel_schedule", "cancelled", "End it for good; posted tasks stay.")
)


def add_schedule_commands(group: click.Group) -> None:
    """Register ``schedule`` on the ``shoal`` group."""
    group.add_command(schedule)
