"""The PostgreSQL store: one fleet shared by agents on many hosts, through one URL.

It keeps exactly the semantics of the SQLite store (one contract suite runs on both); what
differs is how writers share the fleet.

Writers side by side
--------------------
SQLite has one writer at a time. Here the everyday verbs -- post, claim, complete, fail,
release, defer, heartbeat -- run at once, each one short READ COMMITTED transaction:

* candidates are found with ``FOR UPDATE SKIP LOCKED``, so a claimer never waits on a task
  another claimer is taking, and no task is leased twice;
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
Statements are sent in pipeline mode: one whose result the caller does not need yet (BEGIN,
the fleet lock, an UPDATE, the events, the wake-up, COMMIT) goes out with the next one that
must be answered, so a claim costs about three round trips whatever its batch size.

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
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import threading
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from shoal.errors import (
    InvalidStoreURL,
    SchemaMismatch,
    StoreError,
    StoreNotFound,
    StoreUnavailable,
    WriteConflict,
)
from shoal.model import Agent, Candidate, Event, Task, TaskState
from shoal.policy import Locality, StealFilter
from shoal.settings import Settings
from shoal.stores._sql import load_migrations, load_queries
from shoal.stores._sqltx import SqlTx, agent_of, candidate_of, split_skills
from shoal.stores.base import Capabilities, ClaimContext, NewTask

try:
    import psycopg
    import psycopg.errors
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise InvalidStoreURL(
        f"PostgreSQL fleets need the psycopg driver, which is not installed ({exc.name})",
        hint="pip install 'shoal[postgres]'",
    ) from exc

__all__ = ["DEFAULT_SCHEMA", "PostgresStore", "postgres_target"]

DEFAULT_SCHEMA = "shoal"
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_OUR_OPTIONS = {"schema", "pool_size", "connect_timeout"}
_Q = load_queries("postgres")
#: The same statements for read-only transactions, which may not (and need not) lock rows:
#: a preview of a claim reads what the claim would lock.
_Q_READ = {
    name: re.sub(r"\s+FOR (UPDATE|SHARE)( OF \w+)?( SKIP LOCKED)?", "", sql)
    for name, sql in _Q.items()
}
_MIGRATIONS = load_migrations("postgres")
SCHEMA_VERSION = len(_MIGRATIONS)

log = logging.getLogger(__name__)
#: Advisory lock keys (per database): the fleet lock and the steal turn, salted by schema.
_FLEET_LOCK, _STEAL_LOCK, _MIGRATE_LOCK = 1, 2, 3
#: How long the log waits for a gap in event ids to fill before taking it for a rollback.
_EVENT_GAP_GRACE = 10.0
#: While the listening connection is down, waiters poll this often.
_POLL_FALLBACK = 0.25
#: The fleet lock, taken in the message that begins the transaction (see _transaction).
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


def _where(url: str) -> str:
    """The URL without a password, to show in messages."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, host = netloc.rsplit("@", 1)
        netloc = f"{user.split(':', 1)[0]}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


