"""The dashboard's charts: counts read from the event log, drawn as inline SVG with axes.

No chart library and no script: a chart is a few dozen SVG elements drawn here on the
server, so the health and agent pages show them in any browser, and they stay small.

Each chart covers one of ``RANGES`` (the last hour by the minute, the last day by the
quarter hour, the last week by the hour). The numbers come from ``Fleet.event_counts``:
the store counts the window's events per bucket, kind and detail and sends back one row
each, so a week of a busy fleet costs one aggregate over that week's rows (found through
the log's ids, ``SqlTx._first_event_at``) and a few hundred rows to Python -- never the
events themselves.

The fleet's series, per bucket:

- *queue depth*: pending tasks at the end of the bucket, walked back from the count now by
  undoing each bucket's effect on the number of pending tasks (``pending_delta``);
- *done*: tasks completed;
- *failed*: failures reported, leases that ran out, and tasks that died;
- *claimed*: tasks claimed, stolen ones included (a rebalance's move is no claim).

An agent's: done, failed, steals in (tasks it took from another's queue) and steals out
(taken from its queue, ``Fleet.steals_from``).
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from html import escape

from shoal.fleet import Fleet
from shoal.model import EventCount
from shoal.vocabulary import EventKind

__all__ = [
    "DEFAULT_RANGE",
    "RANGES",
    "Chart",
    "CountCache",
    "Range",
    "agent_charts",
    "fleet_charts",
]


@dataclass(frozen=True)
class Range:
    """A span of time the charts cover and the bucket they count by."""

    name: str  # as in the address: ?range=24h
    span: float  # seconds
    width: float  # seconds per bucket
    label: str  # "the last day"
    per: str  # "per 15 min"

    @property
    def buckets(self) -> int:
        return int(self.span // self.width)

    def start(self, now: float) -> float:
        """The first bucket's start: buckets end on whole multiples of the width, the last
        one holding now."""
        return (math.floor(now / self.width) - self.buckets + 1) * self.width


RANGES: dict[str, Range] = {
    r.name: r
    for r in (
        Range("1h", 3600.0, 60.0, "the last hour", "per minute"),
        Range("24h", 86400.0, 900.0, "the last 24 hours", "per 15 min"),
        Range("7d", 7 * 86400.0, 3600.0, "the last 7 days", "per hour"),
    )
}
DEFAULT_RANGE = "1h"

_FAILURES = {EventKind.FAILED, EventKind.EXPIRED, EventKind.DEAD}
#: Seconds after a bucket's end before its counts are kept: an event is logged with the
#: time its transaction began, so a slow writer may still add to a bucket just ended.
SETTLE = 60.0
#: Series (a fleet's or an agent's, per bucket width) a ``CountCache`` keeps at most.
KEPT_SERIES = 64

Fetch = Callable[[float], list[EventCount]]
Row = tuple[str, str, int]


class CountCache:
    """The counts of buckets that have ended, kept, so a page that reloads itself recounts
    only the newest: a week by the hour is counted whole once (about 3 s over 870k events
    on a loaded two-core machine), then one hour's events per reload.

    Kept per series (``key``: whose events, and the bucket width); buckets are aligned on
    multiples of their width, so every window of a series shares them. Buckets older than
    the window asked for are forgotten, and at most ``KEPT_SERIES`` series are kept (the
    least recently used goes), so the cache stays a few hundred rows per series. A prune
    that deletes old events leaves the kept counts as they were: they said what happened.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple[object, ...], dict[float, list[Row]]] = OrderedDict()
        self.counted_from: float | None = None  # where the last fetch started, for tests

    def counts(
        self, key: tuple[object, ...], fetch: Fetch, span: Range, now: float
    ) -> list[EventCount]:
        """``fetch(start)`` (the store's counts from ``start``) over the window of ``span``
        ending now, from the kept buckets and one fetch from the first bucket not kept."""
        width, start, n = span.width, span.start(now), span.buckets
        with self._lock:
            kept = dict(self._kept.get(key, {}))
        first = start
        while first in kept and first < start + n * width:
            first += width
        fresh: dict[float, list[Row]] = defaultdict(list)
        if first < start + n * width:
            self.counted_from = first
            for c in fetch(first):
                fresh[first + c.bucket * width].append((c.kind, c.detail, c.total))
        with self._lock:
            store = self._kept.setdefault(key, {})
            self._kept.move_to_end(key)
            for old in [b for b in store if b < start]:
                del store[old]
            b = first
            while b + width <= now - SETTLE and b < start + n * width:
                store[b] = fresh.get(b, [])
                b += width
            while len(self._kept) > KEPT_SERIES:
                self._kept.popitem(last=False)
        found: list[EventCount] = []
        for i in range(n):
            at = start + i * width
            rows = kept[at] if at < first else fresh.get(at, [])
            found.extend(EventCount(i, kind, detail, total) for kind, detail, total in rows)
        return found


