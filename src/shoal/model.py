"""The fleet's data: tasks, agents, leases, events, and the checks every input goes through.

Everything here is a frozen value. A ``Task`` or ``Agent`` is a snapshot taken inside a
store transaction; changing one means asking ``Fleet`` for a transition, never mutating a
record. Validation of user input (priorities, ids, skill names, durations) lives here too,
so every face rejects the same things with the same words.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, NamedTuple

from shoal.errors import BadInput, InvalidPriority

__all__ = [
    "MAX_ID",
    "MAX_MOMENT",
    "PRIORITY_NAMES",
    "Agent",
    "AgentLoad",
    "AgentStatus",
    "Assessment",
    "BatchCompletion",
    "Candidate",
    "Claim",
    "Completion",
    "Event",
    "FleetStatus",
    "Lease",
    "Move",
    "NewTask",
    "Probe",
    "QueueDepth",
    "ReapReport",
    "Registration",
    "Task",
    "TaskDetail",
    "TaskState",
    "as_task_ids",
    "check_agent_id",
    "check_count",
    "check_json",
    "iso_time",
    "normalize_names",
    "parse_duration",
    "parse_moment",
    "parse_priority",
]


class TaskState(StrEnum):
    """Where a task is in its life. See ARCHITECTURE.md for the diagram.

    ``blocked`` waits on dependencies; ``pending`` is claimable (in the pool or a queue);
    ``claimed`` is held under a lease; ``done``, ``dead`` and ``cancelled`` are final until
    someone retries a dead or cancelled task.
    """

    BLOCKED = "blocked"
    PENDING = "pending"
    CLAIMED = "claimed"
    DONE = "done"
    DEAD = "dead"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (TaskState.DONE, TaskState.DEAD, TaskState.CANCELLED)


class AgentStatus(StrEnum):
    """What an agent is doing, as the fleet last saw it."""

    IDLE = "idle"  # found no work; idle_since says since when
    WORKING = "working"  # holds at least one lease
    WAITING = "waiting"  # between tasks: finished one, has not asked for the next yet
    OFFLINE = "offline"  # missed heartbeats; may come back
    #: Paused by the circuit breaker after failing ``failure_streak`` tasks in a row: it
    #: claims nothing until ``paused_until`` or until someone resumes it.
    OVERLOADED = "overloaded"
    TERMINATED = "terminated"  # gone for good; registering the id again starts anew

    @property
    def live(self) -> bool:
        """Counts against max_agents (everything but terminated, as in the anti-idle rules)."""
        return self is not AgentStatus.TERMINATED


#: Names accepted wherever a priority is asked for. 1 is the most urgent.
PRIORITY_NAMES: Mapping[str, int] = {"critical": 1, "high": 2, "medium": 5, "low": 8}

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,127}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+:/-]{0,63}$")
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)")
_DURATION_PARTS = re.compile(r"^\s*(?:\d+(?:\.\d+)?\s*(?:ms|s|m|h|d)\s*)+$")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_priority(value: object) -> int:
    """Turn 1..9, "3" or a name (critical, high, medium, low) into a priority number."""
    if isinstance(value, bool):
        raise InvalidPriority(f"priority must be a number from 1 to 9, not {value!r}")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and value.strip().lower() in PRIORITY_NAMES:
        return PRIORITY_NAMES[value.strip().lower()]
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    else:
        raise InvalidPriority(
            f"priority {value!r} is not understood",
            hint="use 1 (most urgent) to 9, or critical (1), high (2), medium (5), low (8)",
        )
    if not 1 <= number <= 9:
        raise InvalidPriority(
            f"priority {number} is out of range",
            hint="use 1 (most urgent) to 9, or critical (1), high (2), medium (5), low (8)",
        )
    return number


def check_agent_id(agent_id: object) -> str:
    """An agent id: letters, digits and ``_ . : @ / -``, starting with a letter or digit."""
    if not isinstance(agent_id, str) or not _ID_RE.match(agent_id):
        raise BadInput(
            f"agent id {agent_id!r} is not valid",
            hint="use 1-128 letters, digits or _ . : @ / -, starting with a letter or digit",
        )
    return agent_id


def normalize_names(values: Iterable[str] | str | None, what: str) -> tuple[str, ...]:
    """Skills or domains as a sorted, de-duplicated tuple; a string may list them with commas."""
    if values is None:
        return ()
    if isinstance(values, str):
        values = [values]
    names: set[str] = set()
    for raw in values:
        if not isinstance(raw, str):
            raise BadInput(f"{what} must be text, not {raw!r}")
        for part in raw.split(","):
            name = part.strip()
            if name and not _NAME_RE.match(name):
                raise BadInput(
                    f"{what} name {name!r} is not valid",
                    hint="use 1-64 letters, digits or _ . + : / -, starting with a letter or digit",
                )
            if name:
                names.add(name)
    return tuple(sorted(names))


def parse_duration(value: object, what: str = "duration") -> float:
    """Seconds from 90, 1.5, "90", "90s", "5m", "2h", "1d", "250ms", or units together:
    "1h30m", "2d 4h"."""
    if isinstance(value, bool):
        raise BadInput(f"{what} must be a duration, not {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION_RE.match(value)):
        seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2)]
    elif isinstance(value, str) and _DURATION_PARTS.match(value):
        parts = _DURATION_PART.findall(value)
        seconds = sum(float(number) * _DURATION_UNITS[unit] for number, unit in parts)
    else:
        raise BadInput(
            f"{what} {value!r} is not a duration",
            hint="give seconds (90) or numbers with units: 250ms, 90s, 5m, 1h30m, 2d",
        )
    if not math.isfinite(seconds) or seconds < 0:
        raise BadInput(f"{what} must be zero or more seconds, not {value!r}")
    return seconds


#: The latest moment shoal takes (the end of year 9999, the last one ISO 8601 can write).
MAX_MOMENT = 253402300799.0


def parse_moment(value: object, what: str = "time") -> float:
    """Epoch seconds from a number or an ISO 8601 time with its zone: 2026-12-01T09:00Z,
    2026-12-01 10:00+01:00. A time without a zone is refused rather than guessed; one before
    1970 is taken as 1970 (it has passed either way)."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value) or not 0 <= value <= MAX_MOMENT:
            raise BadInput(
                f"{what} must be a time (epoch seconds up to the year 9999), not {value!r}",
                hint="or an ISO 8601 time with its zone, e.g. 2026-12-01T09:00Z",
            )
        return float(value)
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise BadInput(
                f"{what} {value!r} is not a time",
                hint="give an ISO 8601 time with its zone, e.g. 2026-12-01T09:00Z",
            ) from None
    else:
        raise BadInput(f"{what} must be a time, not {value!r}")
    if moment.tzinfo is None:
        raise BadInput(
            f"{what} {value!r} has no time zone",
            hint="add Z for UTC or an offset such as +01:00, e.g. 2026-12-01T09:00Z",
        )
    try:
        seconds = moment.timestamp()
    except (OverflowError, ValueError):  # past the year 9999 once in UTC
        seconds = math.inf
    if seconds > MAX_MOMENT:
        raise BadInput(f"{what} {value!r} is after the year 9999", hint="give a nearer time")
    return max(seconds, 0.0)


