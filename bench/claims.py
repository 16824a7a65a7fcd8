"""Claim throughput and latency of shoal, against huey, both on SQLite at one durability.

Why this exists
---------------
A shoal claim is a richer transaction than a queue pop: it writes a lease and an event,
runs the claim cascade, and keeps the agent's status. The question is what that costs
against a plain SQLite task queue at the *same* durability (the same ``PRAGMA
synchronous``, both in WAL mode), so every figure is printed next to huey's for the same
no-op workload measured in the same run, and the verdicts are on ratios. The machine this
runs on is shared and noisy; absolute numbers drift between runs, ratios much less.

What is measured
----------------
* Processing throughput: tasks already posted, then claimed and completed by 1, 4 and 16
  worker processes. shoal at batch 1 (``complete(lease, then_claim=1)``: one commit per
  task) and with batch claims of 10 (``complete_many(..., then_claim=10)``: one commit per
  ten tasks); huey the way its consumer worker does it, ``dequeue()`` then ``execute()``
  per task, without the consumer's polling sleeps. huey has no batch dequeue, so the
  batch-10 rows compare against huey's only mode.
* Enqueue throughput, one process: single ``post`` calls against huey's enqueue (one
  transaction each), and ``post_many`` in chunks as an extra line.
* Claim latency p50/p99/max at 16 processes (every claim and complete-and-claim call of
  the batch-1 run; huey: every ``dequeue``), and claim p50 with 1,000 against 1,000,000
  pending tasks from one process, the pending count held constant by posting one task
  after each cycle (untimed).

Workers are spawned (never forked: each opens its own store), set up, and wait on a
barrier, so start-up is not measured; wall time runs from the barrier's release to the
last worker's finish. Every measurement uses a fresh database file in a temporary folder.
After each shoal run the fleet is checked: every task done, each claimed and completed
exactly once.

Run ``.venv/bin/python bench/claims.py --quick`` for a smoke run (about 20 s on 2 cores);
without ``--quick`` (normal durability) expect about two minutes, half of it pre-filling the
million-task fleets. ``--repeat 3`` reports medians when the machine is noisy.

``--store postgres`` runs the PostgreSQL comparison instead: shoal against pgqueuer on one
server, at 1, 8 and 64 processes, plus the latency from a post to an agent waiting for
work (see ``claims_pg.py``).
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import shutil
import sqlite3
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import huey as huey_package
from huey import Huey
from huey.api import TaskWrapper
from huey.storage import SqliteStorage

import shoal
from _fleet_work import POST_CHUNK, fill_shoal, shoal_worker, verify_shoal
from _harness import (
    BARRIER_TIMEOUT,
    Processing,
    Progress,
    Row,
    close_report,
    git_state,
    median_run,
    percentile,
    print_table,
    run_workers,
    say,
    summary,
)
from shoal import Fleet
from shoal.model import Claim

DURABILITIES = ("normal", "full", "off")
DEFAULT_PG_URL = "postgresql://127.0.0.1:5432/test"
HUEY_FILL_CHUNK = 10_000  # rows per insert transaction when pre-filling huey
SMALL_PENDING = 1_000

# The targets of the issue.
TARGET_BATCH1 = 1.0  # x huey throughput at batch 1
TARGET_BATCH10 = 2.0  # x huey throughput with batch claims of 10
TARGET_P99 = 0.010  # seconds, claim p99 at 16 processes
TARGET_MAX = 0.100  # seconds, worst claim at 16 processes
TARGET_GROWTH = 1.5  # claim p50 at the big pending count / p50 at 1,000
LATENCY_PROCS = 16


# ---------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Plan:
    """Everything a run does, decided once from the command line and printed at the top."""

    durability: str
    tasks: int  # tasks per processing-throughput measurement
    procs: tuple[int, ...]
    enqueue: int  # single post / enqueue calls timed
    big: int  # pending tasks for the "many pending" latency case
    cycles: int  # timed claim cycles per latency-vs-pending case
    warmup: int  # untimed cycles before those
    repeat: int
    root: Path  # where the temporary databases go


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="shoal claim throughput and latency, compared with huey on SQLite "
        "at the same durability, or with pgqueuer on PostgreSQL (--store postgres).",
    )
    parser.add_argument(
        "--store",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="sqlite: against huey (default); postgres: against pgqueuer (see claims_pg.py)",
    )
    parser.add_argument(
        "--pg-url",
        default=DEFAULT_PG_URL,
        help=f"with --store postgres: the server and database (default {DEFAULT_PG_URL})",
    )
    parser.add_argument(
        "--durability",
        choices=DURABILITIES,
        default="normal",
        help="SQLite only: PRAGMA synchronous for both shoal and huey (default: normal)",
    )
    parser.add_argument(
        "--tasks",
        type=int,
        default=None,
        help="tasks per processing run (SQLite: default 20,000; 5,000 at full durability; "
        "--quick: 2,000. PostgreSQL: 10,000; --quick: 1,000)",
    )
    parser.add_argument(
        "--procs",
        default=None,
        help="worker process counts, comma-separated (default SQLite 1,4,16; "
        "PostgreSQL 1,8,64, --quick: 1,8)",
    )
    parser.add_argument(
        "--posts",
        type=int,
        default=None,
        help="PostgreSQL only: timed posts to waiting agents (default 200; --quick: 30)",
    )
    parser.add_argument(
        "--waiters",
        type=int,
        default=None,
        help="PostgreSQL only: agent processes waiting for those posts (default 4; --quick: 2)",
    )
    parser.add_argument(
        "--enqueue",
        type=int,
        default=None,
        help="single post/enqueue calls to time (default 5,000; 1,000 at "
        "full durability; --quick: 500)",
    )
    parser.add_argument(
        "--big",
        type=int,
        default=None,
        help="pending tasks for the big latency case (default 1,000,000; --quick: 100,000)",
    )
    parser.add_argument(
        "--cycles",
        type=int,
        default=None,
        help="timed claim cycles per latency-vs-pending case (default 2,000; --quick: 500)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run each processing measurement this many times, interleaved, "
        "and report the median (default 1)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="small counts for a fast end-to-end smoke run"
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="folder for the temporary databases (default: system temp)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write all figures here")
    return parser.parse_args(argv)


def make_plan(args: argparse.Namespace) -> Plan:
    """Defaults scale with durability: at ``full`` every commit waits for an fsync."""
    full = args.durability == "full"
    if args.quick:
        tasks, enqueue, big, cycles = (1_000 if full else 2_000), 500, 100_000, 500
    else:
        tasks, enqueue = (5_000, 1_000) if full else (20_000, 5_000)
        big, cycles = 1_000_000, 2_000
    procs = tuple(sorted({int(p) for p in (args.procs or "1,4,16").split(",") if p.strip()}))
    if not procs or min(procs) < 1:
        raise SystemExit("--procs needs positive process counts, e.g. 1,4,16")
    plan = Plan(
        durability=args.durability,
        tasks=args.tasks or tasks,
        procs=procs,
        enqueue=args.enqueue or enqueue,
        big=args.big or big,
        cycles=args.cycles or cycles,
        warmup=max(20, (args.cycles or cycles) // 10),
        repeat=max(1, args.repeat),
        root=(args.dir or Path(tempfile.gettempdir())).resolve(),
    )
    if plan.tasks < max(plan.procs) * 10:
        raise SystemExit("--tasks must give every worker at least a few batches")
    return plan


@contextmanager
def fresh_folder(plan: Plan, label: str) -> Iterator[Path]:
    """A new empty folder per measurement, removed afterwards (a 1M-task fleet is big)."""
    folder = Path(tempfile.mkdtemp(prefix=f"shoal-bench-{label}-", dir=plan.root))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------------- shoal


def shoal_url(folder: Path, durability: str) -> str:
    return f"sqlite://{(folder / 'fleet.db').resolve()}?synchronous={durability}"


def new_fleet(folder: Path, durability: str) -> Fleet:
    """A fresh fleet that admits every worker (the default is 4 agents)."""
    fleet = Fleet.open(shoal_url(folder, durability))
    fleet.configure(max_agents=64)
    return fleet


# ---------------------------------------------------------------------- huey


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

    # huey names a task by its function's module: ``__main__`` here, ``__mp_main__`` in a
    # spawned worker. One fixed module name makes the parent's messages the workers' tasks.
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
    start = time.monotonic()
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
    end = time.monotonic()
    return {
        "start": start,
        "end": end,
        "latencies": latencies,
        "done": done,
        "anomalies": [],
        "errors": errors,
    }


def verify_huey(huey: Huey, expected: int, reports: Sequence[dict[str, Any]]) -> list[str]:
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


# ---------------------------------------------------------------------- processes


def process_shoal(plan: Plan, procs: int, batch: int) -> Processing:
    with fresh_folder(plan, f"shoal-p{procs}-b{batch}") as folder:
        url = shoal_url(folder, plan.durability)
        with new_fleet(folder, plan.durability) as fleet:
            fill_shoal(fleet, plan.tasks)
        wall, reports = run_workers(shoal_worker, [(url, f"w{i}", batch) for i in range(procs)])
        problems = verify_shoal(url, plan.tasks, reports)
    lat = [x for r in reports for x in r["latencies"]]
    return Processing(plan.tasks / wall, wall, lat, 0, problems)


def process_huey(plan: Plan, procs: int) -> Processing:
    with fresh_folder(plan, f"huey-p{procs}") as folder:
        huey, noop = make_huey(folder, plan.durability)
        fill_huey(huey, noop, plan.tasks)
        huey.storage.close()
        wall, reports = run_workers(
            huey_worker, [(str(folder), plan.durability) for _ in range(procs)]
        )
        problems = verify_huey(huey, plan.tasks, reports)
        huey.storage.close()
    lat = [x for r in reports for x in r["latencies"]]
    errors = sum(r["errors"] for r in reports)
    if errors:
        problems.append(f"huey: {errors} 'database is locked' errors retried")
    return Processing(plan.tasks / wall, wall, lat, errors, problems)


# ---------------------------------------------------------------------- enqueue


def enqueue_shoal(plan: Plan) -> float:
    """Single ``post`` calls, one transaction each, like huey's enqueue."""
    with fresh_folder(plan, "shoal-post") as folder, new_fleet(folder, plan.durability) as fleet:
        for i in range(50):
            fleet.post(f"warm{i}")
        began = time.perf_counter()
        for i in range(plan.enqueue):
            fleet.post(f"t{i}")
        return plan.enqueue / (time.perf_counter() - began)


