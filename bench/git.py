"""The git store against SQLite (and PostgreSQL, with ``--pg``): claims per second, claim
latency, lost pushes, and how fast the board's repository grows.

Why this exists
---------------
On the git store every write is a fetch, a commit and a push that lands only on the tip it
read; a push turned away re-runs the operation. That is slower than a database by design,
and it gets slower as agents crowd the one branch. The question the docs answer with this
is *how much*: the same claim-then-complete workload, from 1, 3 and 6 worker processes,
on a local bare repository and on a SQLite file (and a PostgreSQL schema) in the same run,
taking turns, with the ratios; and how much disk a thousand tasks leave behind, before and
after ``git gc`` and after ``Fleet.prune`` with ``GitStore.squash_history``.

What is measured
----------------
*Throughput.* Every run starts from a fresh board (``git init --bare``) or database,
pre-filled with ``--tasks`` pool tasks. Each worker is a spawned process with its own
private clone (its own ``SHOAL_GIT_CACHE`` folder, as separate machines would have), set
up before a start barrier. A worker claims one task (``Fleet.claim``, timed), completes it
(``Fleet.complete``, no ``then_claim``: two writes, two commits on git) and goes on until a
claim finds nothing. ``cycles/s`` is tasks claimed and completed per second of wall time,
from the release to the last finish. ``claim calls/s`` is what the claim calls alone run
at: the workers times their claims over their seconds inside ``Fleet.claim`` (the rate if
completing cost nothing). The claim latency is every claim call that got a task,
including its re-runs after lost pushes. ``lost pushes`` is the sum of every worker's
``GitStore.conflicts`` (pushes turned away, each one an operation run again), also per
claim. A call whose every re-run lost its push (``GitStore.conflict_retries`` of them)
raises ``WriteConflict``; the worker asks again, as an agent's loop would, and the table
counts those ``calls that gave up`` (the latency of such a claim runs to its success).
Afterwards each run is checked: every task done, each claimed and completed exactly once
(the event log, read back).

*Size.* One process on a fresh bare repository: ``--size-tasks`` tasks posted and worked
down (claim, complete). ``du`` of the bare repository before and after, as pushed (the
loose objects the pushes leave: the board's own ``git gc --auto`` after a push is turned
off for this; the throughput boards keep git's defaults), after ``git gc`` in it, and
after ``Fleet.prune`` of the finished tasks (a manual clock moved past the steal window,
so the cutoff takes them all), ``squash_history()`` and ``git gc --prune=now``. The same
workload on a SQLite file stands beside it: the file as written (with its WAL), after a
checkpoint, and after the prune and ``VACUUM``. Sizes are per 1,000 tasks (scaled when
``--size-tasks`` is not 1,000).

Run ``make bench-git`` (all of it: about ten minutes on 2 cores) or
``.venv/bin/python bench/git.py --quick`` for a smoke run of under a minute;
``--pg postgresql://127.0.0.1:5432/test`` adds PostgreSQL. docs/benchmarks.md ("The git
store") has the figures and what they mean.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from _fleet_work import fill_shoal, verify_shoal
from _harness import (
    BARRIER_TIMEOUT,
    Comparison,
    Processing,
    Row,
    Table,
    interleaved,
    meta,
    process_counts,
    processing_of,
    put_latency,
    put_rate,
    rate_row,
    run,
    run_workers,
    say,
    summary,
    worker_report,
)
from _results import Figures, figure_name
from shoal import Fleet
from shoal.clock import ManualClock
from shoal.errors import WriteConflict
from shoal.stores import open_store
from shoal.stores.git import GitStore

STORE = "git"  # every figure's name starts with it
#: Calls that gave up after every re-run lost its push, by run name, over all its runs.
GAVE_UP: Counter[str] = Counter()
KB = 1024


@dataclass(frozen=True)
class Plan:
    tasks: int  # pre-filled per throughput run
    procs: tuple[int, ...]
    size_tasks: int
    repeat: int
    folder: Path | None
    pg: str | None  # a postgresql:// URL, or None for no PostgreSQL
    only: str | None = None  # "throughput" or "size": that half alone

    @property
    def systems(self) -> tuple[str, ...]:
        return ("git", "sqlite", "postgres") if self.pg else ("git", "sqlite")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="The git store's claims per second, claim latency, lost pushes and "
        "repository growth, against SQLite (and PostgreSQL with --pg) in the same run.",
    )
    parser.add_argument(
        "--tasks", type=int, default=None, help="tasks per run (default 300; --quick 60)"
    )
    parser.add_argument(
        "--procs", default="1,3,6", help="worker process counts, comma-separated (1,3,6)"
    )
    parser.add_argument(
        "--size-tasks",
        type=int,
        default=None,
        help="tasks for the repository-size measurement (default 1,000; --quick 200)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="runs of each throughput measurement, the systems taking turns; the median "
        "is reported with the range (default 3; --quick 1)",
    )
    parser.add_argument(
        "--pg",
        default=None,
        metavar="URL",
        help="also PostgreSQL, in a fresh schema per run (e.g. postgresql://127.0.0.1:5432/test)",
    )
    parser.add_argument(
        "--only", choices=("throughput", "size"), default=None, help="measure that half alone"
    )
    parser.add_argument("--quick", action="store_true", help="small counts, one run of each")
    parser.add_argument(
        "--dir", type=Path, default=None, help="folder for the boards and databases"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write every figure here")
    return parser.parse_args(argv)


def make_plan(args: argparse.Namespace) -> Plan:
    procs = process_counts(args.procs, "1,3,6")
    tasks = args.tasks or (60 if args.quick else 300)
    if tasks < max(procs) * 5:
        raise SystemExit("--tasks must give every worker a few tasks")
    return Plan(
        tasks=tasks,
        procs=procs,
        size_tasks=args.size_tasks or (200 if args.quick else 1000),
        repeat=args.repeat or (1 if args.quick else 3),
        folder=args.dir,
        pg=args.pg,
        only=args.only,
    )


# ---------------------------------------------------------------------- places


@contextlib.contextmanager
def fresh_folder(plan: Plan, label: str) -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix=f"shoal-gitbench-{label}-", dir=plan.folder))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


def new_board(folder: Path) -> str:
    """An empty bare repository in ``folder``; the store URL of a fleet on it."""
    git("init", "--quiet", "--bare", str(folder / "board.git"))
    return f"git+file://{folder / 'board.git'}#shoal"


def sqlite_url(folder: Path) -> str:
    return f"sqlite://{(folder / 'fleet.db').resolve()}?synchronous=normal"


_serial = itertools.count(1)


@contextlib.contextmanager
def fresh_schema(pg: str) -> Iterator[str]:
    """shoal's URL for a new schema on ``pg``, dropped afterwards."""
    import psycopg  # only with --pg

    name = f"bench_git_{os.getpid()}_{next(_serial)}"
    parts = urlsplit(pg)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "schema"]
    try:
        yield urlunsplit(parts._replace(query=urlencode([*query, ("schema", name)])))
    finally:
        with psycopg.connect(urlunsplit(parts._replace(query=urlencode(query)))) as conn:
            conn.execute(f'drop schema if exists "{name}" cascade')
            conn.commit()


