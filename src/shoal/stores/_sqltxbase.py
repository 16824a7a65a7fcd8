"""What every SQL transaction stands on: running named statements on one connection,
the events and finished counts written just before commit, the settings and counters.

``SqlTx`` (``_sqltx``) is built in three layers, one module each, so no module grows past a
reading: ``SqlTxBase`` here holds the transaction's state and how a statement runs;
``SqlReads`` (``_sqlreads``) adds the verbs that read -- agents, tasks, the claim cascade's
candidate queries -- and ``SqlTx`` adds the transitions, the event log and history.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from shoal.settings import Settings
from shoal.stores._sqldialect import Dialect

__all__ = ["SqlTxBase", "StoreShared"]


class StoreShared(Protocol):
    """What a transaction shares with its store (``SqlStore`` is one): the dialect, and the
    caches of committed data (``_sqlstore``'s docstring, "Caches"). Naming only this keeps
    the transactions below the store: the store imports them, never the reverse."""

    _d: Dialect
    _skillsets: dict[int, tuple[str, ...]]
    _settings: tuple[str | None, Settings]
    _cache_lock: threading.Lock


EventRow = tuple[float, str, int | None, str | None, str | None]
_EVENT_COLUMNS = ("at", "kind", "task", "agent", "data")


class SqlTxBase:
    """The state of one transaction of a ``SqlStore`` and how its named statements run;
    the verbs are its subclasses' (``SqlReads``, ``SqlTx``)."""

    __slots__ = (
        "_c",
        "_d",
        "_events",
        "_json",
        "_locking",
        "_moved",
        "_none",
        "_q",
        "_s",
        "_stole",
        "_wake",
    )

    def __init__(self, store: StoreShared, conn: Any, write: bool) -> None:
        d = store._d
        self._s = store
        self._d = d
        self._c = conn
        self._q = d.queries if write else d.read_queries  # read-only: no row is locked
        self._none = d.no_params
        self._json = d.json_lists
        self._locking = d.side_by_side and write
        self._events: list[EventRow] = []
        # How this transaction moved the finished counts, where the store keeps them itself.
        self._moved: dict[str, int] | None = None if d.counts_by_trigger else {}
        self._wake = False
        self._stole = False

    # running named statements -----------------------------------------------------------

    def _one(self, name: str, params: Mapping[str, Any] | None = None) -> Any:
        return self._c.execute(self._q[name], params or self._none).fetchone()

    def _all(self, name: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        rows: list[Any] = self._c.execute(self._q[name], params or self._none).fetchall()
        return rows

    def _run(self, name: str, params: Mapping[str, Any] | None = None) -> None:
        self._c.execute(self._q[name], params or self._none)

    def _count(self, name: str, params: Mapping[str, Any] | None = None) -> int:
        """Run a statement that changes rows; how many it changed."""
        return int(self._c.execute(self._q[name], params or self._none).rowcount)

    def _many(
        self, name: str, fixed: Mapping[str, Any], names: Sequence[str], rows: Sequence[Any]
    ) -> None:
        """``name`` over many rows at once, the dialect's way (executemany or arrays)."""
        if rows:
            self._d.run_many(self._c, self._q[name], fixed, names, rows)

    def _list(self, values: Sequence[Any]) -> Any:
        """A list as the dialect passes one: a JSON array, or a list (an array)."""
        return json.dumps(list(values)) if self._json else list(values)

    def _work_appeared(self) -> None:
        """A verb made work available to claimers: a store that notifies says so at commit."""
        self._wake = True

    def finish(self) -> None:
        """Before COMMIT: write the events held back and the finished counts moved, and wake
        waiters if work appeared."""
        self.flush_events()
        self._flush_counts()
        if self._wake and self._d.capabilities.notifies:
            self._run("notify_work", {"channel": self._d.channel})

    def flush_events(self) -> None:
        """Write the events held back so far, in one go, in the order they came."""
        if self._events:
            self._many("append_events", {}, _EVENT_COLUMNS, self._events)
            self._events.clear()

    # finished counts -------------------------------------------------------------------
    # How many tasks are done, dead and cancelled is kept, since counting the history would
    # read all of it (schema version 6). Where triggers do not keep the counts, every verb
    # that moves a task into or out of a finished state says so here, and the moves are
    # written once per state just before commit (or before the counts are read).

    def _finished_moved(self, state: str, change: int) -> None:
        if self._moved is not None and change:
            self._moved[state] = self._moved.get(state, 0) + change

    def _flush_counts(self) -> None:
        if self._moved:
            for state, change in self._moved.items():
                if change:
                    self._run("count_finished", {"state": state, "change": change})
            self._moved.clear()

    # settings and counters ------------------------------------------------------------

    def load_settings(self) -> Settings:
        row = self._one("get_meta", {"key": "settings"})
        return self._parse_settings(row[0] if row else None)

    def _parse_settings(self, raw: str | None) -> Settings:
        cached_raw, cached = self._s._settings
        if raw == cached_raw:
            return cached
        settings = Settings.from_mapping(json.loads(raw)) if raw else Settings()
        self._s._settings = (raw, settings)
        return settings

    def save_settings(self, settings: Settings) -> None:
        self.set_meta("settings", json.dumps(settings.overrides(), sort_keys=True))
        self._work_appeared()  # new steal rules or limits may free work for someone

    def next_seq(self) -> int:
        return int(self._one("next_seq")[0])

    def next_seqs(self, count: int) -> list[int]:
        return self._d.seqs(self._all("next_seqs", {"count": count}), count)

    def get_meta(self, key: str) -> str | None:
        row = self._one("get_meta", {"key": key})
        return None if row is None else str(row[0])

    def server_time(self) -> float | None:
        row = self._one("server_time")  # none for an embedded store: this machine's clock
        return None if row is None or row[0] is None else float(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self._run("set_meta", {"key": key, "value": value})