def enqueue_shoal_many(plan: Plan) -> float:
    """``post_many`` in chunks of POST_CHUNK: what a producer with a backlog would do."""
    with fresh_folder(plan, "shoal-many") as folder, new_fleet(folder, plan.durability) as fleet:
        fleet.post_many([{"title": "warm"}])
        began = time.perf_counter()
        fill_shoal(fleet, plan.tasks)
        return plan.tasks / (time.perf_counter() - began)


def enqueue_huey(plan: Plan) -> float:
    with fresh_folder(plan, "huey-enqueue") as folder:
        huey, noop = make_huey(folder, plan.durability)
        for _ in range(50):
            noop()
        began = time.perf_counter()
        for _ in range(plan.enqueue):
            noop()
        rate = plan.enqueue / (time.perf_counter() - began)
        huey.storage.close()
        return rate


# ---------------------------------------------------------------------- latency vs pending


def pending_shoal(plan: Plan, pending: int) -> dict[str, list[float]]:
    """From one process: the latency of ``claim()`` alone (the task then completed, untimed)
    and of ``complete(lease, then_claim=1)``, with ``pending`` tasks waiting throughout."""
    with (
        fresh_folder(plan, f"shoal-pending{pending}") as folder,
        new_fleet(folder, plan.durability) as fleet,
    ):
        fill_shoal(fleet, pending, f"shoal pre-fill {pending:,}")
        fleet.register("solo")
        clock = time.perf_counter
        claim_only: list[float] = []
        for i in range(plan.warmup + plan.cycles):
            began = clock()
            claim = fleet.claim("solo", n=1)
            elapsed = clock() - began
            if not claim.leases:
                raise RuntimeError(f"claim with {pending} pending came back {claim.reason}")
            fleet.complete(claim.leases[0], None)
            fleet.post("refill")  # keep the pending count where it was
            if i >= plan.warmup:
                claim_only.append(elapsed)
        chained: list[float] = []
        next_claim: Claim | None = fleet.claim("solo", n=1)
        for i in range(plan.warmup + plan.cycles):
            if next_claim is None or not next_claim.leases:
                raise RuntimeError(f"complete-and-claim with {pending} pending got nothing")
            began = clock()
            next_claim = fleet.complete(next_claim.leases[0], None, then_claim=1).next
            elapsed = clock() - began
            fleet.post("refill")
            if i >= plan.warmup:
                chained.append(elapsed)
    return {"claim": claim_only, "complete_then_claim": chained}


