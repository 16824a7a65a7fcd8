"""The fleet's data: tasks, agents, leases, claims, events, as frozen values.

Everything here is a frozen value. A ``Task`` or ``Agent`` is a snapshot taken inside a
store transaction; changing one means asking ``Fleet`` for a transition, never mutating a
record. The closed sets of names these values use (states, statuses, event kinds, claim
sources...) are in ``vocabulary``; the checks of user input are in ``validation``.

The values the hub's jobs return -- ``Move``, ``ReapReport``, ``PruneReport`` and
``Assessment`` -- are defined in ``_reports``, and a recurring task's ``Schedule`` in
``_recurring``; they are exported here with the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from shoal._recurring import Schedule
from shoal._reports import Assessment, Move, PruneReport, ReapReport
from shoal._values import field, value
from shoal.times import iso_time
from shoal.vocabulary import AgentStatus, ClaimReason, ClaimSource, ScheduleState, TaskState

__all__ = [
    "Agent",
    "AgentLoad",
    "AgentStatus",
    "Assessment",
    "BatchCompletion",
    "Candidate",
    "Claim",
    "Completion",
    "Event",
    "EventCount",
    "FleetStatus",
    "Grant",
    "Group",
    "Lease",
    "Move",
    "NewTask",
    "Probe",
    "PruneReport",
    "QueueDepth",
    "ReapReport",
    "Registration",
    "Schedule",
    "ScheduleState",
    "Task",
    "TaskDetail",
    "TaskState",
    "count_detail",
]


@value
class Task:
    """A unit of work, as the fleet saw it at one moment.

    ``agent`` is the agent whose queue holds the task while it is pending or blocked (None:
    the pool), the holder while it is claimed, and the last holder once it is finished.
    """

    id: int
    title: str
    state: TaskState
    priority: int
    body: str = ""
    payload: Any = None
    skills: tuple[str, ...] = ()
    domain: str | None = None
    agent: str | None = None
    pinned: bool = False
    stolen: bool = False
    parent: int | None = None
    key: str | None = None
    attempts: int = 0
    max_attempts: int | None = None
    lease_ttl: float | None = None
    expected_duration: float | None = None
    lease_expires: float | None = None
    result: Any = None
    error: str | None = None
    waiting_on: int = 0
    created_at: float = 0.0
    updated_at: float = 0.0
    claimed_at: float | None = None
    finished_at: float | None = None
    stalled_at: float | None = None
    #: When it became (or, if later than now, becomes) ready to run: posted pending (or at
    #: its ``not_before``), freed by its dependencies, or back to pending after a release,
    #: an expiry, or a failure's retry backoff. None while it is blocked. A pending task is
    #: claimable once this moment has come.
    ready_at: float | None = None
    #: Its own first retry backoff (None: the fleet's ``retry_delay``).
    retry_delay: float | None = None
    #: Its concurrency group (None: none): a group's limit, if it has one, caps how many of
    #: its tasks are held at once fleet-wide (``Fleet.set_group``).
    group: str | None = None
    #: Free names people sort and find work by (``shoal list --label``): never routing.
    labels: tuple[str, ...] = ()
    #: The agent that posted it through an agent's face (an MCP session acting as that
    #: agent, an agent's API token); None for a person's post. That agent may edit it.
    posted_by: str | None = None
    #: None for a task read whole. A listing (``Fleet.tasks``, ``Fleet.ready``, the tasks
    #: ``status`` shows held) reads neither a task's payload nor its result, however large:
    #: both are None in its value, and this names the ones the task holds (``"payload"``,
    #: ``"result"``). ``Fleet.get`` and ``Fleet.show`` read them.
    left_out: tuple[str, ...] | None = None

    @property
    def listed(self) -> bool:
        """Read by a listing: ``payload`` and ``result`` were not read."""
        return self.left_out is not None

    @property
    def has_payload(self) -> bool:
        if self.left_out is not None:
            return "payload" in self.left_out
        return self.payload is not None

    @property
    def has_result(self) -> bool:
        if self.left_out is not None:
            return "result" in self.left_out
        return self.result is not None

    @property
    def in_pool(self) -> bool:
        return self.state is TaskState.PENDING and self.agent is None

    def waiting(self, now: float) -> bool:
        """Pending but not claimable yet: a retry backoff or a ``not_before`` still runs."""
        return self.state is TaskState.PENDING and (self.ready_at or 0.0) > now

    def to_dict(self) -> dict[str, Any]:
        """As JSON. A listed task has no ``payload`` or ``result`` key (they were not
        read); every task says ``has_payload`` and ``has_result``."""
        data: dict[str, Any] = {
            "id": self.id,
            "title": self.title,
            "state": self.state.value,
            "priority": self.priority,
            "body": self.body,
            "payload": self.payload,
            "has_payload": self.has_payload,
            "skills": list(self.skills),
            "domain": self.domain,
            "agent": self.agent,
            "pinned": self.pinned,
            "stolen": self.stolen,
            "parent": self.parent,
            "key": self.key,
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "lease_ttl": self.lease_ttl,
            "expected_duration": self.expected_duration,
            "lease_expires": iso_time(self.lease_expires),
            "result": self.result,
            "has_result": self.has_result,
            "error": self.error,
            "waiting_on": self.waiting_on,
            "created_at": iso_time(self.created_at),
            "updated_at": iso_time(self.updated_at),
            "claimed_at": iso_time(self.claimed_at),
            "finished_at": iso_time(self.finished_at),
            "ready_at": iso_time(self.ready_at),
            "retry_delay": self.retry_delay,
            "labels": list(self.labels),
            "posted_by": self.posted_by,
            "stalled": self.stalled_at is not None,
            "group": self.group,
        }
        if self.left_out is not None:
            del data["payload"], data["result"]
        return data


class Candidate(NamedTuple):
    """A pending task as the claim cascade weighs it: only what ranking, leasing and
    stealing need, so a claim does not build whole tasks it may not take."""

    id: int
    title: str
    priority: int
    domain: str | None
    agent: str | None  # the queue it is in (None: the pool)
    pinned: bool
    created_at: float
    lease_ttl: float | None
    attempts: int
    skillset: int  # the id of the skill set it requires
    expected_duration: float | None
    ready_at: float | None
    group: str | None = None  # its concurrency group


class QueueDepth(NamedTuple):
    """An agent with pending tasks in its queue: a possible victim of a steal."""

    agent: str
    depth: int  # pending tasks in its queue
    status: AgentStatus


@value
class NewTask:
    """A task as ``Fleet.post`` decided to insert it (what a store's insert_task takes)."""

    title: str
    body: str
    payload: Any
    priority: int
    skills: tuple[str, ...]
    domain: str | None
    state: TaskState
    agent: str | None
    pinned: bool
    parent: int | None
    key: str | None
    max_attempts: int | None
    lease_ttl: float | None
    expected_duration: float | None
    waiting_on: int
    created_at: float
    pool_key: float
    seq: int
    after: tuple[int, ...] = ()  # added with add_deps, not by insert_task
    #: When it is ready: created_at (or its not_before, if later) if it is posted pending.
    #: Blocked, it keeps only a not_before (else None): freed earlier, it waits for that.
    ready_at: float | None = None
    retry_delay: float | None = None
    group: str | None = None
    labels: tuple[str, ...] = ()
    posted_by: str | None = None


@value
class TaskDetail:
    """A task with its dependencies, dependents and history (``shoal show``)."""

    task: Task
    after: tuple[int, ...]
    dependents: tuple[int, ...]
    events: tuple[Event, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.task.to_dict(),
            "after": list(self.after),
            "dependents": list(self.dependents),
            "events": [e.to_dict() for e in self.events],
        }


@value
class Agent:
    """A registered worker and what the fleet knows of it."""

    id: str
    role: str = "worker"
    skills: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    max_concurrent: int = 1
    manager: bool = False
    ephemeral: bool = False
    status: AgentStatus = AgentStatus.IDLE
    idle_since: float | None = None
    last_seen: float = 0.0
    registered_at: float = 0.0
    incarnation: int = 1
    queued: int = 0  # pending tasks in its queue
    failures: int = 0  # tasks failed in a row since its last completion (the breaker's count)
    paused_until: float | None = None  # the breaker's pause ends then (None: not paused)

    def paused(self, now: float) -> bool:
        """It is held -- by the circuit breaker, or a person's pause -- and may claim nothing
        until ``paused_until`` (or a resume)."""
        return self.paused_until is not None and now < self.paused_until

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "role": self.role,
            "skills": list(self.skills),
            "domains": list(self.domains),
            "max_concurrent": self.max_concurrent,
            "manager": self.manager,
            "ephemeral": self.ephemeral,
            "status": self.status.value,
            "idle_since": iso_time(self.idle_since),
            "last_seen": iso_time(self.last_seen),
            "registered_at": iso_time(self.registered_at),
            "incarnation": self.incarnation,
            "queued": self.queued,
            "failures": self.failures,
            "paused_until": iso_time(self.paused_until),
        }


