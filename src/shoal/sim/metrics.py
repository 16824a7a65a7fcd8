"""What a run is judged by, computed from its trace.

* ``makespan`` -- from the start to the last task done; ``ratio`` divides it by the lower
  bound ``max(T1 / P, T_inf)`` (1.0 would be a perfect schedule; warm-ups count against it).
* ``idle_while_waiting`` -- of the agent-time during which some task was waiting to run, the
  share agents spent free. Work at the hub waiting for the router counts as waiting.
* ``idle_to_work`` p50/p99 -- over every spell an agent sat free while work waited somewhere
  (an agent that got its next task at once has no spell), how long until it held work
  again -- or until the waiting work ran out without it (0 when there was no such spell).
* ``eligible_idle_while_waiting`` -- the same share, counting only time an agent was free
  while a task *it could take* waited (see ``shoal.sim.eligibility``); ``held_by`` splits
  it by what held the work back (threshold, caps, domain_wait, locality_wait, latency),
  each as a share of the same agent-time, so they add up to it.
* ``eligible_idle_to_work`` p50/p99 -- over every spell an agent sat free while work it
  could take waited, how long until it held work (or that work was gone).
* ``wait`` p50/p99 -- from a task being ready (arrived, spawned, or its children done) to
  being claimed.
* ``steals`` (taken at claim time, from ``Claim.sources``) and ``moved`` (by the rebalance);
  ``own_domain`` -- the share of task runs done by an agent of the task's domain;
  ``cold_time`` -- agent-seconds spent warming up on tasks run outside their domain (the
  workload's fixed warm-up and its cold start: ``workloads``, *The cold start*).

``summarize`` gives the mean of each figure over the seeds of a workload and policy, and,
when the reference baseline ``pull+wake`` (one shared pool whose idle agents wake on new
work: what a fleet without shoal would pick) ran on the same seeds, on how many of them the
policy's makespan beat its (``beat_reference``, paired by seed).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from shoal.sim.engine import Trace

__all__ = ["REFERENCE", "Metrics", "measure", "percentile", "summarize"]

#: The baseline every other run is paired with, seed by seed.
REFERENCE = "pull+wake"


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
    eligible_idle_while_waiting: float
    eligible_idle_to_work_p50: float
    eligible_idle_to_work_p99: float
    held_by: dict[str, float]
    wait_p50: float
    wait_p99: float
    steals: int
    moved: int
    own_domain: float | None
    cold_time: float
    wall_seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {k: _rounded(v) for k, v in asdict(self).items()}


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


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
        policy=trace.baseline.name,
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
        eligible_idle_while_waiting=trace.eligible_idle / waiting if waiting else 0.0,
        eligible_idle_to_work_p50=percentile(trace.eligible_gaps, 50),
        eligible_idle_to_work_p99=percentile(trace.eligible_gaps, 99),
        held_by={k: (v / waiting if waiting else 0.0) for k, v in trace.held_by.items()},
        wait_p50=percentile(trace.waits, 50),
        wait_p99=percentile(trace.waits, 99),
        steals=trace.steals,
        moved=len(trace.moves),
        own_domain=own,
        cold_time=sum(s.warmup for s in trace.segments),
        wall_seconds=trace.wall,
    )


def summarize(runs: Sequence[Metrics]) -> list[dict[str, Any]]:
    """One row per (workload, policy): the mean of each figure over its seeds, and how
    often it beat the reference baseline (module docstring)."""
    groups: dict[tuple[str, str], list[Metrics]] = {}
    for m in runs:
        groups.setdefault((m.workload, m.policy), []).append(m)
    rows = []
    for (workload, policy), ms in groups.items():

        def mean(values: Sequence[float | None]) -> float | None:
            known = [v for v in values if v is not None]
            return sum(known) / len(known) if known else None

        row: dict[str, Any] = {"workload": workload, "policy": policy, "seeds": len(ms)}
        for name in _SUMMED:
            row[name] = mean([getattr(m, name) for m in ms])
        row["held_by"] = {cause: mean([m.held_by[cause] for m in ms]) for cause in ms[0].held_by}
        reference = {m.seed: m.ratio for m in groups.get((workload, REFERENCE), [])}
        paired = [m for m in ms if m.seed in reference]
        row["beat_reference"] = (
            None
            if policy == REFERENCE or not paired
            else sum(1 for m in paired if m.ratio < reference[m.seed] - _SAME)
        )
        row["paired_with_reference"] = len(paired)
        rows.append(row)
    return rows


#: Makespan ratios closer than this are a tie, not a win (float noise in the simulation).
_SAME = 1e-9


_SUMMED = (
    "agents",
    "tasks",
    "makespan",
    "lower_bound",
    "ratio",
    "idle_while_waiting",
    "idle_to_work_p50",
    "idle_to_work_p99",
    "eligible_idle_while_waiting",
    "eligible_idle_to_work_p50",
    "eligible_idle_to_work_p99",
    "wait_p50",
    "wait_p99",
    "steals",
    "moved",
    "own_domain",
    "cold_time",
    "wall_seconds",
)
