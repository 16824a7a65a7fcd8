"""What a run is judged by, computed from its trace.

* ``makespan`` -- from the start to the last task done; ``ratio`` divides it by the lower
  bound ``max(T1 / P, T_inf)`` (1.0 would be a perfect schedule; warm-ups count against it).
* ``idle_while_waiting`` -- of the agent-time during which some task was waiting to run, the
  share agents spent free. Work at the hub waiting for the router counts as waiting.
* ``idle_to_work`` p50/p99 -- over every spell an agent sat free while work waited somewhere
  (an agent that got its next task at once has no spell), how long until it held work
  again -- or until the waiting work ran out without it (0 when there was no such spell).
* ``wait`` p50/p99 -- from a task being ready (arrived, spawned, or its children done) to
  being claimed.
* ``steals`` (taken at claim time, from ``Claim.sources``) and ``moved`` (by the rebalance);
  ``own_domain`` -- the share of task runs done by an agent of the task's domain.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from shoal.sim.engine import Trace

__all__ = ["Metrics", "measure", "percentile", "summarize"]


@dataclass(frozen=True, slots=True)
class Metrics:
    """The figures of one run (times in seconds)."""

    workload: str
    policy: str
    seed: int
    agents: int
    tasks: int
    makespan: float
    lower_bound: float
    ratio: float
    work: float
    span: float
    idle_while_waiting: float
    idle_to_work_p50: float
    idle_to_work_p99: float
    wait_p50: float
    wait_p99: float
    steals: int
    moved: int
    own_domain: float | None
    wall_seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def measure(trace: Trace) -> Metrics:
    """The metrics of a finished run."""
    workload = trace.workload
    agents = len(workload.agents)
    work, span = workload.work, workload.span
    bound = max(work / agents, span)  # workload.lower_bound(), without working both out again
    tagged = [s for s in trace.segments if s.in_domain is not None]
    own = sum(1 for s in tagged if s.in_domain) / len(tagged) if tagged else None
    waiting = trace.waiting_time * agents
    return Metrics(
        workload=workload.name,
        policy=trace.policy.name,
        seed=trace.seed,
        agents=agents,
        tasks=trace.tasks,
        makespan=trace.makespan,
        lower_bound=bound,
        ratio=trace.makespan / bound if bound else 0.0,
        work=work,
        span=span,
        idle_while_waiting=trace.idle_while_waiting / waiting if waiting else 0.0,
        idle_to_work_p50=percentile(trace.gaps, 50),
        idle_to_work_p99=percentile(trace.gaps, 99),
        wait_p50=percentile(trace.waits, 50),
        wait_p99=percentile(trace.waits, 99),
        steals=trace.steals,
        moved=len(trace.moves),
        own_domain=own,
        wall_seconds=trace.wall,
    )


def summarize(runs: Sequence[Metrics]) -> list[dict[str, Any]]:
    """One row per (workload, policy): the mean of each figure over its seeds."""
    groups: dict[tuple[str, str], list[Metrics]] = {}
    for m in runs:
        groups.setdefault((m.workload, m.policy), []).append(m)
    rows = []
    for (workload, policy), ms in groups.items():

        def mean(name: str, ms: list[Metrics] = ms) -> float | None:
            values = [getattr(m, name) for m in ms if getattr(m, name) is not None]
            return sum(values) / len(values) if values else None

        row: dict[str, Any] = {"workload": workload, "policy": policy, "seeds": len(ms)}
        for name in _SUMMED:
            row[name] = mean(name)
        rows.append(row)
    return rows


_SUMMED = (
    "agents",
    "tasks",
    "makespan",
    "lower_bound",
    "ratio",
    "idle_while_waiting",
    "idle_to_work_p50",
    "idle_to_work_p99",
    "wait_p50",
    "wait_p99",
    "steals",
    "moved",
    "own_domain",
    "wall_seconds",
)
