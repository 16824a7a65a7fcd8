"""The SQLite store: the embedded default, one file shared by every local process.

Atomicity and fairness
----------------------
Every write is one ``BEGIN IMMEDIATE`` transaction, so SQLite's single-writer lock makes
each claim atomic. But SQLite's stock busy handler is not fair: a writer that finds the
lock taken sleeps on a growing schedule and retries, and under steady contention one
unlucky process can lose every retry for seconds while others win. So writers first take
their turn in a FIFO writer queue kept in a small file beside the database (``_writerlock``:
a robust process-shared mutex that survives ``kill -9``); when a writer reaches SQLite the
lock is free, and SQLite's own busy wait is left for outsiders (another tool touching the
file). Reads never queue: WAL gives them a snapshot.

Cost that does not grow with the fleet
--------------------------------------
Each step of the claim reads a partial index (see migrations/0001_initial.sql): the
owner's queue head, the top of the pool per skill set (the static-key trick in policy),
the tail of a victim's queue, the leases due to expire. Finished tasks are in none of
them. Counts by state and queue depths are kept by triggers.

Errors from the driver are translated here: a busy or broken database becomes
``StoreUnavailable``, a file that is not a fleet becomes ``StoreError``, a schema from
another version ``SchemaMismatch``.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from shoal.errors import (
    InvalidStoreURL,
    SchemaMismatch,
    StoreError,
    StoreNotFound,
    StoreUnavailable,
)
from shoal.model import Agent, Candidate, Event, Task
from shoal.policy import Locality, StealFilter
from shoal.settings import Settings
from shoal.stores._sql import load_migrations, load_queries
from shoal.stores._sqltx import SqlTx, agent_of, candidate_of, split_skills
from shoal.stores._writerlock import open_writer_lock
from shoal.stores.base import Capabilities, ClaimContext, NewTask

__all__ = ["APPLICATION_ID", "SqliteStore"]

#: Marks a database file as a shoal fleet ("SHOL").
APPLICATION_ID = 0x53484F4C
_SYNCHRONOUS = {"off": "OFF", "normal": "NORMAL", "full": "FULL"}
_CHECKPOINT_CHECK = 100  # commits of one connection between looks at the WAL's size
_CHECKPOINT_BYTES = 32 << 20  # checkpoint once the WAL is this big
_Q = load_queries("sqlite")
_MIGRATIONS = load_migrations("sqlite")
SCHEMA_VERSION = len(_MIGRATIONS)

log = logging.getLogger(__name__)


class SqliteStore:
    """A fleet in one SQLite file. See the module docstring."""

    def __init__(
        self,
        path: Path,
        *,
        url: str,
        create: bool = True,
        synchronous: str = "normal",
        busy_timeout: str | float = 30.0,
    ) -> None:
        self.url = url
        self.path = Path(path)
        self.created = False
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
        fresh = not self.path.exists()
        if fresh and not create:
            raise StoreNotFound(
                f"there is no fleet at {self.path}",
                hint=f"create it with `shoal init --store {url}`, or check the path",
            )
        if fresh:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreNotFound(
                    f"cannot create a fleet at {self.path}: {exc.strerror}"
                ) from exc
        self._mutex = threading.RLock()
        self._pid = os.getpid()
        # Commits on this connection do not move SQLite's data_version (it counts the other
        # connections' commits), so threads sharing this store hear of them here.
        self._commits_here = threading.Condition()
        self._skillsets: dict[int, tuple[str, ...]] = {}
        self._settings: tuple[str | None, Settings] = (None, Settings())
        _refuse_foreign_file(self.path)
        self._timeout = timeout
        lock_path = Path(f"{self.path}.lock")
        lock_existed = lock_path.exists()
        try:
            self._writer = open_writer_lock(lock_path)
        except OSError as exc:
            raise StoreNotFound(f"cannot open a fleet at {self.path}: {exc.strerror}") from exc
        self.capabilities = Capabilities(
            shared=True, durable=True, notifies=False, fair=self._writer.fair
        )
        try:
            self._conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=timeout
            )
            self._conn.execute(f"PRAGMA synchronous = {_SYNCHRONOUS[synchronous.lower()]}")
            self._conn.execute("PRAGMA cache_size = -16000")
            self._conn.execute("PRAGMA temp_store = MEMORY")
            # Checkpoints copy the WAL back into the database and sync it: milliseconds.
            # SQLite would run one inside some unlucky writer's COMMIT, with every other
            # writer queued behind it; shoal runs them itself, outside the writer queue.
            self._conn.execute("PRAGMA wal_autocheckpoint = 0")
            self._conn.execute("PRAGMA journal_size_limit = 67108864")
            self._commits = 0
            self._prepare(create)
            self._data_version = self._read_data_version()
        except BaseException as exc:
            log.debug("could not open the fleet at %s: %r", self.path, exc)
            self.close()
            if not lock_existed:  # leave no trace beside a file that is not our fleet
                lock_path.unlink(missing_ok=True)
            if isinstance(exc, sqlite3.DatabaseError):
                raise _translate(exc, self.path) from exc
            raise
        log.debug(
            "opened the fleet at %s (schema version %d, %s writer queue, busy_timeout %gs)",
            self.path,
            SCHEMA_VERSION,
            "fair" if self._writer.fair else "flock",
            timeout,
        )

    # --------------------------------------------------------------- schema

    def _prepare(self, create: bool) -> None:
        """Check that the file is a fleet of this schema version; create or migrate it if
        ``create`` allows. Runs under the write lock, so racing openers agree."""
        with self._locked():
            app_id = self._conn.execute("PRAGMA application_id").fetchone()[0]
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            tables = self._conn.execute(_Q["count_tables"]).fetchone()[0]
            if app_id not in (0, APPLICATION_ID) or (app_id == 0 and tables):
                raise StoreError(
                    f"{self.path} is a SQLite database but not a shoal fleet",
                    hint="point --store at a fleet, or at a new file to create one",
                )
            if version > SCHEMA_VERSION:
                raise SchemaMismatch(
                    f"the fleet at {self.path} has schema version {version}, newer than this "
                    f"shoal understands ({SCHEMA_VERSION})",
                    hint="upgrade shoal (pip install -U shoal) on this machine",
                )
            if version < SCHEMA_VERSION and not create:
                what = "no schema yet" if version == 0 else f"the older schema version {version}"
                raise SchemaMismatch(
                    f"the fleet at {self.path} has {what}; this shoal works with store schema "
                    f"version {SCHEMA_VERSION}, and does not upgrade a fleet unasked",
                    hint=f"run `shoal init --store {self.url}` to upgrade it (tasks are kept)",
                )
            if self._conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                self._conn.execute("PRAGMA journal_mode = WAL")
            if version < SCHEMA_VERSION:
                self._migrate(version)
                self.created = True

    def _migrate(self, version: int) -> None:
        log.debug("migrating %s from schema version %d to %d", self.path, version, SCHEMA_VERSION)
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            for number, _name, script in _MIGRATIONS[version:]:
                for statement in _statements(script):
                    self._conn.execute(statement)
                self._conn.execute(f"PRAGMA user_version = {number}")
            self._conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            log.warning("migrating %s failed; rolled back to schema version %d", self.path, version)
            raise
        log.info(
            "applied migrations %s to %s: schema version %d",
            ", ".join(name for _n, name, _s in _MIGRATIONS[version:]),
            self.path,
            SCHEMA_VERSION,
        )

    # --------------------------------------------------------------- transactions

    def _same_process(self) -> None:
        if os.getpid() != self._pid:
            raise StoreError(
                "this fleet was opened in another process (before a fork)",
                hint="open the fleet again in this process: Fleet.open(url)",
            )

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """The writer queue: this process's mutex, then the fleet-wide queue (see
        ``_writerlock``); then ``BEGIN IMMEDIATE`` finds SQLite's lock free."""
        self._same_process()
        with self._mutex:
            if not self._writer.acquire(self._timeout):
                log.warning(
                    "waited %gs for the other writers of %s; giving up", self._timeout, self.path
                )
                raise StoreUnavailable(
                    f"waited {self._timeout:g}s for the other writers of {self.path}",
                    hint="nothing was changed; try again (or raise ?busy_timeout=SECONDS)",
                )
            try:
                yield
            finally:
                self._writer.release()

    @contextmanager
    def write(self, *, exclusive: bool = False) -> Iterator[SqliteTx]:
        with self._locked():
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.DatabaseError as exc:
                raise _translate(exc, self.path) from exc
            tx = SqliteTx(self)
            try:
                yield tx
                tx.flush_events()
            except BaseException:
                self._rollback()
                raise
            try:
                self._conn.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                self._rollback()
                raise _translate(exc, self.path) from exc
        with self._commits_here:
            self._commits += 1
            self._commits_here.notify_all()
        if self._commits % _CHECKPOINT_CHECK == 0:
            self._checkpoint()

    def _checkpoint(self) -> None:
        """Copy the WAL back into the database once it has grown, without blocking writers
        (PASSIVE): other processes keep committing while this one does the slow part. The
        cost is per distinct page, so a larger WAL makes each committed page cheaper."""
        try:
            size = os.stat(f"{self.path}-wal").st_size
        except OSError:
            return
        if size >= _CHECKPOINT_BYTES:
            with self._mutex, suppress(sqlite3.DatabaseError):
                self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                log.debug("checkpointed the %d-byte WAL of %s", size, self.path)

    @contextmanager
    def read(self) -> Iterator[SqliteTx]:
        self._same_process()
        with self._mutex:
            try:
                self._conn.execute("BEGIN")
            except sqlite3.DatabaseError as exc:
                raise _translate(exc, self.path) from exc
            try:
                yield SqliteTx(self)
            finally:
                self._rollback()

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            with suppress(sqlite3.DatabaseError):
                self._conn.execute("ROLLBACK")
        # The caches may hold what the rolled-back transaction wrote (a skill set it added
        # gets its id reused by the next one committed): only committed data may stay.
        self._skillsets.clear()
        self._settings = (None, Settings())

    def _read_data_version(self) -> int:
        with self._mutex:
            return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

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
        conn = getattr(self, "_conn", None)
        if conn is not None:
            conn.close()
            self._conn = None  # type: ignore[assignment]
        writer = getattr(self, "_writer", None)
        if writer is not None:
            writer.close()
            self._writer = None  # type: ignore[assignment]

    def __del__(self) -> None:
        with suppress(Exception):
            self.close()


