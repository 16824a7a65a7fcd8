"""Stores: where a fleet lives. ``open_store(url)`` picks one by its URL.

* ``memory://`` -- the executable reference, in this process only (``memory://name`` is
  shared by every ``Fleet`` of the process that opens that name).
* ``sqlite:///path/to/fleet.db`` -- the embedded default: one file, any number of local
  processes. ``?synchronous=normal|full|off`` sets durability (default ``normal``: safe from
  crashes of shoal or its agents; ``full`` also from power loss); ``?busy_timeout=SECONDS``
  how long to wait for a program outside shoal that holds the database (default 30).
* ``postgresql://user@host:port/database`` -- one fleet for many hosts. ``?schema=NAME``
  picks the PostgreSQL schema it lives in (default ``shoal``), so one database can hold
  several fleets; ``?pool_size=N`` caps this process's connections (default 10, opened as
  needed); other options (``sslmode``, ``connect_timeout``...) go to libpq. Needs
  ``shoal[postgres]``.
* ``git+file:///path/to/board.git``, ``git+ssh://host/path.git``, ``git+https://...`` -- the
  fleet as a branch of a git repository (``#branch``, default ``shoal``), each change a
  commit pushed by the agent that made it; no server. Needs the ``git`` command.

Without a URL: ``$SHOAL_STORE``, else ``.shoal/fleet.db`` in the nearest folder (this one or
a parent) that has one, the way git finds ``.git`` -- and, as git does since its
``safe.directory`` check, only a fleet that is the user's own: a folder above this one may be
shared (``/tmp``), and a fleet another user put there would hand its tasks to whoever works
below it and take their posts (docs/SECURITY.md, "Files on disk").
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from shoal.errors import InvalidStoreURL, StoreDamaged, StoreError, StoreNotFound
from shoal.stores.base import Capabilities, Store

__all__ = [
    "DEFAULT_DIR",
    "Capabilities",
    "Store",
    "default_store_url",
    "find_fleet",
    "init_store_url",
    "open_store",
    "sqlite_url",
]

DEFAULT_DIR = ".shoal"
DEFAULT_FILE = "fleet.db"

_FORMS = (
    "memory://, sqlite:///path/to/fleet.db, postgresql://user@host:port/database, "
    "git+file:///path/to/board.git (or git+ssh://, git+https://)"
)


def find_fleet(start: Path | None = None) -> Path | None:
    """The nearest ``.shoal/fleet.db`` from ``start`` (default: the current folder) upwards."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / DEFAULT_DIR / DEFAULT_FILE
        try:
            if candidate.is_file():
                _refuse_planted(candidate.parent, candidate)
                return candidate
        except PermissionError as exc:  # a fleet is there, private to another user
            raise StoreError(
                f"{folder / DEFAULT_DIR} holds a fleet you may not read (it is private to "
                "the user who made it)",
                hint="run shoal as that user, ask them for a hub to reach it through "
                "(`shoal serve`, then --store http://...), or start your own fleet with "
                "--store sqlite:///path/to/fleet.db",
            ) from exc
    return None


def _refuse_planted(folder: Path, fleet: Path) -> None:
    """Refuse a fleet the search found that another user could have put there: its
    ``.shoal`` folder or its database not this user's, the folder a link, or a folder
    others may write (they could swap the database). The search walks up through folders
    anyone may write (``/tmp``); a fleet planted there would otherwise be the fleet of every
    command run below it -- its tasks claimed and run, the user's posts handed to it."""
    me = os.geteuid()
    folder_info, fleet_info = folder.lstat(), fleet.lstat()
    elsewhere = (
        "run `shoal init` in a folder of your own, or name a fleet you trust with --store "
        "or SHOAL_STORE (another user's: through its owner's `shoal serve`)"
    )
    if stat.S_ISLNK(folder_info.st_mode):
        why, hint = f"{folder} is a link", elsewhere
    elif folder_info.st_uid != me or fleet_info.st_uid != me:
        owner = folder_info.st_uid if folder_info.st_uid != me else fleet_info.st_uid
        why, hint = f"{folder} holds a fleet that belongs to another user (uid {owner})", elsewhere
    elif folder_info.st_mode & 0o022:
        mode = f"{folder_info.st_mode & 0o777:o}"
        why = f"{folder} may be written by other users (mode {mode})"
        hint = f"if the fleet is yours as it is: `chmod go-w {folder}`; else {elsewhere}"
    else:
        return
    raise StoreDamaged(
        f"{why}; shoal does not use a fleet someone else could have put there", hint=hint
    )


