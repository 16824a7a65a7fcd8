"""The standard scheduling comparison: every workload under every policy, over ten seeds.

Runs ``shoal.sim`` (the real Fleet on a memory store, in virtual time) and prints the tables
the docs show:

* the comparison -- the five policies with their documented settings, plus shoal with the
  two opt-in settings on the workloads they are for (``order=longest_first`` on the
  batches, whose tasks carry estimates off by a lognormal error of sigma 0.5;
  ``locality_wait`` on the affinity stream). Every row is paired by seed with
  ``pull+wake``, one shared pool whose idle agents wake on new work;
* the cold start -- overnight and affinity with a task run outside its domain taking 0%,
  10% and 25% longer, and fork-join with a join run away from its first part doing so
  (``cold_start``, a property of the work: every policy pays it);
* Pareto over more seeds (``--pareto-seeds``, 40): shoal against pull+wake paired by seed,
  with the mean difference and its 95% interval, because ten seeds of a heavy-tailed batch
  cannot tell them apart (docs/scheduling.md says why).

It then checks the scheduling targets and says of each whether it is met (reported, not
bent), writes every figure as JSON with ``--json``, and draws the overnight scenario's Gantt
chart (docs/overnight.png). Usage::

    .venv/bin/python bench/scheduling.py [--seeds 10] [--pareto-seeds 40] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console

from shoal import sim
from shoal.faces.cli.sim import comparison_table
from shoal.sim.gantt import draw
from shoal.sim.metrics import REFERENCE, Metrics, summarize
from shoal.sim.workloads import build

BATCHES = ("lognormal", "pareto")
#: The opt-in settings and the workloads they are for (a row each, named after the setting).
TUNED: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "shoal+longest": (BATCHES, {"order": "longest_first"}),
    "shoal+local 20m": (("affinity",), {"locality_wait": "20m"}),
}
#: The cold-start factors of the second table, and the workloads where it tells: those
#: with domains, and fork-join (a join run away from its first part starts cold).
COLD_STARTS = (0.0, 0.10, 0.25)
COLD_WORKLOADS = ("overnight", "affinity", "forkjoin")
COLD_POLICIES = ("pull", "pull+wake", "shoal")


def tuned_runs(seeds: Sequence[int]) -> list[Metrics]:
    """shoal with each opt-in setting, named after it so it gets a row of its own."""
    runs = []
    for name, (workloads, settings) in TUNED.items():
        for m in sim.compare(workloads, ["shoal"], seeds, settings=settings):
            runs.append(replace(m, policy=name))
    return runs


#: With a cold start, the opt-in setting for work that is costly outside its domain.
COLD_TUNED = ("shoal+local 5m", "affinity", {"locality_wait": "5m"})


def cold_runs(seeds: Sequence[int]) -> dict[float, list[dict[str, Any]]]:
    """The summary rows of ``COLD_WORKLOADS`` at each cold-start factor, and shoal with
    ``COLD_TUNED``'s setting."""
    rows = {}
    name, workload, tuned = COLD_TUNED
    for factor in COLD_STARTS:
        settings = {"cold_start": factor}
        runs = sim.compare(COLD_WORKLOADS, COLD_POLICIES, seeds, settings=settings)
        local = sim.compare([workload], ["shoal"], seeds, settings={**settings, **tuned})
        runs += [replace(m, policy=name) for m in local]
        order = {w: i for i, w in enumerate(COLD_WORKLOADS)}
        runs.sort(key=lambda m: order[m.workload])
        rows[factor] = summarize(runs)
    return rows