@contextlib.contextmanager
def fresh_fleet(plan: Plan, system: str, folder: Path) -> Iterator[str]:
    """A new fleet of ``system`` (pre-filled, admitting every worker); its URL."""
    with contextlib.ExitStack() as stack:
        if system == "git":
            url = new_board(folder)
            os.environ["SHOAL_GIT_CACHE"] = str(folder / "cache-main")
        elif system == "sqlite":
            url = sqlite_url(folder)
        else:
            assert plan.pg is not None
            url = stack.enter_context(fresh_schema(plan.pg))
        with Fleet.init(url) as fleet:
            fleet.configure(max_agents=max(*plan.procs, 4))
            fill_shoal(fleet, plan.tasks, f"{system} pre-fill")
        yield url


# ---------------------------------------------------------------------- throughput


def process(plan: Plan, system: str, procs: int) -> Processing:
    """One throughput run of ``system`` from ``procs`` workers, checked afterwards."""
    with fresh_folder(plan, system) as folder, fresh_fleet(plan, system, folder) as url:
        caches = [str(folder / f"cache-{i}") for i in range(procs)]
        wall, reports = run_workers(claim_worker, [(url, f"w{i}", caches[i]) for i in range(procs)])
        GAVE_UP[run_name(system, procs)] += sum(r["gave_up"] for r in reports)
        return processing_of(plan.tasks, wall, reports, verify_shoal(url, plan.tasks, reports))