def pending_delta(kind: str, detail: str) -> int:
    """How one event of ``kind`` (split by ``model.count_detail``) changed the number of
    pending tasks."""
    if kind == EventKind.POSTED:
        return 1 if detail == "pending" else 0
    if kind in (EventKind.READY, EventKind.RELEASED, EventKind.FAILED, EventKind.EXPIRED):
        return 1  # failed and expired are logged only when the task is pending again
    if kind == EventKind.RETURNED:
        return 0  # from an agent's queue to the pool: pending all along
    if kind == EventKind.CLAIMED:
        return -1
    if kind == EventKind.STOLEN:
        return 0 if detail == "rebalance" else -1  # a rebalance moves, pending stays
    if kind == EventKind.DEFERRED:
        return 0 if detail == "waiting" else 1
    if kind == EventKind.CANCELLED:
        return -1 if detail == "pending" else 0
    if kind == EventKind.RETRIED:
        return 1 if detail == "pending" else 0
    return 0


@dataclass(frozen=True)
class Chart:
    """One series over a range, ready to draw: ``bars`` for counts per bucket, a line for
    a level (the queue's depth)."""

    name: str
    unit: str  # what the values count: "tasks"
    caption: str
    range: Range
    start: float
    values: tuple[float, ...]
    bars: bool = True

    @property
    def axis_unit(self) -> str:
        return f"{self.unit} {self.range.per}" if self.bars else self.unit

    def summary(self) -> str:
        if not any(self.values):
            return f"none in {self.range.label}"
        if self.bars:
            total, peak = _num(sum(self.values)), _num(max(self.values))
            return f"{total} {self.unit} in {self.range.label}, peak {peak} {self.range.per}"
        return f"now {_num(self.values[-1])} {self.unit}, peak {_num(max(self.values))}"

    def svg(self, width: int = 480, height: int = 190) -> str:
        """The chart as inline SVG, with a value axis (its unit and three ticks) and a
        time axis (UTC). Only numbers and this module's own words are in it, escaped."""
        left, right, top_pad, bottom = 46, 10, 20, 26
        plot_w, plot_h = width - left - right, height - top_pad - bottom
        top = _nice(max(self.values, default=0.0))
        n = max(1, len(self.values))
        step = plot_w / n

        def y(value: float) -> float:
            return top_pad + plot_h - plot_h * value / top

        parts = [
            f'<svg class="chart" role="img" aria-label="{escape(self._label())}" '
            f'viewBox="0 0 {width} {height}" width="{width}" height="{height}">',
            f"<title>{escape(self._label())}</title>",
            f'<text class="unit" x="{left - 40}" y="12">{escape(self.axis_unit)}</text>',
        ]
        for tick in (0.0, top / 2, top):
            ty = y(tick)
            parts.append(
                f'<line class="grid" x1="{left}" y1="{ty:.1f}" x2="{width - right}" '
                f'y2="{ty:.1f}"/><text class="tick" x="{left - 4}" y="{ty + 4:.1f}" '
                f'text-anchor="end">{_num(tick)}</text>'
            )
        if self.bars:
            for i, value in enumerate(self.values):
                if value > 0:
                    x, h = left + i * step, plot_h * value / top
                    parts.append(
                        f'<rect class="bar" x="{x + step * 0.1:.1f}" y="{y(value):.1f}" '
                        f'width="{max(step * 0.8, 0.8):.1f}" height="{h:.1f}"/>'
                    )
        else:
            coords = " ".join(
                f"{left + (i + 0.5) * step:.1f},{y(v):.1f}" for i, v in enumerate(self.values)
            )
            parts.append(f'<polyline class="line" points="{coords}"/>')
        base = top_pad + plot_h
        parts.append(
            f'<line class="axis" x1="{left}" y1="{base}" x2="{width - right}" y2="{base}"/>'
            f'<line class="axis" x1="{left}" y1="{top_pad}" x2="{left}" y2="{base}"/>'
        )
        for at, text in _time_ticks(self.range, self.start, n):
            x = left + (at - self.start) / self.range.width * step
            parts.append(
                f'<line class="axis" x1="{x:.1f}" y1="{base}" x2="{x:.1f}" y2="{base + 4}"/>'
                f'<text class="tick" x="{x:.1f}" y="{base + 16}" text-anchor="middle">'
                f"{escape(text)}</text>"
            )
        parts.append(
            f'<text class="tick" x="{width - right}" y="{height - 1}" text-anchor="end">UTC</text>'
        )
        parts.append("</svg>")
        return "".join(parts)

    def _label(self) -> str:
        return f"{self.name} ({self.axis_unit}), {self.range.label}: {self.summary()}"


