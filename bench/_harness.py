"""The one harness every claims comparison runs on: worker processes released together,
timing, interleaved repeats and their medians with the range of the runs, percentiles, the
table of figures against the other system, the header and the end of the report, and the
--json file (its format and names: ``_results``).

The benchmarks compare shoal with a queue made for one job (huey on SQLite, pgqueuer on
PostgreSQL) on a shared, noisy machine, so the helpers here are about measuring the two
sides the same way: one spawned process per worker, a start barrier, wall time from the
barrier to the last finish, the systems taking turns, and ratios next to every pair of
figures. What differs by store (how shoal's store is opened, how the other system is set
up and driven, which extra measurements there are) is a ``Comparison`` that
``_sqlite_side`` or ``_pg_side`` builds and ``run`` drives.
"""

from __future__ import annotations

import datetime
import math
import multiprocessing as mp
import os
import platform
import queue
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import shoal
from _results import Figures, write_results

BARRIER_TIMEOUT = 300.0  # seconds a worker waits for the others to be ready


def say(text: str) -> None:
    print(text, flush=True)


def process_counts(text: str, example: str) -> tuple[int, ...]:
    """The ``--procs`` list: distinct positive counts, smallest first."""
    counts = tuple(sorted({int(p) for p in text.split(",") if p.strip()}))
    if not counts or min(counts) < 1:
        raise SystemExit(f"--procs needs positive process counts, e.g. {example}")
    return counts


def check_tasks(tasks: int, procs: Sequence[int]) -> None:
    """A run too small for its most workers would measure start-up, not claims."""
    if tasks < max(procs) * 10:
        raise SystemExit("--tasks must give every worker at least a few batches")


def latency_procs(wanted: int, procs: Sequence[int]) -> int:
    """The process count whose runs the contended-latency rows read: the one the target
    is for if it was run, else the most that was."""
    return wanted if wanted in procs else max(procs)


class Progress:
    """Prints how far a long pre-fill has got, about every tenth of the way."""

    def __init__(self, label: str, total: int) -> None:
        self.label, self.total, self.start = label, total, time.perf_counter()
        self.step = total // 10 if total >= 100_000 else total + 1
        self.next = self.step

    def update(self, done: int) -> None:
        if done >= self.next:
            elapsed = time.perf_counter() - self.start
            say(
                f"    {self.label}: {done:,}/{self.total:,} in {elapsed:.1f}s "
                f"({done / elapsed:,.0f}/s)"
            )
            self.next += self.step


def worker_report(
    start: float,
    end: float,
    cpu: float,
    latencies: list[float],
    done: Sequence[Any],
    anomalies: Sequence[str] = (),
    errors: int = 0,
) -> dict[str, Any]:
    """What a worker process sends back, in the shape ``run_workers`` and ``processing_of``
    read: its start and end on the shared monotonic clock, its own CPU seconds, every claim
    latency, what it did, what looked wrong, and how many errors it retried."""
    return {
        "start": start,
        "cpu": cpu,
        "end": end,
        "latencies": latencies,
        "done": list(done),
        "anomalies": list(anomalies),
        "errors": errors,
    }


def reported_once(reports: Sequence[dict[str, Any]], expected: int, what: str) -> list[str]:
    """The workers' own anomalies, and whether the ``expected`` tasks were reported done
    exactly once across all of them (``what``: how the message names the workers' act)."""
    problems = [a for r in reports for a in r["anomalies"]]
    done = [t for r in reports for t in r["done"]]
    if len(done) != expected or len(set(done)) != expected:
        problems.append(
            f"{what} {len(done)} tasks ({len(set(done))} distinct), expected {expected}"
        )
    return problems


