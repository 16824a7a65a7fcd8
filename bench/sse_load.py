"""Does watching the fleet slow the fleet down? Claim latency of a many-process claim race
with 50 dashboards open on ``/live``, against the same race with none.

Why this exists
---------------
``shoal serve`` pushes the fleet's changes to every open dashboard over server-sent events
(``/live``), fed by the store's change signal. A claim race is exactly when the fleet
changes fastest, and the server's work for its watchers (waking on each change, reading
the fleet, writing to every stream) runs on the same machine and the same store as the
agents. The target (issue 15): with 50 watchers open during a 16-process claim race,
claim p99 within 10% of the same race without watchers, and nothing lost -- every task
done exactly once, every watcher receiving events, none dropped.

What is measured
----------------
Each race: a fresh fleet (a SQLite file, or a fresh schema on PostgreSQL with
``--store postgres``) pre-filled with ``--tasks`` pool tasks, served by a real ``shoal
serve`` process; then ``--procs`` worker processes, each its own agent with its own Fleet,
claim and complete until the fleet is empty (``_fleet_work``: batch 1, each call a
``complete(lease, then_claim=1)`` timed by the worker, the first claim too). The server
runs in both kinds of race, so the only difference is the watchers: ``--watchers``
streams held open by one spawned process (``_sse_watchers``, at nice 19: the watchers
stand in for browsers on other machines, so their own CPU should not be taken from the
race), all connected before the race starts and read until every one has had an event from
the race. The two kinds take
turns over ``--repeat`` rounds (the order reversed every other round) and latencies are
pooled per kind; p50, p99 and max are nearest-rank. After every race: every task done,
each claimed and completed once (the workers' reports, the state counts and the event
log); after every watched race: every watcher connected, none lost its stream, every one
received at least one event while the race ran.

The watchers only read the stream by default, as the issue's target has it. A fleet page
does more: on each event it fetches the lanes again (``/lanes``). ``--reload-lanes`` makes
each watcher do the same (one request in flight, the last change queued behind it, as the
page's htmx does), which measures fifty open dashboards rather than fifty open streams.

Run ``make bench-sse`` (SQLite, the figures into bench/results/sqlite_sse.json), or
``.venv/bin/python bench/sse_load.py --quick`` for a smoke run of about a minute; exits 1
when something was lost (not on a missed latency target: the machine is shared and noisy).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import multiprocessing as mp
import os
import queue
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

from _fleet_work import fill_shoal, work_down
from _harness import Row, close_report, meta, say, summary
from _results import Figures, figure_name
from _served import serving
from _sse_watchers import CONNECT_DEADLINE, GRACE, watch
from shoal import Fleet

DEFAULT_PG_URL = "postgresql://127.0.0.1:5432/test"
SCHEMA_PREFIX = "bench_sse_"
TARGET_P99_RATIO = 1.10  # watched p99 / unwatched p99


@dataclass
class Plan:
    store: str  # "sqlite" or "postgres"
    pg_url: str
    tasks: int
    procs: int
    watchers: int
    repeat: int
    folder: Path
    reload: bool = False  # each watcher also reloads the lanes on every event


@dataclass
class Kind:
    """Every race of one kind (watched or not), pooled."""

    name: str
    latencies: list[float] = field(default_factory=list)
    rates: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    events: list[int] = field(default_factory=list)  # per watcher per race: events in the race
    server_cpu: list[float] = field(default_factory=list)  # the server's CPU seconds per race
    watcher_cpu: list[float] = field(default_factory=list)  # the watcher process's, per race


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="shoal claim latency in a many-process claim race with SSE watchers "
        "open on /live, against the same race without them.",
    )
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument(
        "--pg-url",
        default=DEFAULT_PG_URL,
        help=f"with --store postgres: the server and database (default {DEFAULT_PG_URL})",
    )
    parser.add_argument(
        "--tasks", type=int, default=None, help="tasks per race (default 5,000; --quick 1,500)"
    )
    parser.add_argument("--procs", type=int, default=16, help="claiming processes (default 16)")
    parser.add_argument(
        "--watchers", type=int, default=50, help="open /live streams in a watched race (50)"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="rounds of one race of each kind, taking turns (default 3; --quick 2)",
    )
    parser.add_argument(
        "--reload-lanes",
        action="store_true",
        help="each watcher also fetches /lanes on every fleet event, as the fleet page does "
        "(one request in flight, the last change queued), instead of only reading the stream",
    )
    parser.add_argument("--quick", action="store_true", help="small counts for a smoke run")
    parser.add_argument(
        "--dir", type=Path, default=None, help="folder for the fleets and the server logs"
    )
    parser.add_argument(
        "--json", type=Path, default=None, help="also write every figure here, by name"
    )
    return parser.parse_args(argv)


# ---------------------------------------------------------------------- fleets


_serial = itertools.count(1)


@contextlib.contextmanager
def fresh_fleet(plan: Plan) -> Iterator[str]:
    """A new fleet's URL (a SQLite file, or a PostgreSQL schema dropped afterwards)."""
    n = next(_serial)
    if plan.store == "sqlite":
        yield f"sqlite://{plan.folder / f'race-{n}.db'}"
        return
    import psycopg

    from _pg_side import with_schema, without_schema

    server = without_schema(plan.pg_url)
    schema = f"{SCHEMA_PREFIX}{os.getpid()}_{n}"
    try:
        yield with_schema(server, schema)
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'drop schema if exists "{schema}" cascade')