def iso_time(seconds: float | None) -> str | None:
    """A moment as ISO 8601 UTC to the millisecond (``2026-11-23T09:30:00.000Z``): how every
    time leaves shoal in JSON."""
    if seconds is None:
        return None
    moment = datetime.fromtimestamp(min(max(seconds, 0.0), MAX_MOMENT), tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def check_json(value: object, what: str) -> object:
    """Make sure ``value`` can be stored as JSON; return it unchanged."""
    if value is None or isinstance(value, str | int | bool):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise BadInput(f"{what} must be JSON-serializable: {exc}") from None
    return value


@dataclass(frozen=True, slots=True)
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

    @property
    def in_pool(self) -> bool:
        return self.state is TaskState.PENDING and self.agent is None

    def waiting(self, now: float) -> bool:
        """Pending but not claimable yet: a retry backoff or a ``not_before`` still runs."""
        return self.state is TaskState.PENDING and (self.ready_at or 0.0) > now

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "state": self.state.value,
            "priority": self.priority,
            "body": self.body,
            "payload": self.payload,
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
            "error": self.error,
            "waiting_on": self.waiting_on,
            "created_at": iso_time(self.created_at),
            "updated_at": iso_time(self.updated_at),
            "claimed_at": iso_time(self.claimed_at),
            "finished_at": iso_time(self.finished_at),
            "ready_at": iso_time(self.ready_at),
            "retry_delay": self.retry_delay,
            "stalled": self.stalled_at is not None,
        }


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