def run_workers(
    target: Callable[..., None], per_worker: Sequence[tuple[Any, ...]]
) -> tuple[float, list[dict[str, Any]]]:
    """Spawn one process per argument tuple, release them together, and return the wall
    time from the release to the last finish, with each worker's report.

    ``time.monotonic`` is CLOCK_MONOTONIC on Linux, one clock for every process, so the
    workers' own start and end stamps can be compared."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(per_worker))
    results = ctx.Queue()
    procs = [
        ctx.Process(target=target, args=(*args, barrier, results), daemon=True)
        for args in per_worker
    ]
    for proc in procs:
        proc.start()
    reports: list[dict[str, Any]] = []
    try:
        while len(reports) < len(procs):
            try:
                reports.append(results.get(timeout=5.0))
            except queue.Empty:
                if not any(p.is_alive() for p in procs):
                    codes = [p.exitcode for p in procs]
                    raise RuntimeError(f"workers exited without reporting: {codes}") from None
        for proc in procs:
            proc.join(timeout=60)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
    failures = [r["error"] for r in reports if "error" in r]
    if failures:
        raise RuntimeError(failures[0])
    wall = max(r["end"] for r in reports) - min(r["start"] for r in reports)
    return wall, reports


@dataclass
class Processing:
    """One processing-throughput measurement, or the median of several (``median_run``)."""

    throughput: float
    wall: float
    latencies: list[float]
    errors: int = 0
    problems: list[str] = field(default_factory=list)
    cpu_per_task: float | None = None  # seconds of the workers' own CPU, where measured
    runs: tuple[float, ...] = ()  # the throughput of every run behind this one

    @property
    def spread(self) -> tuple[float, float]:
        """The lowest and the highest throughput of the runs: how far apart they were."""
        runs = self.runs or (self.throughput,)
        return min(runs), max(runs)


def median_run(runs: Sequence[Processing]) -> Processing:
    """The median throughput, the wall time and CPU of the run with it, every run's
    throughput (for the range), and latencies and problems pooled over all runs."""
    ordered = sorted(runs, key=lambda r: r.throughput)
    mid = ordered[(len(ordered) - 1) // 2]
    return Processing(
        statistics.median(r.throughput for r in runs),
        mid.wall,
        [x for r in runs for x in r.latencies],
        sum(r.errors for r in runs),
        [p for r in runs for p in r.problems],
        mid.cpu_per_task,
        tuple(r.throughput for r in runs),
    )


def rated(count: int, wall: float) -> Processing:
    """A throughput measured in this process, no workers (``count`` operations in ``wall``
    seconds), in the shape ``interleaved`` takes turns with."""
    return Processing(count / wall, wall, [], runs=(count / wall,))


def processing_of(
    tasks: int, wall: float, reports: Sequence[dict[str, Any]], problems: list[str]
) -> Processing:
    """One measurement from its workers' reports: throughput over the wall time, every
    claim latency pooled, retried errors summed, and the workers' CPU per task where every
    worker reported it."""
    cpu = [r["cpu"] for r in reports if "cpu" in r]
    return Processing(
        tasks / wall,
        wall,
        [x for r in reports for x in r["latencies"]],
        sum(r["errors"] for r in reports),
        problems,
        sum(cpu) / tasks if len(cpu) == len(reports) else None,
        (tasks / wall,),
    )


Trial = tuple[str, Callable[[], Processing]]  # a run's name, and how to measure it once


def interleaved(groups: Iterable[Sequence[Trial]], repeat: int) -> dict[str, Processing]:
    """Every measurement of the groups, by name, each the median of ``repeat`` runs.

    Within a group (one configuration, every system) the systems take turns, and the
    order is reversed on every other round, so a drift in the machine's load hits each of
    them alike."""
    runs: dict[str, list[Processing]] = {}
    for trials in groups:
        for attempt in range(repeat):
            tag = f" (run {attempt + 1}/{repeat})" if repeat > 1 else ""
            for name, measure in trials if attempt % 2 == 0 else trials[::-1]:
                say(f"{name}{tag} ...")
                result = measure()
                say(f"    {result.throughput:,.0f}/s in {result.wall:.2f}s")
                for problem in result.problems:
                    say(f"    WARNING: {problem}")
                runs.setdefault(name, []).append(result)
    return {name: median_run(results) for name, results in runs.items()}


def put_rate(figures: Figures, name: Callable[..., str], system: str, run: Processing) -> None:
    """A system's throughput under ``name`` (``figure_name`` with all but the quantity
    given): the median, the lowest and highest run, and the workers' CPU per task."""
    low, high = run.spread
    figures.put(name(quantity=f"{system}_per_s"), run.throughput)
    figures.put(name(quantity=f"{system}_per_s_min"), low)
    figures.put(name(quantity=f"{system}_per_s_max"), high)
    cpu = None if run.cpu_per_task is None else run.cpu_per_task * 1000
    figures.put(name(quantity=f"{system}_cpu_per_task_ms"), cpu)


