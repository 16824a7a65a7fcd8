"""What every claims benchmark shares: worker processes released together, percentiles,
and the table of figures against another system.

The benchmarks compare shoal with a queue made for one job (huey on SQLite, pgqueuer on
PostgreSQL) on a shared, noisy machine, so the helpers here are about measuring the two
sides the same way: one spawned process per worker, a start barrier, wall time from the
barrier to the last finish, and ratios next to every pair of figures.
"""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
import queue
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BARRIER_TIMEOUT = 300.0  # seconds a worker waits for the others to be ready


def say(text: str) -> None:
    print(text, flush=True)


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
    """One processing-throughput measurement."""

    throughput: float
    wall: float
    latencies: list[float]
    errors: int = 0
    problems: list[str] = field(default_factory=list)
    cpu_per_task: float | None = None  # seconds of the workers' own CPU, where measured


def median_run(runs: Sequence[Processing]) -> Processing:
    """The run with the median throughput; latencies pooled over all runs."""
    ordered = sorted(runs, key=lambda r: r.throughput)
    mid = ordered[(len(ordered) - 1) // 2]
    return Processing(
        statistics.median(r.throughput for r in runs),
        mid.wall,
        [x for r in runs for x in r.latencies],
        sum(r.errors for r in runs),
        [p for r in runs for p in r.problems],
        mid.cpu_per_task,
    )


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

    @property
    def ratio(self) -> float | None:
        if self.shoal is None or not self.rival:
            return None
        return self.shoal / self.rival

    def to_dict(self, rival: str) -> dict[str, Any]:
        return {
            "name": self.name,
            "shoal": self.shoal,
            rival: self.rival,
            "unit": self.unit,
            "ratio": self.ratio,
            "target": self.target,
            "passed": self.passed,
            "note": self.note,
        }


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "ms":
        return f"{value * 1000:.2f} ms"
    if unit == "x":
        return f"{value:.2f}x"
    return f"{value:,.0f}/s"


def print_table(rows: Sequence[Row], rival: str) -> None:
    header = ("measurement", "shoal", rival, f"shoal/{rival}", "target", "result")
    cells = [
        (
            r.name,
            fmt(r.shoal, r.unit),
            fmt(r.rival, r.unit),
            "-" if r.ratio is None else f"{r.ratio:.2f}x",
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
    rival: str,
    problems: dict[str, list[str]],
    checked: str,
    json_path: Path | None,
    meta: dict[str, Any],
    figures: dict[str, Any],
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
        meta["loadavg_end"] = os.getloadavg()
        meta["seconds"] = elapsed
        report = {
            "meta": meta,
            "figures": figures,
            "rows": [r.to_dict(rival) for r in rows],
            "problems": problems,
        }
        json_path.write_text(json.dumps(report, indent=2, default=str) + "\n")
        say(f"figures written to {json_path}")
