"""What git may take from the git store's private clone: nothing that runs a program.

A clone's hooks and its config's commands (``core.fsmonitor``, ``core.sshCommand``,
``remote.origin.uploadpack``, ``credential.helper``...) are run by git as whoever runs git
in it. Whatever got into a clone, the store runs none of it: not while it works in the
clone (hooks point nowhere, the upload and receive programs are named outright), and not
when it opens it again (a config holding anything shoal never writes is made again). And
the folders around the clone must be this user's alone (the second-user attacks are in
tests/processes/test_git_clone_safety.py)."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

import pytest

from shoal import Fleet
from shoal.errors import ShoalError, StoreDamaged
from shoal.stores._gitguard import Credentials, split_credentials
from shoal.stores.git import GitStore
from tests.conftest import git_board

#: Hooks git runs on the commands the store uses (fetch, fast-import, push, gc).
HOOKS = ("reference-transaction", "post-update", "pre-auto-gc", "pre-push", "post-rewrite")


def clone_of(store: GitStore) -> Path:
    return store._clone.path


def plant(clone: Path, markers: Path) -> None:
    """Hooks, and config entries that name programs, each touching a marker file."""
    markers.mkdir()
    for hook in HOOKS:
        script = clone / "hooks" / hook
        script.parent.mkdir(exist_ok=True)
        script.write_text(f"#!/bin/sh\ntouch {markers}/hook-{hook}\n")
        script.chmod(0o755)
    for key, value in (
        ("core.fsmonitor", f"touch {markers}/fsmonitor"),
        ("core.sshCommand", f"touch {markers}/ssh; ssh"),
        ("core.askPass", f"touch {markers}/askpass"),
        ("remote.origin.uploadpack", f"touch {markers}/upload-pack; git-upload-pack"),
        ("remote.origin.receivepack", f"touch {markers}/receive-pack; git-receive-pack"),
        ("credential.helper", f"!touch {markers}/credential"),
        ("commit.gpgSign", "true"),
        ("gpg.program", f"{markers}/gpg-never-there"),
    ):
        subprocess.run(["git", f"--git-dir={clone}", "config", key, value], check=True)


def test_hooks_and_commands_planted_in_the_clone_never_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Planted in a clone at work, they are not run by its next writes, reads, polls and
    squash (the upload program was, on every fetch, and the hooks on every ref update);
    a store that opens the clone afterwards makes it again, saying why."""
    url = git_board(tmp_path)
    store = GitStore(url, cache=tmp_path / "cache")
    fleet = Fleet(store)
    fleet.register("ada")
    fleet.post("before")
    markers = tmp_path / "ran"
    plant(clone_of(store), markers)
    fleet.post("after")
    fleet.claim("ada")
    store.wait_for_change(0)
    assert store.squash_history() is not None
    store._clone.collect()
    assert sorted(p.name for p in markers.iterdir()) == []
    with caplog.at_level(logging.WARNING, logger="shoal.stores._gitcli"):
        again = Fleet(GitStore(url, cache=tmp_path / "cache"))
    assert "its config holds" in caplog.text and "remote.origin.uploadpack" in caplog.text
    assert sorted(t.title for t in again.tasks()) == ["after", "before"]
    again.post("and on")
    assert sorted(p.name for p in markers.iterdir()) == []
    config = (clone_of(store) / "config").read_text()
    assert "touch" not in config and not (clone_of(store) / "hooks").exists()


def test_a_cache_folder_others_may_write_is_refused_naming_the_fix(tmp_path: Path) -> None:
    url = git_board(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o770)
    with pytest.raises(StoreDamaged, match="its group may write it") as raised:
        GitStore(url, cache=cache)
    assert str(cache) in raised.value.message
    assert f"chmod go-w {cache}" in (raised.value.hint or "")
    assert not list(cache.iterdir())  # no clone, no lock file: nothing was made or run