@value
class Lease:
    """The right to work on one task until ``expires``. Only ``token`` may change the task."""

    task_id: int
    agent: str
    token: str
    expires: float

    def to_dict(self, now: float | None = None) -> dict[str, Any]:
        """As JSON; with ``now``, also how many seconds it has left (``expires_in_s``)."""
        data: dict[str, Any] = {
            "task_id": self.task_id,
            "agent": self.agent,
            "token": self.token,
            "expires": iso_time(self.expires),
        }
        if now is not None:
            data["expires_in_s"] = round(self.expires - now, 3)
        return data


@value
class Grant:
    """One task a claim handed out: the task, the lease on it, the step of the claim cascade
    that found it (``source``), and whose queue it was in (``origin``: None for the pool;
    the victim, for a steal)."""

    task: Task
    lease: Lease
    source: ClaimSource
    origin: str | None = None

    def to_dict(self, now: float | None = None) -> dict[str, Any]:
        return {
            "task": self.task.to_dict(),
            "lease": self.lease.to_dict(now),
            "source": self.source,
        }


@value
class Claim:
    """What ``Fleet.claim`` handed out: a grant per task, or why there were none.

    ``reason`` is None when something was claimed, else a ``ClaimReason``: ``busy`` when the
    agent is at its max_concurrent, ``paused`` when the circuit breaker holds it, ``empty``
    when nothing it can do is waiting. ``retry_at`` is set when the claim passed over work
    it may take later (another domain's task, left to that domain's agents for
    ``domain_wait`` or ``locality_wait``; a task waiting out its retry backoff or its
    ``not_before``), or when a pause ends: the moment to ask again.
    """

    grants: tuple[Grant, ...] = ()
    reason: ClaimReason | None = None
    retry_at: float | None = None

    def __bool__(self) -> bool:
        return bool(self.grants)

    @property
    def leases(self) -> tuple[Lease, ...]:
        return tuple(g.lease for g in self.grants)

    @property
    def tasks(self) -> tuple[Task, ...]:
        return tuple(g.task for g in self.grants)

    @property
    def sources(self) -> tuple[ClaimSource, ...]:
        return tuple(g.source for g in self.grants)

    def to_dict(self, now: float | None = None) -> dict[str, Any]:
        """As JSON; with ``now``, each lease says how long it has left."""
        return {
            "claimed": [g.to_dict(now) for g in self.grants],
            "reason": self.reason,
            "retry_at": iso_time(self.retry_at),
        }


