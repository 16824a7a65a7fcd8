"""The Gantt chart of `shoal sim --png`: one panel per workload on its own time axis, a
caption at the top saying what to look at, the legend, and a handful of artists per panel
whatever the number of task runs (an artist per run made the chart take minutes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal import sim
from shoal.sim.gantt import CAPTION, draw, figure

PolyCollection = pytest.importorskip("matplotlib.collections").PolyCollection


def test_one_panel_per_workload_each_on_its_own_time_axis(tmp_path: Path) -> None:
    results = [
        sim.simulate(workload, policy, seed=0, tasks=30, agents=3)
        for workload in ("lognormal", "forkjoin")
        for policy in ("pull", "shoal")
    ]
    fig = figure(results)
    assert len(fig.axes) == 2  # lognormal and forkjoin, each with both policies
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert titles[0].startswith("lognormal:") and titles[1].startswith("forkjoin:")
    for ax, workload in zip(fig.axes, ("lognormal", "forkjoin"), strict=True):
        runs = [r for r in results if r.metrics.workload == workload]
        # every task run is one bar, all in one collection (not one artist each)
        (bars,) = [c for c in ax.collections if isinstance(c, PolyCollection)]
        assert len(bars.get_paths()) == sum(len(r.trace.segments) for r in runs)
        assert len(ax.collections) <= 3  # the bars, and the steal and move marks
        # its own time axis: it ends with its own longest run
        end = max(r.metrics.makespan for r in runs) / 3600
        assert ax.get_xlim()[1] == pytest.approx(end * 1.01)
        # each policy heads its band with its figures
        heads = [t.get_text() for t in ax.texts]
        assert [h.split(":")[0] for h in heads] == ["pull", "shoal"]
        assert all("makespan" in h and "stolen" in h for h in heads)
    assert fig.axes[0].get_xlim() != fig.axes[1].get_xlim()
    assert [t.get_text() for t in fig.texts] == [CAPTION]
    assert fig.legends and "stolen at claim" in [t.get_text() for t in fig.legends[0].texts]
    # the caption and the legend are above the first panel
    top_of_panels = fig.axes[0].get_position().y1
    assert fig.texts[0].get_position()[1] > top_of_panels
    png = draw(results, tmp_path / "chart.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