def pending_huey(plan: Plan, pending: int) -> list[float]:
    """From one process: the latency of ``dequeue()``, the task then executed (untimed)."""
    with fresh_folder(plan, f"huey-pending{pending}") as folder:
        huey, noop = make_huey(folder, plan.durability)
        fill_huey(huey, noop, pending, f"huey pre-fill {pending:,}")
        clock = time.perf_counter
        latencies: list[float] = []
        for i in range(plan.warmup + plan.cycles):
            began = clock()
            task = huey.dequeue()
            elapsed = clock() - began
            if task is None:
                raise RuntimeError(f"huey dequeue with {pending} pending came back empty")
            huey.execute(task)
            noop()  # keep the pending count where it was
            if i >= plan.warmup:
                latencies.append(elapsed)
        huey.storage.close()
    return latencies


# ---------------------------------------------------------------------- figures and table


_SYNCHRONOUS_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def observed_durability(plan: Plan) -> tuple[str, str]:
    """What each side's connection really runs at, read back rather than trusted.

    shoal has no public way to ask its connection, so this reads the store's private one;
    a missing attribute reads as "unknown" instead of failing the run."""
    with fresh_folder(plan, "pragmas") as folder:
        with new_fleet(folder, plan.durability) as fleet:
            conn = getattr(getattr(fleet, "_store", None), "_conn", None)
            mine = _pragmas(conn) if isinstance(conn, sqlite3.Connection) else "unknown"
        huey, _ = make_huey(folder, plan.durability)
        theirs = _pragmas(huey.storage.conn)
        huey.storage.close()
    return mine, theirs


