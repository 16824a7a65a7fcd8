"""huey on SQLite, the other system of the SQLite comparison, set up and driven the way
its own consumer would drive it.

huey is a task queue and nothing more: ``dequeue()`` deletes one row, ``execute()`` runs
the task. Its consumer adds polling sleeps between empty dequeues; the workers here leave
them out, so what is measured is the queue. Every function takes the folder of a fresh
measurement (``_sqlite_side.fresh_folder``) and the ``PRAGMA synchronous`` level shoal
runs at, so both sides pay for the same fsyncs.
"""

from __future__ import annotations

import sqlite3
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from huey import Huey
from huey.api import TaskWrapper
from huey.storage import SqliteStorage

from _harness import (
    BARRIER_TIMEOUT,
    Processing,
    Progress,
    processing_of,
    rated,
    run_workers,
    worker_report,
)

HUEY_FILL_CHUNK = 10_000  # rows per insert transaction when pre-filling huey


class DurableSqliteStorage(SqliteStorage):  # type: ignore[misc]
    """huey's own SqliteStorage at a chosen ``PRAGMA synchronous``.

    huey's ``fsync`` argument offers only FULL or OFF, and shoal defaults to NORMAL (in WAL
    mode: safe from a crash of any process, not from power loss). Comparing at different
    levels would compare fsync counts, not the queues, so every connection gets the level.
    """

    def __init__(
        self,
        name: str = "huey",
        filename: str = "huey.db",
        synchronous: str = "normal",
        **kwargs: Any,
    ) -> None:
        self.synchronous = synchronous.upper()
        super().__init__(name, filename=filename, **kwargs)

    def _create_connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection = super()._create_connection()
        conn.execute(f"pragma synchronous={self.synchronous}")
        return conn


def make_huey(folder: Path, durability: str) -> tuple[Huey, TaskWrapper]:
    """A Huey on ``folder/huey.db`` with the no-op task, defined the same in every process."""
    huey = Huey(
        "bench",
        storage_class=DurableSqliteStorage,
        filename=str(folder / "huey.db"),
        synchronous=durability,
    )

    # huey names a task by its function's module: ``__main__`` or this module's name here,
    # ``__mp_main__`` in a spawned worker. One fixed module name makes the parent's
    # messages the workers' tasks.
    noop_task.__module__ = "bench"
    return huey, huey.task(name="noop")(noop_task)


def noop_task() -> None:
    """huey's work: nothing, like shoal's ``run_task``."""


def fill_huey(huey: Huey, noop: TaskWrapper, count: int, label: str = "huey pre-fill") -> None:
    """Insert ``count`` enqueued no-op tasks, the rows ``storage.enqueue`` would write, many
    per transaction: one commit per task would make a million-task pre-fill take minutes, and
    the pre-fill is not what is measured."""
    storage = huey.storage
    progress = Progress(label, count)
    filled = 0
    while filled < count:
        chunk = min(HUEY_FILL_CHUNK, count - filled)
        rows = [
            (storage.name, storage.to_blob(huey.serialize_task(noop.s())), 0) for _ in range(chunk)
        ]
        with storage.db(commit=True) as cursor:
            cursor.executemany("insert into task (queue, data, priority) values (?, ?, ?)", rows)
        filled += chunk
        progress.update(filled)


def huey_worker(
    folder: str, durability: str, barrier: Any, results: Any
) -> None:  # pragma: no cover - runs in a child process
    """One worker process doing what huey's consumer worker does per task."""
    try:
        results.put(_huey_work(Path(folder), durability, barrier))
    except BaseException:
        barrier.abort()
        results.put({"error": f"huey worker:\n{traceback.format_exc()}"})


def _huey_work(folder: Path, durability: str, barrier: Any) -> dict[str, Any]:
    huey, _ = make_huey(folder, durability)
    huey.storage.queue_size()  # open the connection (and set its pragmas) before the start
    latencies: list[float] = []
    done: list[str] = []
    errors = 0
    clock = time.perf_counter
    barrier.wait(BARRIER_TIMEOUT)
    start, cpu = time.monotonic(), time.process_time()
    while True:
        began = clock()
        try:
            task = huey.dequeue()
        except sqlite3.OperationalError:  # "database is locked": the consumer logs, retries
            errors += 1
            continue
        latencies.append(clock() - began)
        if task is None:
            break
        try:
            huey.execute(task)
        except sqlite3.OperationalError:
            errors += 1
        done.append(task.id)
    end, cpu = time.monotonic(), time.process_time() - cpu
    return worker_report(start, end, cpu, latencies, done, errors=errors)


def verify_huey(huey: Huey, expected: int, reports: Sequence[dict[str, Any]]) -> list[str]:
    """Every task executed once by the workers, and none left in the queue."""
    done = [t for r in reports for t in r["done"]]
    problems = []
    if len(done) != expected or len(set(done)) != expected:
        problems.append(
            f"huey workers executed {len(done)} tasks ({len(set(done))} distinct), "
            f"expected {expected}"
        )
    if (left := huey.pending_count()) != 0:
        problems.append(f"huey queue still holds {left} tasks")
    return problems


def process_huey(folder: Path, durability: str, tasks: int, procs: int) -> Processing:
    """Pre-fill ``tasks`` no-op tasks and work them down from ``procs`` processes."""
    huey, noop = make_huey(folder, durability)
    fill_huey(huey, noop, tasks)
    huey.storage.close()
    wall, reports = run_workers(huey_worker, [(str(folder), durability) for _ in range(procs)])
    result = processing_of(tasks, wall, reports, verify_huey(huey, tasks, reports))
    huey.storage.close()
    if result.errors:
        result.problems.append(f"huey: {result.errors} 'database is locked' errors retried")
    return result


def enqueue_huey(folder: Path, durability: str, calls: int) -> Processing:
    """Enqueues per second from one process: one transaction each, after 50 untimed."""
    huey, noop = make_huey(folder, durability)
    for _ in range(50):
        noop()
    began = time.perf_counter()
    for _ in range(calls):
        noop()
    result = rated(calls, time.perf_counter() - began)
    huey.storage.close()
    return result


def pending_huey(
    folder: Path, durability: str, pending: int, warmup: int, cycles: int
) -> list[float]:
    """From one process: the latency of ``dequeue()``, the task then executed (untimed),
    with ``pending`` tasks waiting throughout."""
    huey, noop = make_huey(folder, durability)
    fill_huey(huey, noop, pending, f"huey pre-fill {pending:,}")
    clock = time.perf_counter
    latencies: list[float] = []
    for i in range(warmup + cycles):
        began = clock()
        task = huey.dequeue()
        elapsed = clock() - began
        if task is None:
            raise RuntimeError(f"huey dequeue with {pending} pending came back empty")
        huey.execute(task)
        noop()  # keep the pending count where it was
        if i >= warmup:
            latencies.append(elapsed)
    huey.storage.close()
    return latencies
