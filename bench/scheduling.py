"""The standard scheduling comparison: every workload under every policy, over ten seeds.

Runs ``shoal.sim`` (the real Fleet on a memory store, in virtual time) and prints the table
the docs show: the four policies with their documented settings, plus shoal with the two
opt-in settings on the workloads they are for -- ``order=longest_first`` on the batches
(whose tasks carry estimates off by a lognormal error of sigma 0.5) and ``locality_wait``
on the affinity stream. Tuned rows are paired by seed with the untuned pull baseline.

It then checks the scheduling targets and says of each whether it is met (reported, not
bent), writes every figure as JSON with ``--json``, and draws the overnight scenario's Gantt
chart (docs/overnight.png). Usage::

    .venv/bin/python bench/scheduling.py [--seeds 10] [--json PATH] [--png PATH]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console

from shoal import sim
from shoal.faces.cli.sim import comparison_table
from shoal.sim.gantt import draw
from shoal.sim.metrics import Metrics, summarize
from shoal.sim.workloads import build

BATCHES = ("lognormal", "pareto")
#: The opt-in settings and the workloads they are for (a row each, named after the setting).
TUNED: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "shoal+longest": (BATCHES, {"order": "longest_first"}),
    "shoal+local 20m": (("affinity",), {"locality_wait": "20m"}),
}


def tuned_runs(seeds: Sequence[int]) -> list[Metrics]:
    """shoal with each opt-in setting, named after it so it gets a row of its own."""
    runs = []
    for name, (workloads, settings) in TUNED.items():
        for m in sim.compare(workloads, ["shoal"], seeds, settings=settings):
            runs.append(replace(m, policy=name))
    return runs


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def check_targets(rows: list[dict[str, Any]], runs: list[Metrics]) -> list[tuple[str, bool]]:
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
    fork = by[("forkjoin", "shoal")]
    within = all(
        m.makespan <= m.work / m.agents + m.span
        for m in runs
        if m.workload == "forkjoin" and m.policy == "shoal"
    )
    found.append(
        (
            f"forkjoin: ratio {fork['ratio']:.3f} (<= 1.10); T1/P + T_inf held on every seed: "
            f"{within}",
            fork["ratio"] <= 1.10 and within,
        )
    )
    for workload in BATCHES:
        shoal, pull = by[(workload, "shoal")]["ratio"], by[(workload, "pull")]["ratio"]
        found.append(
            (
                f"{workload}: ratio {shoal:.3f} vs pull {pull:.3f} (<= pull + 0.02)",
                shoal <= pull + 0.02,
            )
        )
        longest = by[(workload, "shoal+longest")]
        beat, paired = longest["beat_pull"], longest["paired_with_pull"]
        found.append(
            (
                f"{workload}, longest_first: ratio {longest['ratio']:.3f} (<= 1.02), beat pull on "
                f"{beat} of {paired} seeds (>= 9 of 10)",
                longest["ratio"] <= 1.02 and beat >= 0.9 * paired,
            )
        )
    shoal, pull = by[("affinity", "shoal")], by[("affinity", "pull")]
    found.append(
        (
            f"affinity: own domain {shoal['own_domain']:.1%} vs pull {pull['own_domain']:.1%}, "
            f"makespan {shoal['ratio']:.3f} vs pull {pull['ratio']:.3f} (own >= pull's, "
            "makespan <= pull's)",
            shoal["own_domain"] >= pull["own_domain"] and shoal["makespan"] <= pull["makespan"],
        )
    )
    held = by[("affinity", "shoal+local 20m")]
    gap = held["makespan"] / pull["makespan"] - 1
    found.append(
        (
            f"affinity, locality_wait 20m: own domain {held['own_domain']:.1%} (>= 90%), "
            f"makespan {gap:+.2%} against pull's (within 1%)",
            held["own_domain"] >= 0.9 and gap <= 0.01,
        )
    )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--png", default="docs/overnight.png", help="the overnight chart")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    args = parser.parse_args()
    console = Console(highlight=False, width=132)
    seeds = list(range(args.seeds))
    began = time.perf_counter()
    runs = sim.compare(sim.WORKLOADS, sim.BASELINES, seeds)
    runs += tuned_runs(seeds)
    order = {name: i for i, name in enumerate(sim.WORKLOADS)}
    runs.sort(key=lambda m: order[m.workload])  # stable: each workload's rows stay together
    rows = summarize(runs)
    elapsed = time.perf_counter() - began
    console.print(comparison_table(rows, title=f"seeds 0-{seeds[-1]}, {elapsed:.0f} s"))
    console.print("[bold]Targets[/bold]")
    targets = check_targets(rows, runs)
    for text, ok in targets:
        console.print(f"  {verdict(ok):6}  {text}")
    results = [sim.simulate("overnight", p, 0) for p in sim.BASELINES]
    Path(args.png).parent.mkdir(parents=True, exist_ok=True)
    chart = draw(results, args.png, title="The overnight scenario (seed 0)")
    console.print(f"Gantt chart of the overnight scenario: {chart}")
    if args.json is not None:
        report = {
            "seeds": seeds,
            "seconds": elapsed,
            "summary": rows,
            "runs": [m.to_dict() for m in runs],
            "targets": [{"target": text, "met": ok} for text, ok in targets],
            "workloads": {name: build(name, 0).description for name in sim.WORKLOADS},
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        console.print(f"figures: {args.json}")


if __name__ == "__main__":
    main()
