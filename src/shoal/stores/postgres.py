"""The PostgreSQL store: one fleet shared by agents on many hosts, through one URL.

It keeps exactly the semantics of the SQLite store (one contract suite runs on both) and
shares its code: it is a ``SqlStore`` (see ``_sqlstore``), and ``PostgresDialect`` below
says what is particular to PostgreSQL -- above all, how writers share the fleet.

Writers side by side
--------------------
SQLite has one writer at a time. Here the everyday verbs -- post, claim, complete, fail,
release, defer, heartbeat -- run at once, each one short READ COMMITTED transaction:

* candidates are found with ``FOR UPDATE SKIP LOCKED``, so a claimer never waits on a task
  another claimer is taking, and no task is leased twice (read-only transactions run the
  same statements without their locking clauses: see ``_sql``);
* a claim locks its agent's row first, so one agent's concurrent claims cannot pass its
  ``max_concurrent``; a finish locks the task's row (a compare-and-set on the token) and
  then the holder's;
* dependencies a post or defer relies on are read ``FOR SHARE``, so one cannot finish
  unseen between the read and the commit;
* steals take turns on an advisory lock, because the steal caps count a sliding window.

Fleet-wide changes -- registration (the agent cap), status changes, the hub's reap,
rebalance and assess, cancel, retry, settings -- hold a fleet-wide advisory lock exclusively,
and every other writer holds it shared: they see and change a fleet nobody else is changing,
as on SQLite. Two writers can still, rarely, lock rows in opposite orders; PostgreSQL then
aborts one, and ``Fleet`` runs it again (``WriteConflict``).

Round trips
-----------
The everyday claim -- finish what was done, take the next from the own queue or the pool --
is one statement, ``direct_claim`` (a PL/pgSQL function, migrations/0014): one round trip in
its own transaction, since the connections are in autocommit. It refuses the rarer cases,
having changed nothing, and they run as transactions of several statements. Those are sent
in pipeline mode: one whose result the caller does not need yet (BEGIN, the fleet lock, an
UPDATE, the events, the wake-up, COMMIT) goes out with the next one that must be answered,
so a general claim costs about three to six round trips whatever its batch size. psycopg
prepares a statement on the server once a connection has run it a few times, and the
function's own statements are planned once per connection (generic plans: each is an
index look-up whatever the values).

Wake-ups
--------
A transaction that makes work available (a post, a release or expiry, a dependency done, a
move, a revival, new settings) sends ``pg_notify`` on the fleet's channel. Each store that
waits keeps one listening connection in a background thread; waiters wake within
milliseconds. If that connection drops, waiters fall back to polling while it reconnects and
listens again.

Faults
------
A lost server (restart, network) fails the calls in flight with ``StoreUnavailable``: exit
code 4, "try again". The pool then drops its dead connections and opens new ones. Nothing a
call acknowledged is lost (commits are synchronous), and a lease whose acknowledgement was
lost simply expires.

A client that stops in the middle of a transaction (suspended with SIGSTOP or Ctrl-Z, a
paused VM, a network that drops without closing) would hold the fleet lock, and every other
agent would wait on it for ever. The server ends such a session after
``IDLE_IN_TRANSACTION`` seconds of silence inside a transaction (shoal's transactions are
milliseconds long), rolling it back and freeing the fleet; the stopped client, when it
resumes, gets ``StoreUnavailable`` and tries again.
"""

from __future__ import annotations

import os
import re
import threading
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from shoal._log import get_logger
from shoal.errors import (
    BadInput,
    InvalidStoreURL,
    SchemaMismatch,
    StoreError,
    StoreNotFound,
    StoreUnavailable,
    WriteConflict,
)
from shoal.extras import install_hint
from shoal.stores._sql import load_queries, migration_count
from shoal.stores._sqlstore import Dialect, SqlStore
from shoal.stores.base import Capabilities
from shoal.text import shown_url

try:
    import psycopg
    import psycopg.errors
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise InvalidStoreURL(
        f"PostgreSQL fleets need the psycopg driver, which is not installed ({exc.name})",
        hint=install_hint("postgres"),
    ) from exc

__all__ = ["DEFAULT_SCHEMA", "PostgresStore", "postgres_target"]

