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
* The raw SQLite ceiling at the same batches and process counts (``_raw_sqlite``): a
  claim-and-ack loop with no shoal in it, and shoal's throughput as a share of it.
* Enqueue throughput, one process: single ``post`` calls against huey's enqueue (one
  transaction each), and ``post_many`` in chunks as an extra line.
* Claim latency p50/p99/max at 16 processes (every claim and complete-and-claim call of
  the batch-1 run; huey: every ``dequeue``), and claim p50 with 1,000 against 1,000,000
  pending tasks from one process, the pending count held constant by posting one task
  after each cycle (untimed).

The throughputs are medians of ``--repeat`` runs (3 unless told), every system taking its
turn within each configuration; the latencies pool the samples of every run. Every
measurement uses a fresh database file in a temporary folder. After each shoal run the
fleet is checked: every task done, each claimed and completed exactly once; after each raw
run, every row acked once.

``--quick`` is a smoke run (a minute or two on 2 cores, three rounds of small counts);
without it (normal durability) expect five to ten minutes, one or two of them pre-filling
the million-task fleets.
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

import huey as huey_package

from _fleet_work import POST_CHUNK, fill_shoal, work_down
from _harness import (
    Comparison,
    Processing,
    Row,
    Table,
    check_tasks,
    interleaved,
    latency_procs,
    meta,
    percentile,
    process_counts,
    put_latency,
    put_rate,
    rate_row,
    rated,
    say,
)
from _huey_peer import enqueue_huey, make_huey, pending_huey, process_huey
from _raw_sqlite import process_raw
from _results import Figures, figure_name
from shoal import Fleet
from shoal.model import Claim

SMALL_PENDING = 1_000
STORE = "sqlite"
BATCHES = (1, 10)

# The targets of the issues, each on the figure it names.
TARGET_VS_HUEY = {1: 0.6, 10: 2.0}  # x huey throughput, by batch (huey: one at a time)
TARGET_SHARE_OF_RAW = {1: 0.5}  # x the raw SQLite loop's throughput, by batch
TARGET_P99_MS = 10  # claim p99 at 16 processes, batch 1
TARGET_MAX_MS = 100  # worst claim at 16 processes, batch 1
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


def process_raw_fresh(plan: Plan, procs: int, batch: int) -> Processing:
    with fresh_folder(plan, f"raw-p{procs}-b{batch}") as folder:
        return process_raw(folder, plan.durability, plan.tasks, procs, batch)


def enqueue_shoal(plan: Plan) -> Processing:
    """Single ``post`` calls, one transaction each, like huey's enqueue."""
    with fresh_folder(plan, "shoal-post") as folder, new_fleet(folder, plan.durability) as fleet:
        for i in range(50):
            fleet.post(f"warm{i}")
        began = time.perf_counter()
        for i in range(plan.enqueue):
            fleet.post(f"t{i}")
        return rated(plan.enqueue, time.perf_counter() - began)


def enqueue_shoal_many(plan: Plan) -> Processing:
    """``post_many`` in chunks of POST_CHUNK: what a producer with a backlog would do."""
    with fresh_folder(plan, "shoal-many") as folder, new_fleet(folder, plan.durability) as fleet:
        fleet.post_many([{"title": "warm"}])
        began = time.perf_counter()
        fill_shoal(fleet, plan.tasks)
        return rated(plan.tasks, time.perf_counter() - began)


def enqueue_huey_fresh(plan: Plan) -> Processing:
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


# ---------------------------------------------------------------------- measuring


ENQUEUE = ("enqueue: shoal post", "enqueue: huey enqueue", "enqueue: shoal post_many")


def run_name(system: str, procs: int) -> str:
    """A processing run's name, as its progress line and warnings show it; ``system`` is
    huey, or shoal or raw with the batch: ``shoal b10``."""
    return f"{system}, {procs} procs"


@dataclass
class Measured:
    """What a SQLite run measured: every interleaved run's median by name (``ENQUEUE`` and
    ``run_name``), and the backlog latency samples by pending count and kind (claim,
    complete_then_claim, huey)."""

    runs: dict[str, Processing]
    backlog: dict[int, dict[str, list[float]]]


