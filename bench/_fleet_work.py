"""shoal's side of the claims benchmarks, the same on every store: pre-fill a fleet, work
it down from many processes with no-op tasks, and check afterwards that every task was
claimed once and completed once.

A worker claims, runs nothing and completes, so what is measured is the coordination. At
batch 1 it finishes one task and claims the next in one transaction
(``complete(lease, then_claim=1)``); at batch n it claims n at a time and completes them
together (``complete_many(..., then_claim=n)``). Each store's side (``_sqlite_side``,
``_pg_side``) makes and pre-fills the fleet its own way, then ``work_down`` measures it.
"""

from __future__ import annotations

import time
import traceback
from collections import Counter
from collections.abc import Sequence
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
from shoal import Fleet
from shoal.model import Claim, Task

POST_CHUNK = 1_000  # tasks per post_many call when pre-filling


def fill_shoal(fleet: Fleet, count: int, label: str = "shoal pre-fill") -> None:
    """Post ``count`` pool tasks with post_many, a chunk per transaction."""
    progress = Progress(label, count)
    posted = 0
    while posted < count:
        chunk = min(POST_CHUNK, count - posted)
        fleet.post_many([{"title": f"t{posted + i}"} for i in range(chunk)])
        posted += chunk
        progress.update(posted)


def work_down(url: str, tasks: int, procs: int, batch: int) -> Processing:
    """Work the pre-filled fleet at ``url`` down from ``procs`` worker processes, each its
    own agent claiming ``batch`` at a time, then check every task was done exactly once."""
    wall, reports = run_workers(shoal_worker, [(url, f"w{i}", batch) for i in range(procs)])
    return processing_of(tasks, wall, reports, verify_shoal(url, tasks, reports))


def run_task(task: Task) -> None:
    """The work itself: nothing, so what is measured is the coordination."""


def shoal_worker(
    url: str, agent_id: str, batch: int, barrier: Any, results: Any
) -> None:  # pragma: no cover - runs in a child process
    """One worker process: its own Fleet, its own agent, claim until the fleet is empty."""
    try:
        results.put(_shoal_work(url, agent_id, batch, barrier))
    except BaseException:
        barrier.abort()
        results.put({"error": f"shoal worker {agent_id}:\n{traceback.format_exc()}"})


def _shoal_work(url: str, agent_id: str, batch: int, barrier: Any) -> dict[str, Any]:
    fleet = Fleet.open(url, create=False)
    fleet.register(agent_id, max_concurrent=batch)
    latencies: list[float] = []
    done: list[int] = []
    anomalies: list[str] = []
    clock = time.perf_counter
    barrier.wait(BARRIER_TIMEOUT)
    start, cpu = time.monotonic(), time.process_time()
    began = clock()
    claim: Claim | None = fleet.claim(agent_id, n=batch)
    latencies.append(clock() - began)
    while claim is not None and claim.leases:
        for task in claim.tasks:
            run_task(task)
        if batch == 1:
            lease = claim.leases[0]
            began = clock()
            completion = fleet.complete(lease, None, then_claim=1)
            latencies.append(clock() - began)
            if completion.already_done:
                anomalies.append(f"task {lease.task_id} was already done")
            else:
                done.append(lease.task_id)
            claim = completion.next
        else:
            began = clock()
            outcome = fleet.complete_many(
                [(lease, None) for lease in claim.leases], then_claim=batch
            )
            latencies.append(clock() - began)
            done.extend(outcome.completed)
            anomalies += [f"task {t} was already done" for t in outcome.already_done]
            anomalies += [f"task {t} lease lost: {why}" for t, why in outcome.lost]
            claim = outcome.next
    end, cpu = time.monotonic(), time.process_time() - cpu
    reason = "no next claim (agent not live?)" if claim is None else claim.reason
    if reason != "empty":
        anomalies.append(f"{agent_id} stopped on claim reason {reason!r}, not 'empty'")
    fleet.close()
    return worker_report(start, end, cpu, latencies, done, anomalies)


def verify_shoal(url: str, expected: int, reports: Sequence[dict[str, Any]]) -> list[str]:
    """Every task done, each claimed once and completed once (invariant I2, from outside)."""
    problems = reported_once(reports, expected, "workers completed")
    with Fleet.open(url, create=False) as fleet:
        counts = dict(fleet.status().counts)
        if counts.get("done", 0) != expected or any(
            n for state, n in counts.items() if state != "done"
        ):
            problems.append(f"state counts {counts}, expected {{'done': {expected}}}")
        completed: Counter[int] = Counter()
        claimed: Counter[int] = Counter()
        since = 0
        while events := fleet.events(since, limit=10_000):
            for event in events:
                if event.task_id is None:
                    continue
                if event.kind == "completed":
                    completed[event.task_id] += 1
                elif event.kind in ("claimed", "stolen"):
                    claimed[event.task_id] += 1
            since = events[-1].id
    for kind, seen in (("completed", completed), ("claimed", claimed)):
        twice = sum(1 for n in seen.values() if n > 1)
        if len(seen) != expected or twice:
            problems.append(
                f"{kind} events cover {len(seen)} tasks ({twice} more than once), "
                f"expected {expected} once each"
            )
    return problems