# ---------------------------------------------------------------------- one race


@dataclass
class Watching:
    """The watcher process and the events it is steered by."""

    proc: Any
    ready: Any
    race: Any
    stop: Any
    results: Any

    def report(self) -> tuple[list[dict[str, Any]], float]:
        """Stop the watchers; what each received, and the CPU seconds their process used."""
        self.stop.set()
        deadline = time.monotonic() + GRACE + 30
        while True:
            try:
                got: dict[str, Any] = self.results.get(timeout=1.0)
                break
            except queue.Empty:
                if not self.proc.is_alive() or time.monotonic() > deadline:
                    raise RuntimeError("the watcher process ended without a report") from None
        self.proc.join(timeout=10)
        if "error" in got:
            raise RuntimeError(got["error"])
        return list(got["watchers"]), float(got["cpu"])


def start_watchers(base: str, count: int, reload: bool) -> Watching:
    """Spawn the watcher process and wait until all its streams are open."""
    ctx = mp.get_context("spawn")
    ready, race, stop, results = ctx.Event(), ctx.Event(), ctx.Event(), ctx.Queue()
    args = (base, count, reload, ready, race, stop, results)
    proc = ctx.Process(target=watch, args=args, daemon=True)
    proc.start()
    if not ready.wait(CONNECT_DEADLINE + 30):
        proc.terminate()
        raise RuntimeError("the watchers did not open their streams")
    return Watching(proc, ready, race, stop, results)


def check_watchers(reports: list[dict[str, Any]], count: int) -> list[str]:
    """Every watcher connected, kept its stream and received an event in the race."""
    problems = []
    if len(reports) != count:
        problems.append(f"{len(reports)} watcher reports, expected {count}")
    for n, got in enumerate(reports):
        if not got["connected"]:
            problems.append(f"watcher {n} never connected: {got['error']}")
        elif got["error"]:
            problems.append(f"watcher {n}: {got['error']}")
        elif not got["in_race"]:
            problems.append(f"watcher {n} received no event from the race ({got['events']})")
    return problems


