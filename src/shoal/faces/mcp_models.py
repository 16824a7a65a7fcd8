"""The structured results of shoal's MCP tools: typed models with a JSON schema each.

A tool's return annotation becomes its ``outputSchema``, so an MCP client can validate what
comes back and a model can rely on the field names. Each model is built from the Fleet's own
records (``Task``, ``Lease``, ``Agent``...) by a ``of`` class method; nothing here decides
anything.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from shoal.model import Agent, Assessment, Claim, Lease, Task, TaskDetail

__all__ = [
    "AgentInfo",
    "AssessmentInfo",
    "ClaimResult",
    "CompletionResult",
    "EventInfo",
    "HeartbeatResult",
    "LeaseInfo",
    "RegistrationResult",
    "SettingsResult",
    "StateResult",
    "TaskDetailInfo",
    "TaskInfo",
    "TaskList",
    "TaskResult",
]


class TaskInfo(BaseModel):
    """A task as the fleet saw it when the tool ran."""

    id: int
    title: str
    state: str = Field(description="blocked, pending, claimed, done, dead or cancelled")
    priority: int = Field(description="1 (most urgent) to 9")
    body: str
    payload: Any = None
    skills: list[str]
    domain: str | None
    agent: str | None = Field(
        description="the queue holding it (pending), its holder (claimed) or last holder"
    )
    pinned: bool
    stolen: bool
    parent: int | None
    attempts: int
    max_attempts: int | None
    lease_expires: float | None = Field(description="Unix time the current lease ends")
    result: Any = None
    error: str | None
    expected_duration: float | None = Field(description="seconds it is expected to run")
    created_at: float
    ready_at: float | None = Field(
        description="Unix time it last became ready to run (None while blocked)"
    )
    finished_at: float | None

    @classmethod
    def of(cls, task: Task) -> TaskInfo:
        return cls.model_validate(task.to_dict())


class LeaseInfo(BaseModel):
    """The right to work on one task until ``expires_at``; only ``token`` may finish it."""

    task_id: int
    agent: str
    token: str = Field(description="pass it to complete_task, fail_task and release_task")
    expires_at: float = Field(description="Unix time; call heartbeat before then to extend it")

    @classmethod
    def of(cls, lease: Lease) -> LeaseInfo:
        return cls(
            task_id=lease.task_id, agent=lease.agent, token=lease.token, expires_at=lease.expires
        )


class ClaimResult(BaseModel):
    """A claimed task with its lease, or why there was none."""

    claimed: bool
    task: TaskInfo | None = None
    lease: LeaseInfo | None = None
    source: str | None = Field(
        default=None, description="where the task came from: queue (yours), pool, or steal"
    )
    reason: str | None = Field(
        default=None, description="why nothing was claimed: empty (no work you can do) or busy"
    )
    retry_at: float | None = Field(
        default=None,
        description="Unix time work passed over for its own domain's agents is free to take",
    )
    waited_seconds: float = 0.0
    next_step: str

    @classmethod
    def of(cls, claim: Claim, waited: float = 0.0) -> ClaimResult:
        if not claim:
            if claim.reason == "busy":
                step = (
                    "You hold as many tasks as your max_concurrent allows: finish one "
                    "(complete_task, fail_task or release_task) before claiming another."
                )
            else:
                step = (
                    "Nothing you can do is waiting. Call wait_for_task to be woken when work "
                    "arrives, or (if you are not a manager) set_agent_status terminated to free "
                    "your place when assess_workload says terminate_idle."
                )
            if claim.retry_at is not None:
                step += (
                    " Work of other domains is being left to their own agents for now; it is "
                    "free to take at retry_at."
                )
            return cls(
                claimed=False,
                reason=claim.reason,
                retry_at=claim.retry_at,
                waited_seconds=waited,
                next_step=step,
            )
        task, lease = claim.tasks[0], claim.leases[0]
        return cls(
            claimed=True,
            task=TaskInfo.of(task),
            lease=LeaseInfo.of(lease),
            source=claim.sources[0],
            waited_seconds=waited,
            next_step=(
                f"Do task {task.id}, then call complete_task (or fail_task). Call heartbeat "
                "if the work may outlast the lease."
            ),
        )


class CompletionResult(BaseModel):
    """A finished task, and the tasks that were waiting on it and are now ready."""

    task: TaskInfo
    already_done: bool = Field(description="true if it was already completed with this lease")
    released: list[int] = Field(description="tasks that became pending because this one is done")
    next: ClaimResult | None = Field(
        default=None, description="your next task, when claim_next was set"
    )
    next_step: str


class TaskResult(BaseModel):
    """A task after a change (failed, released, posted)."""

    task: TaskInfo
    created: bool = Field(default=True, description="false when the key matched an existing task")
    message: str


class AgentInfo(BaseModel):
    """An agent as the fleet knows it."""

    id: str
    role: str
    skills: list[str]
    domains: list[str]
    max_concurrent: int
    manager: bool
    ephemeral: bool
    status: str = Field(description="idle, working, waiting, offline or terminated")
    idle_since: float | None
    last_seen: float
    queued: int = Field(description="pending tasks in its own queue")

    @classmethod
    def of(cls, agent: Agent) -> AgentInfo:
        return cls.model_validate(agent.to_dict())


class RegistrationResult(BaseModel):
    """The agent as registered, and how full the fleet is now."""

    agent: AgentInfo
    created: bool = Field(description="false when a live registration was updated")
    live: int = Field(description="live non-manager agents, this one included")
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
    working_agents: int
    max_agents: int
    missing_skills: list[str] = Field(description="skills a spawned agent should bring")
    unservable: int = Field(description="pending tasks no present agent can take")

    @classmethod
    def of(cls, a: Assessment) -> AssessmentInfo:
        return cls.model_validate(a.to_dict())


class TaskList(BaseModel):
    """Tasks, newest first."""

    tasks: list[TaskInfo]


class EventInfo(BaseModel):
    """One entry of a task's history."""

    at: float
    kind: str
    agent: str | None
    data: dict[str, Any]


class TaskDetailInfo(BaseModel):
    """A task with its dependencies, dependents and latest events."""

    task: TaskInfo
    after: list[int] = Field(description="tasks it waits for")
    dependents: list[int] = Field(description="tasks waiting for it")
    events: list[EventInfo]

    @classmethod
    def of(cls, detail: TaskDetail) -> TaskDetailInfo:
        return cls(
            task=TaskInfo.of(detail.task),
            after=list(detail.after),
            dependents=list(detail.dependents),
            events=[
                EventInfo(at=e.at, kind=e.kind, agent=e.agent, data=dict(e.data))
                for e in detail.events
            ],
        )


class SettingsResult(BaseModel):
    """The fleet's settings after the call, and which of them it changed."""

    settings: dict[str, Any] = Field(
        description="every setting by name: durations in seconds, counts, priorities, words"
    )
    changed: list[str] = Field(description="the settings this call changed")
    message: str


class StateResult(BaseModel):
    """The fleet at a glance: the readable summary and the data behind it."""

    summary: str
    you: str | None = Field(description="this session's agent, if it has one")
    status: dict[str, Any] = Field(
        description="agents with load, counts by state, pool, queues, capacity, stalled, "
        "stuck and the last assessment"
    )
