"""``GET /metrics``: the fleet in Prometheus's text format, for dashboards and alerts.

Two kinds of figure, from two sources (every name, type and label: docs/metrics.md):

* **Gauges** -- how the fleet is *now* -- are read at scrape time from one ``Fleet.status()``
  snapshot, the call built to be cheap at any size: tasks by state, agents by status, queue
  depths, the pool, capacity, stalled tasks, the last assessment's advice.
* **Counters and histograms** -- what the fleet *did* -- come from the event log, which
  every state change writes (invariant I5). The collector keeps a cursor in the log: each
  scrape reads the events after it (at most ``EVENTS_PER_SCRAPE``, the rest waits for the
  next scrape, so a scrape's cost has a ceiling after a burst) and adds them up. The cursor
  starts at the log's end when the app is made, so the counters count since the server
  started, as Prometheus counters do: a restart resets them and ``rate()`` takes that in
  its stride. The store hands out only settled events (none still being committed), so a
  cursor that moves past an id never skips one.

Cardinality is bounded whatever the fleet's size: every label takes a closed set of words
(the ``vocabulary`` enums), except ``agent`` on the queue depth, which names at most
``TOP_QUEUES`` agents (the deepest queues) and sums the rest under ``agent="other"``, and
``domain`` on the pending tasks, at most ``TOP_DOMAINS`` likewise.

Each app has its own ``CollectorRegistry`` (``Metrics``), never the process's global one:
several apps live in one test process, and the fleet's figures are the app's, not the
process's. The route needs role viewer, like every read; Prometheus sends a viewer token
with ``Authorization: Bearer`` (``authorization: credentials_file:`` in its scrape job).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from shoal import __version__
from shoal.access import Role
from shoal.errors import BadInput
from shoal.faces.web.guard import Principal, need
from shoal.fleet import Fleet
from shoal.model import Event, FleetStatus
from shoal.times import parse_moment
from shoal.vocabulary import AgentStatus, ClaimSource, EventKind, Recommendation, TaskState

__all__ = [
    "EVENTS_PER_SCRAPE",
    "TOP_DOMAINS",
    "TOP_GROUPS",
    "TOP_QUEUES",
    "Metrics",
    "router",
]

#: The most events one scrape adds up; a backlog is read over the following scrapes.
EVENTS_PER_SCRAPE = 10_000
#: Agents named by ``shoal_queue_depth``: the deepest queues; the rest are one "other" line.
TOP_QUEUES = 100
#: Domains named by ``shoal_pending_tasks``: those with the most; the rest are one "other".
TOP_DOMAINS = 50
#: Concurrency groups named by ``shoal_group_held`` and ``shoal_group_max`` (by name).
TOP_GROUPS = 100
#: Tasks whose ready moment the collector remembers, to time their claim; past this (a
#: backlog of millions of pending tasks) the oldest are forgotten and their claims untimed.
MAX_TRACKED = 1_000_000
#: Buckets of the wait histograms, in seconds: agents' tasks take seconds to hours.
WAIT_BUCKETS = (0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 86400.0)

router = APIRouter(tags=["metrics"])

Viewer = Annotated[Principal, Depends(need(Role.VIEWER))]


class _Tally:
    """What the event log says the fleet did since the cursor started; fed in log order.

    The counters and histograms are prometheus_client's own, made with no registry: the
    collector yields them itself, after it has read the new events.
    """

    def __init__(self) -> None:
        def counter(name: str, doc: str, labels: Iterable[str] = ()) -> Counter:
            return Counter(name, doc, list(labels), registry=None)

        self.posted = counter("shoal_tasks_posted", "Tasks posted.")
        self.claimed = counter(
            "shoal_tasks_claimed", "Claims, by where the claim found the task.", ["source"]
        )
        self.stolen = counter(
            "shoal_tasks_stolen",
            "Tasks taken from another agent's queue: by a claim, or moved by rebalance.",
            ["by"],
        )
        self.completed = counter("shoal_tasks_completed", "Tasks completed.")
        self.failed = counter(
            "shoal_tasks_failed",
            "Failures reported by agents; outcome retry (pending again) or dead.",
            ["outcome"],
        )
        self.expired = counter(
            "shoal_leases_expired",
            "Leases that ran out (the agent died or hung); outcome retry or dead.",
            ["outcome"],
        )
        self.dead = counter(
            "shoal_tasks_dead", "Tasks that went dead (out of attempts), by cause.", ["cause"]
        )
        self.retried = counter(
            "shoal_tasks_retried",
            "Tasks brought back by hand (retry of a dead or cancelled task, or of a wait).",
        )
        self.released = counter("shoal_tasks_released", "Tasks given back untouched.")
        self.cancelled = counter("shoal_tasks_cancelled", "Tasks cancelled.")
        self.returned = counter(
            "shoal_tasks_returned", "Queued tasks sent back to the pool as their agent went away."
        )
        self.offline = counter(
            "shoal_agents_offline", "Agents marked offline after missing heartbeats."
        )
        self.events = counter("shoal_events_read", "Events of the log the collector has read.")
        self.claim_wait = Histogram(
            "shoal_claim_wait_seconds",
            "From the moment a task became ready to its claim (tasks that became ready "
            "while the server ran).",
            buckets=WAIT_BUCKETS,
            registry=None,
        )
        self.idle_wait = Histogram(
            "shoal_idle_to_claim_seconds",
            "From the moment an agent went idle (found no work, or registered) to its next claim.",
            buckets=WAIT_BUCKETS,
            registry=None,
        )
        for source in ClaimSource:
            self.claimed.labels(source=source.value)
        for by in ("claim", "rebalance"):
            self.stolen.labels(by=by)
        for outcome in ("retry", "dead"):
            self.failed.labels(outcome=outcome)
            self.expired.labels(outcome=outcome)
        for cause in (EventKind.FAILED, EventKind.EXPIRED):
            self.dead.labels(cause=cause.value)
        self.ready: dict[int, float] = {}  # pending task -> when it became ready
        self.idle: dict[str, float] = {}  # idle agent -> when it went idle

    def metrics(self) -> Iterator[Metric]:
        for made in (
            self.posted,
            self.claimed,
            self.stolen,
            self.completed,
            self.failed,
            self.expired,
            self.dead,
            self.retried,
            self.released,
            self.cancelled,
            self.returned,
            self.offline,
            self.events,
            self.claim_wait,
            self.idle_wait,
        ):
            yield from made.collect()

    def _became_ready(self, task: int | None, at: float) -> None:
        if task is None:
            return
        self.ready.pop(task, None)  # re-insert at the end: the dict is oldest first
        self.ready[task] = at
        if len(self.ready) > MAX_TRACKED:
            del self.ready[next(iter(self.ready))]

    def _claimed(self, event: Event) -> None:
        ready = self.ready.pop(event.task_id, None) if event.task_id is not None else None
        if ready is not None:
            self.claim_wait.observe(max(0.0, event.at - ready))
        idle = self.idle.pop(event.agent, None) if event.agent is not None else None
        if idle is not None:
            self.idle_wait.observe(max(0.0, event.at - idle))

    def take(self, event: Event) -> None:
        """Count one event (the kinds and their data: ``_transitions``, ``_claiming``)."""
        kind, data, task = event.kind, event.data, event.task_id
        self.events.inc()
        if kind == EventKind.POSTED:
            self.posted.inc()
            if data.get("state") == TaskState.PENDING:
                self._became_ready(task, max(event.at, _moment(data.get("not_before"), 0.0)))
        elif kind == EventKind.CLAIMED:
            self.claimed.labels(source=_source(data)).inc()
            self._claimed(event)
        elif kind == EventKind.STOLEN:
            if data.get("source") == ClaimSource.STEAL:  # a claim's steal
                self.claimed.labels(source=ClaimSource.STEAL.value).inc()
                self.stolen.labels(by="claim").inc()
                self._claimed(event)
            else:  # rebalance moved it, still pending (and as ready as before)
                self.stolen.labels(by="rebalance").inc()
        elif kind == EventKind.COMPLETED:
            self.completed.inc()
        elif kind in (EventKind.FAILED, EventKind.EXPIRED):
            (self.failed if kind == EventKind.FAILED else self.expired).labels("retry").inc()
            self._became_ready(task, _moment(data.get("ready_at"), event.at))
        elif kind == EventKind.DEAD:
            cause = data.get("cause")
            if cause == EventKind.FAILED:
                self.failed.labels(outcome="dead").inc()
            elif cause == EventKind.EXPIRED:
                self.expired.labels(outcome="dead").inc()
            if cause in (EventKind.FAILED, EventKind.EXPIRED):
                self.dead.labels(cause=str(cause)).inc()
        elif kind in (EventKind.RELEASED, EventKind.READY):
            if kind == EventKind.RELEASED:
                self.released.inc()
            self._became_ready(task, event.at)
        elif kind == EventKind.DEFERRED:
            if not data.get("waiting_on"):
                self._became_ready(task, event.at)
        elif kind == EventKind.RETRIED:
            self.retried.inc()
            if data.get("state", data.get("was")) == TaskState.PENDING:
                self._became_ready(task, event.at)
        elif kind == EventKind.CANCELLED:
            self.cancelled.inc()
            self.ready.pop(task or 0, None)
        elif kind == EventKind.RETURNED:
            self.returned.inc()
        elif kind in (EventKind.AGENT_IDLE, EventKind.AGENT_REGISTERED) and event.agent:
            # found no work; or (re)registered anew, which starts an agent idle
            self.idle[event.agent] = event.at
        elif kind == EventKind.AGENT_STATUS and data.get("to") != AgentStatus.IDLE:
            self.idle.pop(event.agent or "", None)
        elif kind in (EventKind.AGENT_OFFLINE, EventKind.AGENT_TERMINATED, EventKind.AGENT_PAUSED):
            if kind == EventKind.AGENT_OFFLINE:
                self.offline.inc()
            self.idle.pop(event.agent or "", None)


def _source(data: Mapping[str, object]) -> str:
    source = data.get("source")
    return str(source) if source in set(ClaimSource) else ClaimSource.POOL.value


def _moment(value: object, default: float) -> float:
    """An event's ISO time as epoch seconds (``default`` when absent or unreadable)."""
    if value is None:
        return default
    try:
        return parse_moment(value)
    except BadInput:
        return default