DEFAULT_SCHEMA = "shoal"
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
#: Seconds a session may sit idle inside a transaction before the server ends it (module
#: docstring, "Faults").
IDLE_IN_TRANSACTION = 30.0
_OUR_OPTIONS = {"schema", "pool_size", "connect_timeout"}
SCHEMA_VERSION = migration_count("postgres")

log = get_logger(__name__)
#: Advisory lock keys (per database): the fleet lock and the steal turn, salted by schema.
_FLEET_LOCK, _STEAL_LOCK, _MIGRATE_LOCK = 1, 2, 3
#: How long the log waits at most for a gap in event ids to fill before taking it for a
#: rollback (no longer once no running transaction could fill it: see events_settled).
_EVENT_GAP_GRACE = 10.0
#: While the listening connection is down, waiters poll this often.
_POLL_FALLBACK = 0.25
#: Connections one process may hold at once, by default: enough that a worker's task
#: threads, claim loop and heartbeat (each holding one only for a transaction) seldom wait
#: for one another. They open as needed (one at first) and close after idling.
_POOL_SIZE = 10
#: The SQLSTATE with which direct_claim refuses a case for the general path.
_DIRECT_REFUSED = "SH001"
#: The fleet lock, taken in the message that begins the transaction (see ``begin``).
_LOCKS = {
    "lock_fleet": "SELECT pg_advisory_xact_lock(%d)",
    "lock_fleet_shared": "SELECT pg_advisory_xact_lock_shared(%d)",
}


