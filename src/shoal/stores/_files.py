"""The files of a SQLite fleet on disk: private to their owner, never reached through a link.

Whoever can write a fleet's files can do anything to the fleet, and whoever can read them
reads every lease token, so the files are the fleet's outer wall (docs/SECURITY.md, "Files
on disk"). This module keeps it up, whatever the umask of the process that makes them:

* the folder shoal creates for a fleet (``.shoal/``) is 0700, and the database, its
  ``-wal`` and ``-shm`` files and the writer queue's lock file are 0600. SQLite gives the
  ``-wal`` and ``-shm`` files the database's own mode, so creating the database 0600 is
  enough for them; files left 0644 by an older shoal are narrowed by the next writer that
  opens the fleet (a reader changes nothing);
* no file is opened through a symbolic link (``O_NOFOLLOW``), and a link, or anything but
  a regular file, where a fleet file should be is refused with ``StoreDamaged`` (exit 5):
  following it would let whoever planted it make shoal overwrite the link's target.
  Python's sqlite3 cannot ask SQLite not to follow a link to the database itself (the
  ``SQLITE_OPEN_NOFOLLOW`` flag is not exposed), so the database's path is checked just
  before SQLite opens it; SQLite opens its ``-wal`` and ``-shm`` files with ``O_NOFOLLOW``
  itself;
* a database found damaged (SQLite says "malformed" or "not a database") gets a marker
  file beside it, ``fleet.db.damaged``, and writers refuse a fleet that has one, so that
  nothing more is written into a file that is known to be broken. ``shoal doctor`` checks
  the file and removes the marker once the file is sound again (repaired, or restored from
  a backup).

Closing any descriptor of a file drops every POSIX lock the process holds on it, SQLite's
included, so the checks here that open the database, ``-wal`` or ``-shm`` run only while
this process has no connection to that fleet (see ``_sqliteopen._count_open``).
"""

from __future__ import annotations

import errno
import os
import stat
import time
from pathlib import Path

from shoal.errors import StoreDamaged

__all__ = [
    "FILE_MODE",
    "FOLDER_MODE",
    "create_private",
    "damaged_marker",
    "make_folder",
    "mark_damaged",
    "narrow",
    "open_private",
    "refuse_if_marked",
    "refuse_unsafe",
]

FOLDER_MODE = 0o700
FILE_MODE = 0o600
#: The bits a fleet file must not have: any access by the group or by others.
_LOOSE = 0o077
#: Suffix of the marker left beside a database found damaged.
DAMAGED_SUFFIX = ".damaged"


def make_folder(folder: Path) -> None:
    """Create ``folder`` and its missing parents 0700, whatever the umask. A folder that
    exists already is left as it is (it may be the user's own, shared on purpose)."""
    missing: list[Path] = []
    here = folder
    while not os.path.lexists(here) and here != here.parent:
        missing.append(here)
        here = here.parent
    for place in reversed(missing):
        try:
            os.mkdir(place, FOLDER_MODE)
        except FileExistsError:
            continue  # another opener made it first: theirs is 0700 too
        os.chmod(place, FOLDER_MODE)  # the umask may have taken bits off; put them back


