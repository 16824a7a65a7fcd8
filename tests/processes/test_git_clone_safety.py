"""Another user of this machine tries to make the git store run their commands as you.

Every git store command works in a private clone named by a formula anyone can compute
(``<name>-<sha256(remote#branch)[:16]>.git``). A user who can write where that clone goes
makes it first, with a hook in it; git runs a clone's hooks as whoever runs git in it. The
attacker's steps run as a second local user (``setpriv`` to uid 65534, as root can); the
victim is this test's process, running the real ``shoal`` command. Whatever the attacker
planted, the victim's commands refuse it (exit 5, naming the folder or clone and the fix),
``doctor`` reports it, the hook never runs and the board is left as it was."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import git_board
from tests.processes.test_git_store import board_of, git, shoal

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="playing a second local user needs root and setpriv",
)

NOBODY = 65534


def as_another_user(script: str, home: Path) -> None:
    """Run the shell ``script`` as uid/gid 65534 with no supplementary groups."""
    done = subprocess.run(
        [
            "setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            "sh",
            "-ec",
            script,
        ],
        env={"PATH": os.environ["PATH"], "HOME": str(home), "LC_ALL": "C"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder every user may write, sticky as /tmp is: where a team might point
    ``SHOAL_GIT_CACHE`` to share it (under /tmp, so that the other user can reach it)."""
    folder = Path(tempfile.mkdtemp(prefix="shoal-shared-", dir="/tmp"))
    folder.chmod(0o1777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def predictable_clone(cache: Path, url: str) -> Path:
    """Where the store's private clone of ``url``'s branch goes under ``cache``: the name
    the attacker computes."""
    remote = url.removeprefix("git+")
    digest = hashlib.sha256(f"{remote}#shoal".encode()).hexdigest()[:16]
    return cache / f"board.git-{digest}.git"


def plant_clone(clone: Path, url: str, marker: Path, home: Path) -> None:
    """As the other user: a clone of the board's remote at ``clone`` whose hooks touch
    ``marker`` -- the very clone the victim's shoal would make, plus the hooks."""
    hook = f'#!/bin/sh\necho "$(id -u) $0" >> {marker}\n'
    hooks = " ".join(
        f"{clone}/hooks/{name}"
        for name in ("reference-transaction", "post-update", "pre-auto-gc", "post-checkout")
    )
    as_another_user(
        f"mkdir -p {clone.parent}\n"
        f"git init --quiet --bare {clone}\n"
        f"git --git-dir={clone} remote add origin {url.removeprefix('git+')}\n"
        f"for hook in {hooks}; do printf '%s' '{hook}' > $hook; chmod +x $hook; done\n",
        home,
    )


@pytest.mark.parametrize("where", ["shared-folder", "their-folder", "their-clone"])
def test_a_clone_another_user_planted_is_refused_never_run_and_doctor_says_so(
    tmp_path: Path, shared: Path, where: str
) -> None:
    """``shared-folder``: SHOAL_GIT_CACHE is the shared folder itself (mode 1777);
    ``their-folder``: a cache folder the other user made there; ``their-clone``: the
    victim's own private cache, holding a clone of the other user's (moved in as a restore
    or a careless copy would). The victim's status, register and doctor used to run the
    planted hook 7 times, as the victim, and doctor found all fine."""
    url = git_board(tmp_path)
    board = board_of(url)
    assert shoal(tmp_path / "own", url, "init").returncode == 0
    marker = tmp_path / "hook-ran"
    if where == "shared-folder":
        cache = shared
        plant_clone(predictable_clone(cache, url), url, marker, shared)
        named = str(cache)
    elif where == "their-folder":
        cache = shared / "cache"
        plant_clone(predictable_clone(cache, url), url, marker, shared)
        named = str(cache)
    else:
        cache = tmp_path / "cache"
        cache.mkdir(mode=0o700)
        planted = predictable_clone(shared, url)
        plant_clone(planted, url, marker, shared)
        named = str(predictable_clone(cache, url))
        shutil.move(planted, named)
    tip = git(board, "rev-parse", "shoal")
    for args in (["status"], ["register", "ada"], ["doctor"], ["doctor", "--json"]):
        done = shoal(cache, url, *args)
        said = done.stdout + done.stderr
        assert done.returncode == 5, said
        assert named in said, said
        assert "SHOAL_GIT_CACHE" in said or "rm -rf" in said, said
    assert not marker.exists(), marker.read_text()
    assert git(board, "rev-parse", "shoal") == tip  # ada was not registered


def test_a_lock_file_another_user_linked_elsewhere_is_not_followed(tmp_path: Path) -> None:
    """A link where the clone's lock file goes, aimed at a file of the victim's: it used to
    be followed, creating (or opening) the link's target. It is refused (exit 5, named),
    the target left as it was."""
    url = git_board(tmp_path)
    assert shoal(tmp_path / "own", url, "init").returncode == 0
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    target = tmp_path / "victims-file"
    lock = Path(f"{predictable_clone(cache, url)}.lock")
    lock.symlink_to(target)
    done = shoal(cache, url, "status")
    assert done.returncode == 5, done.stderr
    assert str(lock) in done.stderr
    assert not target.exists()


def test_the_clone_of_a_shared_cache_is_private_and_works_for_its_owner(tmp_path: Path) -> None:
    """The checks let the ordinary case through: a cache folder made by shoal (0700, in
    folders owned by root or the user) is used, and the clone in it is 0700."""
    url = git_board(tmp_path)
    cache = tmp_path / "deep" / "cache"
    assert shoal(cache, url, "init").returncode == 0
    done = shoal(cache, url, "add", "one")
    assert done.returncode == 0, done.stderr
    clone = predictable_clone(cache, url)
    assert clone.is_dir()
    assert (clone.stat().st_mode & 0o777, cache.stat().st_mode & 0o777) == (0o700, 0o700)
