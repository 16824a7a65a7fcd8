"""A process that opens a SQLite fleet twice -- a second handle, opened and closed while the
first stays open -- keeps seeing what other processes write. (Closing any descriptor of a
file drops every POSIX lock the process holds on it, SQLite's included; if opening a second
handle did that, another process could take the database for unused, remove its WAL, and
leave the first handle reading a stale snapshot.)"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from shoal import Fleet
from tests.workers import SHOAL


def shoal(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    return subprocess.run(
        [*SHOAL, "--store", url, *args],
        capture_output=True,
        text=True,
        env=clean,
        timeout=60,
        check=False,
    )


def test_a_second_handle_in_one_process_does_not_hide_other_processes_writes(
    tmp_path: Path,
) -> None:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    Fleet.init(url).close()
    first = Fleet.open(url)
    first.post("one")
    with Fleet.open(url) as second:  # opened and closed while the first stays open
        second.post("two")
        assert second._store._d._wal_backlog() > 0  # it reads the wal-index (checkpoints)
    assert sorted(t.title for t in first.tasks()) == ["one", "two"]
    for _ in range(2):  # other processes come and go
        assert shoal(url, "status").returncode == 0
    added = shoal(url, "add", "three")
    assert added.returncode == 0, added.stderr
    assert sorted(t.title for t in first.tasks()) == ["one", "three", "two"]
    first.post("four")  # and its own writes reach the others
    listed = shoal(url, "list", "--json")
    assert listed.returncode == 0 and "four" in listed.stdout
    first.close()
