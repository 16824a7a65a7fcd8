"""docs/SECURITY.md's table "Who may do what", read as data, and what the walker shares.

The table is the spec: rows are powers, columns a role on its faces, and each cell ✓
(allowed), ✗ with the refusal's code (and HTTP status), or n.a. The walker
(test_who_may_do_what.py) tries each cell through the real faces the column names, so the
table and the code cannot drift apart unnoticed: a row or a column the walker does not
know, a cell it cannot read, or a header that changed fails with a message naming it.

A ``Try`` is one attempt at a power: ``setup`` prepares the fleet (a task to cancel, a
lease held by another agent) and returns the act, whose ``Outcome`` the walker judges
against the cell -- after snapshotting the fleet around a refused one, to prove it changed
nothing.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from shoal import Fleet

DOC = Path(__file__).resolve().parents[2] / "docs" / "SECURITY.md"
SECTION = "## Who may do what"

#: The table's columns as the doc heads them (``<br>`` read as " / "), by the walker's key.
COLUMNS = {
    "viewer": "viewer / API · dashboard",
    "agent": "agent token / API",
    "worker": "worker / MCP stdio · HTTP",
    "manager": "manager / MCP stdio · HTTP",
    "admin-api": "admin / API",
    "admin-dashboard": "admin / dashboard",
    "owner": "owner / CLI · git board",
    "anyone": "anyone else / API · dashboard · MCP HTTP",
}

_FOOTNOTES = str.maketrans("", "", "¹²³⁴⁵⁶⁷⁸⁹⁰")
_REFUSAL = re.compile(r"(?:(\d{3})\s+)?`([a-z_]+)`")
_ROW_KEY = re.compile(r"\*\*(.+?)\*\*")


class Verdict(Enum):
    ALLOWED = "✓"
    REFUSED = "✗"
    NA = "n.a."


@dataclass(frozen=True)
class Cell:
    """One cell: what ``column`` may do of ``row``, and the refusals it names."""

    row: str
    column: str
    text: str
    verdict: Verdict
    refusals: tuple[tuple[int | None, str], ...] = ()  # (HTTP status or None, code)

    @property
    def codes(self) -> set[str]:
        return {code for _, code in self.refusals}

    def __str__(self) -> str:
        return f"[{self.row} / {COLUMNS[self.column]}: {self.text!r}]"


class TableError(AssertionError):
    """The doc's table is not one the walker can read."""


def _cells(line: str) -> list[str]:
    return [part.strip() for part in line.strip().strip("|").split("|")]


def _header(text: str) -> str:
    return " ".join(text.replace("<br>", " / ").split())


def read_cell(row: str, column: str, text: str) -> Cell:
    """``text`` as a cell, or ``TableError`` saying what a cell may say."""
    plain = text.translate(_FOOTNOTES).strip()
    if plain == "✓":
        return Cell(row, column, text, Verdict.ALLOWED)
    if plain == "n.a.":
        return Cell(row, column, text, Verdict.NA)
    if plain.startswith("✗"):
        found = tuple((int(s) if s else None, code) for s, code in _REFUSAL.findall(plain))
        if found:
            return Cell(row, column, text, Verdict.REFUSED, found)
    raise TableError(
        f"{SECTION!r} in {DOC.name}: the cell of row {row!r}, column {COLUMNS[column]!r} "
        f"reads {text!r}; a cell is ✓, n.a., or ✗ and its codes in backticks, each "
        "after its HTTP status if it has one (✗ 403 `forbidden`)"
    )