def put_latency(
    figures: Figures,
    name: Callable[..., str],
    samples: Sequence[float],
    prefix: str = "",
    targets: dict[str, str] | None = None,
) -> dict[str, float]:
    """p50, p99 and max of ``samples`` in milliseconds under ``name``, each quantity
    ``<prefix><stat>_ms`` (no prefix for shoal's own), with its target if it has one;
    returns the summary in seconds."""
    stats = summary(samples)
    for stat in ("p50", "p99", "max"):
        quantity = f"{prefix}{stat}_ms"
        figures.put(name(quantity=quantity), stats[stat] * 1000, (targets or {}).get(stat))
    return stats


def percentile(samples: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile: a value that was actually observed."""
    ordered = sorted(samples)
    return ordered[max(1, math.ceil(pct / 100 * len(ordered))) - 1]


def summary(samples: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(samples),
        "p50": percentile(samples, 50),
        "p99": percentile(samples, 99),
        "max": max(samples),
        "mean": statistics.fmean(samples),
    }


@dataclass
class Row:
    """One line of the table; ``passed`` is None for lines without a target."""

    name: str
    shoal: float | None
    rival: float | None  # the other system's figure (huey, pgqueuer)
    unit: str  # "/s" or "ms"
    target: str = ""
    passed: bool | None = None
    note: str = ""
    shoal_spread: tuple[float, float] | None = None  # lowest and highest of the runs
    rival_spread: tuple[float, float] | None = None

    @property
    def ratio(self) -> float | None:
        if self.shoal is None or not self.rival:
            return None
        return self.shoal / self.rival


def rate_row(
    name: str,
    mine: Processing,
    theirs: Processing | None,
    target: str = "",
    passed: bool | None = None,
    note: str = "",
) -> Row:
    """A throughput line: two medians, each with the range of its runs."""
    return Row(
        name,
        mine.throughput,
        None if theirs is None else theirs.throughput,
        "/s",
        target,
        passed,
        note,
        mine.spread,
        None if theirs is None else theirs.spread,
    )


def fmt(value: float | None, unit: str, spread: tuple[float, float] | None = None) -> str:
    if value is None:
        return "-"
    if unit == "ms":
        return f"{value * 1000:.2f} ms"
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "n":  # a plain count or size, no rate
        return f"{value:,.0f}" if value >= 100 or value == int(value) else f"{value:,.2f}"
    if spread is not None and spread[0] != spread[1]:
        return f"{value:,.0f}/s ({spread[0]:,.0f}-{spread[1]:,.0f})"
    return f"{value:,.0f}/s"


def ratio_text(ratio: float) -> str:
    """A ratio with two decimals, or two significant digits when that would show 0.00."""
    return f"{ratio:.2f}x" if abs(ratio) >= 0.1 else f"{ratio:.2g}x"


def print_table(rows: Sequence[Row], rival: str, mine: str = "shoal") -> None:
    """The table: ``mine`` (the system measured) against ``rival``, with their ratio."""
    header = ("measurement", mine, rival, f"{mine}/{rival}", "target", "result")
    cells = [
        (
            r.name,
            fmt(r.shoal, r.unit, r.shoal_spread),
            fmt(r.rival, r.unit, r.rival_spread),
            "-" if r.ratio is None else ratio_text(r.ratio),
            r.target or "-",
            {True: "PASS", False: "MISS", None: ""}[r.passed],
        )
        for r in rows
    ]
    widths = [max(len(str(c[i])) for c in [header, *cells]) for i in range(len(header))]
    line = "  ".join(f"{{:{'<' if i == 0 else '>'}{w}}}" for i, w in enumerate(widths))
    say(line.format(*header))
    say("  ".join("-" * w for w in widths))
    for row, cell in zip(rows, cells, strict=True):
        say(line.format(*cell) + (f"  {row.note}" if row.note else ""))


def git_state(repo: Path) -> str:
    """Which shoal was measured: the main developer edits the hot path while this runs."""
    try:
        head = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "src"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "not a git checkout"
    return f"git {head}" + (" + uncommitted changes in src/" if dirty else "")


def close_report(
    rows: Sequence[Row],
    problems: dict[str, list[str]],
    checked: str,
    json_path: Path | None,
    meta: dict[str, Any],
    figures: Figures,
    elapsed: float,
) -> None:
    """The end of a benchmark's report: warnings or the correctness line (``checked`` says
    how each side was checked), the target tally, and the figures as JSON if asked."""
    if problems:
        say("")
        for where, found in problems.items():
            for problem in found:
                say(f"WARNING ({where}): {problem}")
    else:
        say(f"correctness: every run did each task exactly once ({checked})")
    passed = sum(1 for r in rows if r.passed)
    say(f"targets: {passed} PASS, {sum(1 for r in rows if r.passed is False)} MISS")
    if json_path is not None:
        meta["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        meta["seconds"] = round(elapsed, 1)
        meta["problems"] = [f"{where}: {p}" for where, found in problems.items() for p in found]
        write_results(json_path, meta, figures)
        say(f"{len(figures.values)} figures written to {json_path}")


def meta(
    store: str,
    setup: dict[str, Any],
    platform_extra: dict[str, Any],
    peers: dict[str, str],
    products: dict[str, Any],
) -> dict[str, Any]:
    """The header of a report, in its printed order: the command, what the run does, the
    machine and its load, which shoal was measured, and the other system's versions
    (``peers``). The keys ``_results.REQUIRED_META`` names are the file's contract."""
    shoal_dir = Path(shoal.__file__).resolve().parent
    return {
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "store": store,
        **setup,
        "python": platform.python_version(),
        **platform_extra,
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        "shoal": f"{getattr(shoal, '__version__', '?')} {git_state(shoal_dir.parent.parent)}",
        "peers": peers,
        **products,
        "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    }


Table = tuple[str, list[Row]]  # the system in the second column, and the lines


@dataclass(frozen=True)
class Comparison:
    """One store's comparison, as ``run`` drives it; built by ``_sqlite_side.comparison``
    or ``_pg_side.comparison``, which have already checked the store can be reached."""

    title: str  # the first line of the report
    meta: dict[str, Any]
    notices: Sequence[str]  # extra header lines, e.g. what was cleaned up first
    # Measures everything, fills the --json figures, and returns the tables (each the
    # system shoal is set against, and its rows) and the processing runs by name (whose
    # problems are the report's warnings).
    measure: Callable[[Figures], tuple[list[Table], dict[str, Processing]]]
    conditions: str  # opens the results line, e.g. "normal durability; "
    footnotes: Sequence[str]  # printed under the table
    checked: str  # how each side was checked, for the correctness line
    strict: bool  # exit 1 when a run found a problem
    mine: str = "shoal"  # what the first column of figures is (bench/git.py: "git")


def run(comparison: Comparison, json_path: Path | None) -> int:
    """Print the header, measure, print the table and the verdicts, write the JSON."""
    say(comparison.title)
    for key, value in comparison.meta.items():
        if isinstance(value, dict):  # the peers' versions
            say(f"  {key:<26} {', '.join(f'{k} {v}' for k, v in value.items())}")
        else:
            say(f"  {key:<26} {value}")
    for notice in comparison.notices:
        say(f"  {notice}")
    say("")

    began = time.perf_counter()
    figures = Figures()
    tables, processing = comparison.measure(figures)
    problems = {name: got.problems for name, got in processing.items() if got.problems}
    elapsed = time.perf_counter() - began

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    say("")
    say(
        f"results ({comparison.conditions}throughput: higher is better, latency: lower is "
        f"better; measured in {elapsed:.0f}s; load average now {load})"
    )
    for number, (rival, rows) in enumerate(tables):
        if number:
            say("")
        print_table(rows, rival, comparison.mine)
    for note in comparison.footnotes:
        say(f"  {note}")
    close_report(
        [row for _, rows in tables for row in rows],
        problems,
        comparison.checked,
        json_path,
        comparison.meta,
        figures,
        elapsed,
    )
    return 1 if problems and comparison.strict else 0