class PostgresStore:
    """A fleet in a PostgreSQL schema. See the module docstring."""

    def __init__(self, url: str, *, create: bool = True) -> None:
        self.url = url
        self.created = False
        self._where = _where(url)
        conninfo, self.schema, options = postgres_target(url)
        try:
            pool_size = int(options.get("pool_size", "4"))
            if not 1 <= pool_size <= 100:
                raise ValueError
        except ValueError:
            raise InvalidStoreURL(
                f"pool_size={options.get('pool_size')!r} is not a number from 1 to 100",
                hint="e.g. ?pool_size=8 (connections this process may use at once)",
            ) from None
        self._conninfo = conninfo
        self._connect_kwargs: dict[str, Any] = {
            "autocommit": True,
            "options": f"-c search_path={self.schema}",
            "application_name": "shoal",
        }
        salt = zlib.crc32(self.schema.encode()) << 8  # one fleet's locks per schema
        self._fleet_key = salt | _FLEET_LOCK
        self._steal_key = salt | _STEAL_LOCK
        self._migrate_key = salt | _MIGRATE_LOCK
        self._channel = f"shoal_work_{self.schema}"
        self._pid = os.getpid()
        self._skillsets: dict[int, tuple[str, ...]] = {}
        self._settings: tuple[str | None, Settings] = (None, Settings())
        self._cache_lock = threading.Lock()
        self.capabilities = Capabilities(shared=True, durable=True, notifies=True, fair=True)
        self._listener: _Listener | None = None
        self._listener_lock = threading.Lock()
        # The wake-up count each thread saw when its last transaction began: a wait after
        # an empty claim counts from there, so a NOTIFY sent while that claim ran is not
        # lost (it would otherwise cost the waiter a whole re-check interval).
        self._seen = threading.local()
        self._pool: ConnectionPool | None = None
        self._prepare(create)
        self._pool = ConnectionPool(
            conninfo,
            kwargs=self._connect_kwargs,
            min_size=1,
            max_size=pool_size,
            open=False,
            name=f"shoal-{self.schema}",
            timeout=30.0,
        )
        try:
            self._pool.open(wait=True, timeout=30.0)
        except PoolTimeout as exc:
            self._pool.close()
            log.warning("no connection to the fleet at %s within 30s", self._where)
            raise StoreUnavailable(
                f"cannot open connections to the fleet at {self._where}",
                hint="check that the server is up and accepts connections; then try again",
            ) from exc
        log.debug(
            "opened the fleet at %s (schema %s, version %d, pool of up to %d connections)",
            self._where,
            self.schema,
            SCHEMA_VERSION,
            pool_size,
        )

    # --------------------------------------------------------------- schema

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(self._conninfo, **self._connect_kwargs)
        except psycopg.OperationalError as exc:
            raise _unreachable(exc, self._where) from exc
        except psycopg.ProgrammingError as exc:
            raise InvalidStoreURL(
                f"store URL {self._where!r} is not usable: {_first_line(exc)}",
                hint="write postgresql://USER@HOST:PORT/DATABASE[?schema=NAME]",
            ) from exc

    def _prepare(self, create: bool) -> None:
        """Check that the schema holds a fleet of this version; create or migrate it if
        ``create`` allows. Racing openers take turns on an advisory lock."""
        with self._connect() as conn:
            try:
                conn.execute("BEGIN")
                conn.execute(_Q["lock_fleet"], {"key": self._migrate_key})
                exists = conn.execute(_Q["schema_exists"], {"schema": self.schema}).fetchone()
                has_schema = bool(exists and exists[0])
                version = 0
                if has_schema:
                    marked = conn.execute(_Q["migrations_table"]).fetchone()
                    if marked and marked[0]:
                        row = conn.execute(_Q["schema_version"]).fetchone()
                        version = int(row[0] or 0) if row else 0
                    else:
                        tables = conn.execute(_Q["foreign_tables"]).fetchone()
                        if tables and tables[0]:
                            raise StoreError(
                                f"schema {self.schema!r} at {self._where} holds tables that "
                                "are not a shoal fleet",
                                hint="choose another schema with ?schema=NAME",
                            )
                if version > SCHEMA_VERSION:
                    raise SchemaMismatch(
                        f"the fleet at {self._where} has schema version {version}, newer than "
                        f"this shoal understands ({SCHEMA_VERSION})",
                        hint="upgrade shoal (pip install -U 'shoal[postgres]') on this host",
                    )
                if version < SCHEMA_VERSION and not create:
                    what = "no fleet yet" if version == 0 else f"the older schema version {version}"
                    raise (StoreNotFound if version == 0 else SchemaMismatch)(
                        f"{self._where} has {what}; this shoal works with store schema version "
                        f"{SCHEMA_VERSION}, and does not upgrade a fleet unasked",
                        hint=f"run `shoal init --store {self._where}` to create or upgrade it "
                        "(tasks are kept)",
                    )
                if version < SCHEMA_VERSION:
                    log.debug(
                        "migrating schema %s at %s from version %d to %d",
                        self.schema,
                        self._where,
                        version,
                        SCHEMA_VERSION,
                    )
                    conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
                    conn.execute(_Q["create_migrations_table"])
                    for number, name, script in _MIGRATIONS[version:]:
                        conn.execute(script.encode())
                        conn.execute(_Q["record_migration"], {"version": number, "name": name})
                    self.created = True
                conn.execute("COMMIT")
                if self.created:
                    log.info(
                        "applied migrations %s to schema %s at %s: version %d",
                        ", ".join(name for _n, name, _s in _MIGRATIONS[version:]),
                        self.schema,
                        self._where,
                        SCHEMA_VERSION,
                    )
            except psycopg.errors.InsufficientPrivilege as exc:
                raise StoreError(
                    f"not allowed to create the fleet at {self._where}: {_first_line(exc)}",
                    hint="ask for CREATE on the database, or have its owner run `shoal init`",
                ) from exc
            except psycopg.OperationalError as exc:
                raise _unreachable(exc, self._where) from exc

    # --------------------------------------------------------------- transactions

    def _same_process(self) -> None:
        if os.getpid() != self._pid:
            raise StoreError(
                "this fleet was opened in another process (before a fork)",
                hint="open the fleet again in this process: Fleet.open(url)",
            )

    @contextmanager
    def _transaction(self, begin: str, lock: str | None) -> Iterator[PostgresTx]:
        self._same_process()
        if self._pool is None:
            raise StoreError("this fleet is closed", hint="open it again: Fleet.open(url)")
        try:
            conn = self._pool.getconn()
        except PoolTimeout as exc:
            log.warning("no connection to the fleet at %s within 30s", self._where)
            raise StoreUnavailable(
                f"no connection to the fleet at {self._where} within 30s",
                hint="the server may be down or at max_connections; nothing was changed, try again",
            ) from exc
        tx = PostgresTx(self, conn, read_only=lock is None)
        listener = self._listener
        self._seen.wakeups = None if listener is None else listener.wakeups
        ok = False
        try:
            # BEGIN and the fleet lock in one message (the simple protocol takes both).
            conn.execute(begin if lock is None else f"{begin}; {_LOCKS[lock] % self._fleet_key}")
            yield tx
            with conn.pipeline():  # the held-back events, the wake-up and COMMIT: one trip
                tx.finish()
                conn.execute("COMMIT")
            ok = True
        except psycopg.Error as exc:
            self._after_failure(conn)
            raise self._translate(exc) from exc
        finally:
            if not ok:
                self._rollback(conn)
            self._pool.putconn(conn)

    def write(self, *, exclusive: bool = False) -> AbstractContextManager[PostgresTx]:
        """A read-write transaction; ``exclusive`` for fleet-wide changes (module docstring)."""
        return self._transaction("BEGIN", "lock_fleet" if exclusive else "lock_fleet_shared")

    def read(self) -> AbstractContextManager[PostgresTx]:
        """A read-only transaction over one snapshot."""
        return self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", None)

    def _rollback(self, conn: psycopg.Connection[Any]) -> None:
        with self._cache_lock:
            self._skillsets.clear()
            self._settings = (None, Settings())
        if conn.broken or conn.closed:
            return
        try:
            conn.execute("ROLLBACK")
        except psycopg.Error:
            with suppress(psycopg.Error):
                conn.close()

    def _after_failure(self, conn: psycopg.Connection[Any]) -> None:
        """A broken connection means the server went away: have the pool test the others
        (and replace the dead ones) before they are handed out again."""
        if (conn.broken or conn.closed) and self._pool is not None:
            with suppress(Exception):
                self._pool.check()

    def _translate(self, exc: psycopg.Error) -> Exception:
        """A driver error as the shoal error a caller can act on. Errors that mean a bug
        in shoal (bad SQL, a broken constraint) are left as they are, to be reported."""
        text = _first_line(exc)
        if isinstance(exc, psycopg.errors.DeadlockDetected | psycopg.errors.SerializationFailure):
            log.warning("write conflict at %s (%s); nothing was changed", self._where, text)
            return WriteConflict(
                f"another writer of the fleet got in the way ({text})",
                hint="nothing was changed; try again",
            )
        if isinstance(exc, psycopg.errors.UndefinedTable | psycopg.errors.UndefinedFunction):
            return SchemaMismatch(
                f"the fleet at {self._where} is missing part of its schema ({text})",
                hint=f"run `shoal init --store {self._where}`",
            )
        if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
            log.warning("lost the connection to the fleet at %s (%s)", self._where, text)
            return StoreUnavailable(
                f"lost the connection to the fleet at {self._where} ({text})",
                hint="the server restarted or the network dropped; the call may not have been "
                "applied -- try again (completing twice is safe; so is a post with --key)",
            )
        return exc

    # --------------------------------------------------------------- wake-ups

    def wait_for_change(self, timeout: float) -> bool:
        """Wait for a wake-up on the fleet's channel (see the module docstring)."""
        self._same_process()
        with self._listener_lock:
            if self._listener is None:
                self._listener = _Listener(
                    self._conninfo, self._connect_kwargs, self._channel, where=self._where
                )
            listener = self._listener
        since: int | None = getattr(self._seen, "wakeups", None)
        self._seen.wakeups = None
        return listener.wait(timeout, since)

    def close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.stop()
        pool, self._pool = self._pool, None
        if pool is not None and os.getpid() == self._pid:
            with suppress(Exception):
                pool.close(timeout=1.0)

    def __del__(self) -> None:
        with suppress(Exception):
            self.close()


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


