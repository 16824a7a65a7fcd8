"""The Gantt chart of a run: agents down the side, time across, one bar per task run.

Bars are coloured by the task's domain (grey: no domain); a task taken by a steal at claim
time has a red outline and a red mark at its start, one moved by the rebalance a black
outline and a black mark. Several runs (say, one workload under each policy) are drawn one
above the other on the same time axis. matplotlib is an extra (``pip install
'shoal[sim]'``); it draws off-screen (the Agg backend), so no display is needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from shoal.errors import BadInput
from shoal.extras import install_hint

if TYPE_CHECKING:
    from shoal.sim import Result

__all__ = ["draw"]

_HOUR = 3600.0


def draw(results: Sequence[Result], path: str | Path, *, title: str | None = None) -> Path:
    """Draw ``results`` (one panel each) to the PNG at ``path``; returns the path."""
    try:
        import matplotlib
    except ImportError:
        raise BadInput(
            "drawing the Gantt chart needs matplotlib, which is not installed",
            hint=f"{install_hint('sim')} (or run without --png)",
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    domains = sorted({s.domain for r in results for s in r.trace.segments if s.domain})
    palette = plt.get_cmap("tab10")
    colour = {d: palette(i % 10) for i, d in enumerate(domains)}
    rows = sum(len(r.trace.workload.agents) for r in results)
    height = min(40.0, 1.2 + 0.22 * rows + 0.5 * len(results))
    fig, axes = plt.subplots(len(results), 1, figsize=(10, height), sharex=True, squeeze=False)
    for ax, result in zip(axes[:, 0], results, strict=True):
        trace = result.trace
        names = [a.id for a in trace.workload.agents]
        row = {name: i for i, name in enumerate(names)}
        for seg in trace.segments:
            y = row[seg.agent]
            start, width = seg.start / _HOUR, (seg.end - seg.start) / _HOUR
            edge = "red" if seg.source == "steal" else "black" if seg.moved else "white"
            ax.broken_barh(
                [(start, width)],
                (y - 0.4, 0.8),
                facecolors=colour.get(seg.domain or "", "0.6"),
                edgecolors=edge,
                linewidth=1.2 if edge != "white" else 0.3,
            )
            if edge != "white":
                ax.plot(start, y - 0.45, marker="v", color=edge, markersize=4)
        m = result.metrics
        ax.set_title(
            f"{m.workload} / {m.policy}: makespan {m.makespan / _HOUR:.2f} h "
            f"({m.ratio:.2f}x bound), idle while work waited {m.idle_while_waiting:.0%}, "
            f"{m.steals} stolen, {m.moved} moved",
            fontsize=9,
            loc="left",
        )
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels(names if len(names) <= 40 else [""] * len(names), fontsize=7)
        ax.set_ylim(len(names) - 0.5, -0.5)
        ax.grid(axis="x", linewidth=0.3)
    axes[-1, 0].set_xlabel("hours from the start")
    handles: list[Patch | Line2D] = [Patch(color=colour[d], label=d) for d in domains]
    handles += [
        Line2D([], [], marker="v", color="red", linestyle="", label="stolen at claim"),
        Line2D([], [], marker="v", color="black", linestyle="", label="moved by rebalance"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=min(8, len(handles)), fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    out = Path(path)
    fig.savefig(out, dpi=72)
    plt.close(fig)
    return out
