"""The standard scheduling comparison: every workload under every policy, a few seeds.

Runs ``shoal.sim`` (the real Fleet on a memory store, in virtual time), prints the table
the README shows, checks the targets the simulator was built to answer, and draws the
overnight scenario's Gantt chart (docs/overnight.png). Usage::

    .venv/bin/python bench/scheduling.py [--seeds 3] [--agents N --tasks N] [--png PATH]

Targets (reported, not bent): on the lognormal and Pareto batches shoal's makespan ratio
within 2% of pull's; on the affinity workload at least 90% of task runs in their own
domain, with a makespan that beats both pull and push. A last line runs the fork-join
tree again with ``busy_threshold 0`` (the setting the claim-time steal needs for
fork-join work; see the README).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import Console

from shoal import sim
from shoal.faces.cli_sim import comparison_table
from shoal.sim.gantt import draw
from shoal.sim.metrics import summarize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--agents", type=int, help="resize the batch, affinity, fork-join fleets")
    parser.add_argument("--tasks", type=int, help="resize their work")
    parser.add_argument("--png", default="docs/overnight.png", help="the overnight chart")
    args = parser.parse_args()
    console = Console(highlight=False, width=132)
    seeds = list(range(args.seeds))
    began = time.perf_counter()
    runs = sim.compare(["overnight"], sim.POLICIES, seeds)
    runs += sim.compare(
        ["lognormal", "pareto", "affinity", "forkjoin"],
        sim.POLICIES,
        seeds,
        agents=args.agents,
        tasks=args.tasks,
    )
    rows = summarize(runs)
    fork_join = sim.compare(
        ["forkjoin"], ["shoal"], seeds, agents=args.agents, tasks=args.tasks,
        settings={"busy_threshold": 0},
    )  # fmt: skip
    tuned = summarize(fork_join)
    tuned[0]["policy"] = "shoal (busy 0)"
    elapsed = time.perf_counter() - began
    console.print(comparison_table([*rows, *tuned], title=f"seeds {seeds}, {elapsed:.1f} s"))
    by = {(r["workload"], r["policy"]): r for r in rows}
    console.print("[bold]Targets[/bold]")
    for workload in ("lognormal", "pareto"):
        shoal, pull = by[(workload, "shoal")]["ratio"], by[(workload, "pull")]["ratio"]
        gap = shoal / pull - 1
        verdict = "met" if gap <= 0.02 else "MISSED"
        console.print(
            f"  {workload}: shoal {shoal:.3f} vs pull {pull:.3f} ({gap:+.1%}; within 2%: {verdict})"
        )
    aff = {p: by[("affinity", p)] for p in sim.POLICIES}
    own = aff["shoal"]["own_domain"]
    beats = all(aff["shoal"]["makespan"] < aff[p]["makespan"] for p in ("pull", "push"))
    console.print(
        f"  affinity: shoal runs {own:.0%} in domain (90%: {'met' if own >= 0.9 else 'MISSED'}); "
        f"makespan {aff['shoal']['makespan'] / 3600:.2f} h vs pull "
        f"{aff['pull']['makespan'] / 3600:.2f} h, push {aff['push']['makespan'] / 3600:.2f} h "
        f"(beats both: {'met' if beats else 'MISSED'})"
    )
    results = [sim.simulate("overnight", p, 0) for p in sim.POLICIES]
    Path(args.png).parent.mkdir(parents=True, exist_ok=True)
    chart = draw(results, args.png, title="The overnight scenario (seed 0)")
    console.print(f"Gantt chart of the overnight scenario: {chart}")


if __name__ == "__main__":
    main()
