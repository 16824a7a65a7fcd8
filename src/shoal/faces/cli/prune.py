"""``shoal prune``: delete old history -- finished tasks with their events, and old events
of no task -- by hand, or to see what the monitor's ``history_retention`` would delete."""

from __future__ import annotations

import click

from shoal.errors import BadInput
from shoal.faces.cli.app import App, json_option, pass_app
from shoal.limits import PRUNE_BATCH
from shoal.model import PruneReport
from shoal.times import iso_time

__all__ = ["add_prune_commands"]


@click.command(short_help="Delete old history: finished tasks and their events.")
@click.option(
    "--older-than",
    metavar="DURATION",
    help="Delete what finished longer ago than this: 30d, 12h, 90m. "
    "Default: the fleet's history_retention.",
)
@click.option("--dry-run", is_flag=True, help="Count what would go; delete nothing.")
@click.option(
    "--batch",
    type=int,
    default=PRUNE_BATCH,
    show_default=True,
    help="Tasks per transaction (claims go on between them).",
)
@click.option(
    "--squash",
    is_flag=True,
    help="Git store: then make the branch's history one commit, so finished work "
    "stops taking room in the repository.",
)
@json_option
@pass_app
def prune(app: App, older_than: str | None, dry_run: bool, batch: int, squash: bool) -> None:
    """Delete tasks that finished (done, dead, cancelled) longer ago than --older-than, with
    their events, and older events of no task, e.g. `shoal prune --older-than 30d
    --dry-run`. Live work is never touched, nor a dead or cancelled task that a live one
    waits on. Set `shoal config set history_retention 30d` and `shoal monitor` prunes on
    every pass. On a git store, --squash then replaces the branch's history by one commit
    (every clone follows; the remote frees the room at its next `git gc`)."""
    fleet = app.fleet()
    if older_than is None and not squash and not fleet.settings().history_retention:
        raise BadInput(
            "nothing to prune by: give --older-than, or set the fleet's history_retention",
            hint="e.g. `shoal prune --older-than 30d`, or `shoal config set "
            "history_retention 30d` for the monitor to prune on every pass",
        )
    report = fleet.prune(older_than, batch=batch, dry_run=dry_run, squash=squash)
    app.emit(report.to_dict(), _words(report))


def _words(report: PruneReport) -> str:
    verb = "would delete" if report.dry_run else "deleted"
    said = f"{verb} {report.tasks:,} tasks and {report.events:,} events"
    if report.cutoff is not None:
        said += f" (what finished before {iso_time(report.cutoff)})"
    if report.squashed:
        said += f"; the branch's history is now one commit, {report.squashed[:12]}"
    return said


def add_prune_commands(group: click.Group) -> None:
    """Register ``prune`` on the ``shoal`` group."""
    group.add_command(prune)