class QueueDepth(NamedTuple):
    """An agent with pending tasks in its queue: a possible victim of a steal."""

    agent: str
    depth: int  # pending tasks in its queue
    status: AgentStatus


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
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
        """The circuit breaker holds it: it may claim nothing until its cooldown ends."""
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


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class Claim:
    """What ``Fleet.claim`` handed out: leases with their tasks, or why there were none.

    ``reason`` is None when something was claimed, ``"busy"`` when the agent is at its
    max_concurrent, ``"paused"`` when the circuit breaker holds it, and ``"empty"`` when
    nothing it can do is waiting. ``sources`` says for each lease where the task came from:
    ``queue``, ``pool`` or ``steal``; ``origins`` whose queue it was in (None for the pool),
    so a steal names its victim. ``retry_at`` is set when the claim passed over work it may
    take later (another domain's task, left to that domain's agents for ``domain_wait`` or
    ``locality_wait``; a task waiting out its retry backoff or its ``not_before``), or when
    a pause ends: the moment to ask again.
    """

    leases: tuple[Lease, ...] = ()
    tasks: tuple[Task, ...] = ()
    sources: tuple[str, ...] = ()
    reason: str | None = None
    origins: tuple[str | None, ...] = ()
    retry_at: float | None = None

    def __bool__(self) -> bool:
        return bool(self.leases)

    def items(self) -> list[tuple[Task, Lease]]:
        return list(zip(self.tasks, self.leases, strict=True))

    def to_dict(self, now: float | None = None) -> dict[str, Any]:
        """As JSON; with ``now``, each lease says how long it has left."""
        return {
            "claimed": [
                {"task": t.to_dict(), "lease": lease.to_dict(now), "source": s}
                for t, lease, s in zip(self.tasks, self.leases, self.sources, strict=True)
            ],
            "reason": self.reason,
            "retry_at": iso_time(self.retry_at),
        }


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class Probe:
    """What ``Fleet.probe`` found: the store took a write at ``at`` (this process's clock),
    and its server's own clock then read ``server_time`` (None: the store has no server)."""

    at: float
    server_time: float | None = None

    @property
    def skew(self) -> float | None:
        """Seconds the server's clock is ahead of this one (negative: behind)."""
        return None if self.server_time is None else self.server_time - self.at


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class Move:
    """A pending task moved from one queue to another by rebalance."""

    task_id: int
    title: str
    priority: int
    from_agent: str
    to_agent: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "title": self.title,
            "priority": self.priority,
            "from": self.from_agent,
            "to": self.to_agent,
        }


