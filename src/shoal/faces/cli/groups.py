"""Concurrency groups: ``shoal group set NAME --max N``, ``list``, ``clear NAME``.

A task names its group when it is posted (``shoal add ... --group deploy``); a group's
limit says how many of its tasks may be held at once, fleet-wide, and every claim keeps it
(docs/ARCHITECTURE.md, "Concurrency groups"). Setting or lifting a limit acts on the
fleet, so it is a person's or a manager's (docs/SECURITY.md, "Who may do what").
"""

from __future__ import annotations

import click

from shoal.faces import render
from shoal.faces.cli.app import App, json_option, pass_app

__all__ = ["add_group_commands"]


@click.group()
def group() -> None:
    """Concurrency groups: at most N tasks of a group held at once, fleet-wide.

    e.g. `shoal add "deploy web" --group deploy`, then `shoal group set deploy --max 1`.
    """


@group.command("set")
@click.argument("name")
@click.option("--max", "most", required=True, metavar="N", help="At most N held at once (1+).")
@json_option
@pass_app
def group_set(app: App, name: str, most: str) -> None:
    """Let at most N tasks of group NAME be held at once; claims pass over the rest and
    take the next best.

    e.g. `shoal group set deploy --max 1`.
    """
    found = app.fleet().set_group(name, most)  # type: ignore[arg-type]  # checked there
    app.emit(found.to_dict(), f"group {found.name}: at most {found.max} held ({found.held} now)")


@group.command("clear")
@click.argument("name")
@json_option
@pass_app
def group_clear(app: App, name: str) -> None:
    """Lift group NAME's limit: its tasks are claimed like any others.

    e.g. `shoal group clear deploy`.
    """
    found = app.fleet().clear_group(name)
    app.emit(found.to_dict(), f"group {found.name}: no limit ({found.held} held now)")


@group.command("list")
@json_option
@pass_app
def group_list(app: App) -> None:
    """The groups with a limit or a task held: the limit and how many are held now.

    e.g. `shoal group list --json`.
    """
    found = app.fleet(read_only=True).groups()
    app.emit(
        [g.to_dict() for g in found],
        render.groups_table(found),
        empty="no groups: `shoal group set NAME --max N` makes one",
    )


def add_group_commands(cli: click.Group) -> None:
    """Register ``group`` on the ``shoal`` group."""
    cli.add_command(group)