def _pragmas(conn: sqlite3.Connection) -> str:
    level = conn.execute("pragma synchronous").fetchone()[0]
    journal = conn.execute("pragma journal_mode").fetchone()[0]
    return f"synchronous={_SYNCHRONOUS_NAMES.get(level, level)} journal_mode={journal}"


def describe(plan: Plan) -> dict[str, Any]:
    shoal_dir = Path(shoal.__file__).resolve().parent
    return {
        "command": shlex.join([sys.executable, *sys.argv]),
        "durability": plan.durability,
        "tasks_per_processing_run": plan.tasks,
        "procs": list(plan.procs),
        "single_enqueue_calls": plan.enqueue,
        "pending_small": SMALL_PENDING,
        "pending_big": plan.big,
        "latency_cycles": plan.cycles,
        "latency_warmup": plan.warmup,
        "repeat": plan.repeat,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "loadavg_start": os.getloadavg(),
        "shoal": f"{getattr(shoal, '__version__', '?')} at {shoal_dir} "
        f"({git_state(shoal_dir.parent.parent)})",
        "huey": f"{huey_package.__version__} (SqliteStorage, synchronous set per connection)",
        "tmp": str(plan.root),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


# ---------------------------------------------------------------------- main


def enqueue_rows(plan: Plan, figures: dict[str, Any]) -> list[Row]:
    """Enqueue throughput, one process: single transactions on both sides, then post_many."""
    say("enqueue ...")
    post_one, huey_one = enqueue_shoal(plan), enqueue_huey(plan)
    post_many = enqueue_shoal_many(plan)
    figures["enqueue"] = {
        "shoal_post": post_one,
        "huey_enqueue": huey_one,
        "shoal_post_many": post_many,
    }
    return [
        Row("enqueue, single post vs enqueue, 1 proc", post_one, huey_one, "/s"),
        Row(
            f"enqueue, post_many x{POST_CHUNK} (extra)",
            post_many,
            None,
            "/s",
            note="huey has no batch enqueue",
        ),
    ]


def processing_runs(plan: Plan) -> dict[tuple[str, int], Processing]:
    """Every processing measurement, keyed by (system, processes). The systems alternate
    within each process count, so a drift in the machine's load hits all of them."""
    runs: dict[tuple[str, int], list[Processing]] = {}
    for procs in plan.procs:
        for attempt in range(plan.repeat):
            for system, batch in (("huey", 1), ("shoal b1", 1), ("shoal b10", 10)):
                tag = f" (run {attempt + 1}/{plan.repeat})" if plan.repeat > 1 else ""
                say(f"processing: {system}, {procs} procs, {plan.tasks:,} tasks{tag} ...")
                if system == "huey":
                    result = process_huey(plan, procs)
                else:
                    result = process_shoal(plan, procs, batch)
                say(f"    {result.throughput:,.0f} tasks/s in {result.wall:.2f}s")
                for problem in result.problems:
                    say(f"    WARNING: {problem}")
                runs.setdefault((system, procs), []).append(result)
    return {key: median_run(value) for key, value in runs.items()}


def processing_rows(
    plan: Plan, processing: dict[tuple[str, int], Processing], figures: dict[str, Any]
) -> list[Row]:
    figures["processing"] = {
        f"{system}, {procs} procs": {
            "throughput": run.throughput,
            "wall": run.wall,
            "latency": summary(run.latencies),
            "errors": run.errors,
        }
        for (system, procs), run in processing.items()
    }
    rows = []
    for procs in plan.procs:
        huey_rate = processing[("huey", procs)].throughput
        for batch, target in ((1, TARGET_BATCH1), (10, TARGET_BATCH10)):
            rate = processing[(f"shoal b{batch}", procs)].throughput
            note = "" if batch == 1 else "vs huey one at a time (no batch dequeue)"
            rows.append(
                Row(
                    f"process, batch {batch}, {procs} procs",
                    rate,
                    huey_rate,
                    "/s",
                    f">= {target:g}x huey",
                    rate >= target * huey_rate,
                    note,
                )
            )
    return rows


def contended_rows(
    plan: Plan, processing: dict[tuple[str, int], Processing], figures: dict[str, Any]
) -> list[Row]:
    """Claim latency under contention, from the processing runs at 16 processes."""
    procs = LATENCY_PROCS if LATENCY_PROCS in plan.procs else max(plan.procs)
    where = f"{procs} procs" + ("" if procs == LATENCY_PROCS else " (target is for 16)")
    b1 = summary(processing[("shoal b1", procs)].latencies)
    b10 = summary(processing[("shoal b10", procs)].latencies)
    theirs = summary(processing[("huey", procs)].latencies)
    figures["latency_contended"] = {
        "procs": procs,
        "shoal_b1": b1,
        "shoal_b10": b10,
        "huey": theirs,
    }
    p99, worst = f"<= {TARGET_P99 * 1000:g} ms", f"<= {TARGET_MAX * 1000:g} ms"
    return [
        Row(f"claim p50, batch 1, {where}", b1["p50"], theirs["p50"], "ms"),
        Row(
            f"claim p99, batch 1, {where}",
            b1["p99"],
            theirs["p99"],
            "ms",
            p99,
            b1["p99"] <= TARGET_P99,
        ),
        Row(
            f"claim max, batch 1, {where}",
            b1["max"],
            theirs["max"],
            "ms",
            worst,
            b1["max"] <= TARGET_MAX,
        ),
        Row(f"claim p99, batch 10, {where} (extra)", b10["p99"], theirs["p99"], "ms"),
        Row(f"claim max, batch 10, {where} (extra)", b10["max"], theirs["max"], "ms"),
    ]


def pending_rows(plan: Plan, figures: dict[str, Any]) -> list[Row]:
    """Claim p50 from one process with 1,000 and with ``plan.big`` tasks pending."""
    samples: dict[int, dict[str, list[float]]] = {}
    for count in (SMALL_PENDING, plan.big):
        say(f"latency with {count:,} pending ...")
        samples[count] = {**pending_shoal(plan, count), "huey": pending_huey(plan, count)}
    figures["latency_pending"] = {
        str(count): {kind: summary(values) for kind, values in by_kind.items()}
        for count, by_kind in samples.items()
    }
    p50 = {c: {k: percentile(v, 50) for k, v in by_kind.items()} for c, by_kind in samples.items()}
    small, big = p50[SMALL_PENDING], p50[plan.big]
    rows = []
    for kind, what in (("claim", "claim()"), ("complete_then_claim", "complete(then_claim=1)")):
        for count in (SMALL_PENDING, plan.big):
            rows.append(
                Row(
                    f"{what} p50, {count:,} pending, 1 proc",
                    p50[count][kind],
                    p50[count]["huey"],
                    "ms",
                    note="huey: dequeue()",
                )
            )
        growth = big[kind] / small[kind]
        rows.append(
            Row(
                f"{what} p50 {plan.big:,} / {SMALL_PENDING:,} pending",
                growth,
                big["huey"] / small["huey"],
                "x",
                f"<= {TARGET_GROWTH:g}x",
                growth <= TARGET_GROWTH,
                "" if kind == "claim" else "extra",
            )
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.store == "postgres":
        import claims_pg  # pgqueuer and the PostgreSQL drivers, only when asked for

        return claims_pg.main(args)
    plan = make_plan(args)
    plan.root.mkdir(parents=True, exist_ok=True)
    meta = describe(plan)
    mine, theirs = observed_durability(plan)
    meta["durability"] = f"shoal {mine}; huey {theirs}"
    if mine != theirs:
        meta["durability"] += "  <-- NOT EQUAL: the ratios below compare different durability"
    say("shoal claims benchmark, against huey on SQLite at the same durability")
    for key, value in meta.items():
        say(f"  {key:<26} {value}")
    say("")

    began = time.perf_counter()
    figures: dict[str, Any] = {}
    rows = enqueue_rows(plan, figures)
    processing = processing_runs(plan)
    rows += processing_rows(plan, processing, figures)
    rows += contended_rows(plan, processing, figures)
    rows += pending_rows(plan, figures)
    problems = {
        f"{system}, {procs} procs": run.problems
        for (system, procs), run in processing.items()
        if run.problems
    }
    elapsed = time.perf_counter() - began

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    say("")
    say(
        f"results ({plan.durability} durability; throughput: higher is better, latency: lower "
        f"is better; measured in {elapsed:.0f}s; load average now {load})"
    )
    print_table(rows, "huey")
    say(
        "  claim latency at N procs: every claim() and complete-and-claim call of the batch-1 "
        "run; huey: every dequeue()"
    )
    say(
        "  claim() p50 vs pending: claim() alone, from one process; the task then completed "
        "and one task posted (untimed), so the pending count stays put"
    )
    checked = (
        "shoal: worker reports, state counts and the event log; "
        "huey: worker reports and an empty queue"
    )
    close_report(rows, "huey", problems, checked, args.json, meta, figures, elapsed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