def postgres_target(url: str) -> tuple[str, str, dict[str, str]]:
    """(libpq URL without shoal's options, schema, shoal's options) of a ``postgresql://``
    URL. ``?schema=`` names the PostgreSQL schema the fleet lives in (default "shoal"), so
    several fleets can share one database; other query options go to libpq unchanged."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise InvalidStoreURL(f"{url!r} is not a postgresql:// URL")
    ours: dict[str, str] = {}
    theirs: list[tuple[str, str]] = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        (ours.__setitem__(name, value) if name in _OUR_OPTIONS else theirs.append((name, value)))
    schema = ours.pop("schema", DEFAULT_SCHEMA)
    if not _SCHEMA_NAME.match(schema):
        raise InvalidStoreURL(
            f"schema={schema!r} in store URL is not a plain PostgreSQL name",
            hint="use lower-case letters, digits and _ (e.g. ?schema=fleet_a)",
        )
    if "connect_timeout" in ours:
        theirs.append(("connect_timeout", ours.pop("connect_timeout")))
    elif not any(name == "connect_timeout" for name, _ in theirs):
        theirs.append(("connect_timeout", "10"))
    conninfo = urlunsplit(
        ("postgresql", parts.netloc, parts.path, urlencode(theirs), parts.fragment)
    )
    return conninfo, schema, ours


class PostgresStore(SqlStore):
    """A fleet in a PostgreSQL schema. See the module docstring."""

    _d: PostgresDialect

    def __init__(self, url: str, *, create: bool = True) -> None:
        dialect = PostgresDialect(url)
        self.schema = dialect.schema
        super().__init__(dialect, url, create=create)

    @property
    def _listener(self) -> _Listener | None:
        return self._d.listener


class PostgresDialect(Dialect):
    """What is particular to PostgreSQL (see the module docstring)."""

    name = "postgres"
    queries = load_queries("postgres")
    read_queries = load_queries("postgres", read_only=True)
    side_by_side = True
    heard_apart = False
    counts_by_trigger = True  # writers side by side add rows of changes (migration 6)
    json_lists = False
    pool_per_skillset = False
    upgrade_hint = "upgrade shoal (pip install -U 'shoal[postgres]') on this host"
    no_params = None
    errors = (psycopg.Error,)
    event_grace = _EVENT_GAP_GRACE
    log = log
    version_word = "version"

    def __init__(self, url: str) -> None:
        self.where = shown_url(url)
        conninfo, self.schema, options = postgres_target(url)
        self.target = f"schema {self.schema} at {self.where}"
        try:
            self._pool_size = int(options.get("pool_size", str(_POOL_SIZE)))
            if not 1 <= self._pool_size <= 100:
                raise ValueError
        except ValueError:
            raise InvalidStoreURL(
                f"pool_size={options.get('pool_size')!r} is not a number from 1 to 100",
                hint="e.g. ?pool_size=8 (connections this process may use at once)",
            ) from None
        self._conninfo = conninfo
        self._connect_kwargs: dict[str, Any] = {
            "autocommit": True,
            "options": f"-c search_path={self.schema} "
            f"-c idle_in_transaction_session_timeout={int(IDLE_IN_TRANSACTION * 1000)}",
            "application_name": "shoal",
        }
        salt = zlib.crc32(self.schema.encode()) << 8  # one fleet's locks per schema
        fleet_key = self.fleet_key = salt | _FLEET_LOCK
        self.steal_key = salt | _STEAL_LOCK
        self.migrate_key = salt | _MIGRATE_LOCK
        self.channel = f"shoal_work_{self.schema}"
        # BEGIN and the fleet lock in one message (the simple protocol takes both).
        self._begin_exclusive = f"BEGIN; {_LOCKS['lock_fleet'] % fleet_key}"
        self._begin_shared = f"BEGIN; {_LOCKS['lock_fleet_shared'] % fleet_key}"
        self._pid = os.getpid()
        self.capabilities = Capabilities(
            shared=True, durable=True, notifies=True, fair=True, direct_claims=True
        )
        self.listener: _Listener | None = None
        self._listener_lock = threading.Lock()
        # The wake-up count each thread saw when its last transaction began: a wait after
        # an empty claim counts from there, so a NOTIFY sent while that claim ran is not
        # lost (it would otherwise cost the waiter a whole re-check interval).
        self._seen = threading.local()
        self._pool: ConnectionPool | None = None

    # --------------------------------------------------------------- opening

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(self._conninfo, **self._connect_kwargs)
        except psycopg.OperationalError as exc:
            raise _unreachable(exc, self.where) from exc
        except psycopg.ProgrammingError as exc:
            raise InvalidStoreURL(
                f"store URL {self.where!r} is not usable: {_first_line(exc)}",
                hint="write postgresql://USER@HOST:PORT/DATABASE[?schema=NAME]",
            ) from exc

    @contextmanager
    def opening(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction on a connection of its own; racing openers take turns on an
        advisory lock (the store takes it first: lock_fleet)."""
        with self._connect() as conn:
            try:
                conn.execute("BEGIN")
                yield conn
                conn.execute("COMMIT")
            except psycopg.errors.InsufficientPrivilege as exc:
                raise StoreError(
                    f"not allowed to create the fleet at {self.where}: {_first_line(exc)}",
                    hint="ask for CREATE on the database, or have its owner run `shoal init`",
                ) from exc
            except psycopg.OperationalError as exc:
                raise _unreachable(exc, self.where) from exc

    def foreign(self) -> StoreError:
        return StoreError(
            f"schema {self.schema!r} at {self.where} holds tables that are not a shoal fleet",
            hint="choose another schema with ?schema=NAME",
        )

    def not_upgraded(self, version: int) -> tuple[type[StoreError], str, str]:
        what = "no fleet yet" if version == 0 else f"the older schema version {version}"
        return (
            StoreNotFound if version == 0 else SchemaMismatch,
            f"{self.where} has {what}",
            f"run `shoal init --store {self.where}` to create or upgrade it (tasks are kept)",
        )

    def begin_migration(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')

    def run_script(self, conn: psycopg.Connection[Any], script: str) -> None:
        conn.execute(script.encode())

    def opened(self) -> None:
        self._pool = ConnectionPool(
            self._conninfo,
            kwargs=self._connect_kwargs,
            min_size=1,
            max_size=self._pool_size,
            open=False,
            name=f"shoal-{self.schema}",
            timeout=30.0,
        )
        try:
            self._pool.open(wait=True, timeout=30.0)
        except PoolTimeout as exc:
            self._pool.close()
            log.warning("no connection to the fleet at %s within 30s", self.where)
            raise StoreUnavailable(
                f"cannot open connections to the fleet at {self.where}",
                hint="check that the server is up and accepts connections; then try again",
            ) from exc
        log.debug(
            "opened the fleet at %s (schema %s, version %d, pool of up to %d connections)",
            self.where,
            self.schema,
            SCHEMA_VERSION,
            self._pool_size,
        )

    # --------------------------------------------------------------- transactions

    @contextmanager
    def connection(self, write: bool) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection; the wake-up count as the transaction begins (see _seen)."""
        if self._pool is None:
            raise StoreError("this fleet is closed", hint="open it again: Fleet.open(url)")
        try:
            conn = self._pool.getconn()
        except PoolTimeout as exc:
            log.warning("no connection to the fleet at %s within 30s", self.where)
            raise StoreUnavailable(
                f"no connection to the fleet at {self.where} within 30s",
                hint="the server may be down or at max_connections; nothing was changed, try again",
            ) from exc
        listener = self.listener
        self._seen.wakeups = None if listener is None else listener.wakeups
        try:
            yield conn
        finally:
            self._pool.putconn(conn)

    def begin(self, conn: psycopg.Connection[Any], write: bool, exclusive: bool) -> None:
        """A writer holds the fleet lock, exclusively for a fleet-wide change (module
        docstring); a reader reads one snapshot."""
        if not write:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        else:
            conn.execute(self._begin_exclusive if exclusive else self._begin_shared)

    def pipeline(self, conn: psycopg.Connection[Any]) -> AbstractContextManager[Any]:
        return conn.pipeline()

    def commit(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute("COMMIT")

    def rollback(self, conn: psycopg.Connection[Any]) -> None:
        if conn.broken or conn.closed:
            return
        try:
            conn.execute("ROLLBACK")
        except psycopg.Error:
            with suppress(psycopg.Error):
                conn.close()

    def direct_claim(
        self, conn: psycopg.Connection[Any], sql: str, params: Mapping[str, Any]
    ) -> list[Any] | None:
        """One statement, so one transaction (the connection is in autocommit) and one round
        trip; a refusal rolls back whatever the function had done."""
        try:
            return conn.execute(sql, params).fetchall()
        except psycopg.Error as exc:
            if exc.sqlstate == _DIRECT_REFUSED:
                return None
            raise

    def failed(self, conn: psycopg.Connection[Any]) -> None:
        """A broken connection means the server went away: have the pool test the others
        (and replace the dead ones) before they are handed out again."""
        if (conn.broken or conn.closed) and self._pool is not None:
            with suppress(Exception):
                self._pool.check()

    def translate(self, exc: Exception) -> Exception:
        """A driver error as the shoal error a caller can act on. Errors that mean a bug
        in shoal (bad SQL, a broken constraint) are left as they are, to be reported."""
        text = _first_line(exc)
        if isinstance(exc, psycopg.errors.DeadlockDetected | psycopg.errors.SerializationFailure):
            log.warning("write conflict at %s (%s); nothing was changed", self.where, text)
            return WriteConflict(
                f"another writer of the fleet got in the way ({text})",
                hint="nothing was changed; try again",
            )
        if isinstance(exc, psycopg.errors.UndefinedTable | psycopg.errors.UndefinedFunction):
            return SchemaMismatch(
                f"the fleet at {self.where} is missing part of its schema ({text})",
                hint=f"run `shoal init --store {self.where}`",
            )
        if isinstance(exc, psycopg.DataError):
            # A value the server cannot keep (NUL in text, a number out of range): input
            # the checks in shoal.text and shoal.validation should have refused first.
            return BadInput(
                f"the fleet at {self.where} cannot store that value ({text})",
                hint="nothing was changed; remove NUL and control characters, keep numbers "
                "in range",
            )
        if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
            log.warning("lost the connection to the fleet at %s (%s)", self.where, text)
            return StoreUnavailable(
                f"lost the connection to the fleet at {self.where} ({text})",
                hint="the server restarted or the network dropped; the call may not have been "
                "applied -- try again (completing twice is safe; so is a post with --key)",
            )
        return exc

    # --------------------------------------------------------------- statements

    def run_many(
        self,
        conn: psycopg.Connection[Any],
        sql: str,
        fixed: Mapping[str, Any],
        names: Sequence[str],
        rows: Any,
    ) -> None:
        """One statement, one array per column (unnest): one round trip for any count."""
        params = dict(fixed)
        for i, name in enumerate(names):
            params[name] = [row[i] for row in rows]
        conn.execute(sql, params)

    def seqs(self, rows: list[Any], count: int) -> list[int]:
        """A sequence's values: other writers may take some in between."""
        return sorted(int(r[0]) for r in rows)

    # --------------------------------------------------------------- wake-ups

    def wait_for_change(self, timeout: float) -> bool:
        """Wait for a wake-up on the fleet's channel (see the module docstring)."""
        with self._listener_lock:
            if self.listener is None:
                self.listener = _Listener(
                    self._conninfo, self._connect_kwargs, self.channel, where=self.where
                )
            listener = self.listener
        since: int | None = getattr(self._seen, "wakeups", None)
        self._seen.wakeups = None
        return listener.wait(timeout, since)

    def close(self) -> None:
        listener, self.listener = self.listener, None
        if listener is not None:
            listener.stop()
        pool, self._pool = self._pool, None
        if pool is not None and os.getpid() == self._pid:
            with suppress(Exception):
                pool.close(timeout=1.0)


class _Listener:
    """One LISTEN connection in a daemon thread; waiters wait on a condition it signals.

    Every (re)connection counts as a wake-up, since notifications sent while nobody listened
    are lost: whoever waits then looks again. While the connection is down, waiters poll."""

    def __init__(
        self, conninfo: str, kwargs: Mapping[str, Any], channel: str, *, where: str = ""
    ) -> None:
        self._conninfo = conninfo
        self._where = where or channel  # for the log: the URL without its password
        self._kwargs = dict(kwargs)
        self._channel = channel
        self._changed = threading.Condition()
        self._wakeups = 0
        self._listening = False
        self._stopping = False
        self._conn: psycopg.Connection[Any] | None = None
        self._thread = threading.Thread(target=self._run, name=f"shoal-{channel}", daemon=True)
        self._thread.start()

    @property
    def wakeups(self) -> int:
        return self._wakeups

    def wait(self, timeout: float, since: int | None = None) -> bool:
        """Wait for a wake-up after the ``since``-th (default: from now)."""
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._changed:
            seen = self._wakeups if since is None else since
            while self._wakeups == seen:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                if not self._listening:  # poll while the connection is down
                    self._changed.wait(min(remaining, _POLL_FALLBACK))
                    return True
                self._changed.wait(remaining)
            return True

    def _wake(self) -> None:
        with self._changed:
            self._wakeups += 1
            self._changed.notify_all()

    def _run(self) -> None:
        backoff = 0.05
        lost = False  # the connection dropped and has not come back yet
        while not self._stopping:
            try:
                with psycopg.connect(self._conninfo, **self._kwargs) as conn:
                    self._conn = conn
                    conn.execute(f'LISTEN "{self._channel}"')
                    self._listening = True
                    backoff = 0.05
                    if lost:
                        log.warning("listening again at %s (reconnected)", self._where)
                    else:
                        log.debug("listening for wake-ups at %s", self._where)
                    lost = False
                    self._wake()
                    while not self._stopping:
                        for _ in conn.notifies(timeout=1.0, stop_after=1):
                            self._wake()
            except psycopg.Error as exc:
                if self.stopping:
                    pass  # the connection was cancelled on purpose
                elif not lost:
                    lost = True
                    log.warning(
                        "lost the LISTEN connection to %s (%s); waiters poll while it reconnects",
                        self._where,
                        _first_line(exc),
                    )
                else:
                    log.debug("reconnecting to %s failed (%s)", self._where, _first_line(exc))
            finally:
                self._conn = None
                self._listening = False
            if not self._stopping:
                self._wake()  # waiters fall back to polling
                time.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    @property
    def stopping(self) -> bool:
        return self._stopping

    def stop(self) -> None:
        self._stopping = True
        conn = self._conn
        if conn is not None:
            with suppress(Exception):
                conn.cancel_safe(timeout=1.0)
        self._thread.join(timeout=2.0)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _unreachable(exc: psycopg.OperationalError, where: str) -> StoreError:
    text = _first_line(exc)
    if "does not exist" in text and "database" in text:
        return StoreNotFound(
            f"{where}: {text}",
            hint="create the database first (createdb NAME), then `shoal init --store URL`",
        )
    if "authentication" in text or "password" in text or "role" in text:
        return StoreError(
            f"{where} refused the login: {text}",
            hint="check the user and password in the URL (postgresql://USER:PASS@HOST/DB)",
        )
    return StoreUnavailable(
        f"cannot reach the fleet at {where}: {text}",
        hint="check the host and port and that PostgreSQL is running; then try again",
    )
