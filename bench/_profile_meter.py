"""The timing wrappers of ``profile_claims.py``: a SQLite fleet's connection and writer
queue with every call into SQLite and every turn in the queue timed, the statements counted
by name. They reach into the store's private parts (``Fleet._store._d``): a tool for
reading shoal's insides, not an API."""

from __future__ import annotations

import re
import sqlite3
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from shoal import Fleet

__all__ = ["Meter", "instrument"]


class Meter:
    """Seconds and calls spent in SQLite and in the writer queue, statements by name."""

    def __init__(self) -> None:
        self.sqlite = 0.0
        self.queue_wait = 0.0
        self.held = 0.0
        self.holds: list[float] = []
        self.waits: list[float] = []
        self.turns: list[float] = []  # when each turn began and ended (perf_counter)
        self.calls: Counter[str] = Counter()
        self.traced: Counter[str] = Counter()
        self.spent: dict[str, float] = {}
        self._names: dict[str, str] = {}
        self._current = "?"
        self._since = 0.0
        self._cpu_since = 0.0
        self.held_cpu = 0.0
        self.tracing: Callable[[bool], None] = lambda on: None

    def reset(self) -> None:
        self.sqlite = self.queue_wait = self.held = self.held_cpu = 0.0
        self.holds.clear()
        self.waits.clear()
        self.turns.clear()
        self.calls.clear()
        self.traced.clear()
        self.spent.clear()

    def name_of(self, sql: str) -> str:
        name = self._names.get(sql) or self._names.get(_shape(sql))
        if name is None:
            name = " ".join(sql.split())[:40]
        self._current = name
        return name

    def trace(self, _text: str) -> None:
        """SQLite's own count: every statement it starts, each row of an executemany and
        each trigger program an UPDATE enters (Python reports those under the statement's
        own text) included."""
        self.traced[self._current] += 1

    def took(self, seconds: float) -> None:
        self.sqlite += seconds
        self.spent[self._current] = self.spent.get(self._current, 0.0) + seconds


def _shape(sql: str) -> str:
    """A statement with its parameters blanked, so a named statement the store binds by
    position (``:name`` turned into ``?N``) is still known by its name."""
    return re.sub(r"\?\d+|(?<!:):[a-z_]+", "?", sql)


class TimedCursor:
    """A cursor whose fetches count as time in SQLite (they step the statement)."""

    def __init__(self, cursor: sqlite3.Cursor, meter: Meter) -> None:
        self._cursor, self._meter = cursor, meter

    def fetchone(self) -> Any:
        began = time.perf_counter()
        row = self._cursor.fetchone()
        self._meter.took(time.perf_counter() - began)
        return row

    def fetchall(self) -> list[Any]:
        began = time.perf_counter()
        rows = self._cursor.fetchall()
        self._meter.took(time.perf_counter() - began)
        return rows


class TimedConnection:
    """The store's connection with every call into SQLite timed and named."""

    def __init__(self, conn: sqlite3.Connection, meter: Meter, names: dict[str, str]) -> None:
        self._conn, self._meter = conn, meter
        meter._names = {sql: name for name, sql in names.items()}
        meter._names.update({_shape(sql): name for name, sql in names.items()})
        meter.tracing = lambda on: conn.set_trace_callback(meter.trace if on else None)

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction

    def execute(self, sql: str, params: Any = ()) -> TimedCursor:
        meter = self._meter
        meter.calls[meter.name_of(sql)] += 1
        began = time.perf_counter()
        cursor = self._conn.execute(sql, params)
        meter.took(time.perf_counter() - began)
        return TimedCursor(cursor, meter)

    def executemany(self, sql: str, rows: Any) -> sqlite3.Cursor:
        meter = self._meter
        rows = list(rows)
        meter.calls[meter.name_of(sql)] += 1
        began = time.perf_counter()
        cursor = self._conn.executemany(sql, rows)
        meter.took(time.perf_counter() - began)
        return cursor

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


class TimedWriter:
    """The writer queue with the wait for a turn and the turn itself timed."""

    def __init__(self, writer: Any, meter: Meter) -> None:
        self._writer, self._meter = writer, meter
        self.fair = writer.fair

    def acquire(self, timeout: float) -> bool:
        began = time.perf_counter()
        got: bool = self._writer.acquire(timeout)
        now = time.perf_counter()
        self._meter.queue_wait += now - began
        self._meter.waits.append(now - began)
        self._meter._since = now
        self._meter._cpu_since = time.thread_time()
        self._meter.turns.append(now)
        return got

    def release(self) -> None:
        began = time.perf_counter()
        self._meter.held_cpu += time.thread_time() - self._meter._cpu_since
        self._writer.release()
        now = time.perf_counter()
        held = began - self._meter._since
        self._meter.turns.append(began)
        self._meter.held += held
        self._meter.holds.append(held)
        self._meter.queue_wait += now - began

    def __getattr__(self, name: str) -> Any:
        return getattr(self._writer, name)


def instrument(fleet: Fleet) -> Meter:
    """Wrap the fleet's connection and writer queue (private: see the module docstring)."""
    dialect = fleet._store._d  # type: ignore[attr-defined]
    meter = Meter()
    dialect.conn = TimedConnection(dialect.conn, meter, dict(dialect.queries))
    dialect.writer = TimedWriter(dialect.writer, meter)
    return meter
