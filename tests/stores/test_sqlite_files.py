"""A SQLite fleet's files on disk: private, never reached through a link, never reset unless
shoal's, opened for reading without the writer queue, and kept away from once damaged.

Every test makes the hostile or broken file the way it appears in the field (a symlink
planted beside the fleet, a lock file of junk, a FIFO, files an older shoal left 0644, a
folder that cannot be written, a page overwritten on disk) and checks both the refusal
(``StoreDamaged``: exit 5) and that nothing was written -- the link's target above all.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from shoal import Fleet, StoreError
from shoal.errors import StoreDamaged, exit_code_for
from tests.helpers import damage_tasks_table

SECRET = b"the victim's own bytes\n"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A fleet with a task, closed (its WAL copied back into the database)."""
    path = tmp_path / "fleet.db"
    with Fleet.init(f"sqlite://{path}") as fleet:
        fleet.post("first")
    return path


def refused(path: Path, *words: str, read_only: bool = False) -> StoreDamaged:
    reader = {"read_only": True} if read_only else {}
    with pytest.raises(StoreDamaged) as caught:
        Fleet.open(f"sqlite://{path}", create=False, **reader)
    assert exit_code_for(caught.value) == 5
    for word in words:
        assert word in str(caught.value), caught.value
    assert caught.value.hint
    return caught.value


# ---------------------------------------------------------------------- links