@dataclass(frozen=True, slots=True)
class ReapReport:
    """What one monitor pass did."""

    expired: tuple[int, ...] = ()  # leases expired, task back to pending
    dead: tuple[int, ...] = ()  # leases expired with attempts used up
    offline: tuple[str, ...] = ()  # agents marked offline
    returned: tuple[int, ...] = ()  # their queued tasks, back in the pool
    terminated: tuple[str, ...] = ()  # ephemeral agents idle too long
    stalled: tuple[int, ...] = ()  # tasks running well past their expected duration
    resumed: tuple[str, ...] = ()  # agents whose circuit-breaker pause ran out

    def __bool__(self) -> bool:
        return any(
            (
                self.expired,
                self.dead,
                self.offline,
                self.returned,
                self.terminated,
                self.stalled,
                self.resumed,
            )
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "expired": list(self.expired),
            "dead": list(self.dead),
            "offline": list(self.offline),
            "returned": list(self.returned),
            "terminated": list(self.terminated),
            "stalled": list(self.stalled),
            "resumed": list(self.resumed),
        }


@dataclass(frozen=True, slots=True)
class Assessment:
    """The workload assessment and what to do about it.

    ``workload`` is idle / underutilized / balanced / overloaded; ``recommendation`` is
    spawn / terminate_idle / maintain. ``missing_skills`` are skills that pending tasks need
    and no live agent has: an agent spawned for this fleet should bring them.
    """

    workload: str
    recommendation: str
    reason: str
    pending: int
    in_progress: int
    blocked: int
    live_agents: int
    idle_agents: int
    working_agents: int
    max_agents: int
    missing_skills: tuple[str, ...] = ()
    unservable: int = 0  # pending tasks no live agent can take
    stuck: int = 0  # blocked tasks waiting on dead or cancelled ones
    at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "recommendation": self.recommendation,
            "reason": self.reason,
            "pending": self.pending,
            "in_progress": self.in_progress,
            "blocked": self.blocked,
            "live_agents": self.live_agents,
            "idle_agents": self.idle_agents,
            "working_agents": self.working_agents,
            "max_agents": self.max_agents,
            "missing_skills": list(self.missing_skills),
            "unservable": self.unservable,
            "stuck": self.stuck,
            "at": iso_time(self.at),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Assessment:
        return cls(
            workload=data["workload"],
            recommendation=data["recommendation"],
            reason=data.get("reason", ""),
            pending=data["pending"],
            in_progress=data["in_progress"],
            blocked=data.get("blocked", 0),
            live_agents=data["live_agents"],
            idle_agents=data["idle_agents"],
            working_agents=data.get("working_agents", 0),
            max_agents=data["max_agents"],
            missing_skills=tuple(data.get("missing_skills", ())),
            unservable=data.get("unservable", 0),
            stuck=data.get("stuck", 0),
            at=parse_moment(data.get("at", 0.0), "at"),  # ISO 8601, or epoch seconds (older)
        )


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
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
            "waiting": self.waiting,
            "next_ready": iso_time(self.next_ready),
            "assessment": None if self.assessment is None else self.assessment.to_dict(),
        }


#: The largest id a store can hold (a signed 64-bit integer).
MAX_ID = 2**63 - 1


def as_task_ids(values: Sequence[int] | int | str | None, what: str) -> tuple[int, ...]:
    """Task ids from user input: one id, a list, or text like "12" or "12, 14"."""
    if values is None:
        return ()
    items: Sequence[object]
    if isinstance(values, str):
        items = values.replace(",", " ").split()
    elif isinstance(values, int):
        items = [values]
    else:
        items = values
    out: list[int] = []
    for value in items:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            try:
                number = int(str(value).strip().lstrip("#"))
            except ValueError:
                raise BadInput(
                    f"{what} must list task ids (whole numbers), not {value!r}"
                ) from None
        if not 1 <= number <= MAX_ID:
            raise BadInput(f"{what}: {number} is not a task id (ids are whole numbers from 1)")
        out.append(number)
    return tuple(dict.fromkeys(out))


def check_count(value: object, what: str, low: int, high: int) -> int:
    """A whole number from ``low`` to ``high`` (never a bool, never unbounded)."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadInput(f"{what} must be a whole number from {low} to {high}, not {value!r}")
    return value
