"""The raw SQLite ceiling: the least a claim-and-ack loop on a SQLite file can do, with no
shoal in it, so shoal's throughput can be read as a share of what the file allows.

huey tells how shoal compares with another queue; this tells how much of the store's own
speed shoal's richer transaction leaves on the table. One table of tasks (an id, a state, a
token) with a partial index on the pending ones, in WAL mode at the ``PRAGMA synchronous``
shoal runs at. A worker loops like shoal's: each turn is one ``BEGIN IMMEDIATE``
transaction that acks what it holds, one ``UPDATE`` per task (``where id = ? and token =
?``), and claims the next ``batch`` with one ``UPDATE ... RETURNING`` (the first pending
rows, marked claimed under a fresh token). Batch 1 is shoal's ``complete(lease,
then_claim=1)`` without the lease's expiry, the agent's row, the events or the cascade;
batch 10 is its ``complete_many(..., then_claim=10)``. Writers wait for each other the
plain SQLite way (the busy timeout), not in shoal's arrival order.

After a run the file is checked like shoal's: every row done, and every id acked exactly
once by exactly one worker.
"""

from __future__ import annotations

import secrets
import sqlite3
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _harness import (
    BARRIER_TIMEOUT,
    Processing,
    Progress,
    processing_of,
    reported_once,
    run_workers,
    worker_report,
)

FILL_CHUNK = 10_000  # rows per transaction when pre-filling
BUSY_TIMEOUT = 60.0  # seconds a writer waits for the lock before the run fails

SCHEMA = """
create table task (
    id integer primary key,
    state text not null default 'pending',  -- pending, claimed, done
    token text
);
create index task_pending on task (id) where state = 'pending';
"""
CLAIM = """
update task set state = 'claimed', token = ?
where id in (select id from task where state = 'pending' order by id limit ?)
returning id
"""
ACK = "update task set state = 'done' where id = ? and token = ? and state = 'claimed'"


def connect(path: Path, durability: str) -> sqlite3.Connection:
    """A connection as shoal's are set up: WAL, the same ``synchronous``, transactions
    begun by hand."""
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level=None)
    conn.execute("pragma journal_mode = wal")
    conn.execute(f"pragma synchronous = {durability}")
    return conn


def fill_raw(path: Path, durability: str, count: int) -> None:
    """The table with ``count`` pending tasks, many per transaction (not what is timed)."""
    conn = connect(path, durability)
    try:
        conn.executescript(SCHEMA)
        progress = Progress("raw pre-fill", count)
        filled = 0
        while filled < count:
            chunk = min(FILL_CHUNK, count - filled)
            conn.execute("begin immediate")
            conn.executemany("insert into task (state) values ('pending')", [()] * chunk)
            conn.execute("commit")
            filled += chunk
            progress.update(filled)
    finally:
        conn.close()


def raw_worker(
    path: str, durability: str, batch: int, barrier: Any, results: Any
) -> None:  # pragma: no cover - runs in a child process
    """One worker process: ack what it holds and claim the next batch until none is left."""
    try:
        results.put(_raw_work(Path(path), durability, batch, barrier))
    except BaseException:
        barrier.abort()
        results.put({"error": f"raw SQLite worker:\n{traceback.format_exc()}"})


def _raw_work(path: Path, durability: str, batch: int, barrier: Any) -> dict[str, Any]:
    conn = connect(path, durability)
    latencies: list[float] = []
    done: list[int] = []
    anomalies: list[str] = []
    held: list[int] = []
    token = ""
    clock = time.perf_counter
    barrier.wait(BARRIER_TIMEOUT)
    start, cpu = time.monotonic(), time.process_time()
    while True:
        began = clock()
        conn.execute("begin immediate")
        for task in held:
            if conn.execute(ACK, (task, token)).rowcount != 1:
                anomalies.append(f"raw task {task}: ack matched no claimed row")
        token = secrets.token_hex(8)
        claimed = [row[0] for row in conn.execute(CLAIM, (token, batch)).fetchall()]
        conn.execute("commit")
        latencies.append(clock() - began)
        done += held
        held = claimed
        if not held:
            break
    end, cpu = time.monotonic(), time.process_time() - cpu
    conn.close()
    return worker_report(start, end, cpu, latencies, done, anomalies)


def verify_raw(path: Path, expected: int, reports: Sequence[dict[str, Any]]) -> list[str]:
    """Every row done, and acked once: by one worker, each id once across all of them."""
    problems = reported_once(reports, expected, "raw workers acked")
    conn = sqlite3.connect(path)
    try:
        states = dict(conn.execute("select state, count(*) from task group by state"))
    finally:
        conn.close()
    if states != {"done": expected}:
        problems.append(f"raw table states {states}, expected {{'done': {expected}}}")
    return problems


def process_raw(folder: Path, durability: str, tasks: int, procs: int, batch: int) -> Processing:
    """Pre-fill ``tasks`` rows in ``folder`` and work them down from ``procs`` processes,
    ``batch`` at a time."""
    path = folder / "raw.db"
    fill_raw(path, durability, tasks)
    wall, reports = run_workers(raw_worker, [(str(path), durability, batch)] * procs)
    return processing_of(tasks, wall, reports, verify_raw(path, tasks, reports))