def measure_all(plan: Plan) -> Measured:
    """Enqueue, then processing at each process count with every system taking turns,
    then latency against the backlog."""
    enqueue = [
        (ENQUEUE[0], functools.partial(enqueue_shoal, plan)),
        (ENQUEUE[1], functools.partial(enqueue_huey_fresh, plan)),
        (ENQUEUE[2], functools.partial(enqueue_shoal_many, plan)),
    ]
    processing = (
        [
            (run_name("huey", procs), functools.partial(process_huey_fresh, plan, procs)),
            *[
                (
                    run_name(f"{system} b{batch}", procs),
                    functools.partial(how, plan, procs, batch),
                )
                for batch in BATCHES
                for system, how in (("shoal", process_shoal), ("raw", process_raw_fresh))
            ],
        ]
        for procs in plan.procs
    )
    runs = interleaved([enqueue, *processing], plan.repeat)
    backlog = {}
    for count in (SMALL_PENDING, plan.big):
        say(f"latency with {count:,} pending ...")
        backlog[count] = {**pending_shoal(plan, count), "huey": pending_huey_fresh(plan, count)}
    return Measured(runs, backlog)


# ---------------------------------------------------------------------- figures and rows


def report(plan: Plan, measured: Measured, figures: Figures) -> list[Table]:
    """Every figure under its name, and the printed tables: against huey, and against the
    raw SQLite loop."""
    against_huey = enqueue_rows(measured.runs, figures)
    against_huey += processing_rows(plan, measured.runs, figures)
    against_huey += contended_rows(plan, measured.runs, figures)
    against_huey += backlog_rows(plan, measured.backlog, figures)
    return [("huey", against_huey), ("raw SQLite", raw_rows(plan, measured.runs, figures))]


def enqueue_rows(runs: dict[str, Processing], figures: Figures) -> list[Row]:
    """Enqueue throughput, one process: single transactions on both sides, then post_many."""
    post_one, huey_one, post_many = (runs[name] for name in ENQUEUE)
    at = functools.partial(figure_name, STORE, "enqueue")
    put_rate(figures, at, "shoal", post_one)
    put_rate(figures, at, "huey", huey_one)
    figures.put(at(quantity="ratio_vs_huey"), post_one.throughput / huey_one.throughput)
    put_rate(figures, functools.partial(figure_name, STORE, "post_many"), "shoal", post_many)
    return [
        rate_row("enqueue, single post vs enqueue, 1 proc", post_one, huey_one),
        rate_row(
            f"enqueue, post_many x{POST_CHUNK} (extra)",
            post_many,
            None,
            note="huey has no batch enqueue",
        ),
    ]


def processing_rows(plan: Plan, runs: dict[str, Processing], figures: Figures) -> list[Row]:
    """Throughput against huey; every system's figures (raw's too) go in here."""
    rows = []
    for procs in plan.procs:
        huey = runs[run_name("huey", procs)]
        for batch in BATCHES:
            at = functools.partial(figure_name, STORE, batch=batch, procs=procs)
            mine, raw = (
                runs[run_name(f"shoal b{batch}", procs)],
                runs[run_name(f"raw b{batch}", procs)],
            )
            for system, run in (("shoal", mine), ("huey", huey), ("raw", raw)):
                put_rate(figures, at, system, run)
            target = TARGET_VS_HUEY[batch]
            passed = figures.put(
                at(quantity="ratio_vs_huey"), mine.throughput / huey.throughput, f">= {target:g}"
            )
            note = "" if batch == 1 else "vs huey one at a time (no batch dequeue)"
            rows.append(
                rate_row(
                    f"process, batch {batch}, {procs} procs",
                    mine,
                    huey,
                    f">= {target:g}x huey",
                    passed,
                    note,
                )
            )
    return rows


def raw_rows(plan: Plan, runs: dict[str, Processing], figures: Figures) -> list[Row]:
    """shoal's throughput as a share of the raw SQLite loop's, by batch and process count,
    and each batch's lowest share over the process counts."""
    rows = []
    for batch in BATCHES:
        target = TARGET_SHARE_OF_RAW.get(batch)
        bound = None if target is None else f">= {target:g}"
        shares = []
        for procs in plan.procs:
            mine, raw = (
                runs[run_name(f"shoal b{batch}", procs)],
                runs[run_name(f"raw b{batch}", procs)],
            )
            share = mine.throughput / raw.throughput
            shares.append(share)
            name = figure_name(STORE, batch=batch, procs=procs, quantity="share_of_raw")
            passed = figures.put(name, share, bound)
            rows.append(
                rate_row(
                    f"process, batch {batch}, {procs} procs",
                    mine,
                    raw,
                    "" if target is None else f">= {target:g}x raw",
                    passed,
                )
            )
        figures.put(figure_name(STORE, batch=batch, quantity="share_of_raw"), min(shares))
    return rows