def test_a_symlinked_lock_file_is_refused_and_its_target_untouched(
    db: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(SECRET)
    victim.chmod(0o644)
    lock = Path(f"{db}.lock")
    lock.unlink()
    lock.symlink_to(victim)
    error = refused(db, str(lock), "symbolic link", str(victim))
    assert "rm " in (error.hint or "") or "mv " in (error.hint or "")
    assert victim.read_bytes() == SECRET and mode_of(victim) == 0o644
    assert lock.is_symlink()  # left for the person to look at


def test_a_symlinked_database_is_refused_and_the_fleet_it_points_at_untouched(
    db: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    link = elsewhere / "fleet.db"
    link.symlink_to(db)
    before = digest(db)
    refused(link, str(link), "symbolic link")
    refused(link, "symbolic link", read_only=True)
    assert digest(db) == before
    assert not Path(f"{link}.lock").exists() and not Path(f"{db}-wal").exists()


def test_a_symlinked_wal_is_refused(db: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(SECRET)
    Path(f"{db}-wal").symlink_to(victim)
    refused(db, f"{db}-wal", "symbolic link")
    assert victim.read_bytes() == SECRET


# ---------------------------------------------------------------------- the lock file


def test_a_lock_file_of_random_bytes_is_refused_and_left_as_it_is(db: Path) -> None:
    lock = Path(f"{db}.lock")
    junk = os.urandom(4096)
    lock.write_bytes(junk)
    refused(db, str(lock), "not a shoal writer queue")
    assert lock.read_bytes() == junk


def test_a_fifo_where_the_lock_file_goes_is_refused(db: Path) -> None:
    lock = Path(f"{db}.lock")
    lock.unlink()
    os.mkfifo(lock)
    refused(db, str(lock), "not a regular file")
    assert stat.S_ISFIFO(os.lstat(lock).st_mode)


def test_shoals_own_lock_file_is_reused(db: Path) -> None:
    """The refusals above are for foreign files only: a fleet reopens over its own."""
    lock = Path(f"{db}.lock")
    assert lock.stat().st_size == 4096
    with Fleet.open(f"sqlite://{db}", create=False) as fleet:
        fleet.post("second")
    assert lock.read_bytes()[:16] == b"shoal-writer-q1\0"


# ---------------------------------------------------------------------- modes


def test_files_an_older_shoal_left_0644_are_narrowed_by_the_next_writer_only(db: Path) -> None:
    with Fleet.open(f"sqlite://{db}", create=False) as fleet:
        raw = sqlite3.connect(db)  # keeps the -wal and -shm in place after the fleet closes
        raw.execute("SELECT count(*) FROM tasks").fetchone()
        fleet.post("second")
    files = [db, Path(f"{db}-wal"), Path(f"{db}-shm"), Path(f"{db}.lock")]
    try:
        for path in files:
            path.chmod(0o644)
        with Fleet.open(f"sqlite://{db}", create=False, read_only=True) as reader:
            assert len(reader.tasks()) == 2
        assert [mode_of(p) for p in files] == [0o644] * 4  # a reader changes nothing
        with Fleet.open(f"sqlite://{db}", create=False) as writer:
            writer.post("third")
        assert [mode_of(p) for p in files] == [0o600] * 4
    finally:
        raw.close()


def test_a_new_fleet_is_private_whatever_the_umask(tmp_path: Path) -> None:
    folder = tmp_path / "deep" / ".shoal"
    old = os.umask(0)
    try:
        with Fleet.init(f"sqlite://{folder / 'fleet.db'}") as fleet:
            fleet.post("x")
            made = sorted(p.name for p in folder.iterdir())
            modes = {p.name: mode_of(p) for p in folder.iterdir()}
    finally:
        os.umask(old)
    assert {"fleet.db", "fleet.db-wal", "fleet.db-shm", "fleet.db.lock"} <= set(made)
    assert set(modes.values()) == {0o600}, modes
    assert mode_of(folder) == 0o700 and mode_of(folder.parent) == 0o700


# ---------------------------------------------------------------------- readers


def test_a_reader_takes_no_writer_queue_and_cannot_write(db: Path) -> None:
    """No lock file is made (SQLite's own -wal and -shm are, where it can), and the
    database is as it was."""
    Path(f"{db}.lock").unlink()
    before = digest(db)
    with Fleet.open(f"sqlite://{db}", read_only=True) as reader:
        assert [t.title for t in reader.tasks()] == ["first"]
        with pytest.raises(StoreError, match="read-only"):
            reader.post("nope")
    assert not Path(f"{db}.lock").exists()
    assert digest(db) == before


@pytest.fixture
def frozen(db: Path) -> Iterator[Path]:
    """The fleet's folder made unwritable (``chattr +i``: even root cannot create files
    there), as on a read-only mount; only the database is in it."""
    for side in ("-wal", "-shm", ".lock"):
        Path(f"{db}{side}").unlink(missing_ok=True)
    made = subprocess.run(["chattr", "+i", str(db.parent)], capture_output=True, check=False)
    if made.returncode:
        pytest.skip("chattr +i is not available here")
    try:
        yield db
    finally:
        subprocess.run(["chattr", "-i", str(db.parent)], check=True)


def test_a_reader_works_where_nothing_can_be_written(frozen: Path) -> None:
    with Fleet.open(f"sqlite://{frozen}", create=False, read_only=True) as reader:
        assert [t.title for t in reader.tasks()] == ["first"]
        assert reader.status().counts.get("pending") == 1
    assert sorted(p.name for p in frozen.parent.iterdir()) == ["fleet.db"]


# ---------------------------------------------------------------------- damage


def test_damage_found_by_a_read_is_store_damaged_and_keeps_writers_away(db: Path) -> None:
    damage_tasks_table(db)
    with (
        Fleet.open(f"sqlite://{db}", create=False, read_only=True) as reader,
        pytest.raises(StoreDamaged) as caught,
    ):
        reader.tasks()
    assert exit_code_for(caught.value) == 5 and "doctor" in (caught.value.hint or "")
    assert Path(f"{db}.damaged").exists()
    before = digest(db)
    refused(db, "found damaged", "shoal writes nothing")
    assert digest(db) == before
    with Fleet.open(f"sqlite://{db}", create=False, read_only=True) as reader:
        assert reader.agents() == []  # what is still readable can be read


def test_a_new_fleet_refused_leaves_no_database_behind(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(SECRET)
    db = tmp_path / "new" / "fleet.db"
    db.parent.mkdir()
    Path(f"{db}.lock").symlink_to(victim)
    with pytest.raises(StoreDamaged):
        Fleet.init(f"sqlite://{db}")
    assert sorted(p.name for p in db.parent.iterdir()) == ["fleet.db.lock"]
    assert victim.read_bytes() == SECRET