def default_store_url() -> str:
    """``$SHOAL_STORE``, or the nearest ``.shoal/fleet.db``; else a clear error."""
    url = os.environ.get("SHOAL_STORE", "").strip()
    if url:
        return url
    found = find_fleet()
    if found is None:
        raise StoreNotFound(
            f"no fleet found in {Path.cwd()} or any folder above it",
            hint="run `shoal init` here to create .shoal/fleet.db, or point --store / "
            "SHOAL_STORE at a fleet (e.g. sqlite:///path/to/fleet.db)",
        )
    return f"sqlite://{found}"


def init_store_url() -> str:
    """Where ``shoal init`` creates a fleet: ``$SHOAL_STORE``, else ``./.shoal/fleet.db``."""
    return os.environ.get("SHOAL_STORE", "").strip() or sqlite_url(
        Path.cwd() / DEFAULT_DIR / DEFAULT_FILE
    )


def sqlite_url(path: Path | str) -> str:
    """The URL of a SQLite fleet at ``path``."""
    return f"sqlite://{Path(path).resolve()}"


def open_store(url: str | None, *, create: bool = True, read_only: bool = False) -> Store:
    """Open the store at ``url`` (see the module docstring). ``read_only`` is a promise
    to only look: a SQLite fleet is then opened without the writer queue and works on a
    read-only disk (see ``_sqliteopen``); other stores ignore it."""
    url = (url or default_store_url()).strip()
    if url.startswith("memory://"):
        from shoal.stores.memory import MemoryStore

        return MemoryStore.open(url)
    if url.startswith("sqlite:"):
        from shoal.stores.sqlite import SqliteStore

        path, options = _sqlite_target(url)
        return SqliteStore(
            path, url=url, create=create and not read_only, read_only=read_only, **options
        )
    scheme = url.split(":", 1)[0] if ":" in url else ""
    if scheme in ("postgres", "postgresql"):
        from shoal.stores.postgres import PostgresStore

        return PostgresStore(url, create=create)
    if url.startswith("git+"):
        from shoal.stores.git import GitStore

        return GitStore(url, create=create and not read_only)
    raise InvalidStoreURL(
        f"store URL {url!r} is not one shoal understands", hint=f"use one of: {_FORMS}"
    )


def _sqlite_target(url: str) -> tuple[Path, dict[str, str]]:
    """``sqlite:///abs/path``, ``sqlite:////abs/path`` or ``sqlite:relative/path``, with
    options in the query string."""
    parts = urlsplit(url)
    if parts.netloc and parts.netloc not in (".", ".."):
        raise InvalidStoreURL(
            f"store URL {url!r} has a host ({parts.netloc!r}); SQLite fleets are local files",
            hint="write sqlite:///path/to/fleet.db (three slashes, then the path)",
        )
    raw = (parts.netloc + parts.path) if parts.netloc else parts.path
    if not raw or raw.endswith("/"):
        raise InvalidStoreURL(
            f"store URL {url!r} names no file", hint="write sqlite:///path/to/fleet.db"
        )
    options: dict[str, str] = {}
    for name, values in parse_qs(parts.query, keep_blank_values=True).items():
        if name not in ("synchronous", "busy_timeout"):
            raise InvalidStoreURL(
                f"unknown option {name!r} in store URL {url!r}",
                hint="SQLite options: ?synchronous=normal|full|off&busy_timeout=SECONDS",
            )
        options[name] = values[-1]
    path = Path("/" + raw.lstrip("/")) if raw.startswith("/") else Path.cwd() / raw
    return path, options
