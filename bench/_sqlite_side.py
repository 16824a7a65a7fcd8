"""The SQLite comparison: shoal on a SQLite file against huey (``_huey_peer``), both at
one ``PRAGMA synchronous`` in WAL mode.

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

Every measurement uses a fresh database file in a temporary folder. After each shoal run
the fleet is checked: every task done, each claimed and completed exactly once.

``--quick`` is a smoke run (about 20 s on 2 cores); without it (normal durability) expect
about two minutes, half of it pre-filling the million-task fleets.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import huey as huey_package

from _fleet_work import POST_CHUNK, fill_shoal, work_down
from _harness import (
    Comparison,
    Processing,
    Row,
    check_tasks,
    interleaved,
    latency_procs,
    meta,
    percentile,
    process_counts,
    processing_figures,
    say,
    summary,
)
from _huey_peer import enqueue_huey, make_huey, pending_huey, process_huey
from shoal import Fleet
from shoal.model import Claim

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


def make_plan(args: argparse.Namespace) -> Plan:
    """Defaults scale with durability: at ``full`` every commit waits for an fsync."""
    full = args.durability == "full"
    if args.quick:
        tasks, enqueue, big, cycles = (1_000 if full else 2_000), 500, 100_000, 500
    else:
        tasks, enqueue = (5_000, 1_000) if full else (20_000, 5_000)
        big, cycles = 1_000_000, 2_000
    plan = Plan(
        durability=args.durability,
        tasks=args.tasks or tasks,
        procs=process_counts(args.procs or "1,4,16", "1,4,16"),
        enqueue=args.enqueue or enqueue,
        big=args.big or big,
        cycles=args.cycles or cycles,
        warmup=max(20, (args.cycles or cycles) // 10),
        repeat=max(1, args.repeat),
        root=(args.dir or Path(tempfile.gettempdir())).resolve(),
    )
    check_tasks(plan.tasks, plan.procs)
    return plan


@contextmanager
def fresh_folder(plan: Plan, label: str) -> Iterator[Path]:
    """A new empty folder per measurement, removed afterwards (a 1M-task fleet is big)."""
    folder = Path(tempfile.mkdtemp(prefix=f"shoal-bench-{label}-", dir=plan.root))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------------- shoal's store


def shoal_url(folder: Path, durability: str) -> str:
    return f"sqlite://{(folder / 'fleet.db').resolve()}?synchronous={durability}"


def new_fleet(folder: Path, durability: str) -> Fleet:
    """A fresh fleet that admits every worker (the default is 4 agents)."""
    fleet = Fleet.open(shoal_url(folder, durability))
    fleet.configure(max_agents=64)
    return fleet


def process_shoal(plan: Plan, procs: int, batch: int) -> Processing:
    with fresh_folder(plan, f"shoal-p{procs}-b{batch}") as folder:
        with new_fleet(folder, plan.durability) as fleet:
            fill_shoal(fleet, plan.tasks)
        return work_down(shoal_url(folder, plan.durability), plan.tasks, procs, batch)


def process_huey_fresh(plan: Plan, procs: int) -> Processing:
    with fresh_folder(plan, f"huey-p{procs}") as folder:
        return process_huey(folder, plan.durability, plan.tasks, procs)


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


def enqueue_huey_fresh(plan: Plan) -> float:
    with fresh_folder(plan, "huey-enqueue") as folder:
        return enqueue_huey(folder, plan.durability, plan.enqueue)


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


def pending_huey_fresh(plan: Plan, pending: int) -> list[float]:
    with fresh_folder(plan, f"huey-pending{pending}") as folder:
        return pending_huey(folder, plan.durability, pending, plan.warmup, plan.cycles)


# ---------------------------------------------------------------------- durability


_SYNCHRONOUS_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def observed_durability(plan: Plan) -> tuple[str, str]:
    """What each side's connection really runs at, read back rather than trusted.

    shoal has no public way to ask its connection, so this reads the store's private one
    (``Fleet._store``); a missing attribute reads as "unknown" instead of failing the run."""
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


# ---------------------------------------------------------------------- rows


def run_name(system: str, procs: int) -> str:
    """A processing run's name: its progress line, warnings and --json key."""
    return f"{system}, {procs} procs"


