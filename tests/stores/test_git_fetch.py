"""The git store's private clone: its fetch reports the board's tip without asking git
again when the branch stayed where this process left it, and still sees every move another
clone made -- a plain push, a squash of the history, a packed ref (``git gc`` in the
clone); the loose objects its writes leave are packed now and then; and a clone that
cannot be written is this host's trouble, said plainly."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from shoal import Fleet
from shoal.errors import StoreUnavailable
from shoal.stores import git as git_module
from shoal.stores.git import GitStore
from tests.conftest import git_board


def clone_git(store: GitStore, *args: str) -> str:
    path = store._clone.path
    done = subprocess.run(["git", "-C", str(path), *args], capture_output=True, check=True)
    return done.stdout.decode().strip()


def test_each_fleet_sees_the_others_writes_through_its_own_clone(tmp_path: Path) -> None:
    url = git_board(tmp_path)
    a_store = GitStore(url, cache=tmp_path / "a")
    b_store = GitStore(url, cache=tmp_path / "b")
    a, b = Fleet(a_store), Fleet(b_store)
    a.post("one")
    assert [t.title for t in b.tasks()] == ["one"]
    b.post("two")
    b.post("three")
    assert sorted(t.title for t in a.tasks()) == ["one", "three", "two"]
    # a's own write, then a read: the branch is where a left it
    a.post("four")
    assert len(a.tasks()) == 4
    # the ref packed away in b's clone: b asks git, and still reads the tip
    clone_git(b_store, "pack-refs", "--all")
    assert len(b.tasks()) == 4
    b.post("five")
    assert len(a.tasks()) == len(b.tasks()) == 5
    # history squashed by b: a new root commit, which b picks up
    assert b_store.squash_history() is not None
    a.post("six")
    assert len(b.tasks()) == 6
    assert clone_git(a_store, "rev-parse", "refs/remotes/origin/shoal") == clone_git(
        b_store, "rev-parse", "refs/remotes/origin/shoal"
    )


def loose_objects(store: GitStore) -> int:
    counts = dict(line.split(": ") for line in clone_git(store, "count-objects", "-v").splitlines())
    return int(counts["count"])


def test_the_private_clone_packs_what_the_writes_leave_loose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each write leaves its objects loose in the clone; without a ``git gc --auto`` now and
    then they stayed there for good (about 100 MB per 1,000 tasks, bench/git.py). gc counts
    loose objects by sampling one of 256 folders, so the writes leave thousands of them (a
    eighty tasks each): enough that the sample cannot miss."""
    monkeypatch.setattr(git_module, "COLLECT_EVERY", 10)
    store = GitStore(git_board(tmp_path), cache=tmp_path / "cache")
    clone_git(store, "config", "gc.auto", "256")  # as at 2000, sooner
    clone_git(store, "config", "gc.autoDetach", "false")  # done when the write returns
    fleet = Fleet(store)
    for batch in range(40):  # 80 tasks a write: under fast-import's 100, so loose
        fleet.post_many([{"title": f"task {batch}.{n}"} for n in range(80)])
    # Of about 3,400 written, what the writes since the last gc left: up to COLLECT_EVERY
    # writes of ~90 objects each (gc estimates its count from a sample, so not always 0).
    assert loose_objects(store) <= 1_200
    assert fleet.status().counts["pending"] == 3200


def test_a_private_clone_that_cannot_be_written_is_a_clear_retryable_error(
    tmp_path: Path,
) -> None:
    """A cache folder that cannot be made, or a clone whose objects cannot be written (a
    read-only or full disk): StoreUnavailable naming the clone and SHOAL_GIT_CACHE (exit
    4), the board untouched -- both used to be an internal error (exit 70)."""
    url = git_board(tmp_path)
    (tmp_path / "a-file").write_text("not a folder")
    with pytest.raises(StoreUnavailable, match="cannot write the private clone") as raised:
        GitStore(url, cache=tmp_path / "a-file" / "cache")
    assert "SHOAL_GIT_CACHE" in (raised.value.hint or "")
    store = GitStore(url, cache=tmp_path / "cache")
    fleet = Fleet(store)
    fleet.post("kept")
    board = Path(url.removeprefix("git+file://"))
    tip = (board / "refs" / "heads" / "shoal").read_text()
    pack = store._clone.path / "objects" / "pack"
    shutil.rmtree(pack)
    pack.write_text("not a folder")  # fast-import can write no pack here
    with pytest.raises(StoreUnavailable, match="cannot write the private clone"):
        fleet.post("not written")
    assert (board / "refs" / "heads" / "shoal").read_text() == tip
