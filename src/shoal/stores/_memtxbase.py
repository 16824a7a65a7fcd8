"""What every memory transaction stands on: the undo journal, the one place a task row
changes (so the indexes follow it), and the settings and counters.

The memory store's transaction is built in three layers, one module each, as ``SqlTx``
is: ``MemoryTxBase`` here; ``MemoryReads`` (``_memreads``) adds the verbs that read --
agents, tasks, the claim cascade's candidate queries; ``_MemoryTx`` (``memory``) adds the
transitions, history and the event log.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from shoal.settings import Settings
from shoal.stores._memdata import TASK_FIELDS, Data, Row

__all__ = ["MemoryTxBase"]


class MemoryTxBase:
    """One transaction over ``Data``: every change goes through ``_record`` to be undoable.
    The verbs are its subclasses' (``MemoryReads``, ``_MemoryTx``)."""

    def __init__(self, data: Data, writable: bool) -> None:
        self.d = data
        self.writable = writable
        self.journal: list[Callable[[], None]] = []

    def rollback(self) -> None:
        while self.journal:
            self.journal.pop()()

    def _record(self, undo: Callable[[], None]) -> None:
        if not self.writable:
            raise RuntimeError("a read transaction tried to change the fleet")
        self.journal.append(undo)

    def _put(self, mapping: dict[Any, Any], key: Any, value: Any) -> None:
        if key in mapping:
            old = mapping[key]
            self._record(lambda: mapping.__setitem__(key, old))
        else:
            self._record(lambda: mapping.pop(key, None))
        mapping[key] = value

    def _pop(self, mapping: dict[Any, Any], key: Any) -> None:
        if key in mapping:
            old = mapping.pop(key)
            self._record(lambda: mapping.__setitem__(key, old))

    def _append(self, items: list[Any], value: Any) -> None:
        self._record(items.pop)
        items.append(value)

    def _task(self, task_id: int, **changes: Any) -> None:
        row = self.d.tasks[task_id]
        new = Row(
            task=replace(row.task, **{k: v for k, v in changes.items() if k in TASK_FIELDS}),
            skillset=changes.get("skillset", row.skillset),
            pool_key=changes.get("pool_key", row.pool_key),
            seq=changes.get("seq", row.seq),
            token=changes.get("token", row.token),
        )
        self._set_row(task_id, new)

    def _set_row(self, task_id: int, new: Row) -> None:
        """Every task row changes here, so the indexes follow it (and are undone with it)."""
        old = self.d.tasks.get(task_id)
        self._put(self.d.tasks, task_id, new)
        index = self.d.index
        self._record(lambda: index.move(task_id, new, old))
        index.move(task_id, old, new)

    # settings and counters -------------------------------------------------------------

    def load_settings(self) -> Settings:
        return self.d.settings

    def save_settings(self, settings: Settings) -> None:
        old = self.d.settings
        self._record(lambda: setattr(self.d, "settings", old))
        self.d.settings = settings

    def next_seq(self) -> int:
        return self.next_seqs(1)[0]

    def next_seqs(self, count: int) -> list[int]:
        old = self.d.seq
        self._record(lambda: setattr(self.d, "seq", old))
        self.d.seq = old + count
        return list(range(old + 1, old + count + 1))

    def get_meta(self, key: str) -> str | None:
        return self.d.meta.get(key)

    def set_meta(self, key: str, value: str) -> None:
        self._put(self.d.meta, key, value)