@value
class Completion:
    """The outcome of ``Fleet.complete``: the finished task, and the next claim if asked."""

    task: Task
    already_done: bool = False
    released: tuple[int, ...] = ()  # dependents that became pending
    next: Claim | None = None

    def to_dict(self, now: float | None = None) -> dict[str, Any]:
        return {
            "task": self.task.to_dict(),
            "already_done": self.already_done,
            "released": list(self.released),
            "next": None if self.next is None else self.next.to_dict(now),
        }


@value
class BatchCompletion:
    """The outcome of ``Fleet.complete_many``: each lease done, already done, or lost."""

    completed: tuple[int, ...] = ()
    already_done: tuple[int, ...] = ()
    lost: tuple[tuple[int, str], ...] = ()  # (task id, why)
    released: tuple[int, ...] = ()
    next: Claim | None = None

    def to_dict(self, now: float | None = None) -> dict[str, Any]:
        return {
            "completed": list(self.completed),
            "already_done": list(self.already_done),
            "lost": [{"task_id": t, "reason": why} for t, why in self.lost],
            "released": list(self.released),
            "next": None if self.next is None else self.next.to_dict(now),
        }


@value
class Probe:
    """What ``Fleet.probe`` found: the store took a write at ``at`` (this process's clock),
    and its server's own clock then read ``server_time`` (None: the store has no server)."""

    at: float
    server_time: float | None = None

    @property
    def skew(self) -> float | None:
        """Seconds the server's clock is ahead of this one (negative: behind)."""
        return None if self.server_time is None else self.server_time - self.at


