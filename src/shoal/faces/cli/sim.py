"""``shoal sim``: run workloads under scheduling policies in virtual time, and compare.

The simulator runs the real ``Fleet`` on an in-process memory store with a manual clock
(see ``shoal.sim``); this module only reads the command line, shows the table and writes
the chart.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from rich import box
from rich.table import Table

from shoal.errors import BadInput
from shoal.faces.cli.app import App, json_flag, pass_app
from shoal.settings import Settings
from shoal.sim import BASELINES, WORKLOADS, simulate_all
from shoal.sim.baselines import get as get_baseline
from shoal.sim.metrics import summarize
from shoal.sim.workloads import get as get_workload
from shoal.sim.workloads import split_model

__all__ = ["add_sim_commands", "comparison_table", "parse_sets", "sim_command"]


def parse_sets(pairs: Sequence[str]) -> dict[str, str]:
    """``NAME=VALUE`` pairs from ``--set`` (the values are checked by the fleet)."""
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise BadInput(
                f"--set takes NAME=VALUE, not {pair!r}", hint="e.g. --set busy_threshold=0"
            )
        out[name.strip()] = value.strip()
    return out


def _minutes(seconds: float | None) -> str:
    """Minutes, whole from 100 up (the table is narrow)."""
    if seconds is None:
        return "-"
    return f"{seconds / 60:.0f}" if seconds >= 6000 else f"{seconds / 60:.1f}"


def _held_by(causes: dict[str, float | None], total: float | None) -> str:
    """The main cause of eligible idleness and its share of agent-time: ``caps 27%``."""
    if not total:
        return "-"
    share, cause = max((v or 0.0, k) for k, v in causes.items())
    return f"{_CAUSE.get(cause, cause)} {share:.0%}" if share >= 0.01 else f"{cause} {share:.1%}"


#: Shorter names for the table (the JSON keeps the full ones).
_CAUSE = {"locality_wait": "locality", "domain_wait": "domain"}


def _spread(low: float | None, high: float | None) -> str:
    """Two durations (p50/p99) in minutes."""
    return f"{_minutes(low)}/{_minutes(high)}"


def comparison_table(
    rows: Sequence[dict[str, Any]], title: str | None = None, *, grouped: bool = True
) -> Table:
    """The comparison as a rich table: one row per workload and policy (means over seeds).
    ``grouped``: a workload's name on its first row only (for eyes, not for ``cut``)."""
    table = Table(
        title=title,
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
        title_justify="left",
        caption="hours: makespan, ÷ bound: over max(T1/P, T_inf); vs pull+wake: seeds with "
        "a shorter makespan than pull+wake's; idle: share of agent-time free while work waited, "
        "eligible: while work it could take waited, held by: what mostly kept that work from "
        "it; idle→work (eligible spells) and wait: p50/p99 in minutes; domain: task runs in "
        "their own domain; means over seeds",
        caption_justify="left",
    )
    for name in (
        "workload",
        "policy",
        "hours",
        "÷ bound",
        "vs pull+wake",
        "idle",
        "eligible",
        "held by",
        "idle→work",
        "wait",
        "stolen",
        "moved",
        "domain",
    ):
        justify = "left" if name in ("workload", "policy", "held by") else "right"
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    last = None
    for row in rows:
        own = row["own_domain"]
        beat = row.get("beat_reference")
        table.add_row(
            row["workload"] if row["workload"] != last or not grouped else "",
            row["policy"],
            f"{row['makespan'] / 3600:.2f}",
            f"{row['ratio']:.3f}",
            "-" if beat is None else f"{beat}/{row['paired_with_reference']}",
            f"{row['idle_while_waiting']:.0%}",
            f"{row['eligible_idle_while_waiting']:.1%}",
            _held_by(row["held_by"], row["eligible_idle_while_waiting"]),
            _spread(row["eligible_idle_to_work_p50"], row["eligible_idle_to_work_p99"]),
            _spread(row["wait_p50"], row["wait_p99"]),
            f"{row['steals']:.1f}",
            f"{row['moved']:.1f}",
            "-" if own is None else f"{own:.0%}",
            end_section=False,
        )
        last = row["workload"]
    return table