def refuse_unsafe(path: Path, what: str, fix: str | None = None) -> os.stat_result | None:
    """The ``lstat`` of a fleet file, None if it is not there; ``StoreDamaged`` if it is a
    symbolic link or not a regular file. ``what`` names the file in the message."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    _refuse_kind(path, info, what, fix)
    return info


def _refuse_kind(path: Path, info: os.stat_result, what: str, fix: str | None) -> None:
    if stat.S_ISLNK(info.st_mode):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        raise StoreDamaged(
            f"{path} ({what}) is a symbolic link to {target}; shoal does not open a "
            "fleet's files through a link, which would let whoever made it aim shoal's "
            "writes at another file; nothing was written",
            hint=fix or f"remove the link (`rm {path}`), or point --store at the real file",
        )
    if not stat.S_ISREG(info.st_mode):
        raise StoreDamaged(
            f"{path} ({what}) is not a regular file; nothing was written",
            hint=fix or f"move it out of the way (`mv {path} {path}.bak`), then try again",
        )


def _refuse_owner(path: Path, info: os.stat_result, what: str, fix: str | None) -> None:
    raise StoreDamaged(
        f"{path} ({what}) belongs to another user (uid {info.st_uid}); shoal writes a fleet "
        "only through files of the user running it, never one someone else could have put "
        "there; nothing was written",
        hint=fix
        or f"run shoal as the fleet's owner; if the fleet is yours, stop its processes and "
        f"remove the file (`rm {path}`), and keep the fleet in a folder only you may write",
    )


def open_private(
    path: Path,
    what: str,
    *,
    create: bool = True,
    write: bool = True,
    narrow: bool = True,
    fix: str | None = None,
) -> int:
    """A descriptor of the fleet file ``path``, opened without following a link, created
    0600 if ``create`` (whatever the umask), and (``narrow``, as a writer opens it) without
    group and other access if it had them -- and refused if it is another user's.
    ``StoreDamaged`` for a link, anything but a regular file, or (``narrow``) a file another
    user owns: one planted beside the fleet in a folder others may write (a lock file whose
    mutex the planter can hold, a database full of its tasks) would make that user part of
    the fleet. ``OSError`` otherwise (not there, with ``create`` off; no permission)."""
    flags = (os.O_RDWR if write else os.O_RDONLY) | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    if create:
        flags |= os.O_CREAT
    try:
        fd = os.open(path, flags, FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            refuse_unsafe(path, what, fix)
        raise
    try:
        info = os.fstat(fd)
        _refuse_kind(path, info, what, fix)
        os.set_blocking(fd, True)  # O_NONBLOCK was only so a FIFO could not hang the open
        if narrow and info.st_uid != os.geteuid():
            _refuse_owner(path, info, what, fix)
        loose = stat.S_IMODE(info.st_mode) & _LOOSE
        if narrow and loose:
            os.fchmod(fd, stat.S_IMODE(info.st_mode) & ~_LOOSE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def create_private(path: Path) -> bool:
    """Create the empty file ``path`` 0600 unless something is there already (SQLite
    takes an empty file for a new database, and gives its -wal and -shm files its mode).
    Whether this call made it."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    return True


def narrow(path: Path, what: str) -> None:
    """Check the existing fleet file ``path`` (no link, a regular file) and take group and
    other access off it if it is ours: a file an older shoal made 0644."""
    if refuse_unsafe(path, what) is None:
        return
    try:
        fd = open_private(path, what, create=False, write=False)
    except FileNotFoundError:
        return  # gone meanwhile (SQLite removes its -wal when the last user closes)
    os.close(fd)


# ---------------------------------------------------------------------- damage


def damaged_marker(database: Path) -> Path:
    """The marker beside a database found damaged."""
    return Path(f"{database}{DAMAGED_SUFFIX}")


def mark_damaged(database: Path, finding: str) -> None:
    """Leave the marker beside ``database`` (once; best effort: on a read-only disk there
    is nobody to warn anyway)."""
    marker = damaged_marker(database)
    line = f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}: {finding}\n"
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    except OSError:
        return
    try:
        os.write(fd, line.encode("utf-8", "replace"))
    except OSError:
        pass
    finally:
        os.close(fd)


def refuse_if_marked(database: Path) -> None:
    """``StoreDamaged`` if ``database`` was found damaged and not checked since: writers
    stay away from a file known to be broken."""
    marker = damaged_marker(database)
    if not os.path.lexists(marker):
        return
    try:
        with open(marker, encoding="utf-8", errors="replace") as handle:
            seen = handle.readline().strip()[:200]
    except OSError:
        seen = ""
    raise StoreDamaged(
        f"{database} was found damaged ({seen or 'see ' + str(marker)}); shoal writes "
        "nothing to it until it is checked",
        hint="run `shoal doctor`: it checks the file and removes the mark once it is sound; "
        f"if it is not, stop every shoal process of the fleet, restore {database} from a "
        "backup (deleting its -wal and -shm files), then run `shoal doctor` again",
    )
