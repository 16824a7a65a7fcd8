"""The health page's charts: series read back from the event log, drawn as small inline SVG.

No chart library: four line charts of at most ``MINUTES`` points are a few SVG elements,
drawn here on the server, so the page needs no script to show them and stays readable in
any browser. Everything comes from the newest ``WINDOW_EVENTS`` events
(``Fleet.events(newest=True)``), bucketed per minute; a busy fleet whose last hour holds
more events than that gets a shorter chart (the caption says from when).

The series, per minute:

- *queue depth*: pending tasks at the end of the minute, walked back from the count now by
  undoing each event's effect on the number of pending tasks (``PENDING_DELTA``);
- *throughput*: tasks completed;
- *claim latency*: the median time from a task becoming ready (posted, freed, released,
  failed or expired back to pending, retried) to its claim, over claims whose ready moment
  is in the window;
- *idle share*: the share of live agents that neither claimed nor finished anything in the
  minute (an estimate: the log records what agents do, not when they sit still).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

from shoal.model import Event
from shoal.times import iso_time
from shoal.vocabulary import EventKind

__all__ = ["MINUTES", "WINDOW_EVENTS", "Chart", "charts_of"]

#: Minutes a chart covers at most.
MINUTES = 60
#: The newest events the charts read at most.
WINDOW_EVENTS = 20_000

_READY_KINDS = {
    EventKind.POSTED,
    EventKind.READY,
    EventKind.RELEASED,
    EventKind.FAILED,
    EventKind.EXPIRED,
    EventKind.RETRIED,
}
_WORK_KINDS = {EventKind.CLAIMED, EventKind.STOLEN, EventKind.COMPLETED, EventKind.FAILED}


def pending_delta(event: Event) -> int:
    """How ``event`` changed the number of pending tasks."""
    kind, data = event.kind, event.data
    if kind == EventKind.POSTED:
        return 1 if data.get("state") == "pending" else 0
    if kind in (EventKind.READY, EventKind.RELEASED, EventKind.FAILED, EventKind.EXPIRED):
        return 1  # failed and expired are logged only when the task is pending again
    if kind == EventKind.CLAIMED:
        return -1
    if kind == EventKind.STOLEN:
        return 0 if data.get("by") == "rebalance" else -1  # a rebalance moves, pending stays
    if kind == EventKind.DEFERRED:
        return 0 if data.get("waiting_on") else 1
    if kind == EventKind.CANCELLED:
        return -1 if data.get("was") == "pending" else 0
    if kind == EventKind.RETRIED:
        return 1 if data.get("was") != "pending" and data.get("state") == "pending" else 0
    return 0


@dataclass(frozen=True)
class Chart:
    """One series, per minute, ready to draw."""

    name: str
    unit: str
    caption: str
    points: tuple[tuple[float, float | None], ...]  # (minute start, value or None)

    @property
    def latest(self) -> float | None:
        values = [v for _, v in self.points if v is not None]
        return values[-1] if values else None

    def svg(self, width: int = 360, height: int = 90) -> str:
        """The chart as inline SVG (numbers and escaped words only)."""
        values = [v for _, v in self.points if v is not None]
        top = max(values, default=0.0)
        top = top if top > 0 else 1.0
        pad, n = 4, max(1, len(self.points) - 1)
        coords = []
        for i, (_, value) in enumerate(self.points):
            if value is None:
                continue
            x = pad + (width - 2 * pad) * i / n
            y = height - pad - (height - 2 * pad) * value / top
            coords.append(f"{x:.1f},{y:.1f}")
        label = escape(f"{self.name}: {self.summary()}")
        line = (
            f'<polyline fill="none" stroke="currentColor" stroke-width="2" '
            f'points="{" ".join(coords)}"/>'
            if len(coords) > 1
            else ""
        )
        dots = "".join(
            f'<circle cx="{c.split(",")[0]}" cy="{c.split(",")[1]}" r="2" fill="currentColor"/>'
            for c in coords[-1:]
        )
        return (
            f'<svg class="chart" role="img" aria-label="{label}" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}"><title>{label}</title>'
            f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" '
            f'stroke="#767676" stroke-width="1"/>{line}{dots}</svg>'
        )

    def summary(self) -> str:
        values = [v for _, v in self.points if v is not None]
        if not values:
            return "no data in the window"
        last = values[-1]
        return f"now {_num(last)} {self.unit}, peak {_num(max(values))} {self.unit}"


def _num(value: float) -> str:
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.2f}"


def _minute(at: float) -> float:
    return math.floor(at / 60.0) * 60.0


def charts_of(
    events: Sequence[Event], now: float, pending_now: int, live_agents: int
) -> tuple[list[Chart], str]:
    """The four charts over ``events`` (oldest first), and what the window covers."""
    end = _minute(now)
    start = end - (MINUTES - 1) * 60.0
    if events:
        start = max(start, _minute(events[0].at))
    minutes = [start + 60.0 * i for i in range(int((end - start) / 60.0) + 1)]
    by_minute: Mapping[float, list[Event]] = _bucket(events, start)

    # Queue depth: walk back from now.
    depth: dict[float, float] = {}
    pending = pending_now
    for minute in reversed(minutes):
        depth[minute] = max(0, pending)
        for event in reversed(by_minute.get(minute, [])):
            pending -= pending_delta(event)

    done = {
        m: float(sum(1 for e in by_minute.get(m, []) if e.kind == "completed")) for m in minutes
    }

    ready_at: dict[int, float] = {}
    waits: dict[float, list[float]] = defaultdict(list)
    busy: dict[float, set[str]] = defaultdict(set)
    for event in events:
        minute = _minute(event.at)
        if event.kind in _READY_KINDS and event.task_id is not None:
            ready_at[event.task_id] = event.at
        if event.kind in (EventKind.CLAIMED, EventKind.STOLEN) and event.task_id is not None:
            since = ready_at.pop(event.task_id, None)
            if since is not None and event.data.get("by") != "rebalance":
                waits[minute].append(max(0.0, event.at - since))
        if event.kind in _WORK_KINDS and event.agent:
            busy[minute].add(event.agent)
    latency = {m: (statistics.median(waits[m]) if waits.get(m) else None) for m in minutes}
    live = max(live_agents, 1)
    idle = {m: max(0.0, 1 - len(busy.get(m, ())) / live) * 100 for m in minutes}

    def series(values: Mapping[float, float | None]) -> tuple[tuple[float, float | None], ...]:
        return tuple((m, values.get(m)) for m in minutes)

    charts = [
        Chart("Queue depth", "pending", "Pending tasks at the end of each minute.", series(depth)),
        Chart("Throughput", "done/min", "Tasks completed per minute.", series(done)),
        Chart(
            "Idle share",
            "% idle",
            "Share of live agents that claimed or finished nothing in the minute (estimate).",
            series(idle),
        ),
        Chart(
            "Claim latency",
            "s",
            "Median seconds from a task becoming ready to its claim, per minute.",
            series(latency),
        ),
    ]
    covered = f"{len(minutes)} min from {iso_time(minutes[0])}, over {len(events)} events"
    return charts, covered


def _bucket(events: Sequence[Event], start: float) -> dict[float, list[Event]]:
    found: dict[float, list[Event]] = defaultdict(list)
    for event in events:
        minute = _minute(event.at)
        if minute >= start:
            found[minute].append(event)
    return found
