"""The git store's fetch reports the board's tip without asking git again when the branch
stayed where this process left it, and still sees every move another clone made -- a
plain push, a squash of the history, a packed ref (``git gc`` in the private clone)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from shoal import Fleet
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