def enqueue_rows(plan: Plan, figures: dict[str, Any]) -> list[Row]:
    """Enqueue throughput, one process: single transactions on both sides, then post_many."""
    say("enqueue ...")
    post_one, huey_one = enqueue_shoal(plan), enqueue_huey_fresh(plan)
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


def processing_runs(plan: Plan) -> dict[str, Processing]:
    """huey, shoal at batch 1 and shoal at batch 10, taking turns at each process count."""
    return interleaved(
        (
            [
                (run_name("huey", procs), functools.partial(process_huey_fresh, plan, procs)),
                (run_name("shoal b1", procs), functools.partial(process_shoal, plan, procs, 1)),
                (run_name("shoal b10", procs), functools.partial(process_shoal, plan, procs, 10)),
            ]
            for procs in plan.procs
        ),
        plan.repeat,
        plan.tasks,
    )


def processing_rows(plan: Plan, processing: dict[str, Processing]) -> list[Row]:
    rows = []
    for procs in plan.procs:
        huey_rate = processing[run_name("huey", procs)].throughput
        for batch, target in ((1, TARGET_BATCH1), (10, TARGET_BATCH10)):
            rate = processing[run_name(f"shoal b{batch}", procs)].throughput
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
    plan: Plan, processing: dict[str, Processing], figures: dict[str, Any]
) -> list[Row]:
    """Claim latency under contention, from the processing runs at 16 processes."""
    procs = latency_procs(LATENCY_PROCS, plan.procs)
    where = f"{procs} procs" + ("" if procs == LATENCY_PROCS else " (target is for 16)")
    b1 = summary(processing[run_name("shoal b1", procs)].latencies)
    b10 = summary(processing[run_name("shoal b10", procs)].latencies)
    theirs = summary(processing[run_name("huey", procs)].latencies)
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
        samples[count] = {**pending_shoal(plan, count), "huey": pending_huey_fresh(plan, count)}
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


# ---------------------------------------------------------------------- the comparison


def measure(plan: Plan, figures: dict[str, Any]) -> tuple[list[Row], dict[str, Processing]]:
    rows = enqueue_rows(plan, figures)
    processing = processing_runs(plan)
    figures["processing"] = processing_figures(processing)
    rows += processing_rows(plan, processing)
    rows += contended_rows(plan, processing, figures)
    rows += pending_rows(plan, figures)
    return rows, processing


def comparison(args: argparse.Namespace) -> Comparison:
    """The SQLite comparison for these arguments, its durability read back from both."""
    plan = make_plan(args)
    plan.root.mkdir(parents=True, exist_ok=True)
    header = meta(
        {
            "durability": plan.durability,
            "tasks_per_processing_run": plan.tasks,
            "procs": list(plan.procs),
            "single_enqueue_calls": plan.enqueue,
            "pending_small": SMALL_PENDING,
            "pending_big": plan.big,
            "latency_cycles": plan.cycles,
            "latency_warmup": plan.warmup,
            "repeat": plan.repeat,
        },
        {"sqlite": sqlite3.sqlite_version},
        {
            "huey": f"{huey_package.__version__} (SqliteStorage, synchronous set per connection)",
            "tmp": str(plan.root),
        },
    )
    mine, theirs = observed_durability(plan)
    header["durability"] = f"shoal {mine}; huey {theirs}"
    if mine != theirs:
        header["durability"] += "  <-- NOT EQUAL: the ratios below compare different durability"
    return Comparison(
        title="shoal claims benchmark, against huey on SQLite at the same durability",
        rival="huey",
        meta=header,
        notices=(),
        measure=functools.partial(measure, plan),
        conditions=f"{plan.durability} durability; ",
        footnotes=(
            "claim latency at N procs: every claim() and complete-and-claim call of the "
            "batch-1 run; huey: every dequeue()",
            "claim() p50 vs pending: claim() alone, from one process; the task then "
            "completed and one task posted (untimed), so the pending count stays put",
        ),
        checked=(
            "shoal: worker reports, state counts and the event log; "
            "huey: worker reports and an empty queue"
        ),
        strict=False,
    )