def _num(value: float) -> str:
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


def _nice(value: float) -> float:
    """The axis' top: ``value`` rounded up to 1, 2 or 5 times a power of ten (at least 1),
    even, so the middle tick is a whole number too."""
    if value <= 1:
        return 2.0 if value > 0 else 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * power >= value:
            top = step * power
            return float(top if top % 2 == 0 or top < 2 else top + 1)
    return value  # pragma: no cover (ten times the power is always enough)


def _time_ticks(span: Range, start: float, n: int) -> list[tuple[float, str]]:
    """Where the time axis is labelled (on whole hours, days...) and with what."""
    every, fmt = {
        "1h": (600.0, "%H:%M"),
        "24h": (4 * 3600.0, "%H:%M"),
        "7d": (86400.0, "%a %d"),
    }[span.name]
    end = start + n * span.width
    first = math.ceil(start / every) * every
    ticks = []
    at = first
    while at <= end:
        ticks.append((at, time.strftime(fmt, time.gmtime(at))))
        at += every
    return ticks


def _tally(counts: Iterable[EventCount], n: int) -> dict[str, list[float]]:
    """Per kind, the count in each of ``n`` buckets (a bucket past the window is dropped:
    an event logged after now, from a clock a little ahead)."""
    found: dict[str, list[float]] = defaultdict(lambda: [0.0] * n)
    for c in counts:
        if 0 <= c.bucket < n:
            found[c.kind][c.bucket] += c.total
    return found


def _sum(tally: Mapping[str, list[float]], kinds: Iterable[str], n: int) -> tuple[float, ...]:
    return tuple(sum(tally[k][i] for k in kinds if k in tally) for i in range(n))


def fleet_charts(
    fleet: Fleet, span: Range, pending_now: int, now: float, cache: CountCache | None = None
) -> list[Chart]:
    """The health page's four charts over ``span`` (``cache``: an app's ``CountCache``)."""
    start, n = span.start(now), span.buckets
    cache = cache or CountCache()
    counts = cache.counts(
        ("fleet", span.width), lambda at: fleet.event_counts(at, span.width), span, now
    )
    tally = _tally(counts, n)
    change = [0] * n
    for c in counts:
        if 0 <= c.bucket < n:
            change[c.bucket] += c.total * pending_delta(c.kind, c.detail)
    depth = [0.0] * n
    pending = pending_now
    for i in range(n - 1, -1, -1):
        depth[i] = float(max(0, pending))
        pending -= change[i]
    claims = [0.0] * n
    for c in counts:
        if 0 <= c.bucket < n and (
            c.kind == EventKind.CLAIMED or (c.kind == EventKind.STOLEN and c.detail != "rebalance")
        ):
            claims[c.bucket] += c.total
    return [
        Chart(
            "Queue depth",
            "tasks pending",
            "Tasks pending at the end of each interval, ready or waiting.",
            span,
            start,
            tuple(depth),
            bars=False,
        ),
        Chart("Done", "tasks", "Tasks completed.", span, start, _sum(tally, ["completed"], n)),
        Chart(
            "Failed",
            "tasks",
            "Failures reported, leases run out, and tasks dead.",
            span,
            start,
            _sum(tally, _FAILURES, n),
        ),
        Chart(
            "Claimed", "tasks", "Tasks claimed, stolen ones included.", span, start, tuple(claims)
        ),
    ]


def agent_charts(
    fleet: Fleet, agent: str, span: Range, now: float, cache: CountCache | None = None
) -> list[Chart]:
    """An agent's page's four charts over ``span`` (``cache``: an app's ``CountCache``)."""
    start, n, width = span.start(now), span.buckets, span.width
    cache = cache or CountCache()

    def own(at: float) -> list[EventCount]:
        return fleet.event_counts(at, width, agent=agent)

    def taken(at: float) -> list[EventCount]:
        return [EventCount(b, "stolen", "out", k) for b, k in fleet.steals_from(at, width, agent)]

    tally = _tally(cache.counts(("agent", agent, width), own, span, now), n)
    out = list(_tally(cache.counts(("out", agent, width), taken, span, now), n)["stolen"])
    return [
        Chart("Done", "tasks", "Tasks it completed.", span, start, _sum(tally, ["completed"], n)),
        Chart(
            "Failed",
            "tasks",
            "Failures it reported, its leases that ran out, and tasks that died with it.",
            span,
            start,
            _sum(tally, _FAILURES, n),
        ),
        Chart(
            "Steals in",
            "tasks",
            "Tasks it took from another agent's queue (or a rebalance gave it).",
            span,
            start,
            _sum(tally, ["stolen"], n),
        ),
        Chart(
            "Steals out",
            "tasks",
            "Tasks taken from its queue by other agents (or a rebalance).",
            span,
            start,
            tuple(out),
        ),
    ]