def claim_worker(
    url: str, agent_id: str, cache: str, barrier: Any, results: Any
) -> None:  # pragma: no cover - runs in a child process
    """One worker process: its own clone, its own agent, claim and complete until empty."""
    try:
        results.put(_claim_work(url, agent_id, cache, barrier))
    except BaseException:
        barrier.abort()
        results.put({"error": f"worker {agent_id}:\n{traceback.format_exc()}"})


def _claim_work(url: str, agent_id: str, cache: str, barrier: Any) -> dict[str, Any]:
    os.environ["SHOAL_GIT_CACHE"] = cache  # this process's own clone
    store = open_store(url, create=False)
    fleet = Fleet(store)
    fleet.register(agent_id)
    latencies: list[float] = []
    done: list[int] = []
    anomalies: list[str] = []
    clock = time.perf_counter
    barrier.wait(BARRIER_TIMEOUT)
    lost_before = getattr(store, "conflicts", 0)
    start, cpu = time.monotonic(), time.process_time()
    gave_up = 0  # calls that lost every one of their pushes (WriteConflict reached us)
    while True:
        began = clock()
        while True:  # a claim that gave up is asked again, as an agent's loop would
            try:
                claim = fleet.claim(agent_id)
                break
            except WriteConflict:
                gave_up += 1
        took = clock() - began
        if not claim.leases:
            break
        latencies.append(took)
        lease = claim.leases[0]
        while True:
            try:
                completion = fleet.complete(lease)
                break
            except WriteConflict:
                gave_up += 1
        if completion.already_done:
            anomalies.append(f"task {lease.task_id} was already done")
        else:
            done.append(lease.task_id)
    end, cpu = time.monotonic(), time.process_time() - cpu
    if claim.reason != "empty":
        anomalies.append(f"{agent_id} stopped on claim reason {claim.reason!r}, not 'empty'")
    lost = getattr(store, "conflicts", 0) - lost_before
    fleet.close()
    report = worker_report(start, end, cpu, latencies, done, anomalies, errors=lost)
    report["gave_up"] = gave_up
    return report


def measure_throughput(plan: Plan) -> dict[str, Processing]:
    groups = [
        [
            (run_name(system, procs), lambda s=system, p=procs: process(plan, s, p))
            for system in plan.systems
        ]
        for procs in plan.procs
    ]
    return interleaved(groups, plan.repeat)


def run_name(system: str, procs: int) -> str:
    return f"{system}, {procs} process{'es' if procs > 1 else ''}"


# ---------------------------------------------------------------------- size


def du(path: Path) -> int:
    """Disk used under ``path`` in bytes, as ``du`` counts it (whole blocks per file)."""
    out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0]) * KB


def work_alone(fleet: Fleet, tasks: int) -> None:
    """Post ``tasks`` and claim and complete every one from this process."""
    fill_shoal(fleet, tasks, "size pre-fill")
    fleet.register("sizer")
    while (claim := fleet.claim("sizer")).leases:
        fleet.complete(claim.leases[0])
    counts = {state: n for state, n in fleet.status().counts.items() if n}
    if counts != {"done": tasks}:
        raise RuntimeError(f"the size run left {counts}, not {tasks} done")


def prune_all(fleet: Fleet, clock: ManualClock) -> int:
    """Prune every finished task: move the clock past the steal window, cut at a second."""
    clock.advance(fleet.settings().rebalance_interval + 60)
    return fleet.prune(1.0).tasks