def race(plan: Plan, watched: bool, into: Kind) -> None:
    """One race on a fresh fleet and a fresh server; its figures go ``into`` its kind."""
    with fresh_fleet(plan) as url:
        with Fleet.init(url) as fleet:
            fleet.configure(max_agents=max(plan.procs, 4))
            fill_shoal(fleet, plan.tasks, "pre-fill")
        log = plan.folder / f"serve-{next(_serial)}.log"
        with serving(url, log) as server:
            watching = start_watchers(server.base, plan.watchers, plan.reload) if watched else None
            if watching is not None:
                watching.race.set()
            cpu = server.cpu_seconds()
            try:
                run = work_down(url, plan.tasks, plan.procs, 1)
            finally:
                cpu = server.cpu_seconds() - cpu
                reports, watcher_cpu = watching.report() if watching else ([], 0.0)
    into.latencies += run.latencies
    into.rates.append(run.throughput)
    into.problems += run.problems
    into.server_cpu.append(cpu)
    line = f"    {run.throughput:,.0f}/s in {run.wall:.2f}s; server CPU {cpu:.2f}s"
    if watching is not None:
        into.problems += check_watchers(reports, plan.watchers)
        counts = [r["in_race"] for r in reports]
        into.events += counts
        into.watcher_cpu.append(watcher_cpu)
        kinds = sorted({k for r in reports for k in r["events"]})
        line += (
            f"; {sum(r['connected'] for r in reports)}/{plan.watchers} watchers (CPU "
            f"{watcher_cpu:.2f}s in all), events in "
            f"the race per watcher min {min(counts, default=0)} median "
            f"{statistics.median(counts) if counts else 0:g} ({', '.join(kinds) or 'none'})"
        )
        if plan.reload:
            line += f"; {sum(r['reloads'] for r in reports)} lane reloads"
    say(line)
    for problem in run.problems:
        say(f"    WARNING: {problem}")


# ---------------------------------------------------------------------- report


def name_of(plan: Plan, kind: Kind, quiet: Kind) -> Callable[[str], str]:
    """How a kind's figures are named: ``sqlite.race.procs16.p99_ms`` without watchers,
    ``sqlite.watched_race.procs16.waiters50.p99_ms`` with them."""
    watched = kind is not quiet
    measurement = ("reloaded_race" if plan.reload else "watched_race") if watched else "race"
    waiters = plan.watchers if watched else None
    return lambda quantity: figure_name(
        plan.store, measurement, procs=plan.procs, waiters=waiters, quantity=quantity
    )


def figures_of(plan: Plan, quiet: Kind, loud: Kind, figures: Figures) -> bool | None:
    """Put every figure; return the verdict on the p99 target."""
    for kind in (quiet, loud):
        name = name_of(plan, kind, quiet)
        stats = summary(kind.latencies)
        for stat in ("p50", "p99", "max"):
            figures.put(name(f"{stat}_ms"), stats[stat] * 1000)
        figures.put(name("per_s"), statistics.median(kind.rates))
        figures.put(name("server_cpu_s"), statistics.median(kind.server_cpu))
    name = name_of(plan, loud, quiet)
    a, b = summary(quiet.latencies), summary(loud.latencies)
    figures.put(name("p50_ratio"), b["p50"] / a["p50"])
    figures.put(name("events_per_watcher_min"), min(loud.events, default=0))
    figures.put(name("events_per_watcher_median"), statistics.median(loud.events or [0]))
    figures.put(name("watchers_cpu_s"), statistics.median(loud.watcher_cpu or [0.0]))
    return figures.put(name("p99_ratio"), b["p99"] / a["p99"], f"<= {TARGET_P99_RATIO}")


