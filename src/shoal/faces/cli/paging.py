"""Lists that never drop rows silently: ``shoal list``, ``shoal events`` and ``shoal agents``.

Each shows a page (``--limit N``, or its default) or every row (``--all``). When rows are
left out, one line on stderr says how many and the command that shows the next page: on a
terminal it lands under the table, in a pipe it stays out of the data. ``--json`` keeps its
shape (a bare array); a page goes on from the last row shown, by the name the Python API
and the HTTP API already give that cursor in each list's own order:

- ``shoal list`` is newest first: ``--before ID``, the tasks older than task ID
  (``Fleet.tasks(before=)``, ``GET /tasks?before=``; MCP's ``list_tasks`` cursor is the same
  id);
- ``shoal events`` is the log: ``--since ID --limit N`` reads it forward from an event id
  (``Fleet.events(since)``, ``GET /events?since=``); the default, ``--tail N``, is its end;
- ``shoal agents`` is by id: ``--after ID``.

How many more: counted by reading at most ``AHEAD`` rows past the page, and only when the
page came back full -- one bounded listing (no payloads) where there may be more, none
where there cannot be; from ``AHEAD`` on the line says "at least".
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from shoal.errors import BadInput
from shoal.faces import output
from shoal.faces.cli.context import App, echo

if TYPE_CHECKING:  # rich loads only when a table is drawn; click when an option is made
    import click
    from rich.table import Table

__all__ = [
    "AHEAD",
    "CHUNK",
    "all_option",
    "emit_rows",
    "id_option",
    "limit_option",
    "more_line",
    "no_header_option",
    "page_of",
    "page_size",
]

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")
C = TypeVar("C")

#: Rows read past a full page to count what was left out: 200 listed tasks cost a few ms
#: on SQLite (1000 cost 60-80 ms, measured on a 20,000-task fleet: too much for a `list`).
AHEAD = 200
#: Rows read at a time for ``--all`` (the HTTP API gives at most 10,000 a call).
CHUNK = 1000


def limit_option(default: int, *names: str) -> Callable[[F], F]:
    """``--limit N`` (and ``names``, e.g. ``-n``): the page size; None when not given, so
    that ``--all`` can refuse it."""
    import click

    return click.option(
        "--limit",
        *names,
        "limit",
        type=click.IntRange(min=1),
        help=f"Show at most this many (default {default}); a line on stderr says how many "
        "more there are and how to see them.",
    )


def id_option(name: str, help: str) -> Callable[[F], F]:
    """``--before ID`` / ``--since ID``: a task or event id (a whole number, 1 or more for
    ``--before``, 0 or more for ``--since``), refused in words otherwise."""
    import click

    low = 1 if name == "--before" else 0

    def check(_ctx: click.Context, _param: click.Parameter, value: int | None) -> int | None:
        if value is not None and value < low:
            raise click.BadParameter(f"{value} is not an id: ids are whole numbers from {low}")
        return value

    return click.option(name, type=int, metavar="ID", callback=check, help=help)


def all_option(fn: F) -> F:
    """``--all``: every row, no page."""
    import click

    return click.option("--all", "show_all", is_flag=True, help="Show every one.")(fn)


def no_header_option(fn: F) -> F:
    """``--no-header``: rows only (for ``cut``, ``awk``, ``wc -l``)."""
    import click

    return click.option(
        "--no-header", is_flag=True, help="Leave out the header line (tsv) or row (table)."
    )(fn)


def page_size(limit: int | None, show_all: bool, default: int, other: str = "") -> int | None:
    """The rows to show: ``limit``, else ``default``; None with ``--all`` (refused beside a
    ``--limit``, or ``other`` -- another option that chooses rows -- when given)."""
    if show_all and (limit is not None or other):
        both = f"--all and {other or '--limit'}"
        raise BadInput(f"{both} both choose how many rows to show", hint="give one of them")
    if show_all:
        return None
    return default if limit is None else limit


def more_line(command: Sequence[str], count: int, noun: str, where: str, then: str) -> str:
    """The line that says rows were left out: how many (``AHEAD`` or more: "at least") and
    the command that shows them (``command``, quoted for the shell: ``then`` says what it
    shows)."""
    many = f"at least {count}" if count >= AHEAD else str(count)
    shown = " ".join(shlex.quote(part) for part in command)
    return f"shoal {command[1]}: {many} more {noun} {where}: `{shown}` {then}, --all every one"


def page_of(
    fetch: Callable[[int, C | None], list[R]],
    size: int | None,
    start: C | None,
    key: Callable[[R], C],
) -> tuple[list[R], int]:
    """A page of a list read by ``fetch(limit, cursor)`` (the rows after ``cursor`` in the
    list's order; None: from the top): ``size`` rows from ``start`` (None: every row, read
    ``CHUNK`` at a time), and how many more there are (up to ``AHEAD``, counted only when
    the page came back full). ``key``: a row's cursor (its id)."""
    if size is None:
        rows: list[R] = []
        while True:
            chunk = fetch(CHUNK, start)
            rows += chunk
            if len(chunk) < CHUNK:
                return rows, 0
            start = key(chunk[-1])
    rows = fetch(size, start)
    more = len(fetch(AHEAD, key(rows[-1]))) if rows and len(rows) == size else 0
    return rows, more


def emit_rows(
    app: App,
    data: list[dict[str, Any]],
    table: Callable[[], Table],
    *,
    empty: str,
    no_header: bool,
    note: str | None = None,
    rows: Callable[[], tuple[Sequence[str], Iterable[Sequence[str]]]] | None = None,
) -> None:
    """Print a list (``App.emit``), without its header with ``no_header``, then ``note``
    (rows left out) on stderr. ``table`` makes the view, called only for people: JSON
    never loads rich. ``rows`` (the header and the rows as plain text, what ``table``
    shows) prints a pipe's tab-separated lines without rich at all."""
    shape = app.output_format()
    if rows is not None and shape == "tsv":
        header, lines = rows()
        if not no_header:
            echo(output.tsv_line(header))
        for line in lines:
            echo(output.tsv_line(line))
    elif no_header and shape == "tsv":
        drawn = table()
        lines = output.plain_lines(drawn)
        if any(output.clean(str(c.header)) for c in drawn.columns):
            next(lines, None)
        for line in lines:
            echo(line)
    else:

        def headed() -> Table:
            drawn = table()
            drawn.show_header = drawn.show_header and not no_header
            return drawn

        app.emit(data, headed, empty=empty)
    if note is not None:
        echo(note, err=True)