def contended_rows(plan: Plan, runs: dict[str, Processing], figures: Figures) -> list[Row]:
    """Claim latency under contention, from the processing runs at 16 processes."""
    procs = latency_procs(LATENCY_PROCS, plan.procs)
    where = f"{procs} procs" + ("" if procs == LATENCY_PROCS else " (target is for 16)")
    huey_samples = runs[run_name("huey", procs)].latencies
    stats = {}
    for batch in BATCHES:
        at = functools.partial(figure_name, STORE, "claim", batch=batch, procs=procs)
        bounds = {"p99": f"<= {TARGET_P99_MS:g}", "max": f"<= {TARGET_MAX_MS:g}"}
        mine = runs[run_name(f"shoal b{batch}", procs)].latencies
        stats[batch] = put_latency(figures, at, mine, targets=bounds if batch == 1 else None)
        theirs = put_latency(figures, at, huey_samples, "huey_")
        put_latency(figures, at, runs[run_name(f"raw b{batch}", procs)].latencies, "raw_")
    b1, b10 = stats[1], stats[10]
    verdicts = figures.targets
    p99_name = figure_name(STORE, "claim", batch=1, procs=procs, quantity="p99_ms")
    max_name = figure_name(STORE, "claim", batch=1, procs=procs, quantity="max_ms")
    return [
        Row(f"claim p50, batch 1, {where}", b1["p50"], theirs["p50"], "ms"),
        Row(
            f"claim p99, batch 1, {where}",
            b1["p99"],
            theirs["p99"],
            "ms",
            f"<= {TARGET_P99_MS:g} ms",
            verdicts[p99_name]["pass"],
        ),
        Row(
            f"claim max, batch 1, {where}",
            b1["max"],
            theirs["max"],
            "ms",
            f"<= {TARGET_MAX_MS:g} ms",
            verdicts[max_name]["pass"],
        ),
        Row(f"claim p99, batch 10, {where} (extra)", b10["p99"], theirs["p99"], "ms"),
        Row(f"claim max, batch 10, {where} (extra)", b10["max"], theirs["max"], "ms"),
    ]


def backlog_rows(
    plan: Plan, backlog: dict[int, dict[str, list[float]]], figures: Figures
) -> list[Row]:
    """Claim p50 from one process with 1,000 and with ``plan.big`` tasks pending, and how
    much it grew."""
    p50 = {c: {k: percentile(v, 50) for k, v in by_kind.items()} for c, by_kind in backlog.items()}
    at = functools.partial(figure_name, STORE, "backlog")
    for count, by_kind in p50.items():
        for kind, value in by_kind.items():
            figures.put(at(pending=count, quantity=f"{kind}_p50_ms"), value * 1000)
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
        passed = figures.put(at(quantity=f"{kind}_growth"), growth, f"<= {TARGET_GROWTH:g}")
        rows.append(
            Row(
                f"{what} p50 {plan.big:,} / {SMALL_PENDING:,} pending",
                growth,
                big["huey"] / small["huey"],
                "x",
                f"<= {TARGET_GROWTH:g}x",
                passed,
                "" if kind == "claim" else "extra",
            )
        )
    figures.put(at(quantity="huey_growth"), big["huey"] / small["huey"])
    return rows


# ---------------------------------------------------------------------- the comparison


def measure(plan: Plan, figures: Figures) -> tuple[list[Table], dict[str, Processing]]:
    measured = measure_all(plan)
    return report(plan, measured, figures), measured.runs


def comparison(args: argparse.Namespace) -> Comparison:
    """The SQLite comparison for these arguments, its durability read back from both."""
    plan = make_plan(args)
    plan.root.mkdir(parents=True, exist_ok=True)
    header = meta(
        STORE,
        {
            "quick": bool(args.quick),
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
        {"huey": huey_package.__version__},
        {"tmp": str(plan.root)},
    )
    mine, theirs = observed_durability(plan)
    header["durability_observed"] = f"shoal {mine}; huey {theirs}"
    if mine != theirs:
        header["durability_observed"] += (
            "  <-- NOT EQUAL: the ratios below compare different durability"
        )
    return Comparison(
        title="shoal claims benchmark, against huey and a raw SQLite loop at the same durability",
        meta=header,
        notices=(),
        measure=functools.partial(measure, plan),
        conditions=f"{plan.durability} durability; ",
        footnotes=(
            "claim latency at N procs: every claim() and complete-and-claim call of the "
            "batch-1 run; huey: every dequeue()",
            "claim() p50 vs pending: claim() alone, from one process; the task then "
            "completed and one task posted (untimed), so the pending count stays put",
            "throughput: the median of the runs, their lowest-highest in parentheses; raw SQLite: "
            "one UPDATE ... RETURNING claims, one UPDATE per task acks, batch per transaction",
        ),
        checked=(
            "shoal: worker reports, state counts and the event log; "
            "huey: worker reports and an empty queue; raw: worker reports and every row done"
        ),
        strict=False,
    )
