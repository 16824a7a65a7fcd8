"""``shoal edit ID``: fix a task after posting it -- what it says, how it ranks, its labels.

beads users change issues all day; a fleet's tasks are no different: a title with a typo,
a missing skill, a label to find it by. ``Fleet.edit`` does the work and refuses what
cannot be (a finished task; a held task's skills or domain, which chose its holder). Only
the options given change; ``--no-domain``, ``--no-labels``, ``--no-skills`` and
``--no-expected-duration`` clear a field.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from shoal.errors import BadInput
from shoal.faces import output
from shoal.faces.cli.app import App, json_option
from shoal.task_checks import EDIT_FIELDS

__all__ = ["add_edit_commands", "edit"]


@click.command(short_help="Change a task that has not finished.")
@click.argument("task_id", type=int)
@click.option("--title", "-t", help="A new title.")
@click.option("--body", "-b", help="A new body; '-' reads stdin.")
@click.option("--priority", "-p", help="1 (most urgent) to 9, or critical/high/medium/low.")
@click.option("--skill", "-s", "skills", multiple=True, help="Its skills, all of them (repeat).")
@click.option("--no-skills", is_flag=True, help="It needs no skill.")
@click.option("--domain", "-d", help="Its domain.")
@click.option("--no-domain", is_flag=True, help="It belongs to no domain.")
@click.option("--label", "-l", "labels", multiple=True, help="Its labels, all of them (repeat).")
@click.option("--no-labels", is_flag=True, help="Remove every label.")
@click.option("--expected-duration", metavar="DURATION", help="e.g. 10m; for stall detection.")
@click.option("--no-expected-duration", is_flag=True, help="Forget the expected duration.")
@json_option
@click.pass_obj
def edit(
    app: App,
    task_id: int,
    title: str | None,
    body: str | None,
    priority: str | None,
    skills: tuple[str, ...],
    no_skills: bool,
    domain: str | None,
    no_domain: bool,
    labels: tuple[str, ...],
    no_labels: bool,
    expected_duration: str | None,
    no_expected_duration: bool,
) -> None:
    """Change a task that has not finished: its title, body, priority, skills, domain,
    labels or expected duration. Only what you give changes; one `edited` event says what
    did. A claimed task keeps its skills and domain (they chose its holder): edit those
    once it is released or back in the pool.

    \b
    e.g. shoal edit 12 --title "fix the parser's error message" -p high
         shoal edit 12 --label backend --label needs-review
         shoal edit 12 --no-domain --skill python --skill sql
    """
    changes: dict[str, Any] = {}
    pairs = (
        ("skills", skills, no_skills, "--skill", ()),
        ("domain", domain, no_domain, "--domain", None),
        ("labels", labels, no_labels, "--label", ()),
        ("expected_duration", expected_duration, no_expected_duration, "--expected-duration", None),
    )
    for name, value, clear, option, empty in pairs:
        if value and clear:
            raise BadInput(
                f"give {option} or --no-{option[2:]}, not both", hint="one says what, one clears"
            )
        if clear:
            changes[name] = empty
        elif value:
            changes[name] = value
    for name, text in (("title", title), ("priority", priority)):
        if text is not None:
            changes[name] = text
    if body is not None:
        changes["body"] = sys.stdin.read() if body == "-" else body
    if not changes:
        raise BadInput(
            "nothing to change",
            hint="give --title, --body, --priority, --skill, --domain, --label or "
            "--expected-duration (see `shoal edit --help`)",
        )
    fleet = app.fleet()
    before = fleet.get(task_id)
    task = fleet.edit(task_id, **changes)
    changed = [n for n in EDIT_FIELDS if n in changes and getattr(before, n) != getattr(task, n)]
    said = f"task {task.id} edited: {', '.join(changed)}" if changed else "nothing changed"
    app.emit({**task.to_dict(), "changed": changed}, f"{said} ({output.one_line(task.title)})")


def add_edit_commands(group: click.Group) -> None:
    """Register ``edit`` on the ``shoal`` group."""
    group.add_command(edit)
