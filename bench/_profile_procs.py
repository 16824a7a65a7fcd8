"""The contended part of ``profile_claims.py`` (``--procs``): worker processes draining one
SQLite fleet at batch 1, each with its writer queue and SQLite timed, and where a cycle's
time goes when they take turns -- waiting for the queue, holding it (on a CPU, in SQLite),
outside it, the hand-off between turns, context switches and time runnable but not running
(``/proc/self/schedstat``)."""

from __future__ import annotations

import argparse
import itertools
import multiprocessing as mp
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _profile_meter import instrument
from shoal import Fleet
from shoal.model import Claim

__all__ = ["contention"]

_EDGE_TURNS = 3  # turns at each end of a contended run left out of its steady state


def _url_of(folder: Path, durability: str) -> str:
    return f"sqlite://{(folder / 'fleet.db').resolve()}?synchronous={durability}"


def _schedstat() -> tuple[int, int, int]:
    """(ns on a CPU, ns runnable but waiting for one, time slices) of this process."""
    try:
        with open("/proc/self/schedstat") as handle:
            run_ns, wait_ns, slices = handle.read().split()
        return int(run_ns), int(wait_ns), int(slices)
    except (OSError, ValueError):
        return 0, 0, 0


def contention_worker(url: str, agent: str, barrier: Any, results: Any) -> None:
    """One process draining the fleet at batch 1, its writer queue and SQLite timed."""
    try:
        fleet = Fleet.open(url, create=False)
        fleet.register(agent)
        meter = instrument(fleet)
        meter.reset()
        barrier.wait(120)
        usage0, sched0 = resource.getrusage(resource.RUSAGE_SELF), _schedstat()
        began, cpu0 = time.perf_counter(), time.process_time()
        claim: Claim | None = fleet.claim(agent)
        cycles = 1
        while claim is not None and claim.leases:
            claim = fleet.complete(claim.leases[0], None, then_claim=1).next
            cycles += 1
        wall, cpu = time.perf_counter() - began, time.process_time() - cpu0
        usage1, sched1 = resource.getrusage(resource.RUSAGE_SELF), _schedstat()
        fleet.close()
        results.put(
            {
                "cycles": cycles,
                "wall": wall,
                "cpu": cpu,
                "wait": meter.queue_wait,
                "held": meter.held,
                "held_cpu": meter.held_cpu,
                "sqlite": meter.sqlite,
                "waits": meter.waits,
                "turns": meter.turns,
                "voluntary": usage1.ru_nvcsw - usage0.ru_nvcsw,
                "involuntary": usage1.ru_nivcsw - usage0.ru_nivcsw,
                "runqueue": (sched1[1] - sched0[1]) / 1e9,
                "system": usage1.ru_stime - usage0.ru_stime,
            }
        )
    except BaseException as exc:
        barrier.abort()
        results.put({"error": repr(exc)})


def contention(args: argparse.Namespace, procs: int) -> None:
    ctx = mp.get_context("spawn")
    tasks = args.contended_tasks
    folder = Path(tempfile.mkdtemp(prefix="shoal-profile-procs-", dir=args.dir))
    try:
        url = _url_of(folder, args.durability)
        with Fleet.open(url) as fleet:
            fleet.configure(max_agents=64)
            for start in range(0, tasks, 1000):
                fleet.post_many(
                    [{"title": f"t{i}"} for i in range(start, min(tasks, start + 1000))]
                )
        barrier, results = ctx.Barrier(procs + 1), ctx.Queue()
        children = [
            ctx.Process(target=contention_worker, args=(url, f"w{i}", barrier, results))
            for i in range(procs)
        ]
        for child in children:
            child.start()
        barrier.wait(120)
        began = time.perf_counter()
        reports = [results.get(timeout=600) for _ in children]
        wall = time.perf_counter() - began
        for child in children:
            child.join(60)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    errors = [r["error"] for r in reports if "error" in r]
    if errors:
        raise SystemExit(f"a worker failed: {errors[0]}")
    cycles: int = sum(r["cycles"] for r in reports)

    def per(key: str) -> float:
        return float(sum(r[key] for r in reports)) / cycles * 1e6

    waits = sorted(w for r in reports for w in r["waits"])
    # Turns of every process on one clock: the gap from one turn's end to the next one's
    # start is the hand-off (the next writer being woken and scheduled).
    turns = sorted(
        (r["turns"][i], r["turns"][i + 1])
        for r in reports
        for i in range(0, len(r["turns"]) - 1, 2)
    )
    gaps = sorted(max(0.0, b[0] - a[1]) for a, b in itertools.pairwise(turns))
    holds = sorted(end - start for start, end in turns)
    busy = sum(r["wall"] for r in reports) / cycles * 1e6
    print(
        f"\n=== {procs} processes draining {tasks} tasks at batch 1: "
        f"{tasks / wall:,.0f} tasks/s ({wall / tasks * 1e6:.0f} us of wall per task) ==="
    )
    print(
        f"per cycle, per process: wall {busy:.0f} us = waiting for the writer queue "
        f"{per('wait'):.0f} + holding it {per('held'):.0f} (on a CPU {per('held_cpu'):.0f}; "
        f"in SQLite {per('sqlite'):.0f}) + "
        f"outside it {busy - per('wait') - per('held'):.0f}"
    )
    print(
        f"    CPU {per('cpu'):.0f} us (in the kernel {per('system'):.0f}); "
        f"runnable but not running {per('runqueue'):.0f} us; "
        f"context switches {per('voluntary') / 1e6:.2f} voluntary, "
        f"{per('involuntary') / 1e6:.2f} involuntary"
    )
    print(
        f"    turns back to back: held p50 {statistics.median(holds) * 1e6:.0f} us, "
        f"mean {statistics.fmean(holds) * 1e6:.0f} us; hand-off p50 "
        f"{statistics.median(gaps) * 1e6:.0f} us, mean {statistics.fmean(gaps) * 1e6:.0f} us"
    )
    print(
        f"    writer queue wait p50 {statistics.median(waits) * 1e3:.2f} ms, "
        f"p99 {waits[int(len(waits) * 0.99)] * 1e3:.2f} ms, max {waits[-1] * 1e3:.1f} ms"
    )
    # A process's first turns prepare the claim's statements on a fresh connection, and its
    # last ones share the CPUs with the processes that finished and are exiting.
    steady = sorted(w for r in reports for w in r["waits"][_EDGE_TURNS:-_EDGE_TURNS])
    longest = sorted(
        ((w, turn - len(r["waits"])) for r in reports for turn, w in enumerate(r["waits"])),
        reverse=True,
    )[:5]
    print(
        f"    without each process's first and last {_EDGE_TURNS} turns: "
        f"p99 {steady[int(len(steady) * 0.99)] * 1e3:.2f} ms, max {steady[-1] * 1e3:.1f} ms; "
        "longest waits (ms, at turn from the end): "
        + ", ".join(f"{w * 1e3:.0f} at {turn}" for w, turn in longest)
    )