def print_results(plan: Plan, quiet: Kind, loud: Kind, verdict: bool | None) -> None:
    a, b = summary(quiet.latencies), summary(loud.latencies)
    rate_a, rate_b = statistics.median(quiet.rates), statistics.median(loud.rates)
    cpu_a, cpu_b = statistics.median(quiet.server_cpu), statistics.median(loud.server_cpu)
    result = {True: "PASS", False: "MISS", None: ""}[verdict]
    header = ("measurement", "no watchers", f"{plan.watchers} watchers", "ratio", "target", "")
    cells = [
        *(
            (
                f"claim {stat}",
                f"{a[stat] * 1000:.2f} ms",
                f"{b[stat] * 1000:.2f} ms",
                f"{b[stat] / a[stat]:.2f}x",
                *((f"<= {TARGET_P99_RATIO:.2f}x", result) if stat == "p99" else ("", "")),
            )
            for stat in ("p50", "p99", "max")
        ),
        ("throughput", f"{rate_a:,.0f}/s", f"{rate_b:,.0f}/s", f"{rate_b / rate_a:.2f}x", "", ""),
        (
            "server CPU per race",
            f"{cpu_a:.2f} s",
            f"{cpu_b:.2f} s",
            f"{cpu_b / cpu_a:.2f}x" if cpu_a else "-",  # a small run may measure 0 s
            "",
            "",
        ),
    ]
    widths = [max(len(c[i]) for c in [header, *cells]) for i in range(len(header))]
    line = "  ".join(f"{{:{'<' if i == 0 else '>'}{w}}}" for i, w in enumerate(widths))
    say(line.format(*header))
    say("  ".join("-" * w for w in widths))
    for cell in cells:
        say(line.format(*cell))
    say(
        f"  {len(quiet.latencies):,} and {len(loud.latencies):,} timed calls (claim+complete, "
        f"batch 1) over {plan.repeat} races of each kind; throughput and CPU are medians of "
        f"the races. Events received in a watched race, per watcher: min "
        f"{min(loud.events, default=0)}, median {statistics.median(loud.events or [0]):g}; "
        f"the watchers' own process used {statistics.median(loud.watcher_cpu or [0.0]):.2f} s "
        "of CPU per race (on this machine, where browsers elsewhere would not)."
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    repeat = max(1, args.repeat or (2 if args.quick else 3))
    tasks = args.tasks or (1_500 if args.quick else 5_000)
    if tasks < args.procs * 10 or args.procs < 1 or args.watchers < 1:
        raise SystemExit("--tasks must give every process a few claims; --procs, --watchers >= 1")
    with contextlib.ExitStack() as stack:
        folder = args.dir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        folder.mkdir(parents=True, exist_ok=True)
        plan = Plan(
            args.store,
            args.pg_url,
            tasks,
            args.procs,
            args.watchers,
            repeat,
            folder,
            args.reload_lanes,
        )
        return measure(plan, args.json)


def measure(plan: Plan, json_path: Path | None) -> int:
    setup = {
        "tasks": plan.tasks,
        "procs": plan.procs,
        "watchers": plan.watchers,
        "repeat": plan.repeat,
        "watchers_reload_lanes": plan.reload,
    }
    header = meta(
        plan.store, setup, {}, {"httpx": version("httpx")}, {"uvicorn": version("uvicorn")}
    )
    say(
        f"shoal serve under watch: a {plan.procs}-process claim race, with {plan.watchers} "
        f"SSE watchers on /live and without ({plan.store})"
    )
    for key, value in header.items():
        say(f"  {key:<26} {value}")
    say("")
    began = time.perf_counter()
    quiet, loud = Kind("without watchers"), Kind(f"with {plan.watchers} watchers")
    for attempt in range(plan.repeat):
        order = [(False, quiet), (True, loud)]
        for watched, kind in order if attempt % 2 == 0 else order[::-1]:
            say(f"{kind.name} (run {attempt + 1}/{plan.repeat}) ...")
            race(plan, watched, kind)
    elapsed = time.perf_counter() - began
    figures = Figures()
    verdict = figures_of(plan, quiet, loud, figures)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    say("")
    say(f"results (latency: lower is better; measured in {elapsed:.0f}s; load average now {load})")
    print_results(plan, quiet, loud, verdict)
    problems = {k.name: k.problems for k in (quiet, loud) if k.problems}
    p99 = Row("claim p99", None, None, "ms", f"<= {TARGET_P99_RATIO:.2f}x", verdict)
    close_report(
        [p99],
        problems,
        "workers' reports, state counts, event log; every watcher got events",
        json_path,
        header,
        figures,
        elapsed,
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