def measure_size(plan: Plan) -> dict[str, dict[str, float]]:
    """Bytes the board (and the SQLite file) grew by for ``size_tasks`` tasks, at each
    stage: ``pushed``, ``gc``, ``squashed`` (git); ``written``, ``checkpoint``,
    ``vacuumed`` (SQLite); and the private clone's growth."""
    sizes: dict[str, dict[str, float]] = {"git": {}, "sqlite": {}}
    git_sizes, lite = sizes["git"], sizes["sqlite"]
    with fresh_folder(plan, "size-git") as folder:
        say(f"git size: {plan.size_tasks:,} tasks from one process ...")
        url = new_board(folder)
        board = folder / "board.git"
        # What the pushes leave, unpacked: the board's own `git gc --auto` after a push
        # (receive.autoGc, at 6,700 loose objects) would pack some of it on the way.
        git("config", "receive.autoGc", "false", cwd=board)
        os.environ["SHOAL_GIT_CACHE"] = str(folder / "cache")
        clock = ManualClock(time.time())
        store = GitStore(url)  # the benchmark squashes the history itself
        with Fleet(store, clock=clock) as fleet:
            git("gc", "--quiet", "--prune=now", cwd=board)  # the empty fleet, packed
            start, clone_start = du(board), du(folder / "cache")
            began = time.perf_counter()
            work_alone(fleet, plan.size_tasks)
            say(f"    worked down in {time.perf_counter() - began:.0f}s")
            git_sizes["start"] = start
            git_sizes["pushed"] = du(board) - start
            git_sizes["clone"] = du(folder / "cache") - clone_start
            git_sizes["commits"] = int(git("rev-list", "--count", "shoal", cwd=board))
            git("gc", "--quiet", cwd=board)
            git_sizes["gc"] = du(board) - start
            pruned = prune_all(fleet, clock)
            if store.squash_history() is None:
                raise RuntimeError("squash_history found the branch moved (nobody else writes)")
            git("gc", "--quiet", "--prune=now", cwd=board)
            git_sizes["squashed"] = du(board) - start
            git_sizes["pruned_tasks"] = pruned
    with fresh_folder(plan, "size-sqlite") as folder:
        say(f"sqlite size: {plan.size_tasks:,} tasks from one process ...")
        clock = ManualClock(time.time())
        with Fleet(open_store(sqlite_url(folder)), clock=clock) as fleet:
            sql(folder, "pragma wal_checkpoint(truncate)")  # the empty fleet, no WAL
            start = du(folder)
            work_alone(fleet, plan.size_tasks)
            lite["start"] = start
            lite["written"] = du(folder) - start
            sql(folder, "pragma wal_checkpoint(truncate)")
            lite["checkpoint"] = du(folder) - start
            lite["pruned_tasks"] = prune_all(fleet, clock)
            sql(folder, "vacuum", "pragma wal_checkpoint(truncate)")
            lite["vacuumed"] = du(folder) - start
    return sizes


def sql(folder: Path, *statements: str) -> None:
    import sqlite3

    conn = sqlite3.connect(folder / "fleet.db", isolation_level=None)
    try:
        for statement in statements:
            conn.execute(statement).fetchall()
    finally:
        conn.close()


# ---------------------------------------------------------------------- the report


def measure(plan: Plan, figures: Figures) -> tuple[list[Table], dict[str, Processing]]:
    runs = measure_throughput(plan) if plan.only != "size" else {}
    tables: list[Table] = []
    if runs:
        for peer in plan.systems[1:]:
            tables.append((peer, throughput_rows(plan, runs, peer, figures)))
    if plan.only != "throughput":
        tables.append(("sqlite", size_rows(plan, measure_size(plan), figures)))
    return tables, runs


def throughput_rows(
    plan: Plan, runs: dict[str, Processing], peer: str, figures: Figures
) -> list[Row]:
    rows: list[Row] = []
    first = peer == plan.systems[1]  # git's own figures are written once
    for procs in plan.procs:
        mine, theirs = runs[run_name("git", procs)], runs[run_name(peer, procs)]
        name = functools.partial(figure_name, STORE, None, procs=procs)
        if first:
            put_rate(figures, name, "git", mine)
        put_rate(figures, name, peer, theirs)
        figures.put(name(quantity=f"ratio_vs_{peer}"), mine.throughput / theirs.throughput)
        mine_claims, their_claims = claim_rate(mine, procs), claim_rate(theirs, procs)
        if first:
            figures.put(name(quantity="git_claim_calls_per_s"), mine_claims)
        figures.put(name(quantity=f"{peer}_claim_calls_per_s"), their_claims)
        claim_name = functools.partial(figure_name, STORE, "claim", procs=procs)
        ours = put_latency(figures, claim_name, mine.latencies) if first else None
        stats = put_latency(figures, claim_name, theirs.latencies, prefix=f"{peer}_")
        ours = ours or summary(mine.latencies)
        if first:
            figures.put(name(quantity="lost_pushes"), mine.errors / plan.repeat)
            per_claim = mine.errors / (plan.tasks * plan.repeat)
            figures.put(name(quantity="lost_pushes_per_claim"), per_claim)
            gave_up = GAVE_UP[run_name("git", procs)] / plan.repeat
            figures.put(name(quantity="gave_up"), gave_up)
        each = "process" if procs == 1 else "processes"
        rows += [
            rate_row(f"claim+complete cycles/s, {procs} {each}", mine, theirs),
            Row("  claim calls/s", mine_claims, their_claims, "/s"),
            Row("  claim p50", ours["p50"], stats["p50"], "ms"),
            Row("  claim p99", ours["p99"], stats["p99"], "ms"),
            Row(
                "  lost pushes per claim",
                mine.errors / (plan.tasks * plan.repeat),
                None,
                "n",
                note=f"({mine.errors / plan.repeat:,.0f} a run)",
            ),
            Row(
                "  calls that gave up, a run",
                GAVE_UP[run_name("git", procs)] / plan.repeat,
                GAVE_UP[run_name(peer, procs)] / plan.repeat,
                "n",
            ),
        ]
    return rows


