"""The Gantt chart of a run: agents down the side, time across, one bar per task run.

One panel per workload, on its own time axis (an overnight of hours and a batch of minutes
do not share a scale); in it, each policy's agents one band above the next, headed by the
policy's figures, so the policies of a workload compare at a glance. Bars are coloured by
the task's domain (grey: no domain); a task taken by a steal at claim time has a red
outline and a red mark at its start, one moved by the rebalance a black outline and a
black mark. A one-line caption at the top says what to look at, and the legend sits
under it.

Every panel is a handful of artists, whatever the number of runs -- one collection of
bars, one set of marks per colour -- and the axes are placed by arithmetic, not by
matplotlib's layout engine: drawing an artist per task run and laying out a panel per run
made ``shoal sim --png`` take minutes for a run the simulator did in seconds.

matplotlib is an extra (``pip install 'shoal[sim]'``); the chart is drawn off-screen on a
bare ``Figure`` (the Agg canvas, no pyplot), so no display is needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shoal.errors import BadInput
from shoal.extras import install_hint

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from shoal.sim import Result

__all__ = ["CAPTION", "draw", "figure"]

_HOUR = 3600.0
#: What to look at, above the chart.
CAPTION = (
    "Look at where each policy's last bar ends (its makespan) and at the gaps before it "
    "(agents idle while work waited)."
)
# Sizes in inches: the figure grows with the rows it shows.
_WIDTH, _LEFT, _RIGHT = 10.0, 0.75, 0.2
_ROW = 0.13  # an agent's row
_HEADER = 0.75  # the caption and the legend
_PANEL = 0.75  # a panel's title, time axis and label


def draw(results: Sequence[Result], path: str | Path, *, title: str | None = None) -> Path:
    """Draw ``results`` (grouped by workload, one panel each) to the PNG at ``path``;
    returns the path."""
    out = Path(path)
    figure(results, title=title).savefig(out, dpi=72)
    return out


def figure(results: Sequence[Result], *, title: str | None = None) -> Figure:
    """The chart of ``results`` as a matplotlib ``Figure`` (see the module docstring)."""
    try:
        import matplotlib
    except ImportError:
        raise BadInput(
            "drawing the Gantt chart needs matplotlib, which is not installed",
            hint=f"{install_hint('sim')} (or run without --png)",
        ) from None
    from matplotlib.figure import Figure

    by_workload: dict[str, list[Result]] = {}
    for result in results:
        by_workload.setdefault(result.metrics.workload, []).append(result)
    domains = sorted({s.domain for r in results for s in r.trace.segments if s.domain})
    palette = matplotlib.colormaps["tab10"]
    colour = {d: palette(i % 10) for i, d in enumerate(domains)}
    rows = {w: sum(1 + len(r.trace.workload.agents) for r in runs)
            for w, runs in by_workload.items()}  # fmt: skip
    handles = _legend(colour, plain=any(not s.domain for r in results for s in r.trace.segments))
    columns = min(10, len(handles))
    legend_rows = -(-len(handles) // columns)
    header = _HEADER + 0.18 * (legend_rows - 1) + (0.3 if title else 0.0)
    height = header + sum(_PANEL + _ROW * n for n in rows.values())
    fig = Figure(figsize=(_WIDTH, height))
    top = height - header
    for workload, runs in by_workload.items():
        panel = _ROW * rows[workload]
        top -= 0.3  # the panel's title
        ax = fig.add_axes(
            (_LEFT / _WIDTH, (top - panel) / height, 1 - (_LEFT + _RIGHT) / _WIDTH, panel / height)
        )
        _panel(ax, workload, runs, colour)
        top -= panel + _PANEL - 0.3
    y = 1 - 0.12 / height
    if title:
        fig.text(0.01, y, title, fontsize=10, va="top", weight="bold")
        y -= 0.3 / height
    fig.text(0.01, y, CAPTION, fontsize=9, va="top")
    fig.legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(0.0, y - 0.25 / height),
        ncol=columns,
        fontsize=7,
        frameon=False,
    )
    return fig


def _panel(ax: Any, workload: str, runs: Sequence[Result], colour: dict[str, Any]) -> None:
    """One workload: each run's agents in a band, headed by its policy's figures."""
    from matplotlib.collections import PolyCollection

    verts, faces, edges, widths = [], [], [], []
    marks: dict[str, tuple[list[float], list[float]]] = {"red": ([], []), "black": ([], [])}
    labels: list[str] = []
    end = 0.0
    for result in runs:
        m, trace = result.metrics, result.trace
        head = len(labels)
        labels.append("")
        if head:
            ax.axhline(head - 0.5, color="0.5", linewidth=0.6)
        figures = (
            f"{m.policy}: makespan {m.makespan / _HOUR:.2f} h ({m.ratio:.2f}x bound), "
            f"idle while work waited {m.idle_while_waiting:.0%}, {m.steals} stolen, "
            f"{m.moved} moved"
        )
        # x in axes fractions, y in rows: the band's heading sits in its first row
        ax.text(0.002, head + 0.3, figures, transform=ax.get_yaxis_transform(), fontsize=7,
                weight="bold", va="bottom")  # fmt: skip
        row = {a.id: head + 1 + i for i, a in enumerate(trace.workload.agents)}
        labels += [a.id for a in trace.workload.agents]
        for seg in trace.segments:
            y, start, stop = row[seg.agent], seg.start / _HOUR, seg.end / _HOUR
            edge = "red" if seg.source == "steal" else "black" if seg.moved else "white"
            verts.append(((start, y - 0.4), (start, y + 0.4), (stop, y + 0.4), (stop, y - 0.4)))
            faces.append(colour.get(seg.domain or "", "0.6"))
            edges.append(edge)
            widths.append(1.2 if edge != "white" else 0.3)
            if edge != "white":
                marks[edge][0].append(start)
                marks[edge][1].append(y - 0.45)
            end = max(end, stop)
    ax.add_collection(PolyCollection(verts, facecolors=faces, edgecolors=edges, linewidths=widths))
    for edge, (xs, ys) in marks.items():
        if xs:
            ax.scatter(xs, ys, marker="v", color=edge, s=14, zorder=3)
    first = runs[0].trace.workload
    ax.set_title(
        f"{workload}: {len(first.agents)} agents, {len(first.tasks)} tasks, "
        f"seed {runs[0].metrics.seed}",
        fontsize=9,
        loc="left",
    )
    ax.set_xlim(0, end * 1.01 or 1.0)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels if len(labels) <= 120 else [""] * len(labels), fontsize=6)
    ax.tick_params(axis="y", length=0)
    ax.tick_params(axis="x", labelsize=7)
    ax.grid(axis="x", linewidth=0.3)
    ax.set_xlabel("hours from the start", fontsize=7)


def _legend(colour: dict[str, Any], *, plain: bool) -> list[Any]:
    """The domains' colours (grey, if ``plain``: a task of no domain) and the two marks."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = [Patch(color=c, label=d) for d, c in colour.items()]
    if plain:
        handles.append(Patch(color="0.6", label="no domain"))
    handles += [
        Line2D([], [], marker="v", color="red", linestyle="", label="stolen at claim"),
        Line2D([], [], marker="v", color="black", linestyle="", label="moved by rebalance"),
    ]
    return handles
