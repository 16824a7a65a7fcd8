"""The scheduling simulator: workload x baseline x seed -> metrics, in virtual time.

It runs the real ``Fleet`` on a ``memory://`` store with a ``ManualClock``: simulated agents
claim, complete, spawn and defer through the Fleet API, and the engine only moves the clock
from one event to the next. A night of a five-agent fleet takes a fraction of a second.

    >>> from shoal import sim
    >>> m = sim.run("forkjoin", "shoal", seed=1, tasks=40)
    >>> m.tasks, m.ratio < 2
    (41, True)

``run`` returns the ``Metrics``; ``simulate`` returns the whole ``Result`` (metrics and
trace), which ``shoal.sim.gantt.draw`` turns into a chart.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from shoal.sim.baselines import BASELINES, Baseline
from shoal.sim.baselines import get as get_baseline
from shoal.sim.engine import Segment, Simulation, Trace
from shoal.sim.metrics import Metrics, measure
from shoal.sim.workloads import WORKLOADS, Workload, build

__all__ = [
    "BASELINES",
    "WORKLOADS",
    "Baseline",
    "Metrics",
    "Result",
    "Segment",
    "Trace",
    "Workload",
    "compare",
    "run",
    "simulate",
    "simulate_all",
]


@dataclass(frozen=True, slots=True)
class Result:
    """One run: its metrics and its trace."""

    metrics: Metrics
    trace: Trace


def simulate(
    workload: str | Workload,
    baseline: str | Baseline,
    seed: int = 0,
    *,
    agents: int | None = None,
    tasks: int | None = None,
    settings: Mapping[str, object] | None = None,
) -> Result:
    """Run ``workload`` (a name or a ``Workload``) under ``baseline`` (a name in
    ``BASELINES``, or a ``Baseline``) for ``seed``.

    ``agents`` and ``tasks`` resize a named workload; ``settings`` are fleet settings to
    run with, over the baseline's own (e.g. ``{"busy_threshold": 0}``).
    """
    chosen = get_baseline(baseline) if isinstance(baseline, str) else baseline
    work = (
        build(workload, seed, agents=agents, tasks=tasks) if isinstance(workload, str) else workload
    )
    trace = Simulation(work, chosen, seed, settings).run()
    return Result(measure(trace), trace)


def run(
    workload: str | Workload,
    baseline: str | Baseline,
    seed: int = 0,
    *,
    agents: int | None = None,
    tasks: int | None = None,
    settings: Mapping[str, object] | None = None,
) -> Metrics:
    """The metrics of one run (see ``simulate``)."""
    return simulate(workload, baseline, seed, agents=agents, tasks=tasks, settings=settings).metrics


def simulate_all(
    workloads: Iterable[str],
    baselines: Iterable[str | Baseline],
    seeds: Iterable[int],
    *,
    agents: int | None = None,
    tasks: int | None = None,
    settings: Mapping[str, object] | None = None,
) -> Iterator[Result]:
    """Every workload under every baseline for every seed, in that order, one ``Result`` at a
    time. Each workload is built once per seed and run under every baseline."""
    chosen = [get_baseline(b) if isinstance(b, str) else b for b in baselines]
    for name in workloads:
        for seed in seeds:
            work = build(name, seed, agents=agents, tasks=tasks)
            for baseline in chosen:
                yield simulate(work, baseline, seed, settings=settings)


def compare(
    workloads: Iterable[str],
    baselines: Iterable[str],
    seeds: Iterable[int],
    *,
    agents: int | None = None,
    tasks: int | None = None,
    settings: Mapping[str, object] | None = None,
) -> list[Metrics]:
    """The metrics of every workload under every baseline for every seed, in that order."""
    runs = simulate_all(workloads, baselines, seeds, agents=agents, tasks=tasks, settings=settings)
    return [r.metrics for r in runs]