class SqliteTx(SqlTx):
    """The store verbs (see ``StoreTx``) as named queries on the store's connection."""

    __slots__ = ("_c", "_events", "_s")

    def __init__(self, store: SqliteStore) -> None:
        self._s = store
        self._c = store._conn
        self._events: list[tuple[float, str, int | None, str | None, str | None]] = []

    def flush_events(self) -> None:
        """Write the events held back so far, in one statement, in the order they came."""
        if self._events:
            self._c.executemany(_Q["append_event"], self._events)
            self._events.clear()

    def _one(self, name: str, params: Mapping[str, Any] | None = None) -> Any:
        return self._c.execute(_Q[name], params or ()).fetchone()

    def _all(self, name: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        return self._c.execute(_Q[name], params or ()).fetchall()

    def _run(self, name: str, params: Mapping[str, Any] | None = None) -> None:
        self._c.execute(_Q[name], params or ())

    # the verbs this dialect runs its own way (the rest are SqlTx's) --------------------

    def get_agent(self, agent_id: str, *, lock: bool = False) -> Agent | None:
        row = self._one("get_agent", {"id": agent_id})
        return None if row is None else agent_of(row)

    def claim_context(self, agent_id: str, now: float) -> ClaimContext | None:
        row = self._one("claim_context", {"id": agent_id, "now": now})
        if row is None:
            return None
        skillsets = self._s._skillsets
        if row[17] != len(skillsets):
            self.skillsets()
        settings = self._parse_settings(row[18])
        return ClaimContext(agent_of(row), row[15], bool(row[16]), skillsets, settings)

    def get_tasks(self, task_ids: Sequence[int], *, share: bool = False) -> dict[int, Task]:
        if not task_ids:
            return {}
        rows = self._all("get_tasks", {"ids": json.dumps(list(task_ids))})
        return {r[0]: self._task(r) for r in rows}

    def leased_task(self, task_id: int) -> tuple[Task, str | None] | None:
        row = self._one("leased_task", {"id": task_id})
        return None if row is None else (self._task(row), row[-1])

    def held_leases(self, agent_id: str, *, lock: bool = False) -> list[tuple[Task, str]]:
        rows = self._all("held_leases", {"agent": agent_id})
        return [(self._task(r), r[-1]) for r in rows]

    def next_seqs(self, count: int) -> list[int]:
        last = int(self._one("next_seqs", {"count": count})[0])
        return list(range(last - count + 1, last + 1))

    def skillsets(self) -> dict[int, tuple[str, ...]]:
        rows = self._all("skillsets")
        cache = self._s._skillsets
        if len(rows) != len(cache):
            cache.clear()
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
        rows: list[Any] = []
        unheld = _unheld(held)
        for skillset in skillsets:
            if domain is None:
                params = {"skillset": skillset, "limit": limit, "now": now, **unheld}
                rows += self._all("pool_best", params)
            else:
                params = {"skillset": skillset, "domain": domain, "limit": limit, "now": now}
                rows += self._all("pool_best_in_domain", params)
        if len(skillsets) > 1:
            rows.sort(key=lambda r: (-r[-1], r[0]))
        return [candidate_of(r) for r in rows[:limit]]

    def pool_longest(
        self, skillsets: Sequence[int], limit: int, held: Locality, now: float
    ) -> list[Candidate]:
        found = []
        unheld = _unheld(held)
        for skillset in skillsets:
            params = {"skillset": skillset, "limit": limit, "now": now, **unheld}
            rows = self._all("pool_longest", params)
            found += [candidate_of(r) for r in rows]
        if len(skillsets) > 1:  # within a priority the static key is the age: oldest first
            found.sort(key=lambda c: (c.priority, -(c.expected_duration or 0.0), c.created_at))
        return found[:limit]

    def steal_tail(
        self, victim: str, rules: StealFilter, held: Locality, limit: int, now: float
    ) -> list[Candidate]:
        if limit <= 0 or not rules.skillsets:
            return []
        params = {
            "victim": victim,
            "min_priority": rules.min_priority,
            "skillsets": json.dumps(list(rules.skillsets)),
            "domains": json.dumps(list(rules.domains)),
            "cross_domain_priority": rules.cross_domain_priority,
            "free_skillset": rules.free_skillset,
            "limit": limit,
            "now": now,
            **_unheld(held),
        }
        name = "steal_tail_longest" if rules.longest else "steal_tail"
        return [candidate_of(r) for r in self._all(name, params)]

    def window_thieves(self, since: float) -> list[str]:
        self.flush_events()
        return [r[0] for r in self._all("window_thieves", {"since": since})]

    # tasks: transitions ----------------------------------------------------------------

    def _skillset_id(self, skills: tuple[str, ...]) -> int:
        for sid, known in self._s._skillsets.items():  # ids never change once given
            if known == skills:
                return sid
        text = ",".join(skills)
        row = self._one("skillset_id", {"skills": text})
        if row is None:
            row = self._one("insert_skillset", {"skills": text})
        return int(row[0])

    def insert_task(self, task: NewTask) -> int:
        cursor = self._c.execute(
            _Q["insert_task"],
            {
                "title": task.title,
                "body": task.body,
                "payload": None if task.payload is None else json.dumps(task.payload),
                "priority": task.priority,
                "skillset": self._skillset_id(task.skills),
                "domain": task.domain,
                "state": task.state.value,
                "agent": task.agent,
                "pinned": int(task.pinned),
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
        return int(cursor.lastrowid or 0)

    def add_deps(self, task_id: int, depends_on: Sequence[int]) -> None:
        self._c.executemany(_Q["add_dep"], [{"task": task_id, "depends_on": d} for d in depends_on])
        self._run("mark_depended_on", {"ids": json.dumps(list(depends_on))})

    def lease_tasks(
        self, agent_id: str, grants: Sequence[tuple[int, str, float, bool]], now: float
    ) -> list[Task]:
        if len(grants) == 1:
            ((task_id, token, expires, stolen),) = grants
            one = {
                "id": task_id,
                "agent": agent_id,
                "token": token,
                "expires": expires,
                "stolen": stolen,
                "now": now,
            }
            return [self._task(row) for row in self._all("lease_task", one)]
        params = {"agent": agent_id, "grants": json.dumps(grants), "now": now}
        rows = self._all("lease_tasks", params)
        if len(rows) == 1:
            return [self._task(rows[0])]
        order = {grant[0]: i for i, grant in enumerate(grants)}
        return [self._task(r) for r in sorted(rows, key=lambda r: order[r[0]])]

    def finish_leased(
        self, items: Sequence[tuple[int, str, Any]], now: float
    ) -> list[tuple[int, str | None, bool]]:
        encoded = [
            (task_id, token, None if result is None else json.dumps(result))
            for task_id, token, result in items
        ]
        if len(encoded) == 1:
            ((task_id, token, result),) = encoded
            one = {"id": task_id, "token": token, "result": result, "now": now}
            rows = self._all("finish_leased_one", one)
        else:
            rows = self._all("finish_leased", {"items": json.dumps(encoded), "now": now})
        return [(r[0], r[1], bool(r[2])) for r in rows]

    def rekey_pool(self, keys: Mapping[int, float]) -> None:
        self._c.executemany(_Q["set_pool_key"], [{"id": i, "pool_key": k} for i, k in keys.items()])

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
        self.flush_events()
        if task_id is not None:
            params = {"task": task_id, "agent": agent_id, "since": since, "limit": limit}
            rows = self._all(of_task, params)
        elif agent_id is not None:
            rows = self._all(of_agent, {"agent": agent_id, "since": since, "limit": limit})
        else:
            rows = self._all(every, {"since": since, "limit": limit})
        return [Event(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]) if r[5] else {}) for r in rows]


@functools.lru_cache(maxsize=256)
def _unheld(held: Locality) -> dict[str, Any]:
    """The parameters of the ``unheld`` condition (see queries.sql) for ``held``: the same
    few (nothing held, for most claims) again and again, so they are made once. Callers
    copy them into their own parameters and never change them."""
    return {
        "own_domains": json.dumps(list(held.domains)),
        "local_since": held.local_since,
        "domain_since": held.domain_since,
        "reserved": json.dumps(sorted(held.reserved)),
    }


def _refuse_foreign_file(path: Path) -> None:
    """A file that is not a SQLite database at all is refused before anything is created
    beside it."""
    try:
        with path.open("rb") as handle:
            header = handle.read(16)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}", hint="check the path") from exc
    if header and header != b"SQLite format 3\x00":
        raise StoreError(
            f"{path} is not a usable shoal fleet (it is not a SQLite database)",
            hint="point --store at a fleet, or at a new file to create one",
        )


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


def _translate(exc: sqlite3.DatabaseError, path: Path) -> StoreError:
    """The most specific shoal error for a driver error."""
    text = str(exc)
    if "file is not a database" in text or "malformed" in text:
        return StoreError(
            f"{path} is not a usable shoal fleet ({text})",
            hint="point --store at a fleet, or restore the file from a backup",
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