@value
class Registration:
    """The outcome of ``Fleet.register``."""

    agent: Agent
    created: bool
    live: int  # live non-manager agents after this registration
    max_agents: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent.to_dict(),
            "created": self.created,
            "live": self.live,
            "max_agents": self.max_agents,
        }


@value
class Event:
    """One entry of the append-only log. Every state change writes exactly one."""

    id: int
    at: float
    kind: str
    task_id: int | None = None
    agent: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": iso_time(self.at),
            "kind": self.kind,
            "task_id": self.task_id,
            "agent": self.agent,
            "data": dict(self.data),
        }


class EventCount(NamedTuple):
    """Events of one kind (and ``detail``, ``count_detail``) in one bucket of time: what
    the dashboard's charts are drawn from, counted by the store so a week of a big
    fleet's log never travels to Python row by row (``Fleet.event_counts``)."""

    bucket: int  # 0: the bucket that starts at the window's start
    kind: str
    detail: str
    total: int  # events counted


def count_detail(kind: str, data: Mapping[str, Any]) -> str:
    """The one fact of an event's data that its count is split by: enough to tell how the
    event changed the number of pending tasks, or (``dead``) why a task died. The SQL
    stores compute the same in their ``event_counts`` statement."""
    if kind == "posted":
        return str(data.get("state") or "")
    if kind == "stolen":
        return str(data.get("by") or "")
    if kind == "deferred":
        return "waiting" if data.get("waiting_on") else ""
    if kind == "cancelled":
        return str(data.get("was") or "")
    if kind == "retried":
        return "" if data.get("was") == "pending" else str(data.get("state") or "")
    if kind == "dead":
        return str(data.get("cause") or "")
    return ""


@value
class AgentLoad:
    """One agent's line in the status snapshot."""

    agent: Agent
    held: tuple[Task, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.agent.to_dict(),
            "load": len(self.held),
            "current_tasks": [{"id": t.id, "title": t.title} for t in self.held],
        }


@value
class Group:
    """A concurrency group as it stands: its limit (``max``; None: it has none) and how many
    of its tasks are held (claimed) right now, fleet-wide."""

    name: str
    max: int | None
    held: int

    @property
    def full(self) -> bool:
        return self.max is not None and self.held >= self.max

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "max": self.max, "held": self.held, "full": self.full}


@value
class FleetStatus:
    """A snapshot of the fleet: who is doing what, what is waiting, and the last assessment."""

    at: float
    agents: tuple[AgentLoad, ...]
    counts: Mapping[str, int]
    pool: int
    live: int
    max_agents: int
    stalled: tuple[Task, ...]
    assessment: Assessment | None
    stuck: tuple[int, ...] = ()  # blocked on dead or cancelled tasks
    waiting: int = 0  # pending tasks not ready yet (a retry backoff or a not_before)
    next_ready: float | None = None  # when the first of them is ready
    #: Claimed tasks whose lease ran out: not running (nor counted in ``counts['claimed']``
    #: or any agent's load); the next claim anywhere takes them back.
    expired: tuple[Task, ...] = ()
    #: Concurrency groups with a limit or a task held (``Fleet.groups``).
    groups: tuple[Group, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "at": iso_time(self.at),
            "agents": [a.to_dict() for a in self.agents],
            "counts": dict(self.counts),
            "pool": self.pool,
            "queues": {a.agent.id: a.agent.queued for a in self.agents if a.agent.queued},
            "capacity": {"live": self.live, "max_agents": self.max_agents},
            "stalled": [{"id": t.id, "title": t.title, "agent": t.agent} for t in self.stalled],
            "stuck": list(self.stuck),
            "expired": [
                {
                    "id": t.id,
                    "title": t.title,
                    "agent": t.agent,
                    "expired": iso_time(t.lease_expires),
                }
                for t in self.expired
            ],
            "waiting": self.waiting,
            "next_ready": iso_time(self.next_ready),
            "assessment": None if self.assessment is None else self.assessment.to_dict(),
            "groups": [g.to_dict() for g in self.groups],
        }
