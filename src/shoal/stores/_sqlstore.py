"""One SQL store, two dialects: what a fleet in SQLite and a fleet in PostgreSQL share.

Both keep exactly the same semantics (one contract suite runs on both), and almost all of
the code that gives them: ``SqlStore`` is the store -- the transaction, the caches, the
schema check, creation and migration -- and ``SqlTx`` (``_sqltx``) holds every verb once,
as named statements with the same names and parameters in both dialects' files (``_sql``).
A ``Dialect`` says only what differs:

* how to connect, begin, commit and roll back, and which driver errors mean what;
* how lists are passed (one JSON array on SQLite, an array on PostgreSQL) and how a
  statement runs over many rows (executemany vs. arrays);
* how writers share the fleet -- SQLite's FIFO writer queue (``_writerlock``), one writer
  at a time, vs. PostgreSQL's advisory locks and row locks, writers side by side. A dialect
  whose writers run side by side (``side_by_side``) gets the statements that exist only for
  that (``lock_claimer``, ``lock_key``, ``lock_steals``); on SQLite they are no-ops it never
  runs. Read-only transactions run the read set of statements, without locking clauses;
* how waiting agents hear of new work (LISTEN/NOTIFY on PostgreSQL, polling SQLite's
  data_version) and how the fleet's mark and version are kept;
* whether the everyday claim can run as one statement (``Capabilities.direct_claims``:
  PostgreSQL's server-side function, which saves the round trips; see
  ``SqlStore.claim_directly``).

A transaction
-------------
``write()`` and ``read()`` share one skeleton: take a connection (and the writer's turn),
begin, run the verbs, then -- in one pipeline where the dialect has one -- write the events
held back, send the wake-up if work appeared, and commit. On any error the transaction
rolls back and the caches are cleared.

Caches
------
The store keeps the skill sets (ids never change once given) and the parsed settings
between transactions: committed data only. A rolled-back transaction may have put what it
wrote there (a skill set it added gets its id reused by the next one committed), so a
rollback clears them.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, suppress
from typing import Any

from shoal import policy
from shoal._values import replace
from shoal.errors import SchemaMismatch, StoreError
from shoal.model import Task
from shoal.settings import Settings
from shoal.stores._sql import load_migrations, migration_count
from shoal.stores._sqldialect import Dialect
from shoal.stores._sqltx import SqlTx
from shoal.stores.base import DirectOutcome, Finishing

__all__ = ["Dialect", "SqlStore"]


class SqlStore:
    """A fleet in a SQL database; ``dialect`` says which (see the module docstring)."""

    def __init__(self, dialect: Dialect, url: str, *, create: bool) -> None:
        self.url = url
        self.created = False
        self.capabilities = dialect.capabilities
        self._d = dialect
        self._pid = os.getpid()
        self._skillsets: dict[int, tuple[str, ...]] = {}
        self._settings: tuple[str | None, Settings] = (None, Settings())
        self._cache_lock = threading.Lock()
        try:
            self._prepare(create)
            dialect.opened()
        except BaseException as exc:
            replaced = dialect.abandon(exc)
            if replaced is exc:
                raise
            raise replaced from exc

    # --------------------------------------------------------------- schema

    def _exec(self, conn: Any, name: str, params: Mapping[str, Any] | None = None) -> Any:
        return conn.execute(self._d.queries[name], params or self._d.no_params)

    def _first(self, conn: Any, name: str, params: Mapping[str, Any] | None = None) -> Any:
        row = self._exec(conn, name, params).fetchone()
        return None if row is None else row[0]

    def _version(self, conn: Any) -> int:
        """The fleet's schema version (0: none yet); refuses another program's data."""
        if not self._first(conn, "schema_exists", {"schema": self._d.schema}):
            return 0
        if self._first(conn, "migrations_table"):
            return int(self._first(conn, "schema_version") or 0)
        if self._first(conn, "foreign_tables"):
            raise self._d.foreign()
        return 0

    def _prepare(self, create: bool) -> None:
        """Check that the place holds a fleet of this schema version; create or migrate it
        if ``create`` allows. Racing openers take turns (``Dialect.opening``)."""
        d, current = self._d, migration_count(self._d.name)
        with d.opening() as conn:
            self._exec(conn, "lock_fleet", {"key": d.migrate_key})
            version = self._version(conn)
            if version > current:
                raise SchemaMismatch(
                    f"the fleet at {d.where} has schema version {version}, newer than this "
                    f"shoal understands ({current})",
                    hint=d.upgrade_hint,
                )
            if version < current and not create:
                error, has, hint = d.not_upgraded(version)
                raise error(
                    f"{has}; this shoal works with store schema version {current}, and does "
                    "not upgrade a fleet unasked",
                    hint=hint,
                )
            d.before_migrating(conn)
            if version < current:
                self._migrate(conn, version)
        if self.created:
            d.log.info(
                "applied migrations %s to %s: %s %d",
                ", ".join(name for _n, name, _s in load_migrations(d.name)[version:]),
                d.target,
                d.version_word,
                current,
            )

    def _migrate(self, conn: Any, version: int) -> None:
        d = self._d
        migrations = load_migrations(d.name)
        current = len(migrations)
        d.log.debug("migrating %s from %s %d to %d", d.target, d.version_word, version, current)
        d.begin_migration(conn)
        try:
            self._exec(conn, "create_migrations_table")
            for number, name, script in migrations[version:]:
                d.run_script(conn, script)
                self._exec(conn, "record_migration", {"version": number, "name": name})
            d.end_migration(conn, current)
        except BaseException:
            d.abort_migration(conn, version)
            raise
        self.created = True

    # --------------------------------------------------------------- transactions

    def _same_process(self) -> None:
        if os.getpid() != self._pid:
            raise StoreError(
                "this fleet was opened in another process (before a fork)",
                hint="open the fleet again in this process: Fleet.open(url)",
            )

    def write(self, *, exclusive: bool = False) -> AbstractContextManager[SqlTx]:
        """A read-write transaction; ``exclusive`` for fleet-wide changes (see ``Store``)."""
        return _Transaction(self, True, exclusive)

    def read(self) -> AbstractContextManager[SqlTx]:
        """A read-only transaction over one snapshot."""
        return _Transaction(self, False, False)

    def _rollback(self, conn: Any) -> None:
        with self._cache_lock:  # only committed data may stay (module docstring)
            self._skillsets.clear()
            self._settings = (None, Settings())
        self._d.rollback(conn)

    def claim_directly(
        self,
        agent_id: str,
        n: int,
        now: float,
        tokens: Sequence[str],
        finishing: Sequence[Finishing] = (),
    ) -> DirectOutcome | None:
        """The everyday claim in one statement, where the dialect has it (see ``Store``).

        The terms come from the settings last read, and the statement refuses if the
        stored settings are not those any more, so they are never stale. ``longest_first``
        is left to the general path."""
        d = self._d
        raw, settings = self._settings
        if not self.capabilities.direct_claims or policy.longest_first(settings):
            return None
        self._same_process()
        params = {
            "fleet_lock": d.fleet_key,
            "agent": agent_id,
            "n": n,
            "now": now,
            "tokens": list(tokens),
            "finish_ids": [item.task_id for item in finishing],
            "finish_tokens": [item.token for item in finishing],
            "finish_results": [
                None if item.result is None else json.dumps(item.result) for item in finishing
            ],
            "settings": raw,
            "lease_ttl": settings.lease_ttl,
            "domain_bonus": policy.domain_bonus_key(settings.aging),
            "locality_wait": settings.locality_wait,
            "domain_wait": settings.domain_wait,
            "seen_resolution": policy.SEEN_RESOLUTION,
            "silent_before": now - settings.heartbeat_timeout,
        }
        with d.connection(True) as conn:
            try:
                rows = d.direct_claim(conn, d.queries["direct_claim"], params)
                if rows is None:
                    return None
                reader = SqlTx(self, conn, False)
                rows, unseen = _seen_by_the_statement(rows)
                finished = tuple(reader.task_of(r[4:]) for r in rows if r[0] == "finished")
                granted = tuple(
                    (reader.task_of(r[4:]), r[3], r[1], r[2]) for r in rows if r[0] == "granted"
                )
                if unseen:  # their later columns, read again now that they are visible
                    finished = tuple(_read_again(reader, t, unseen) for t in finished)
                    granted = tuple((_read_again(reader, t, unseen), *rest) for t, *rest in granted)
            except d.errors as exc:
                d.failed(conn)
                raise d.translate(exc) from exc
        d.committed()
        return DirectOutcome(finished, granted)

    # --------------------------------------------------------------- the rest

    def wait_for_change(self, timeout: float) -> bool:
        """Block until another writer may have changed the fleet (see the dialect)."""
        self._same_process()
        return self._d.wait_for_change(timeout)

    def close(self) -> None:
        dialect = getattr(self, "_d", None)
        if dialect is not None:
            dialect.close()

    def __del__(self) -> None:
        with suppress(Exception):
            self.close()


class _Transaction:
    """One transaction of a ``SqlStore`` (module docstring, "A transaction"): take a
    connection (and a writer's turn) and begin; at the end, in one pipeline where the
    dialect has one, write the events held back, send the wake-up if work appeared and
    commit -- or, on any error, roll back, a driver's error raised as the shoal error it
    means -- and give the connection back. A class rather than a generator: every verb
    runs one, and this is the cheaper way to say it."""

    __slots__ = ("_conn", "_exclusive", "_hold", "_store", "_tx", "_write")

    def __init__(self, store: SqlStore, write: bool, exclusive: bool) -> None:
        self._store, self._write, self._exclusive = store, write, exclusive

    def __enter__(self) -> SqlTx:
        store = self._store
        store._same_process()
        d = store._d
        self._hold = d.connection(self._write)
        conn = self._conn = self._hold.__enter__()
        try:
            d.begin(conn, self._write, self._exclusive)
        except BaseException as exc:
            translated = self._fail(exc)
            if translated is None:
                raise
            raise translated from exc
        self._tx = SqlTx(store, conn, self._write)
        return self._tx

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: Any
    ) -> None:
        if exc is not None:
            translated = self._fail(exc)
            if translated is not None:
                raise translated from exc
            return
        d, conn = self._store._d, self._conn
        try:
            with d.pipeline(conn):  # the held-back events, the wake-up and COMMIT
                self._tx.finish()
                d.commit(conn)
        except BaseException as error:
            translated = self._fail(error)
            if translated is None:
                raise
            raise translated from error
        self._hold.__exit__(None, None, None)
        if self._write:
            d.committed()

    def _fail(self, exc: BaseException) -> BaseException | None:
        """Roll back and give the connection back; the shoal error to raise for a driver's
        error (None: raise ``exc`` itself)."""
        d = self._store._d
        try:
            if isinstance(exc, d.errors):
                d.failed(self._conn)
                return d.translate(exc)
            return None
        finally:
            try:
                self._store._rollback(self._conn)
            finally:
                self._hold.__exit__(None, None, None)


#: Where a direct claim's row holds the task's labels: after role, source, origin and token,
#: the task's columns (``_sqlreads``), labels the 30th of them.
_DIRECT_LABELS = 4 + 29


def _seen_by_the_statement(rows: list[Any]) -> tuple[list[Any], set[int]]:
    """A direct claim's rows, and the ids of tasks its outer statement could not see.

    The claim function reads the fleet afresh, statement by statement, so it may take a task
    posted after the outer statement began. The columns the statement reads beside the
    function's (a task's labels and poster; its group) come from the statement's own view,
    in which such a task does not exist yet: they come back NULL. Labels are never NULL in
    the table, so a NULL there marks the task; its row is given empty columns so it decodes,
    and the caller reads those columns again (``_read_again``)."""
    unseen = {r[4] for r in rows if r[_DIRECT_LABELS] is None}
    if not unseen:
        return rows, unseen
    fixed = [
        (*r[:_DIRECT_LABELS], "[]", *r[_DIRECT_LABELS + 1 :]) if r[4] in unseen else r for r in rows
    ]
    return fixed, unseen


def _read_again(reader: SqlTx, task: Task, unseen: set[int]) -> Task:
    """``task`` with the columns its claim's statement could not see, read now (a statement
    of its own: the connection is in autocommit, and the claim has committed)."""
    if task.id not in unseen:
        return task
    fresh = reader.get_task(task.id)
    if fresh is None:
        return task
    return replace(task, labels=fresh.labels, posted_by=fresh.posted_by, group=fresh.group)