def cold_table(rows: dict[float, list[dict[str, Any]]]) -> str:
    head = (
        f"{'workload':10} {'cold start':>10}  {'policy':15} {'hours':>6} {'÷ bound':>8} "
        f"{'vs pull+wake':>12} {'domain':>7} {'cold hours':>10}"
    )
    lines = [head, "─" * len(head)]
    for workload in COLD_WORKLOADS:
        for factor, summary in rows.items():
            for row in (r for r in summary if r["workload"] == workload):
                beat = row["beat_reference"]
                wins = "-" if beat is None else f"{beat}/{row['paired_with_reference']}"
                lines.append(
                    f"{workload:10} {factor:10.0%}  {row['policy']:15} "
                    f"{row['makespan'] / 3600:6.2f} {row['ratio']:8.3f} "
                    f"{wins:>12} "
                    f"{_share(row['own_domain']):>7} {row['cold_time'] / 3600:10.2f}"
                )
    return "\n".join(lines)


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def paired(workload: str, seeds: Sequence[int]) -> dict[str, Any]:
    """shoal against pull+wake on ``seeds``, paired: means, the mean difference and its 95%
    interval (normal approximation), and the seeds shoal won."""
    runs = sim.compare([workload], [REFERENCE, "shoal"], seeds)
    ref = {m.seed: m.ratio for m in runs if m.policy == REFERENCE}
    ours = {m.seed: m.ratio for m in runs if m.policy == "shoal"}
    diffs = [ours[s] - ref[s] for s in seeds]
    half = 1.96 * statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else 0.0
    return {
        "workload": workload,
        "seeds": len(seeds),
        "pull_wake": statistics.mean(ref.values()),
        "shoal": statistics.mean(ours.values()),
        "difference": statistics.mean(diffs),
        "interval_95": half,
        "shoal_won": sum(1 for d in diffs if d < -1e-9),
    }


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def check_targets(
    rows: list[dict[str, Any]],
    runs: list[Metrics],
    cold: dict[float, list[dict[str, Any]]],
) -> list[tuple[str, bool]]:
    """Each scheduling target: what was measured, and whether it is met."""
    by = {(r["workload"], r["policy"]): r for r in rows}
    found: list[tuple[str, bool]] = []
    night = by[("overnight", "shoal")]
    idle, p99 = night["eligible_idle_while_waiting"], night["eligible_idle_to_work_p99"]
    found.append(
        (
            f"overnight: eligible idle {idle:.2%} (<= 1%), idle-to-work p99 {p99:.0f} s (<= 60 s)",
            idle <= 0.01 and p99 <= 60,
        )
    )
    within = all(
        m.makespan <= m.work / m.agents + m.span
        for m in runs
        if m.workload == "forkjoin" and m.policy == "shoal"
    )
    fork = by[("forkjoin", "shoal")]["ratio"]
    found.append(
        (
            f"forkjoin: ratio {fork:.3f} (<= 1.10); T1/P + T_inf held on every seed: {within}",
            fork <= 1.10 and within,
        )
    )
    for workload in ("overnight", "lognormal", "affinity", "forkjoin", "pareto"):
        ours, ref = by[(workload, "shoal")]["ratio"], by[(workload, REFERENCE)]["ratio"]
        slack = 0.01 if workload == "pareto" else 0.0
        found.append(
            (
                f"{workload}: ratio {ours:.3f} vs pull+wake {ref:.3f} (<= pull+wake"
                + (f" + {slack}" if slack else "")
                + ")",
                ours <= ref + slack + 1e-9,
            )
        )
    for workload in BATCHES:
        longest = by[(workload, "shoal+longest")]
        beat, pairs = longest["beat_reference"], longest["paired_with_reference"]
        found.append(
            (
                f"{workload}, longest_first: ratio {longest['ratio']:.3f} (<= 1.02), beat "
                f"pull+wake on {beat} of {pairs} seeds (>= 9 of 10)",
                longest["ratio"] <= 1.02 and beat >= 0.9 * pairs,
            )
        )
    ours, ref = by[("affinity", "shoal")], by[("affinity", REFERENCE)]
    found.append(
        (
            f"affinity: own domain {ours['own_domain']:.1%} vs pull+wake {ref['own_domain']:.1%}"
            " (>= pull+wake's)",
            ours["own_domain"] >= ref["own_domain"],
        )
    )
    held = by[("affinity", "shoal+local 20m")]
    gap = held["makespan"] / ref["makespan"] - 1
    found.append(
        (
            f"affinity, locality_wait 20m: own domain {held['own_domain']:.1%} (>= 90%), "
            f"makespan {gap:+.2%} against pull+wake's (within 1%)",
            held["own_domain"] >= 0.9 and gap <= 0.01,
        )
    )
    for factor, summary in cold.items():
        if factor == 0:
            continue
        cold_by = {(r["workload"], r["policy"]): r for r in summary}
        rows_of = [(w, "shoal") for w in COLD_WORKLOADS] + [(COLD_TUNED[1], COLD_TUNED[0])]
        for workload, policy in rows_of:
            ours, ref = cold_by[(workload, policy)], cold_by[(workload, REFERENCE)]
            found.append(
                (
                    f"{workload}, cold start {factor:.0%}: {policy} {ours['ratio']:.3f} vs "
                    f"pull+wake {ref['ratio']:.3f} (makespan < pull+wake's)",
                    ours["makespan"] < ref["makespan"],
                )
            )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--pareto-seeds", type=int, default=40)
    parser.add_argument("--png", default="docs/overnight.png", help="the overnight chart")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    args = parser.parse_args()
    console = Console(highlight=False, width=140)
    seeds = list(range(args.seeds))
    began = time.perf_counter()
    runs = sim.compare(sim.WORKLOADS, sim.BASELINES, seeds)
    runs += tuned_runs(seeds)
    order = {name: i for i, name in enumerate(sim.WORKLOADS)}
    runs.sort(key=lambda m: order[m.workload])  # stable: each workload's rows stay together
    rows = summarize(runs)
    elapsed = time.perf_counter() - began
    console.print(comparison_table(rows, title=f"seeds 0-{seeds[-1]}, {elapsed:.0f} s"))
    cold = cold_runs(seeds)
    console.print(f"\n[bold]The cold start[/bold] (seeds 0-{seeds[-1]})")
    console.print(cold_table(cold))
    many = paired("pareto", list(range(args.pareto_seeds)))
    console.print(
        f"\n[bold]Pareto over {many['seeds']} seeds[/bold]: pull+wake {many['pull_wake']:.3f}, "
        f"shoal {many['shoal']:.3f}; shoal - pull+wake {many['difference']:+.3f} "
        f"± {many['interval_95']:.3f} (95%), shoal shorter on {many['shoal_won']}"
    )
    console.print("\n[bold]Targets[/bold]")
    targets = check_targets(rows, runs, cold)
    for text, ok in targets:
        console.print(f"  {verdict(ok):6}  {text}")
    results = [sim.simulate("overnight", p, 0) for p in sim.BASELINES]
    Path(args.png).parent.mkdir(parents=True, exist_ok=True)
    chart = draw(results, args.png, title="The overnight scenario (seed 0)")
    console.print(f"Gantt chart of the overnight scenario: {chart}")
    if args.json is not None:
        report = {
            "seeds": seeds,
            "seconds": time.perf_counter() - began,
            "summary": rows,
            "cold_start": {f"{factor:g}": summary for factor, summary in cold.items()},
            "pareto_seeds": many,
            "runs": [m.to_dict() for m in runs],
            "targets": [{"target": text, "met": ok} for text, ok in targets],
            "workloads": {name: build(name, 0).description for name in sim.WORKLOADS},
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        console.print(f"figures: {args.json}")


if __name__ == "__main__":
    main()
