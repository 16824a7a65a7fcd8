"""Named SQL: each dialect keeps all its runtime SQL in one file of named, commented blocks.

A block starts with ``-- name: <name>`` and a comment saying what it does and why; a
``-- fragment: <name>`` block is text that other blocks (and later fragments) include as
``{name}`` (the task column list, for instance). A ``-- locking: <name>`` block is a
fragment too -- a row-locking clause such as ``FOR UPDATE SKIP LOCKED`` -- that only
read-write transactions get: ``load_queries(dialect)`` fills it in, and
``load_queries(dialect, read_only=True)`` leaves it out, for transactions that may not (and
need not) lock rows. Both sets are made once, when the file is loaded; no SQL text is
rewritten while the store runs.

Both dialects define the same names with the same parameters, and a test checks that every
name is used by the store, so the files never carry dead SQL. Lists are bound as one
parameter each (a JSON array on SQLite, an array on PostgreSQL), so no query text is ever
built at run time.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

__all__ = ["load_migrations", "load_queries", "migration_count"]

#: The SQL files, beside this module (read as plain files: importlib.resources would cost
#: every CLI call its own import, and shoal is never run from a zip).
_SQL = Path(__file__).with_name("sql")
_MIGRATION = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")

_HEADER = re.compile(r"^-- (name|fragment|locking): ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def load_queries(dialect: str, *, read_only: bool = False) -> dict[str, str]:
    """The named blocks of ``sql/<dialect>/queries.sql``, fragments filled in; with
    ``read_only``, the locking fragments left out."""
    text = (_SQL / dialect / "queries.sql").read_text("utf-8")
    headers = list(_HEADER.finditer(text))
    fragments: dict[str, str] = {}
    queries: dict[str, str] = {}
    for i, header in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        body = _strip_comments(text[header.end() : end])
        kind, name = header.group(1), header.group(2)
        if name in fragments or name in queries:
            raise ValueError(f"{dialect}/queries.sql defines {name!r} twice")
        if kind == "locking":
            fragments[name] = "" if read_only else body
        elif kind == "fragment":  # a fragment may include the fragments above it
            fragments[name] = body.format(**fragments)
        else:
            queries[name] = body
    return {name: sql.format(**fragments) for name, sql in queries.items()}


def migration_count(dialect: str) -> int:
    """The schema version this shoal works with: how many migrations ``dialect`` has. Read
    from the file names alone: every open checks it, and a fleet already at this version
    (nearly always) never reads a migration's SQL."""
    return sum(1 for entry in (_SQL / dialect / "migrations").iterdir()
               if _MIGRATION.match(entry.name))  # fmt: skip


@functools.cache
def load_migrations(dialect: str) -> list[tuple[int, str, str]]:
    """(version, file name, SQL) of every ``sql/<dialect>/migrations/NNNN_*.sql``, in order."""
    found = []
    for entry in (_SQL / dialect / "migrations").iterdir():
        match = _MIGRATION.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text("utf-8")))
    found.sort()
    for expected, (version, name, _) in enumerate(found, start=1):
        if version != expected:
            raise ValueError(f"{dialect} migrations skip from {expected - 1} to {name}")
    return found


def _strip_comments(block: str) -> str:
    lines = [ln for ln in block.splitlines() if not ln.lstrip().startswith("--")]
    return "\n".join(lines).strip().rstrip(";").strip()