class PostgresTx(SqlTx):
    """The store verbs (see ``StoreTx``) as named queries on one pooled connection."""

    __slots__ = ("_c", "_events", "_read_only", "_s", "_stole", "_wake")
    _s: PostgresStore

    def __init__(
        self, store: PostgresStore, conn: psycopg.Connection[Any], *, read_only: bool
    ) -> None:
        self._s = store
        self._c = conn
        self._read_only = read_only  # then no row is locked: there is nothing to protect
        self._events: list[tuple[float, str, int | None, str | None, str | None]] = []
        self._wake = False
        self._stole = False

    def _work_appeared(self) -> None:
        self._wake = True

    def finish(self) -> None:
        """Before COMMIT: write the events held back, and wake waiters if work appeared."""
        self._flush_events()
        if self._wake:
            self._run("notify_work", {"channel": self._s._channel})

    def _flush_events(self) -> None:
        if self._events:
            at, kind, task, agent, data = zip(*self._events, strict=True)
            params = {"at": at, "kind": kind, "task": task, "agent": agent, "data": data}
            self._run("append_events", {k: list(v) for k, v in params.items()})
            self._events.clear()

    def _sql(self, name: str) -> str:
        return (_Q_READ if self._read_only else _Q)[name]

    def _one(self, name: str, params: Mapping[str, Any] | None = None) -> Any:
        return self._c.execute(self._sql(name), params).fetchone()

    def _all(self, name: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        return self._c.execute(self._sql(name), params).fetchall()

    def _run(self, name: str, params: Mapping[str, Any] | None = None) -> None:
        self._c.execute(self._sql(name), params)

    # the verbs this dialect runs its own way (the rest are SqlTx's) --------------------

    def get_agent(self, agent_id: str, *, lock: bool = False) -> Agent | None:
        row = self._one("lock_agent" if lock else "get_agent", {"id": agent_id})
        return None if row is None else agent_of(row)

    def claim_context(self, agent_id: str, now: float) -> ClaimContext | None:
        params = {"id": agent_id, "now": now}
        if self._read_only:
            row = self._one("claim_context", params)
        else:
            with self._c.pipeline():  # the lock, then a fresh read: one round trip
                self._run("lock_claimer", params)
                row = self._one("claim_context", params)
        if row is None:
            return None
        skillsets = self._s._skillsets
        if row[17] != len(skillsets):
            self.skillsets()
        settings = self._parse_settings(row[18])
        return ClaimContext(
            agent_of(row), int(row[15]), bool(row[16]), dict(self._s._skillsets), settings
        )

    def get_tasks(self, task_ids: Sequence[int], *, share: bool = False) -> dict[int, Task]:
        if not task_ids:
            return {}
        rows = self._all("share_tasks" if share else "get_tasks", {"ids": list(task_ids)})
        return {r[0]: self._task(r) for r in rows}

    def leased_task(self, task_id: int) -> tuple[Task, str | None] | None:
        row = self._one("leased_task", {"id": task_id})
        return None if row is None else (self._task(row), row[-2])

    def task_by_key(self, key: str) -> Task | None:
        self._run("lock_key", {"key": key})
        return super().task_by_key(key)

    def held_leases(self, agent_id: str, *, lock: bool = False) -> list[tuple[Task, str]]:
        rows = self._all("held_leases" if lock else "held_leases_unlocked", {"agent": agent_id})
        return [(self._task(r), r[-1]) for r in rows]

    def skillsets(self) -> dict[int, tuple[str, ...]]:
        rows = self._all("skillsets")
        cache = self._s._skillsets
        if len(rows) != len(cache):
            with self._s._cache_lock:
                cache.update((sid, split_skills(skills)) for sid, skills in rows)
        return dict(cache)

    def pool_best(
        self,
        skillsets: Sequence[int],
        domain: str | None,
        limit: int,
        held: Locality,
        now: float,
    ) -> list[Candidate]:
        params: dict[str, Any] = {"skillsets": list(skillsets), "limit": limit, "now": now}
        if domain is None:
            rows = self._all("pool_best", {**params, **_unheld(held)})
        else:
            rows = self._all("pool_best_in_domain", {**params, "domain": domain})
        return [candidate_of(r) for r in rows]

    def pool_longest(
        self, skillsets: Sequence[int], limit: int, held: Locality, now: float
    ) -> list[Candidate]:
        params = {"skillsets": list(skillsets), "limit": limit, "now": now, **_unheld(held)}
        return [candidate_of(r) for r in self._all("pool_longest", params)]

    def steal_tail(
        self, victim: str, rules: StealFilter, held: Locality, limit: int, now: float
    ) -> list[Candidate]:
        if limit <= 0 or not rules.skillsets:
            return []
        params = {
            "victim": victim,
            "min_priority": rules.min_priority,
            "skillsets": list(rules.skillsets),
            "domains": list(rules.domains),
            "cross_domain_priority": rules.cross_domain_priority,
            "free_skillset": rules.free_skillset,
            "limit": limit,
            "now": now,
            **_unheld(held),
        }
        name = "steal_tail_longest" if rules.longest else "steal_tail"
        return [candidate_of(r) for r in self._all(name, params)]

    def server_time(self) -> float | None:
        return float(self._one("server_time")[0])

    def _id_list(self, ids: Sequence[int]) -> Any:
        return list(ids)

    def window_thieves(self, since: float) -> list[str]:
        if not self._stole:  # take the steal turn once; it is held until commit
            self._run("lock_steals", {"key": self._s._steal_key})
            self._stole = True
        self._flush_events()
        return [r[0] for r in self._all("window_thieves", {"since": since})]

    # tasks: transitions ----------------------------------------------------------------

    def _skillset_id(self, skills: tuple[str, ...]) -> int:
        for sid, known in list(self._s._skillsets.items()):
            if known == skills:
                return sid
        text = ",".join(skills)
        row = self._one("insert_skillset", {"skills": text})
        return int(row[0])

    def insert_task(self, task: NewTask) -> int:
        row = self._one(
            "insert_task",
            {
                "title": task.title,
                "body": task.body,
                "payload": None if task.payload is None else json.dumps(task.payload),
                "priority": task.priority,
                "skillset": self._skillset_id(task.skills),
                "domain": task.domain,
                "state": task.state.value,
                "agent": task.agent,
                "pinned": task.pinned,
                "parent": task.parent,
                "key": task.key,
                "max_attempts": task.max_attempts,
                "lease_ttl": task.lease_ttl,
                "expected_duration": task.expected_duration,
                "waiting_on": task.waiting_on,
                "pool_key": task.pool_key,
                "seq": task.seq,
                "created_at": task.created_at,
                "ready_at": task.ready_at,
                "retry_delay": task.retry_delay,
            },
        )
        if task.state is TaskState.PENDING:
            self._work_appeared()
        return int(row[0])

    def add_deps(self, task_id: int, depends_on: Sequence[int]) -> None:
        self._run("add_deps", {"task": task_id, "ids": list(depends_on)})
        self._run("mark_depended_on", {"ids": list(depends_on)})

    def lease_tasks(
        self, agent_id: str, grants: Sequence[tuple[int, str, float, bool]], now: float
    ) -> list[Task]:
        ids, tokens, expires, stolen = (list(column) for column in zip(*grants, strict=True))
        params = {
            "agent": agent_id,
            "ids": ids,
            "tokens": tokens,
            "expires": expires,
            "stolen": stolen,
            "now": now,
        }
        rows = self._all("lease_tasks", params)
        order = {grant[0]: i for i, grant in enumerate(grants)}
        return [self._task(r) for r in sorted(rows, key=lambda r: order[r[0]])]

    def finish_leased(
        self, items: Sequence[tuple[int, str, Any]], now: float
    ) -> list[tuple[int, str | None, bool]]:
        params = {
            "ids": [task_id for task_id, _, _ in items],
            "tokens": [token for _, token, _ in items],
            "results": [None if result is None else json.dumps(result) for _, _, result in items],
            "now": now,
        }
        rows = self._all("finish_leased", params)
        return [(r[0], r[1], bool(r[2])) for r in rows]

    def rekey_pool(self, keys: Mapping[int, float]) -> None:
        self._run("set_pool_keys", {"ids": list(keys), "keys": list(keys.values())})

    def events(
        self,
        since: int,
        task_id: int | None,
        agent_id: str | None,
        limit: int,
        newest: bool = False,
    ) -> list[Event]:
        # Named in full, so that every statement's name appears where it runs.
        of_task = "events_of_task_newest" if newest else "events_of_task"
        of_agent = "events_of_agent_newest" if newest else "events_of_agent"
        every = "events_newest" if newest else "events"
        self._flush_events()
        settled = self._one("events_settled", {"grace": _EVENT_GAP_GRACE})
        until = int(settled[0] or 0) if settled else 0
        if task_id is not None:
            params = {
                "task": task_id,
                "agent": agent_id,
                "since": since,
                "until": until,
                "limit": limit,
            }
            rows = self._all(of_task, params)
        elif agent_id is not None:
            params = {"agent": agent_id, "since": since, "until": until, "limit": limit}
            rows = self._all(of_agent, params)
        else:
            rows = self._all(every, {"since": since, "until": until, "limit": limit})
        return [Event(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]) if r[5] else {}) for r in rows]


@functools.lru_cache(maxsize=256)
def _unheld(held: Locality) -> dict[str, Any]:
    """The parameters of the ``unheld`` condition (see queries.sql) for ``held``: the same
    few (nothing held, for most claims) again and again, so they are made once. Callers
    copy them into their own parameters and never change them."""
    pairs = sorted(held.reserved)
    return {
        "own_domains": list(held.domains),
        "local_since": held.local_since,
        "domain_since": held.domain_since,
        "reserved_domains": [domain for domain, _ in pairs],
        "reserved_skillsets": [skillset for _, skillset in pairs],
    }


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