class FleetCollector:
    """A prometheus_client custom collector: one fleet's figures, read at each scrape."""

    def __init__(self, fleet: Fleet, *, batch: int = EVENTS_PER_SCRAPE) -> None:
        self.fleet = fleet
        self.batch = batch
        self.tally = _Tally()
        self.lock = threading.Lock()  # scrapes run on the thread pool; one reads at a time
        newest = fleet.events(limit=1, newest=True)
        self.cursor = newest[-1].id if newest else 0

    def follow(self) -> int:
        """Add up the events logged since the last scrape (at most ``batch``)."""
        with self.lock:
            events = self.fleet.events(since=self.cursor, limit=self.batch)
            for event in events:
                self.tally.take(event)
            if events:
                self.cursor = events[-1].id
            return len(events)

    def collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        status = self.fleet.status()
        by_domain = self.fleet.pending_by_domain()
        self.follow()
        yield from _gauges(status)
        yield _domains(by_domain)
        yield from self.tally.metrics()
        info = GaugeMetricFamily(
            "shoal_build_info", "The shoal serving: always 1.", labels=["version"]
        )
        info.add_metric([__version__], 1)
        yield info
        took = GaugeMetricFamily(
            "shoal_scrape_duration_seconds",
            "How long this scrape took to read the fleet (status and new events).",
            value=time.perf_counter() - started,
        )
        yield took


