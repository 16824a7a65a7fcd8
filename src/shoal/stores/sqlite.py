"""The SQLite store: the embedded default, one file shared by every local process.

It is a ``SqlStore`` (see ``_sqlstore``: the transaction, the schema flow and every verb
are shared with PostgreSQL); ``SqliteDialect`` below says what is particular to SQLite.

Atomicity and fairness
----------------------
Every write is one ``BEGIN IMMEDIATE`` transaction, so SQLite's single-writer lock makes
each claim atomic. But SQLite's stock busy handler is not fair: a writer that finds the
lock taken sleeps on a growing schedule and retries, and under steady contention one
unlucky process can lose every retry for seconds while others win. So writers first take
their turn in a FIFO writer queue kept in a small file beside the database (``_writerlock``:
a robust process-shared mutex that survives ``kill -9``); when a writer reaches SQLite the
lock is free, and SQLite's own busy wait is left for outsiders (another tool touching the
file). Reads never queue: WAL gives them a snapshot. With one writer at a time, the
statements PostgreSQL needs for writers side by side are no-ops here, never run.

Cost that does not grow with the fleet
--------------------------------------
Each step of the claim reads a partial index (see migrations/0001_initial.sql): the
owner's queue head, the top of the pool per skill set (the static-key trick in policy: the
pool steps run once per skill set and are merged, ``per_skillset``), the tail of a victim's
queue, the leases due to expire. Finished tasks are in none of them. Counts by state and
queue depths are kept by triggers. Statements are cached by the driver; a statement over
many rows (the events a transaction held back, say) is one ``executemany`` of it, with no
round trip to save.

Files and errors
----------------
The fleet's files are private and never reached through a link (``_files``); writers and
readers come in by different ways (``_sqliteopen``): a store opened ``read_only`` takes no
writer's turn and creates nothing, so `shoal list` answers while a writer is stuck and on a
read-only disk. Errors from the driver are translated there: a busy or broken database
becomes ``StoreUnavailable``, a damaged one ``StoreDamaged``, a file that is not a fleet
``StoreError``, a schema from another version ``SchemaMismatch``.
"""

from __future__ import annotations

import functools
import os
import re
import sqlite3
import struct
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext, suppress
from pathlib import Path
from typing import Any

from shoal._log import lazy_logger
from shoal.errors import (
    InvalidStoreURL,
    SchemaMismatch,
    StoreError,
    StoreNotFound,
    StoreUnavailable,
)
from shoal.stores import _sqliteopen
from shoal.stores._sql import load_queries, migration_count
from shoal.stores._sqlstore import Dialect, SqlStore
from shoal.stores._writerlock import WriterLock, open_writer_lock
from shoal.stores.base import Capabilities

__all__ = ["APPLICATION_ID", "SqliteStore"]

#: Marks a database file as a shoal fleet ("SHOL"; the migrations_table query checks it).
APPLICATION_ID = 0x53484F4C
_SYNCHRONOUS = {"off": "OFF", "normal": "NORMAL", "full": "FULL"}
_CHECKPOINT_CHECK = 100  # commits of one connection between looks at the WAL's size
_CHECKPOINT_BYTES = 32 << 20  # checkpoint once this much of the WAL waits to be copied back
_CHECKPOINT_JOIN = 30.0  # seconds close() waits for a checkpoint under way
_SHM_HEADER = 100  # bytes of the wal-index header read for that (see _wal_backlog)
_FRAME_HEADER = 24  # bytes before each page in the WAL
_PARAMETER = re.compile(r"(?<!:):([a-z_]+)")
SCHEMA_VERSION = migration_count("sqlite")

log = lazy_logger(__name__)


class SqliteStore(SqlStore):
    """A fleet in one SQLite file. See the module docstring."""

    _d: SqliteDialect

    def __init__(
        self,
        path: Path,
        *,
        url: str,
        create: bool = True,
        synchronous: str = "normal",
        busy_timeout: str | float = 30.0,
        read_only: bool = False,
    ) -> None:
        self.path = Path(path)
        dialect = SqliteDialect(self.path, url, create, synchronous, busy_timeout, read_only)
        super().__init__(dialect, url, create=create)

    @property
    def _conn(self) -> sqlite3.Connection:
        return self._d.conn

    @property
    def _writer(self) -> WriterLock:
        return self._d.writer


