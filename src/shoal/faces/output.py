"""How a command's result reaches whoever ran it: one layer for every command.

On a terminal a result is a rich table or panel, and JSON is indented for reading. Piped,
or with ``--format tsv``, it is plain: one line per row, columns separated by tabs, no
rules, no wrapping, no colour -- what ``cut``, ``awk`` and ``grep`` expect -- and JSON is one
compact document. ``--format env`` prints ``export NAME=value`` lines for ``eval`` where a command
yields ids (a claim's task and token). Colour also stays off under ``NO_COLOR`` (rich reads
it).

Text from agents (titles, errors) reaches people through here too, so cells are taken as
plain text, never as markup, and control characters are shown escaped (``shoal.text.safe``):
``\\x1b`` on the screen, never an escape sequence the terminal would obey.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TextIO

from shoal.text import safe

if TYPE_CHECKING:
    from rich.table import Table

__all__ = [
    "FORMATS",
    "clean",
    "env_lines",
    "is_terminal",
    "json_text",
    "one_line",
    "plain_lines",
    "tsv_line",
]

#: The values of ``--format``.
FORMATS = ("table", "tsv", "json", "env")


def json_text(data: Any, pretty: bool) -> str:
    """``data`` as JSON: indented for a terminal, one compact line for a pipe."""
    if pretty:
        return json.dumps(data, indent=2, default=str)
    return json.dumps(data, separators=(",", ":"), default=str)


def env_lines(values: Mapping[str, object]) -> str:
    """``export NAME=value`` lines, each value quoted for the shell: after
    ``eval "$(shoal claim --format env)"`` the next shoal command sees them."""
    return "\n".join(f"export {name}={shlex.quote(str(value))}" for name, value in values.items())


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal, decided as rich's Console decides it
    (TTY_COMPATIBLE, then FORCE_COLOR, then isatty), without importing rich: a command
    whose output is plain text never needs it."""
    compatible = os.environ.get("TTY_COMPATIBLE", "")
    if compatible in ("0", "1"):
        return compatible == "1"
    force_color = os.environ.get("FORCE_COLOR")
    if force_color is not None:
        return force_color != ""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def plain_lines(renderable: Any, nested: bool = False) -> Iterator[str]:
    """A rich renderable as plain lines: a table as a header and one tab-separated line per
    row (a table that is the whole result has nothing else, so ``cut`` and ``awk`` see only
    rows; one inside a panel or group keeps its title, which says what it is); a panel as
    its title and content; text as its lines."""
    if isinstance(renderable, str):
        yield from (_clean(line) for line in renderable.splitlines() if line.strip())
        return
    from rich.console import Console, Group
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    if isinstance(renderable, Table):
        if nested and renderable.title:
            yield _cell(renderable.title)
        yield from _table_lines(renderable)
    elif isinstance(renderable, Group):
        for part in renderable.renderables:
            yield from plain_lines(part, nested=True)
    elif isinstance(renderable, Panel):
        if renderable.title:
            yield _cell(renderable.title)
        yield from plain_lines(renderable.renderable, nested=True)
    elif isinstance(renderable, Text):
        for line in renderable.plain.splitlines():
            if line.strip():
                yield _clean(line)
    else:  # anything else: as rich draws it, without colour or wrapping
        console = Console(color_system=None, width=10_000, soft_wrap=True)
        with console.capture() as captured:
            console.print(renderable)
        yield from (line for line in captured.get().splitlines() if line.strip())


def _table_lines(table: Table) -> Iterator[str]:
    columns = table.columns
    if any(_cell(c.header) for c in columns):  # a grid (name, value) has no header
        yield "\t".join(_cell(c.header) for c in columns)
    cells = [list(c.cells) for c in columns]
    for row in range(table.row_count):
        yield "\t".join(_cell(column[row]) if row < len(column) else "" for column in cells)


def tsv_line(cells: Iterable[str]) -> str:
    """Plain cells as one tab-separated line, each cell as ``plain_lines`` writes a table's:
    made one line (``one_line``), tabs and line breaks as spaces, trimmed."""
    return "\t".join(_cell(one_line(c)) for c in cells)


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else getattr(value, "plain", str(value))
    return _clean(text).replace("\t", " ").replace("\n", " ").strip()


def _clean(text: str) -> str:
    return safe(text)


def clean(text: str) -> str:
    """Text from agents, safe to show: control characters (escape sequences, bells) and
    direction controls written out as ``\\x1b`` / ``\\u202e``, line breaks kept."""
    return safe(text)


def one_line(text: str) -> str:
    """Text from agents for a one-line message: safe (``clean``), tabs and line breaks as
    spaces."""
    return " ".join(clean(text.replace("\t", " ")).splitlines())