def claim_rate(run: Processing, procs: int) -> float:
    """Claim calls per second at the mean claim latency, ``procs`` workers at once: what
    the claims alone would run at if completing cost nothing."""
    return procs * len(run.latencies) / sum(run.latencies)


def size_rows(plan: Plan, sizes: dict[str, dict[str, float]], figures: Figures) -> list[Row]:
    per = 1000 / plan.size_tasks
    git_sizes, lite = sizes["git"], sizes["sqlite"]
    stages = (
        ("as pushed / as written", "pushed", "written"),
        ("after git gc / checkpoint", "gc", "checkpoint"),
        ("after prune+squash+gc / prune+vacuum", "squashed", "vacuumed"),
    )
    rows = [Row("KB of the empty fleet", git_sizes["start"] / KB, lite["start"] / KB, "n")]
    figures.put(figure_name(STORE, "size", quantity="start_kb"), git_sizes["start"] / KB)
    figures.put(figure_name(STORE, "size", quantity="sqlite_start_kb"), lite["start"] / KB)
    for label, mine, theirs in stages:
        kb_git, kb_lite = git_sizes[mine] * per / KB, lite[theirs] * per / KB
        figures.put(figure_name(STORE, "size", quantity=f"{mine}_kb"), kb_git)
        figures.put(figure_name(STORE, "size", quantity=f"sqlite_{theirs}_kb"), kb_lite)
        rows.append(Row(f"KB per 1,000 tasks {label}", kb_git, kb_lite, "n"))
    clone_kb = git_sizes["clone"] * per / KB
    figures.put(figure_name(STORE, "size", quantity="clone_kb"), clone_kb)
    figures.put(figure_name(STORE, "size", quantity="commits"), git_sizes["commits"] * per)
    rows.append(Row("KB per 1,000 tasks in a private clone", clone_kb, None, "n"))
    rows.append(Row("commits per 1,000 tasks", git_sizes["commits"] * per, None, "n"))
    return rows


def comparison(args: argparse.Namespace) -> Comparison:
    plan = make_plan(args)
    peers = {"sqlite": __import__("sqlite3").sqlite_version}
    if plan.pg:
        import psycopg

        with psycopg.connect(plan.pg) as conn:
            row = conn.execute("show server_version").fetchone()
            peers["postgresql"] = row[0] if row else "?"
    header = meta(
        STORE,
        {
            "tasks_per_run": plan.tasks,
            "procs": ",".join(map(str, plan.procs)),
            "size_tasks": plan.size_tasks,
            "only": plan.only or "both",
            "repeat": plan.repeat,
        },
        {"git": git("--version").strip().removeprefix("git version ")},
        peers,
        {},
    )
    return Comparison(
        title="shoal's git store against SQLite"
        + (" and PostgreSQL" if plan.pg else "")
        + ": claim+complete cycles, claim latency, lost pushes, repository growth",
        meta=header,
        notices=["each git worker has its own clone; the board is a local bare repository"],
        measure=lambda figures: measure(plan, figures),
        conditions="SQLite at synchronous=normal; ",
        footnotes=[
            "claim calls/s: the workers times their claims over their time inside Fleet.claim",
            "lost pushes: GitStore.conflicts summed over the workers (each one an operation "
            "run again), per claim and per run",
            "sizes: du of the bare repository (git) or the database folder (SQLite); the "
            "empty fleet gc'd (checkpointed), then what "
            f"{plan.size_tasks:,} tasks from one process added, scaled to 1,000",
        ],
        checked="event log and state counts read back after every run",
        strict=True,
        mine="git",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    return run(comparison(args), args.json)


if __name__ == "__main__":
    sys.exit(main())
