"""Where the git store's private clones live, and why git may be run in one of them.

git runs whatever a repository tells it to: the hooks in its ``hooks/`` folder, and the
commands its config names (``core.fsmonitor``, ``remote.<name>.uploadpack``,
``credential.helper``...). So a clone is only as safe as the people who could have written
into it. Each clone has a predictable name (``<name>-<sha256(remote#branch)[:16]>.git``),
so in a folder other users can write -- ``SHOAL_GIT_CACHE=/tmp/shared``, mode 1777 -- one
of them could make it first, with a hook in it, and every command of yours on that board
would run their hook as you. git's own guard against a repository of another user
(``safe.directory``) does not apply here: shoal names the repository (``--git-dir``), and
git checks only the repositories it finds by searching.

So before git runs in a clone, this module makes sure nobody else could have written it
(``StoreDamaged``, exit 5, naming what is wrong and the fix; nothing is run):

* the cache folder belongs to this user and neither its group nor others may write it,
  and each folder above it belongs to this user or to root and, if others may write it,
  is sticky (``/tmp``): otherwise another user could move the cache folder aside and put
  their own in its place;
* the clone, if it is there, is a folder (never a link) of this user's that neither its
  group nor others may write;
* the clone's lock file is opened without following a link (``_files.open_private``) and
  must be this user's too.

What git may then take from the clone, and how it gets the URL's password, is
``_gitguard``'s part.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from pathlib import Path
from urllib.parse import urlsplit

from shoal.errors import StoreDamaged
from shoal.stores._files import make_folder, open_private

__all__ = [
    "cache_root",
    "clone_path",
    "open_clone_lock",
    "refuse_unsafe_cache",
    "refuse_unsafe_clone",
]

#: Write access for the group or for others: a folder with either may hold what they put there.
_WRITABLE_BY_OTHERS = 0o022
#: Any access for the group or for others: a clone holds every lease token of the board.
_OPEN_TO_OTHERS = 0o077


def cache_root() -> Path:
    """Where the private clones live: ``$SHOAL_GIT_CACHE``, else the user's cache folder."""
    configured = os.environ.get("SHOAL_GIT_CACHE", "").strip()
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base) / "shoal" / "git"


def clone_path(remote: str, branch: str, cache: Path) -> Path:
    """The private clone of ``remote``'s ``branch`` under ``cache``. ``remote`` is the one
    without credentials, so no password ever shapes a file name."""
    digest = hashlib.sha256(f"{remote}#{branch}".encode()).hexdigest()[:16]
    tail = re.sub(r"[^A-Za-z0-9._-]", "_", Path(urlsplit(remote).path).name)[:40] or "board"
    return cache / f"{tail}-{digest}.git"


def _describe(mode: int) -> str:
    who = [name for bit, name in ((0o020, "its group"), (0o002, "every user")) if mode & bit]
    return f"{' and '.join(who)} may write it (mode {stat.S_IMODE(mode):04o})"


def refuse_unsafe_cache(cache: Path) -> None:
    """Make the cache folder if it is missing (0700), then make sure nobody else could
    have put anything in it (see the module docstring). ``OSError`` if it cannot be made."""
    make_folder(cache)
    real = cache.resolve()
    me = os.geteuid()
    info = os.stat(real)
    named = str(cache) if real == cache else f"{cache} (that is, {real})"
    elsewhere = "point SHOAL_GIT_CACHE at a folder of your own that only you may write" + (
        " (or unset it: the default is ~/.cache/shoal/git)"
        if os.environ.get("SHOAL_GIT_CACHE", "").strip()
        else ""
    )
    if info.st_uid != me:
        raise StoreDamaged(
            f"the git store's cache folder {named} belongs to uid {info.st_uid}, not to this "
            f"user (uid {me}): a clone there may hold another user's hooks, which git would "
            "run as you; nothing was run",
            hint=elsewhere,
        )
    if info.st_mode & _WRITABLE_BY_OTHERS:
        raise StoreDamaged(
            f"the git store's cache folder {named} is not private: {_describe(info.st_mode)}, "
            "so another user could put a clone there whose hooks git would run as you; "
            "nothing was run",
            hint=f"{elsewhere}; or, if that folder is yours alone, `chmod go-w {real}`",
        )
    for above in real.parents:
        info = os.stat(above)
        sticky = info.st_mode & stat.S_ISVTX
        if info.st_uid not in (0, me) or (info.st_mode & 0o002 and not sticky):
            said = (
                f"belongs to uid {info.st_uid}"
                if info.st_uid not in (0, me)
                else f"may be written by every user and is not sticky (mode "
                f"{stat.S_IMODE(info.st_mode):04o})"
            )
            raise StoreDamaged(
                f"{above}, a folder above the git store's cache folder {named}, is not safe: "
                f"it {said}, so another user could put their own cache folder in its place; "
                "nothing was run",
                hint=elsewhere,
            )


def refuse_unsafe_clone(clone: Path) -> None:
    """``StoreDamaged`` if something other than a private folder of this user's is where
    the clone goes (nothing there is fine: it is made)."""
    try:
        info = os.lstat(clone)
    except FileNotFoundError:
        return
    me = os.geteuid()
    remove = (
        f"remove it (`rm -rf {clone}`, as its owner or root; the clone is only a cache, "
        "and shoal makes it again from the board) and keep SHOAL_GIT_CACHE private"
    )
    problem = None
    if stat.S_ISLNK(info.st_mode):
        problem = f"is a symbolic link to {os.readlink(clone)}"
    elif not stat.S_ISDIR(info.st_mode):
        problem = "is not a folder"
    elif info.st_uid != me:
        problem = f"belongs to uid {info.st_uid}, not to this user (uid {me})"
    elif info.st_mode & _WRITABLE_BY_OTHERS:
        problem = f"is not private: {_describe(info.st_mode)}"
    if problem is not None:
        raise StoreDamaged(
            f"the private clone of the board at {clone} {problem}: git would run the hooks "
            "and commands another user may have put in it, as you; nothing was run",
            hint=remove,
        )
    if info.st_mode & _OPEN_TO_OTHERS:  # readable by others only: ours, so just close it
        os.chmod(clone, stat.S_IMODE(info.st_mode) & ~_OPEN_TO_OTHERS)


def open_clone_lock(clone: Path) -> int:
    """A descriptor of the clone's lock file (``<clone>.lock``, made 0600 if missing),
    never opened through a link, and this user's."""
    lock = Path(f"{clone}.lock")
    fix = f"remove it (`rm {lock}`; shoal makes it again) and keep SHOAL_GIT_CACHE private"
    fd = open_private(lock, "the private clone's lock file", fix=fix)
    owner = os.fstat(fd).st_uid
    if owner != os.geteuid():
        os.close(fd)
        raise StoreDamaged(
            f"the lock file of the git store's private clone, {lock}, belongs to uid {owner}, "
            f"not to this user (uid {os.geteuid()}); nothing was run",
            hint=fix,
        )
    return fd