def _gauges(status: FleetStatus) -> Iterator[Metric]:
    """The figures of one status snapshot."""
    tasks = GaugeMetricFamily("shoal_tasks", "Tasks by state.", labels=["state"])
    for state in TaskState:
        tasks.add_metric([state.value], status.counts.get(state.value, 0))
    yield tasks
    yield GaugeMetricFamily(
        "shoal_tasks_waiting",
        "Pending tasks not ready yet (a retry backoff or a not_before still runs).",
        value=status.waiting,
    )
    yield GaugeMetricFamily(
        "shoal_tasks_stalled",
        "Claimed tasks running well past their expected duration.",
        value=len(status.stalled),
    )
    yield GaugeMetricFamily(
        "shoal_tasks_stuck",
        "Blocked tasks waiting on a dead or cancelled one (counted up to 1000).",
        value=len(status.stuck),
    )
    yield GaugeMetricFamily("shoal_pool_depth", "Pending tasks in the pool.", value=status.pool)
    agents = GaugeMetricFamily("shoal_agents", "Agents by status.", labels=["status"])
    by_status = dict.fromkeys(AgentStatus, 0)
    busy = 0
    for load in status.agents:
        by_status[load.agent.status] += 1
        busy += len(load.held)
    for agent_status, count in by_status.items():
        agents.add_metric([agent_status.value], count)
    yield agents
    yield GaugeMetricFamily(
        "shoal_agents_live",
        "Agents holding a seat under max_agents (neither offline nor terminated, not managers).",
        value=status.live,
    )
    yield GaugeMetricFamily(
        "shoal_agents_max", "The fleet's max_agents setting.", value=status.max_agents
    )
    yield GaugeMetricFamily(
        "shoal_leases", "Leases held and running (claimed tasks by agents).", value=busy
    )
    yield GaugeMetricFamily(
        "shoal_tasks_lease_expired",
        "Claimed tasks whose lease ran out: not running; the next claim takes them back.",
        value=len(status.expired),
    )
    yield _queue_depths(status)
    yield from _groups(status)
    advice = GaugeMetricFamily(
        "shoal_assessment_recommendation",
        "The last assessment's advice: 1 on the one it gave, 0 on the others "
        "(all 0 before any assessment).",
        labels=["recommendation"],
    )
    given = status.assessment.recommendation if status.assessment else None
    for word in Recommendation:
        advice.add_metric([word.value], 1 if word is given else 0)
    yield advice
    yield GaugeMetricFamily(
        "shoal_assessment_timestamp_seconds",
        "When the last assessment was made (epoch seconds; 0 before any).",
        value=status.assessment.at if status.assessment else 0,
    )