def read_table(doc: str) -> dict[tuple[str, str], Cell]:
    """Every cell of the section's table, by (row, column key)."""
    start = doc.find(f"\n{SECTION}\n")
    if start < 0:
        raise TableError(f"{DOC.name} has no section {SECTION!r}")
    lines = doc[start:].splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("|")), None)
    if first is None:
        raise TableError(f"{SECTION!r} in {DOC.name} holds no table")
    table = []
    for line in lines[first:]:
        if not line.startswith("|"):
            break
        table.append(line)
    headers = [_header(h) for h in _cells(table[0])[1:]]
    if headers != list(COLUMNS.values()):
        raise TableError(
            f"{SECTION!r} in {DOC.name}: the columns are {headers}, the walker knows "
            f"{list(COLUMNS.values())}; change both together"
        )
    if not set(table[1].replace("|", "").strip()) <= set("-: "):
        raise TableError(f"{SECTION!r}: the line under the header is not |---|: {table[1]!r}")
    cells: dict[tuple[str, str], Cell] = {}
    for line in table[2:]:
        parts = _cells(line)
        if len(parts) != len(COLUMNS) + 1:
            raise TableError(
                f"{SECTION!r}: a row has {len(parts)} cells, not {len(COLUMNS) + 1}: {line!r}"
            )
        key = _ROW_KEY.search(parts[0])
        if key is None:
            raise TableError(f"{SECTION!r}: a row's power is not in **bold**: {parts[0]!r}")
        row = key.group(1)
        if any(r == row for r, _ in cells):
            raise TableError(f"{SECTION!r}: two rows are named {row!r}")
        for column, text in zip(COLUMNS, parts[1:], strict=True):
            cells[(row, column)] = read_cell(row, column, text)
    return cells


def the_table() -> dict[tuple[str, str], Cell]:
    return read_table(DOC.read_text(encoding="utf-8"))


# ---------------------------------------------------------------------- attempts


@dataclass(frozen=True)
class Outcome:
    """What came of one attempt: allowed, or refused with a code (and HTTP status, or the
    CLI's exit code), and the words a refusal gave."""

    ok: bool
    code: str | None = None
    status: int | None = None
    exit: int | None = None
    message: str = ""


Act = Callable[[], Outcome | Awaitable[Outcome]]


@dataclass(frozen=True)
class Try:
    """One attempt: ``setup`` readies the fleet and returns the act."""

    what: str
    setup: Callable[[], Act]


def now(what: str, act: Act) -> Try:
    """A try that needs nothing readied."""
    return Try(what, lambda: act)


def snapshot(fleet: Fleet) -> dict[str, Any]:
    """What a refusal must leave as it was: tasks, agents, the event log's length (every
    change writes an event), settings and access tokens."""
    return {
        "tasks": [t.to_dict() for t in fleet.tasks(limit=100_000)],
        "agents": [a.to_dict() for a in fleet.agents()],
        "events": fleet.events(newest=True, limit=1)[-1].id,
        "settings": fleet.settings().to_dict(),
        "tokens": [c.to_dict() for c in fleet.tokens()],
        "groups": [g.to_dict() for g in fleet.groups()],
    }


@dataclass
class Verdicts:
    """What the walk found: every way a cell was not kept, to report all at once."""

    problems: list[str] = field(default_factory=list)
    tried: int = 0

    def judge(self, cell: Cell, face: str, attempt: Try, got: Outcome, changed: bool) -> None:
        self.tried += 1
        where = f"{cell} via {face}: {attempt.what}"
        if cell.verdict is Verdict.ALLOWED:
            if not got.ok:
                self.problems.append(f"{where} was refused ({got.code}: {got.message})")
            return
        if got.ok:
            self.problems.append(f"{where} was ALLOWED; the table refuses it")
        elif got.code not in cell.codes:
            self.problems.append(f"{where} was refused with {got.code}, not {cell.codes}")
        elif got.status is not None and (got.status, got.code) not in cell.refusals:
            self.problems.append(f"{where} answered {got.status} {got.code}")
        elif got.exit is not None and got.exit != (3 if got.code == "lease_lost" else 2):
            self.problems.append(f"{where} exited {got.exit}")
        elif not got.message.strip():
            self.problems.append(f"{where} said nothing of why")
        if changed:
            self.problems.append(f"{where} changed the fleet")

    def check(self, tried_at_least: int) -> None:
        assert not self.problems, "the table and the code differ:\n" + "\n".join(self.problems)
        assert self.tried >= tried_at_least, f"only {self.tried} attempts were made"


def cells_of(table: dict[tuple[str, str], Cell], columns: Iterable[str]) -> list[Cell]:
    return [cell for (_, column), cell in table.items() if column in columns]
