"""Opening a SQLite fleet's files, and what the driver's errors mean (for ``sqlite``).

Two ways in:

* a **writer** (every store opened for writing) creates what is missing -- the folder
  0700, the database 0600 (``_files``) -- narrows files an older shoal left readable by
  others, refuses a fleet marked damaged, and connects read-write;
* a **reader** (``read_only``: the CLI's ``list``, ``show``, ``status``, ``events``...)
  creates and changes nothing: it connects with ``mode=ro``, so it takes no writer's turn
  and works while a writer is stuck. On a read-only disk, where SQLite cannot make the
  ``-wal`` and ``-shm`` files a WAL reader needs, it falls back to ``immutable=1``: SQLite
  then reads the database file alone, without locks, and does not see what is still in a
  ``-wal`` left beside it (nothing can be writing there: no writer could make its files).
"""

from __future__ import annotations

import collections
import os
import sqlite3
import threading
from pathlib import Path
from urllib.parse import quote

from shoal._log import lazy_logger
from shoal.errors import StoreDamaged, StoreError, StoreNotFound, StoreUnavailable
from shoal.stores import _files

__all__ = ["connect", "count_open", "translate", "uncount", "wal_index"]

log = lazy_logger("shoal.stores.sqlite")

_DATABASE = "the fleet's database"
_SIDE_FILES = (("-wal", "SQLite's write-ahead log"), ("-shm", "SQLite's WAL index"))

#: How many stores of this process have each fleet file open. While one has, the file must
#: not be opened here with plain ``open()``: closing any descriptor of a file drops every
#: POSIX lock the process holds on it, SQLite's included, and another process could then
#: take the database for unused and remove its WAL under the open connection.
_OPEN_HERE: collections.Counter[Path] = collections.Counter()
_OPEN_HERE_LOCK = threading.Lock()

#: One read-only descriptor of each fleet's wal-index (the ``-shm`` file) per process, for
#: the checkpoint's look at the WAL: opened when first wanted, closed with the last store
#: of this process on the fleet, never before -- SQLite's WAL locks, the one that says the
#: file is in use included, are POSIX locks on that very file, and closing any descriptor
#: of it drops them.
_WAL_INDEX_HERE: dict[Path, int] = {}


def wal_index(key: Path | None) -> int:
    """This process's descriptor of the wal-index of the fleet counted as ``key``."""
    if key is None:
        raise OSError("the fleet is closed")
    with _OPEN_HERE_LOCK:
        fd = _WAL_INDEX_HERE.get(key)
        if fd is None:
            fd = _WAL_INDEX_HERE[key] = os.open(
                f"{key}-shm", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
            )
        return fd


def count_open(path: Path, *, writer: bool) -> Path:
    """Count one more store of this process on ``path`` (the key returned). Only when this
    process has the file open nowhere else, first check its files: no links, no foreign
    file; a writer also narrows their modes (``_files``)."""
    key = path.resolve()
    with _OPEN_HERE_LOCK:
        if not _OPEN_HERE[key]:
            _check_files(path, writer)
        _OPEN_HERE[key] += 1
    return key


def uncount(key: Path) -> None:
    """One store of this process less on the fleet counted as ``key``."""
    with _OPEN_HERE_LOCK:
        _OPEN_HERE[key] -= 1
        if not _OPEN_HERE[key] and key in _WAL_INDEX_HERE:
            os.close(_WAL_INDEX_HERE.pop(key))  # no connection of ours is left


def _check_files(path: Path, writer: bool) -> None:
    """The database and its side files are regular files, not links; the database is a
    SQLite database (a file that is not is refused before anything is created beside it);
    a writer narrows the modes of what an older shoal left 0644."""
    if _files.refuse_unsafe(path, _DATABASE) is None:
        return
    for suffix, what in _SIDE_FILES:
        side = Path(f"{path}{suffix}")
        if writer:
            _files.narrow(side, what)
        else:
            _files.refuse_unsafe(side, what)
    try:
        fd = _files.open_private(path, _DATABASE, create=False, write=False, narrow=writer)
    except FileNotFoundError:
        return
    except PermissionError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}", hint="check the path") from exc
    try:
        header = os.pread(fd, 16, 0)
    finally:
        os.close(fd)
    if header and header != b"SQLite format 3\x00":
        raise StoreError(
            f"{path} is not a usable shoal fleet (it is not a SQLite database)",
            hint="point --store at a fleet, or at a new file to create one",
        )


def prepare_writer(path: Path, create: bool) -> bool:
    """Before a writer connects: refuse a fleet marked damaged; make the folder and an
    empty database, both private, if ``create`` allows. Whether it made the database."""
    if os.path.lexists(path):
        _files.refuse_if_marked(path)
        return False
    if not create:
        return False
    try:
        _files.make_folder(path.parent)
        return _files.create_private(path)
    except OSError as exc:
        raise StoreNotFound(f"cannot create a fleet at {path}: {exc.strerror}") from exc


def connect(path: Path, *, read_only: bool, timeout: float) -> sqlite3.Connection:
    """A connection to the database at ``path`` (see the module docstring): read-write, or
    ``mode=ro``, falling back to ``immutable=1`` where the -wal and -shm cannot be made.
    The path is checked for a link just before (see ``_files``)."""
    _files.refuse_unsafe(path, _DATABASE)
    if not read_only:
        return sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=timeout)
    conn = _uri_connect(path, "mode=ro", timeout)
    try:
        conn.execute("PRAGMA schema_version").fetchone()  # the first read opens the WAL
        return conn
    except sqlite3.OperationalError as exc:
        if "unable to open" not in str(exc):
            conn.close()
            raise
    conn.close()
    log.info("%s: cannot make its -wal/-shm files here; reading the database file alone", path)
    return _uri_connect(path, "mode=ro&immutable=1", timeout)


def _uri_connect(path: Path, options: str, timeout: float) -> sqlite3.Connection:
    return sqlite3.connect(
        f"file:{quote(str(path))}?{options}",
        uri=True,
        isolation_level=None,
        check_same_thread=False,
        timeout=timeout,
    )


def translate(exc: sqlite3.DatabaseError, path: Path) -> StoreError:
    """The most specific shoal error for a driver error. A damaged file is marked (see
    ``_files``), so that writers stay away from it until it is checked."""
    text = str(exc)
    if "file is not a database" in text or "malformed" in text:
        log.debug("the fleet at %s is damaged: %s", path, text)
        _files.mark_damaged(path, text)
        return StoreDamaged(
            f"the fleet at {path} is damaged ({text}); nothing was written",
            hint="run `shoal doctor` to check it; if it is damaged, stop every shoal "
            f"process of the fleet and restore {path} from a backup (deleting its -wal and "
            "-shm files)",
        )
    if "unable to open" in text:
        return StoreNotFound(f"cannot open the fleet at {path} ({text})", hint="check the path")
    if "locked" in text or "busy" in text:
        log.warning("the fleet at %s stayed locked by another program (%s)", path, text)
        return StoreUnavailable(
            f"the fleet at {path} stayed locked by another program ({text})",
            hint="nothing was changed; try again",
        )
    if "readonly" in text or "read-only" in text:
        return StoreError(
            f"the fleet at {path} is read-only here ({text})", hint="check file permissions"
        )
    return StoreUnavailable(
        f"the fleet at {path} failed: {text}", hint="nothing was changed; try again"
    )