def _groups(status: FleetStatus) -> Iterator[Metric]:
    """Each concurrency group with a limit: its tasks held now and its limit. Only groups
    with a limit are named -- a manager sets those, and a task's group is any text an agent
    posts -- and at most ``TOP_GROUPS`` of them, by name."""
    limited = [g for g in status.groups if g.max is not None][:TOP_GROUPS]
    held = GaugeMetricFamily(
        "shoal_group_held", "Tasks of a concurrency group held now.", labels=["group"]
    )
    most = GaugeMetricFamily(
        "shoal_group_max", "A concurrency group's limit on tasks held at once.", labels=["group"]
    )
    for group in limited:
        held.add_metric([group.name], group.held)
        most.add_metric([group.name], group.max or 0)
    yield held
    yield most


def _domains(counts: Mapping[str | None, int]) -> GaugeMetricFamily:
    """Pending tasks per domain: the ``TOP_DOMAINS`` largest by name, the rest summed under
    domain="other"; tasks of no domain under domain="" (a domain is never empty)."""
    family = GaugeMetricFamily(
        "shoal_pending_tasks",
        f"Pending tasks by domain: the {TOP_DOMAINS} domains with the most by name, the rest "
        'summed under domain="other", tasks of no domain under domain="".',
        labels=["domain"],
    )
    ranked = sorted(((n, d or "") for d, n in counts.items() if n), key=lambda p: (-p[0], p[1]))
    for n, domain in ranked[:TOP_DOMAINS]:
        family.add_metric([domain], n)
    if len(ranked) > TOP_DOMAINS:
        family.add_metric(["other"], sum(n for n, _ in ranked[TOP_DOMAINS:]))
    return family


def _queue_depths(status: FleetStatus) -> GaugeMetricFamily:
    """Pending tasks per agent queue: the ``TOP_QUEUES`` deepest by name, the rest summed."""
    family = GaugeMetricFamily(
        "shoal_queue_depth",
        f"Pending tasks in an agent's queue: the {TOP_QUEUES} deepest queues by agent, "
        'the rest summed under agent="other".',
        labels=["agent"],
    )
    queued = sorted(
        ((a.agent.queued, a.agent.id) for a in status.agents if a.agent.queued),
        key=lambda pair: (-pair[0], pair[1]),
    )
    for depth, agent in queued[:TOP_QUEUES]:
        family.add_metric([agent], depth)
    if len(queued) > TOP_QUEUES:
        family.add_metric(["other"], sum(depth for depth, _ in queued[TOP_QUEUES:]))
    return family


class Metrics:
    """One app's metrics: its own registry holding the fleet's collector."""

    def __init__(self, fleet: Fleet, *, batch: int = EVENTS_PER_SCRAPE) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = FleetCollector(fleet, batch=batch)
        self.registry.register(self.collector)

    def render(self, accept: str = "") -> tuple[bytes, str]:
        """The figures, and their media type: the classic text format (0.0.4), or OpenMetrics
        when the ``Accept`` header asks for it (as Prometheus does)."""
        encode, media_type = choose_encoder(accept)
        return encode(self.registry), media_type


@router.get(
    "/metrics",
    response_class=Response,
    summary="The fleet's figures in Prometheus's text format (docs/metrics.md).",
)
def metrics(request: Request, _: Viewer) -> Response:
    made: Metrics = request.app.state.metrics
    body, media_type = made.render(request.headers.get("accept", ""))
    return Response(body, media_type=media_type)
