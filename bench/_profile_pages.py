"""The pages each commit of a worker cycle writes, by the b-tree they belong to
(``profile_claims.py --pages``).

A commit in WAL mode appends one frame per page the transaction changed, so its cost
(COMMIT's time, the checkpoint's later) follows the number of pages; and each page a
statement changes is a b-tree edit inside SQLite before that. This runs batch-1 and
batch-10 cycles on a fresh fleet, empties the WAL (a checkpoint that truncates it), runs
``_CYCLES`` more, then reads the WAL's frame headers (page number; a commit frame carries
the database's size) and names each page with SQLite's ``dbstat`` table: the table or
index whose b-tree holds it (``sqlite_schema`` is page 1, the file header, written when the
file grows).
"""

from __future__ import annotations

import collections
import shutil
import sqlite3
import struct
import tempfile
from pathlib import Path

from _profile_instructions import filled, next_cycle
from shoal import Fleet
from shoal.model import Claim

__all__ = ["pages"]

_WARM_UP = 200
_CYCLES = 50
_WAL_HEADER = 32
_FRAME_HEADER = 24


def pages(durability: str) -> None:
    """Print the pages a commit writes at batch 1 and 10, by b-tree, per commit."""
    for batch in (1, 10):
        folder = Path(tempfile.mkdtemp(prefix="shoal-pages-"))
        try:
            commits, names = _commits(folder / "fleet.db", batch, durability)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        by_tree: collections.Counter[str] = collections.Counter()
        for frames in commits:
            by_tree.update(names.get(page, f"page {page}") for page in frames)
        total = sum(by_tree.values())
        print(f"\n=== pages written per commit, batch {batch}: {total / len(commits):.2f} ===")
        for name, count in by_tree.most_common():
            print(f"    {count / len(commits):5.2f}  {name}")


def _commits(db: Path, batch: int, durability: str) -> tuple[list[list[int]], dict[int, str]]:
    fleet = Fleet.open(f"sqlite://{db}?synchronous={durability}")
    try:
        claim: Claim | None = filled(fleet, batch * (_WARM_UP + _CYCLES + 2), batch)
        for n in range(_WARM_UP + _CYCLES):
            if n == _WARM_UP:
                with sqlite3.connect(db) as side:
                    side.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            claim = next_cycle(fleet, claim, batch)
        wal = Path(f"{db}-wal").read_bytes()
        with sqlite3.connect(db) as side:
            names = dict(side.execute("SELECT pageno, name FROM dbstat"))
    finally:
        fleet.close()
    page_size = struct.unpack(">I", wal[8:12])[0]
    commits: list[list[int]] = []
    frames: list[int] = []
    for offset in range(_WAL_HEADER, len(wal) - _FRAME_HEADER + 1, _FRAME_HEADER + page_size):
        page, size_after_commit = struct.unpack(">II", wal[offset : offset + 8])
        frames.append(page)
        if size_after_commit:
            commits.append(frames)
            frames = []
    return commits, names