@click.command("sim", short_help="Simulate scheduling policies on workloads, in virtual time.")
@click.argument("workloads", nargs=-1, metavar="[WORKLOAD]...")
@click.option("--policy", "-p", "baselines", multiple=True, metavar="NAME",
              help=f"A policy to run (repeat; default all): {', '.join(BASELINES)}.")  # fmt: skip
@click.option("--seed", "seeds", multiple=True, type=int, help="A seed (repeat; default 0).")
@click.option("--seeds", "seed_count", type=click.IntRange(1, 1000), help="Run seeds 0..N-1.")
@click.option("--agents", type=int, help="Resize the fleet (not overnight).")
@click.option("--tasks", type=int, help="Resize the work (not overnight).")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
              help="A fleet setting for shoal's runs (the baselines are not tuned), "
                   "e.g. --set order=longest_first; or cold_start=25%, the work's "
                   "own: a task run off its domain takes 25% longer, every policy.")  # fmt: skip
@click.option("--png", type=click.Path(dir_okay=False, path_type=Path),
              help="Write a Gantt chart of the first seed (needs shoal[sim]).")  # fmt: skip
@json_flag()
@pass_app
def sim_command(
    app: App,
    workloads: tuple[str, ...],
    baselines: tuple[str, ...],
    seeds: tuple[int, ...],
    seed_count: int | None,
    agents: int | None,
    tasks: int | None,
    sets: tuple[str, ...],
    png: Path | None,
) -> None:
    """Run WORKLOADs (default all: overnight lognormal pareto affinity forkjoin) under each
    policy (push, push+rebalance, pull, pull+wake, shoal) on the real Fleet, in virtual
    time, and show makespan against the lower bound max(T1/P, T_inf) and on how many seeds
    it beat pull+wake (one shared pool whose idle agents wake on new work),
    idleness while work waited (and while work the idle agent could take waited, with what
    held it back), how long idle agents waited for work, task waits, steals and moves, and
    work done in its domain.

    \b
    shoal sim overnight --png overnight.png
    shoal sim lognormal pareto --seeds 10 --set order=longest_first
    shoal sim affinity -p shoal -p pull+wake --seeds 10 --set locality_wait=20m --json
    shoal sim overnight affinity --seeds 10 --set cold_start=25%
    """
    names = list(workloads) or list(WORKLOADS)
    for name in names:
        get_workload(name)  # every name is checked before anything runs
    chosen = [get_baseline(name) for name in baselines or BASELINES]
    if seeds and seed_count:
        raise BadInput("give --seed or --seeds, not both")
    seed_list = list(range(seed_count)) if seed_count else list(seeds) or [0]
    settings = parse_sets(sets)
    _, fleet_settings = split_model(settings)  # the work's own settings are checked there
    Settings().replace(**fleet_settings)  # checked before anything runs
    results = list(
        simulate_all(names, chosen, seed_list, agents=agents, tasks=tasks, settings=settings)
    )
    runs = [r.metrics for r in results]
    rows = summarize(runs)
    chart = None
    if png is not None:
        from shoal.sim.gantt import draw

        first = [r for r in results if r.metrics.seed == seed_list[0]]
        chart = str(draw(first, png))
    if app.json:  # `shoal sim --json`, or `shoal --json sim`
        data = {"runs": [m.to_dict() for m in runs], "summary": rows, "png": chart}
        click.echo(json.dumps(data, indent=2))
        return
    # On a terminal a table; piped, TSV like every other command's (each row names its
    # workload, and the chart's path goes to stderr, so stdout holds only rows).
    on_screen = app.output_format() == "table"
    title = f"seeds: {', '.join(map(str, seed_list))}"
    app.emit(None, comparison_table(rows, title=title, grouped=on_screen))
    if chart:
        click.echo(f"Gantt chart: {chart}", err=not on_screen)


def add_sim_commands(group: click.Group) -> None:
    """Register ``shoal sim`` on the ``shoal`` group."""
    group.add_command(sim_command)