class SqliteDialect(Dialect):
    """What is particular to SQLite (see the module docstring)."""

    name = "sqlite"
    queries = load_queries("sqlite")
    read_queries = queries  # no statement locks rows: the writer queue does
    side_by_side = False
    heard_apart = True
    counts_by_trigger = False  # a firing trigger costs more here than the count it keeps
    json_lists = True
    pool_per_skillset = True
    upgrade_hint = "upgrade shoal (pip install -U shoal) on this machine"
    no_params = ()
    errors = (sqlite3.DatabaseError,)
    log = log
    version_word = "schema version"

    def __init__(
        self,
        path: Path,
        url: str,
        create: bool,
        synchronous: str,
        busy_timeout: str | float,
        read_only: bool = False,
    ) -> None:
        self.path = path
        self.url = url
        self.where = self.target = str(path)
        if synchronous.lower() not in _SYNCHRONOUS:
            raise InvalidStoreURL(
                f"synchronous={synchronous!r} is not a SQLite durability level",
                hint="use ?synchronous=normal (default), full, or off",
            )
        try:
            timeout = float(busy_timeout)
            if not 0 <= timeout <= 3600:
                raise ValueError
        except ValueError:
            raise InvalidStoreURL(
                f"busy_timeout={busy_timeout!r} is not a number of seconds from 0 to 3600",
                hint="e.g. ?busy_timeout=5",
            ) from None
        self.read_only = read_only
        fresh = not os.path.lexists(self.path)
        if fresh and not create:
            raise StoreNotFound(
                f"there is no fleet at {self.path}",
                hint=f"create it with `shoal init --store {url}`, or check the path",
            )
        # The database this opening made, removed again if the opening fails.
        self._made = not read_only and _sqliteopen.prepare_writer(self.path, create)
        self._mutex = threading.RLock()
        self._checkpointer: threading.Thread | None = None
        self._synchronous = _SYNCHRONOUS[synchronous.lower()]
        # Commits on this connection do not move SQLite's data_version (it counts the other
        # connections' commits), so threads sharing this store hear of them here.
        self._commits_here = threading.Condition()
        self._commits = 0
        self._timeout = timeout
        self._lock_path = Path(f"{self.path}.lock")
        self._lock_existed = os.path.lexists(self._lock_path)
        self._counted: Path | None = None
        self.writer: WriterLock = _NoWriters(self.path)
        try:
            self._counted = _sqliteopen.count_open(self.path, writer=not read_only)
            if not read_only:  # a reader takes no writer's turn, so needs no queue
                self.writer = open_writer_lock(self._lock_path)
        except OSError as exc:
            self.abandon(exc)
            raise StoreNotFound(f"cannot open a fleet at {self.path}: {exc.strerror}") from exc
        except BaseException as exc:
            self.abandon(exc)
            raise
        self.capabilities = Capabilities(
            shared=True, durable=True, notifies=False, fair=self.writer.fair
        )
        try:
            self.conn = _sqliteopen.connect(self.path, read_only=read_only, timeout=timeout)
            if not read_only:
                self.conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            self.conn.execute("PRAGMA cache_size = -16000")
            self.conn.execute("PRAGMA temp_store = MEMORY")
            # Checkpoints copy the WAL back into the database and sync it: milliseconds.
            # SQLite would run one inside some unlucky writer's COMMIT, with every other
            # writer queued behind it; shoal runs them itself, outside the writer queue
            # and on a thread of its own (_checkpoint).
            self.conn.execute("PRAGMA wal_autocheckpoint = 0")
            self.conn.execute("PRAGMA journal_size_limit = 67108864")
        except BaseException as exc:
            replaced = self.abandon(exc)
            if replaced is exc:
                raise
            raise replaced from exc

    # --------------------------------------------------------------- opening

    def opening(self) -> AbstractContextManager[sqlite3.Connection]:
        """Under the write lock, so racing openers agree; outside a transaction. A reader
        only checks the schema (it never creates or migrates one), so it takes no turn."""
        if self.read_only:
            return _Holding(self._mutex, self.conn)
        return self._locked(self.conn)

    def foreign(self) -> StoreError:
        return StoreError(
            f"{self.path} is a SQLite database but not a shoal fleet",
            hint="point --store at a fleet, or at a new file to create one",
        )

    def not_upgraded(self, version: int) -> tuple[type[StoreError], str, str]:
        what = "no schema yet" if version == 0 else f"the older schema version {version}"
        return (
            SchemaMismatch,
            f"the fleet at {self.path} has {what}",
            f"run `shoal init --store {self.url}` to upgrade it (tasks are kept)",
        )

    def before_migrating(self, conn: sqlite3.Connection) -> None:
        if (
            not self.read_only
            and conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal"
        ):
            conn.execute("PRAGMA journal_mode = WAL")

    def begin_migration(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")

    def run_script(self, conn: sqlite3.Connection, script: str) -> None:
        for statement in _statements(script):
            conn.execute(statement)

    def end_migration(self, conn: sqlite3.Connection, version: int) -> None:
        """The version and the shoal mark live in the file's header (PRAGMAs, which take no
        parameters), set in the migrating transaction."""
        conn.execute(f"PRAGMA user_version = {int(version)}")
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute("COMMIT")

    def abort_migration(self, conn: sqlite3.Connection, version: int) -> None:
        conn.execute("ROLLBACK")
        log.warning("migrating %s failed; rolled back to schema version %d", self.path, version)

    def opened(self) -> None:
        self._data_version = self._read_data_version()
        log.debug(
            "opened the fleet at %s (schema version %d, %s writer queue, busy_timeout %gs)",
            self.path,
            SCHEMA_VERSION,
            "fair" if self.writer.fair else "flock",
            self._timeout,
        )

    def abandon(self, exc: BaseException) -> BaseException:
        log.debug("could not open the fleet at %s: %r", self.path, exc)
        connected = getattr(self, "conn", None) is not None
        self.close()
        if not self._lock_existed and not self.read_only:
            self._lock_path.unlink(missing_ok=True)  # no trace beside a file not our fleet
        if getattr(self, "_made", False) and not connected:
            with suppress(OSError):
                if os.path.getsize(self.path) == 0:  # still the empty file this made
                    self.path.unlink()
        if isinstance(exc, sqlite3.DatabaseError):
            return _sqliteopen.translate(exc, self.path)
        return exc

    def translate(self, exc: Exception) -> Exception:
        """A driver error in a verb: a damaged file, a busy or broken database, as the
        shoal error it means (``_sqliteopen.translate``). Errors that mean a bug in shoal
        (bad SQL, a broken constraint) are left as they are, to be reported."""
        if isinstance(exc, sqlite3.IntegrityError | sqlite3.ProgrammingError):
            return exc
        if isinstance(exc, sqlite3.DatabaseError):
            return _sqliteopen.translate(exc, self.path)
        return exc

    # --------------------------------------------------------------- transactions

    def _locked(self, conn: sqlite3.Connection) -> AbstractContextManager[sqlite3.Connection]:
        """The writer queue: this process's mutex, then the fleet-wide queue (see
        ``_writerlock``); then ``BEGIN IMMEDIATE`` finds SQLite's lock free."""
        return _WriterTurn(self, conn)

    def connection(self, write: bool) -> AbstractContextManager[sqlite3.Connection]:
        """Writers take their turn in the writer queue; readers only this process's mutex
        (the connection is shared by the store's threads)."""
        if write:
            return _WriterTurn(self, self.conn)
        return _Holding(self._mutex, self.conn)

    def waited_too_long(self) -> StoreUnavailable:
        log.warning("waited %gs for the other writers of %s; giving up", self._timeout, self.path)
        return StoreUnavailable(
            f"waited {self._timeout:g}s for the other writers of {self.path}",
            hint="nothing was changed; try again (or raise ?busy_timeout=SECONDS)",
        )

    def begin(self, conn: sqlite3.Connection, write: bool, exclusive: bool) -> None:
        try:
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        except sqlite3.DatabaseError as exc:
            raise _sqliteopen.translate(exc, self.path) from exc

    def pipeline(self, conn: sqlite3.Connection) -> AbstractContextManager[None]:
        return nullcontext()

    def commit(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            raise _sqliteopen.translate(exc, self.path) from exc

    def rollback(self, conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            with suppress(sqlite3.DatabaseError):
                conn.execute("ROLLBACK")

    def committed(self) -> None:
        with self._commits_here:
            self._commits += 1
            self._commits_here.notify_all()
        if self._commits % _CHECKPOINT_CHECK == 0:
            self._checkpoint()

    def _checkpoint(self) -> threading.Thread | None:
        """Copy the WAL back into the database once enough of it is waiting, without
        blocking writers (PASSIVE): other processes keep committing while it runs. The cost
        is per distinct page, so a larger WAL makes each committed page cheaper.

        A checkpoint mostly waits for its two fsyncs (tens of milliseconds), so it runs on a
        thread and a connection of its own: this process goes on claiming meanwhile instead
        of making its next call that much later. Returns the thread it started, if any."""
        with self._mutex:
            running = self._checkpointer
            if running is not None and running.is_alive():
                return None
            backlog = self._wal_backlog()
            if backlog < _CHECKPOINT_BYTES:
                return None
            self._checkpointer = threading.Thread(
                target=self._copy_back, args=(backlog,), name="shoal-checkpoint", daemon=True
            )
            self._checkpointer.start()
            return self._checkpointer

    def _copy_back(self, backlog: int) -> None:
        """The checkpoint itself (see ``_checkpoint``), at the store's durability: the
        synchronous level decides the fsyncs a checkpoint makes."""
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=self._timeout)
        except sqlite3.Error:
            return
        try:
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            log.debug("checkpointed %d bytes of the WAL of %s", backlog, self.path)
        except sqlite3.Error as exc:
            log.debug("checkpointing the WAL of %s failed: %s", self.path, exc)
        finally:
            conn.close()

    def _wal_backlog(self) -> int:
        """Bytes of WAL not yet copied back into the database.

        Not the WAL file's size: after a checkpoint SQLite writes the WAL again from its
        start, and the file keeps its size (up to journal_size_limit), so the size would
        call for a checkpoint every time it is looked at. The count is in the header of the
        wal-index, the ``-shm`` file every connection maps: the last valid frame (mxFrame,
        at byte 16) less the frames already copied back (nBackfill, at byte 96), in the
        machine's byte order (SQLite's file format, walformat.html). It is read without a
        lock: a hint for when to checkpoint, nothing more."""
        try:
            header = os.pread(_sqliteopen.wal_index(self._counted), _SHM_HEADER, 0)
        except OSError:
            return 0
        if len(header) < _SHM_HEADER:
            return 0
        page: int = struct.unpack_from("=H", header, 14)[0]
        frames: int = struct.unpack_from("=I", header, 16)[0]
        copied: int = struct.unpack_from("=I", header, 96)[0]
        page = 65536 if page == 1 else page
        return max(0, frames - copied) * (page + _FRAME_HEADER)

    # --------------------------------------------------------------- statements

    def run_many(
        self,
        conn: sqlite3.Connection,
        sql: str,
        fixed: Mapping[str, Any],
        names: Sequence[str],
        rows: Any,
    ) -> None:
        """One cached statement, once per row: no round trips to save. The rows are bound by
        position (the statement's names turned into numbered parameters, once), so no
        mapping is made per row."""
        numbered, order = _numbered(sql, tuple(fixed), tuple(names))
        first = tuple(fixed[name] for name in order[: len(fixed)])
        conn.executemany(numbered, [first + tuple(row) for row in rows] if first else rows)

    def seqs(self, rows: list[Any], count: int) -> list[int]:
        """The counter moved by ``count`` at once: the block of positions below its value."""
        last = int(rows[0][0])
        return list(range(last - count + 1, last + 1))

    # --------------------------------------------------------------- waiting

    def _read_data_version(self) -> int:
        with self._mutex:
            return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    def wait_for_change(self, timeout: float) -> bool:
        """Poll SQLite's data_version (a shared-memory read, no lock) until another
        connection commits. SQLite cannot notify, so this checks every few milliseconds."""
        deadline = time.monotonic() + timeout
        delay = 0.002
        seen_here = self._commits
        while True:
            version = self._read_data_version()
            if version != self._data_version or self._commits != seen_here:
                self._data_version = version
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with self._commits_here:
                self._commits_here.wait_for(
                    lambda: self._commits != seen_here, timeout=min(delay, remaining)
                )
            delay = min(delay * 2, 0.05)

    def close(self) -> None:
        checkpointer = getattr(self, "_checkpointer", None)
        if checkpointer is not None:
            checkpointer.join(_CHECKPOINT_JOIN)
        conn = getattr(self, "conn", None)
        if conn is not None:
            conn.close()
            self.conn = None  # type: ignore[assignment]
        writer = getattr(self, "writer", None)
        if writer is not None:
            writer.close()
            self.writer = None  # type: ignore[assignment]
        counted, self._counted = getattr(self, "_counted", None), None
        if counted is not None:
            _sqliteopen.uncount(counted)


class _NoWriters:
    """The writer queue of a store opened read-only: there is none, and writing is a
    mistake of the caller's (``Fleet.open(read_only=True)`` is for looking)."""

    fair = False

    def __init__(self, path: Path) -> None:
        self._path = path

    def acquire(self, timeout: float) -> bool:
        raise StoreError(
            f"the fleet at {self._path} was opened read-only here",
            hint="open it without read_only to change it",
        )

    def release(self) -> None:
        """Never taken, so never given back."""

    def close(self) -> None:
        """Nothing to close."""


class _WriterTurn:
    """A writer's turn (``SqliteDialect._locked``): this process's mutex, then the fleet's
    writer queue, given back in the reverse order. A class rather than a generator: it is
    entered once per write, and this is the cheaper way to say it."""

    __slots__ = ("_conn", "_dialect")

    def __init__(self, dialect: SqliteDialect, conn: sqlite3.Connection) -> None:
        self._dialect, self._conn = dialect, conn

    def __enter__(self) -> sqlite3.Connection:
        dialect = self._dialect
        dialect._mutex.acquire()
        try:
            if not dialect.writer.acquire(dialect._timeout):
                raise dialect.waited_too_long()
        except BaseException:
            dialect._mutex.release()
            raise
        return self._conn

    def __exit__(self, *exc: object) -> None:
        try:
            self._dialect.writer.release()
        finally:
            self._dialect._mutex.release()


class _Holding:
    """A reader's hold on the shared connection: this process's mutex only."""

    __slots__ = ("_conn", "_mutex")

    def __init__(self, mutex: threading.RLock, conn: sqlite3.Connection) -> None:
        self._mutex, self._conn = mutex, conn

    def __enter__(self) -> sqlite3.Connection:
        self._mutex.acquire()
        return self._conn

    def __exit__(self, *exc: object) -> None:
        self._mutex.release()


@functools.lru_cache(maxsize=64)
def _numbered(
    sql: str, fixed: tuple[str, ...], names: tuple[str, ...]
) -> tuple[str, tuple[str, ...]]:
    """``sql`` with its ``:name`` parameters as ``?N``, numbered in the order of ``fixed``
    then ``names`` (each row binds ``fixed``'s values, then its own, by position)."""
    order = fixed + names
    place = {name: i for i, name in enumerate(order, start=1)}
    numbered = _PARAMETER.sub(lambda m: f"?{place[m.group(1)]}", sql)
    return numbered, order


def _statements(script: str) -> Iterator[str]:
    """The statements of a migration script, one by one (triggers included), so a
    migration runs inside one transaction instead of executescript's own commits."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        if not buffer and (not line.strip() or line.lstrip().startswith("--")):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer.strip()
            buffer = ""
    if buffer.strip():
        raise ValueError(f"migration ends in an unfinished statement: {buffer[:60]!r}")
