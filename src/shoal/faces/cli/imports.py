"""``shoal import beads|github|jsonl FILE``: tasks from the tools people already keep them in.

The reading and mapping live in ``shoal.faces.importing`` (pure, so a bad line is refused
before anything is written); this module reads the file (or stdin for ``-``), posts and
says what happened. ``root.py`` registers the group with ``add_import_commands``;
``shoal add --file FILE`` (tasks.py) runs through ``add_from_file``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from shoal.errors import BadInput
from shoal.faces import following, importing
from shoal.faces.cli.app import App, json_option

__all__ = ["add_from_file", "add_import_commands", "read_source"]


def read_source(file: str) -> str:
    """The text of ``file``, or of stdin for ``-``; a file that cannot be read is bad input."""
    if file == "-":
        try:
            return sys.stdin.buffer.read().decode("utf-8-sig")
        except UnicodeDecodeError:
            raise BadInput("stdin is not UTF-8 text", hint="export it as UTF-8 JSON") from None
    try:
        return Path(file).read_text("utf-8-sig")
    except OSError as exc:
        raise BadInput(
            f"cannot read {file!r}: {exc.strerror or exc}",
            hint="give a readable file, or - for stdin",
        ) from None
    except UnicodeDecodeError:
        raise BadInput(f"{file!r} is not UTF-8 text", hint="export it as UTF-8 JSON") from None


def _report(app: App, report: following.ImportReport) -> None:
    app.emit(report.to_dict(), report.message())


def _post(app: App, batch: importing.Batch) -> None:
    _report(app, following.post_entries(app.fleet(), batch))


def add_from_file(app: App, file: str) -> None:
    """``shoal add --file FILE|-``: post shoal JSON Lines from ``file`` and report."""
    _post(app, importing.parse_jsonl(read_source(file)))


_FILE = click.argument("file", metavar="FILE", type=click.Path(dir_okay=False, allow_dash=True))


@click.group("import", short_help="Add tasks from beads, GitHub issues or JSON Lines.")
def import_group() -> None:
    """Add tasks from a file that another tool exported (FILE may be - for stdin).

    Each imported task has an idempotency key (beads:ID, github:NUMBER, or the line's own),
    so importing the same file again adds nothing and says so. Importing a beads or GitHub
    export again follows it: changed issues update their tasks, closed ones close them
    (the summary says added, updated, closed, already there, skipped). A bad line is
    refused with its line number, and then nothing of the file is added (exit 2).

    \b
    shoal import beads .beads/issues.jsonl
    gh issue list --state all --json number,title,body,labels,state | shoal import github -
    shoal import jsonl tasks.jsonl --json
    """


@import_group.command(short_help="Import a beads export (bd export, .beads/issues.jsonl).")
@_FILE
@json_option
@click.pass_obj
def beads(app: App, file: str) -> None:
    """Import the JSON Lines that beads exports (`bd export -o FILE`, .beads/issues.jsonl).

    \b
    Key:          beads:ID
    Priority:     beads 0 -> 1, 1 -> 2, 2 -> 5, 3 -> 7, 4 -> 9
    Labels:       each a label of the task; domain:X -> domain X (one), skill:Y -> skill Y
    Body:         description (+ design, acceptance criteria, notes)
    Dependencies: "blocks" -> the task waits for that issue; "parent-child" -> the
                  parent (an epic) waits for its children: not claimable until they are
                  done (related and discovered-from are left out)
    Assignee:     its queue, if that agent is here, present and able (else the pool)
    Blocked:      waits for its blockers; blocked on none in the file: held back
    Closed:       not imported (a dependency on one is met); a task an earlier import
                  added is cancelled with a note, and what waits on it goes on
    Again:        changed issues update their unfinished tasks (a held task keeps its
                  skills and domain)

    Example: shoal import beads .beads/issues.jsonl
    """
    _post(app, importing.parse_beads(read_source(file)))


@import_group.command(short_help="Import `gh issue list --json number,title,body,labels,state`.")
@_FILE
@json_option
@click.pass_obj
def github(app: App, file: str) -> None:
    """Import the JSON array of `gh issue list --state all --json number,title,body,labels,state`.

    \b
    Key:       github:NUMBER
    Priority:  label priority:critical|high|medium|low -> 1, 2, 5, 8,
               or P0, P1, P2, P3 -> 1, 2, 5, 8; the most urgent wins; none -> 5
    Labels:    each a label of the task; domain:X -> domain X (one), skill:Y -> skill Y
    Closed:    not imported; a task an earlier import added is cancelled with a note
    Again:     changed issues update their unfinished tasks

    Example: gh issue list --state all --json number,title,body,labels,state \\
               | shoal import github -
    """
    _post(app, importing.parse_github(read_source(file)))


@import_group.command(short_help="Import shoal's own JSON Lines (one task per line).")
@_FILE
@json_option
@click.pass_obj
def jsonl(app: App, file: str) -> None:
    """Import shoal JSON Lines: one task per line, the same as `shoal add --file FILE`.

    Fields: title (required), priority, domain, skills, key, depends_on (keys of tasks in
    the file or already in the fleet), expected_duration, not_before, body, payload,
    lease_ttl, max_attempts, retry_delay, labels. A line without a key gets one from its content.

    Example: echo '{"title": "fix the parser", "skills": ["python"]}' | shoal import jsonl -
    """
    add_from_file(app, file)


def add_import_commands(group: click.Group) -> None:
    """Register ``shoal import`` (beads, github, jsonl) on the ``shoal`` group."""
    group.add_command(import_group)