def test_a_folder_above_the_cache_that_anyone_may_write_is_refused(tmp_path: Path) -> None:
    """Every user may write it and it is not sticky: any of them could rename the cache
    folder away and put their own in its place."""
    url = git_board(tmp_path)
    open_to_all = tmp_path / "open"
    open_to_all.mkdir()
    open_to_all.chmod(0o777)
    with pytest.raises(StoreDamaged, match=f"{open_to_all}, a folder above"):
        GitStore(url, cache=open_to_all / "cache")
    open_to_all.chmod(0o1777)  # sticky, as /tmp is: only the owner may rename what is in it
    Fleet(GitStore(url, cache=open_to_all / "cache")).post("fine")


def test_something_else_where_the_clone_goes_is_refused_and_a_loose_clone_is_narrowed(
    tmp_path: Path,
) -> None:
    url = git_board(tmp_path)
    store = GitStore(url, cache=tmp_path / "cache")
    clone = clone_of(store)
    clone.chmod(0o755)  # readable by others: the store's own, so it is only closed again
    GitStore(url, cache=tmp_path / "cache")
    assert clone.stat().st_mode & 0o777 == 0o700
    clone.chmod(0o777)
    with pytest.raises(StoreDamaged, match="is not private") as raised:
        GitStore(url, cache=tmp_path / "cache")
    assert f"rm -rf {clone}" in (raised.value.hint or "")
    clone.chmod(0o700)
    clone.rename(tmp_path / "elsewhere.git")
    clone.symlink_to(tmp_path / "elsewhere.git")
    with pytest.raises(StoreDamaged, match="is a symbolic link"):
        GitStore(url, cache=tmp_path / "cache")
    assert clone.is_symlink() and os.path.isdir(tmp_path / "elsewhere.git")


@pytest.mark.parametrize(
    ("remote", "split"),
    [
        ("file:///srv/board.git", Credentials("file:///srv/board.git")),
        ("ssh://git@host/board.git", Credentials("ssh://git@host/board.git")),
        (
            "ssh://git:pw@host/board.git",
            Credentials("ssh://git@host/board.git", secrets=("pw",)),
        ),
        (
            "https://ada:pa%2Fss@host:8443/team/board.git",
            Credentials(
                "https://host:8443/team/board.git", "ada", "pa/ss", ("pa%2Fss", "pa/ss", "ada")
            ),
        ),
        (
            "https://ada:pa/ss?w@host/board.git",
            Credentials("https://host/board.git", "ada", "pa/ss?w", ("pa/ss?w", "ada")),
        ),
        (
            "http://T0KEN@host/board.git",
            Credentials("http://host/board.git", "T0KEN", "", ("T0KEN",)),
        ),
    ],
)
def test_credentials_are_taken_out_of_the_url_git_is_given(remote: str, split: Credentials) -> None:
    assert split_credentials(remote) == split


@pytest.mark.parametrize(
    "remote",
    [
        "git+--upload-pack=touch {ran}/x",
        "git+file://--upload-pack=touch%20{ran}/x",
        "git+ssh://-oProxyCommand=touch%20{ran}/x/board.git",
        "git+ssh://-oProxyCommand=touch%20{ran}/x@host/board.git",
        "git+ssh://git@-oProxyCommand=touch%20{ran}/x/board.git",
        "git+ext::sh -c touch% {ran}/x",
        "git+file:///nowhere/board.git#../../x",
    ],
)
def test_a_store_url_that_would_run_a_command_is_refused_and_runs_none(
    remote: str, tmp_path: Path
) -> None:
    """Options and commands smuggled into a store URL stay refused now that the URL is
    split before git sees it: none is run, and each fails as a shoal error."""
    ran = tmp_path / "ran"
    ran.mkdir()
    with pytest.raises(ShoalError):
        GitStore(remote.format(ran=ran), cache=tmp_path / "cache")
    assert list(ran.iterdir()) == []
