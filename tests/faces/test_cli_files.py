# ruff: noqa: F811 -- the tests take the CLI fixtures as parameters
"""The `shoal` command on a SQLite fleet whose files are hostile, stuck or damaged: the
reproductions of the file defects, run as a user would, in real processes.

* a symlink planted as the lock file: refused with exit 5, its target untouched;
* ``umask 000``: the fleet's folder is still 0700 and its files 0600;
* a writer stuck holding the writer queue (another real process): `list`, `status` and
  `show` still answer at once, instead of waiting for it and giving up with exit 4;
* bytes of the database overwritten: `list` and `claim` exit 5 (not 70, "a bug"), the
  claim writes nothing, doctor says so, and once the file is restored from a backup and
  doctor has checked it, work goes on.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from shoal import Fleet
from tests.faces.cli_support import COMMAND, Shoal, base_env, shoal, url  # noqa: F401 (fixtures)
from tests.helpers import damage_tasks_table


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_symlink_as_lock_file_is_refused_with_exit_5_and_its_target_kept(
    shoal: Shoal, url: str, tmp_path: Path
) -> None:
    db = Path(url.removeprefix("sqlite://"))
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    lock = Path(f"{db}.lock")
    lock.unlink()
    lock.symlink_to(victim)
    result = shoal("add", "x")
    assert result.code == 5, result
    assert str(lock) in result.err and "symbolic link" in result.err and "hint:" in result.err
    assert victim.read_text() == "precious\n"
    with Fleet.open(url, read_only=True) as fleet:
        assert fleet.tasks() == []


def test_under_umask_000_the_fleet_is_still_private(tmp_path: Path) -> None:
    script = f"umask 000; {' '.join(COMMAND)} init && {' '.join(COMMAND)} add x"
    proc = subprocess.run(
        ["sh", "-c", script],
        cwd=tmp_path,
        env=base_env({}),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    folder = tmp_path / ".shoal"
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()}
    assert {"fleet.db", "fleet.db.lock"} <= set(modes)
    assert set(modes.values()) == {0o600}, modes
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


# ---------------------------------------------------------------------- a stuck writer

HOLD = """
import sys
from shoal import Fleet
fleet = Fleet.open(sys.argv[1], create=False)
with fleet._store.write():
    print("holding", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def stuck_writer(url: str) -> Iterator[subprocess.Popen[str]]:
    """Another process that holds the fleet's writer queue (and SQLite's write lock)
    until the test lets go."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "holding"
    try:
        yield proc
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


def test_read_commands_answer_while_a_writer_holds_the_fleet(
    url: str, tmp_path: Path, fleet_with_a_task: int, stuck_writer: subprocess.Popen[str]
) -> None:
    """With busy_timeout=60, a command that waited for the writer would take a minute and
    give up with exit 4; the readers answer at once instead (the bound is far from both, so
    a loaded machine's slow start does not blur them)."""
    looker = Shoal(tmp_path, {"SHOAL_STORE": f"{url}?busy_timeout=60"})
    for args in (("list", "--json"), ("status", "--json"), ("show", str(fleet_with_a_task))):
        began = time.monotonic()
        result = looker(*args)
        assert result.code == 0, (args, result)
        assert time.monotonic() - began < 30, args
    assert "watched" in looker("list").out
    assert stuck_writer.poll() is None  # still holding: nobody went around it


@pytest.fixture
def fleet_with_a_task(url: str) -> int:
    with Fleet.open(url) as fleet:
        return fleet.post("watched").id


# ---------------------------------------------------------------------- damage


def test_a_damaged_database_exits_5_writes_nothing_and_recovers_from_a_backup(
    shoal: Shoal, url: str, tmp_path: Path
) -> None:
    db = Path(url.removeprefix("sqlite://"))
    with Fleet.open(url) as fleet:
        fleet.register("ada")
        fleet.post_many([{"title": f"task {i}", "body": "x" * 200} for i in range(60)])
    backup = tmp_path / "backup.db"
    shutil.copy(db, backup)
    damage_tasks_table(db)

    listed = shoal("list")
    assert listed.code == 5, listed
    assert "damaged" in listed.err and "shoal doctor" in listed.err
    assert "bug" not in listed.text

    damaged = digest(db)
    wal = Path(f"{db}-wal")
    wal_before = wal.stat().st_size if wal.exists() else 0
    claimed = shoal("claim", "--agent", "ada")
    assert claimed.code == 5, claimed
    assert "found damaged" in claimed.err
    assert digest(db) == damaged
    assert (wal.stat().st_size if wal.exists() else 0) == wal_before

    checked = shoal("doctor")
    assert checked.code == 5, checked
    assert "integrity" in checked.out and "from a backup" in checked.out

    shutil.copy(backup, db)
    for side in ("-wal", "-shm"):
        Path(f"{db}{side}").unlink(missing_ok=True)
    assert shoal("doctor").code == 0
    assert not os.path.exists(f"{db}.damaged")
    resumed = shoal("claim", "--agent", "ada", "--json")
    assert resumed.code == 0, resumed
    assert resumed.data["task"]["title"] == "task 0"
