"""The structured results of shoal's MCP tools: typed models with a JSON schema each.

A tool's return annotation becomes its ``outputSchema``, so an MCP client can validate what
comes back and a model can rely on the field names. Each model is built from the Fleet's own
records (``Task``, ``Lease``, ``Agent``...) by an ``of`` class method, with the records' field
names; nothing here decides anything.

Two rules keep them cheap to read, since every schema sits in the model's context window:

- **Times are ISO 8601 UTC strings** (``2026-11-23T10:00:00.000Z``), as in the CLI's
  ``--json``; a lease also says ``expires_in_s``, so no one does clock arithmetic.
- **Compact where a task is only named**: lists, and the answers of tools that change a task
  (fail, release, post, cancel, retry), give a ``TaskBrief`` (id, title, state, priority,
  domain, agent, age). The whole task comes with a claim and from ``get_task``.

Both say ``lease_expired`` of a claimed task whose lease ran out (``policy.lease_due``): the
store still says ``claimed`` until the next claim takes it back, but nothing runs it, and a
model that read "claimed by dan" would leave the task alone -- the liveness rules apply to
what a model reads as to every other view (docs/ARCHITECTURE.md, "Liveness and seats").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field

from shoal.model import Agent, Assessment, Claim, Event, Lease, Task, TaskDetail
from shoal.policy import lease_due
from shoal.times import iso_time

__all__ = [
    "AgentInfo",
    "AssessmentInfo",
    "ClaimResult",
    "CompletionResult",
    "EventInfo",
    "GroupResult",
    "HeartbeatResult",
    "LeaseInfo",
    "PostResult",
    "RegistrationResult",
    "SettingsResult",
    "StateResult",
    "TaskBrief",
    "TaskDetailInfo",
    "TaskInfo",
    "TaskList",
    "TaskResult",
    "iso",
    "iso_at",
    "iso_times",
]

#: Keys that hold a moment in the records' dicts (the status snapshot's rows included).
TIME_KEYS = frozenset(
    {
        "at",
        "created_at",
        "updated_at",
        "claimed_at",
        "finished_at",
        "ready_at",
        "lease_expires",
        "expires",
        "expires_at",
        "idle_since",
        "last_seen",
        "registered_at",
        "paused_until",
        "retry_at",
    }
)


def iso(moment: object) -> str | None:
    """A moment (Unix seconds) as ISO 8601 UTC (``model.iso_time``, as everywhere in shoal's
    JSON); a string (already ISO, as the records' dicts give) and None pass as they are."""
    if moment is None or isinstance(moment, str):
        return moment
    if isinstance(moment, int | float) and not isinstance(moment, bool) and math.isfinite(moment):
        return iso_time(float(moment))
    raise ValueError(f"not a moment: {moment!r}")


def iso_at(moment: float) -> str:
    """``iso`` of a moment that is always there."""
    text = iso(moment)
    assert text is not None
    return text


def iso_times(data: Any) -> Any:
    """``data`` (a record's dict, nested) with every moment under a time key made ISO."""
    if isinstance(data, Mapping):
        return {k: iso(v) if k in TIME_KEYS else iso_times(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [iso_times(item) for item in data]
    return data


Time = Annotated[str, BeforeValidator(iso)]
MaybeTime = Annotated[str | None, BeforeValidator(iso)]


def _seconds(span: float) -> int:
    return max(0, round(span))


_LEASE_EXPIRED = "claimed, but its lease ran out: not running; the next claim takes it back"


class TaskBrief(BaseModel):
    """A task named in a list or after a change: enough to pick it out and follow it."""

    id: int
    title: str
    state: str
    priority: int
    domain: str | None
    agent: str | None
    age_s: int = Field(description="seconds since it was posted")
    lease_expired: bool = Field(False, description=_LEASE_EXPIRED)

    @classmethod
    def of(cls, task: Task, now: float) -> TaskBrief:
        return cls(
            id=task.id,
            title=task.title,
            state=task.state.value,
            priority=task.priority,
            domain=task.domain,
            agent=task.agent,
            age_s=_seconds(now - task.created_at),
            lease_expired=lease_due(task, now),
        )


class TaskInfo(BaseModel):
    """A task in full, as the fleet saw it when the tool ran."""

    id: int
    title: str
    state: str
    priority: int
    body: str
    payload: Any = None
    skills: list[str]
    domain: str | None
    labels: list[str] = []
    agent: str | None
    pinned: bool
    parent: int | None
    attempts: int
    max_attempts: int | None
    expected_duration: float | None
    result: Any = None
    error: str | None
    created_at: Time
    ready_at: MaybeTime
    finished_at: MaybeTime
    group: str | None = None  # its concurrency group
    posted_by: str | None = None  # the agent that posted it (it may edit it)
    lease_expired: bool = Field(False, description=_LEASE_EXPIRED)

    @classmethod
    def of(cls, task: Task, now: float | None = None) -> TaskInfo:
        """``now``: when the task was read, to say whether its lease ran out (a task just
        claimed, given none, holds a fresh lease)."""
        expired = now is not None and lease_due(task, now)
        return cls.model_validate({**task.to_dict(), "lease_expired": expired})


class LeaseInfo(BaseModel):
    """The right to work on one task until ``expires_at``; only ``token`` may finish it."""

    task_id: int
    token: str
    expires_at: Time
    expires_in_s: int

    @classmethod
    def of(cls, lease: Lease, now: float) -> LeaseInfo:
        return cls(
            task_id=lease.task_id,
            token=lease.token,
            expires_at=iso_at(lease.expires),
            expires_in_s=_seconds(lease.expires - now),
        )


_BUSY = (
    "You hold as many tasks as your max_concurrent allows: finish one (complete_task, "
    "fail_task or release_task) before claiming another."
)
_PAUSED = (
    "You are paused after failing several tasks in a row: claim nothing until retry_at "
    "(or until an operator resumes you). Fix what makes your tasks fail meanwhile."
)
_EMPTY = (
    "Nothing you can do is waiting (explain says why). Call wait_for_task to be woken when "
    "work arrives, or "
    "(if you are not a manager) set_agent_status terminated when assess_workload says "
    "terminate_idle."
)


class ClaimResult(BaseModel):
    """A claimed task with its lease, or why there was none."""

    claimed: bool
    task: TaskInfo | None = None
    lease: LeaseInfo | None = None
    source: str | None = Field(default=None, description="queue, pool or steal")
    reason: str | None = Field(default=None, description="empty, busy or paused")
    retry_at: MaybeTime = Field(default=None, description="when to ask again")
    waited_seconds: float = 0.0
    next_step: str

    @classmethod
    def of(cls, claim: Claim, now: float, waited: float = 0.0, *, keep: str = "") -> ClaimResult:
        """``keep``: what the holder must keep doing to keep the claim, added to next_step."""
        if not claim:
            step = {"busy": _BUSY, "paused": _PAUSED}.get(claim.reason or "", _EMPTY)
            if claim.retry_at is not None and claim.reason == "empty":
                step += " Some work is held back for now (another domain's, or waiting to be "
                step += "ready): it is free to take at retry_at."
            return cls(
                claimed=False,
                reason=claim.reason,
                retry_at=iso(claim.retry_at),
                waited_seconds=waited,
                next_step=step,
            )
        grant = claim.grants[0]
        task = grant.task
        return cls(
            claimed=True,
            task=TaskInfo.of(task),
            lease=LeaseInfo.of(grant.lease, now),
            source=grant.source,
            waited_seconds=waited,
            next_step=(
                f"Do task {task.id}, then call complete_task (or fail_task). Call heartbeat "
                f"if the work may outlast the lease.{keep}"
            ),
        )


class CompletionResult(BaseModel):
    """A finished task, the tasks that were waiting on it, and your next task if asked."""

    task: TaskBrief
    released: list[int] = Field(description="tasks now ready because this one is done")
    next: ClaimResult | None = None
    next_step: str


class TaskResult(BaseModel):
    """A task after a change (failed, released, cancelled, retried, re-prioritized)."""

    task: TaskBrief
    ready_at: MaybeTime = Field(default=None, description="when it may be claimed again")
    message: str

    @classmethod
    def of(cls, task: Task, now: float, message: str) -> TaskResult:
        later = task.ready_at if task.ready_at is not None and task.ready_at > now else None
        return cls(task=TaskBrief.of(task, now), ready_at=iso(later), message=message)


class PostResult(TaskResult):
    """A task posted (add_task). ``created`` is a posting's word only: a cancel or a retry
    creates nothing, so their results do not carry it."""

    created: bool = Field(default=True, description="false: the key named an existing task")

    @classmethod
    def posted(cls, task: Task, now: float, message: str, created: bool) -> PostResult:
        done = TaskResult.of(task, now, message)
        return cls(task=done.task, ready_at=done.ready_at, message=message, created=created)


class AgentInfo(BaseModel):
    """An agent as the fleet knows it."""

    id: str
    role: str
    skills: list[str]
    domains: list[str]
    max_concurrent: int
    manager: bool
    ephemeral: bool
    status: str
    idle_since: MaybeTime
    last_seen: Time
    queued: int
    paused_until: MaybeTime = Field(default=None, description="claims get nothing until then")

    @classmethod
    def of(cls, agent: Agent) -> AgentInfo:
        return cls.model_validate(agent.to_dict())


class RegistrationResult(BaseModel):
    """The agent as registered, and how full the fleet is now."""

    agent: AgentInfo
    created: bool = Field(description="false: a live registration was updated")
    live: int
    max_agents: int
    message: str


class HeartbeatResult(BaseModel):
    """The leases the heartbeat extended."""

    agent: str
    leases: list[LeaseInfo]


class AssessmentInfo(BaseModel):
    """The workload assessment and what to do about it."""

    workload: str = Field(description="idle, underutilized, balanced or overloaded")
    recommendation: str = Field(description="spawn, terminate_idle or maintain")
    reason: str
    pending: int
    in_progress: int
    blocked: int
    live_agents: int
    idle_agents: int
    max_agents: int
    missing_skills: list[str] = Field(description="skills a spawned agent should bring")

    @classmethod
    def of(cls, a: Assessment) -> AssessmentInfo:
        return cls.model_validate(a.to_dict())


class TaskList(BaseModel):
    """Tasks, newest first, and the cursor to the next page (None: this is the last)."""

    tasks: list[TaskBrief]
    next_cursor: str | None = None


class EventInfo(BaseModel):
    """One entry of a task's history."""

    at: Time
    kind: str
    agent: str | None
    data: dict[str, Any]

    @classmethod
    def of(cls, event: Event) -> EventInfo:
        return cls(
            at=iso_at(event.at),
            kind=event.kind,
            agent=event.agent,
            data=iso_times(dict(event.data)),
        )


class TaskDetailInfo(BaseModel):
    """A task with its dependencies, dependents and latest events."""

    task: TaskInfo
    after: list[int] = Field(description="tasks it waits for")
    dependents: list[int]
    events: list[EventInfo]

    @classmethod
    def of(cls, detail: TaskDetail, now: float) -> TaskDetailInfo:
        return cls(
            task=TaskInfo.of(detail.task, now),
            after=list(detail.after),
            dependents=list(detail.dependents),
            events=[EventInfo.of(e) for e in detail.events],
        )


class SettingsResult(BaseModel):
    """The fleet's settings after the call, and which of them it changed."""

    settings: dict[str, Any] = Field(description="durations in seconds")
    changed: list[str]
    message: str


class GroupResult(BaseModel):
    """A concurrency group after the call: its limit (null: none) and tasks held now."""

    name: str
    max: int | None
    held: int
    full: bool
    message: str


class StateResult(BaseModel):
    """The fleet at a glance: the readable summary and the data behind it."""

    summary: str
    you: str | None
    status: dict[str, Any]
