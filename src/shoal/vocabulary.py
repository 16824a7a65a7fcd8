"""The words of shoal: every closed set of names the fleet speaks, as one enum each.

A task's state, an agent's status, the kind of an event, where a claim found its task, why
a claim came back empty, and what an assessment recommends all travel between the Fleet,
the stores, the CLI, the MCP server and JSON. Each is a ``StrEnum`` here, so its members
are the very strings that are stored and printed (``TaskState.DONE == "done"``), and every
face derives its choices from the enum: a new word is added in one place. The table of how
each concept is named on each face is in docs/ARCHITECTURE.md ("Vocabulary").
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

__all__ = [
    "CANCELLABLE_STATES",
    "REPORTED_STATUSES",
    "RETRIABLE_STATES",
    "AgentStatus",
    "ClaimReason",
    "ClaimSource",
    "EventKind",
    "Recommendation",
    "ScheduleState",
    "TaskState",
    "Workload",
    "names",
]


class TaskState(StrEnum):
    """Where a task is in its life (the diagram: docs/ARCHITECTURE.md, "Task states").

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
    OFFLINE = "offline"  # silent past heartbeat_timeout; may come back
    #: Held -- by the circuit breaker after failing ``failure_streak`` tasks in a row, or by
    #: a person's pause -- until ``paused_until`` or a resume: it claims nothing meanwhile.
    PAUSED = "paused"
    TERMINATED = "terminated"  # gone for good; registering the id again starts anew

    @property
    def live(self) -> bool:
        """Holds a seat: counts against max_agents (managers aside). Offline and terminated
        agents hold none (docs/ARCHITECTURE.md, "Liveness and seats")."""
        return self not in (AgentStatus.OFFLINE, AgentStatus.TERMINATED)


class ClaimSource(StrEnum):
    """Where a claim found a task: the steps of the claim cascade that hand out work."""

    QUEUE = "queue"  # the agent's own queue, from the head
    POOL = "pool"  # the shared pool, best score first
    STEAL = "steal"  # another agent's queue, from the tail


class ClaimReason(StrEnum):
    """Why a claim handed out nothing."""

    BUSY = "busy"  # the agent holds max_concurrent leases already
    PAUSED = "paused"  # the agent is paused (status paused) until retry_at
    EMPTY = "empty"  # nothing this agent can do is ready


class EventKind(StrEnum):
    """The kinds of entry in the event log; every state change writes exactly one."""

    # tasks
    POSTED = "posted"
    CLAIMED = "claimed"
    STOLEN = "stolen"  # claimed from another's queue, or moved by rebalance
    COMPLETED = "completed"
    FAILED = "failed"  # a reported failure; pending again (after a backoff)
    EXPIRED = "expired"  # a lease ran out; pending again at once
    DEAD = "dead"  # out of attempts
    RELEASED = "released"  # given back untouched
    DEFERRED = "deferred"  # put aside until other tasks are done
    CANCELLED = "cancelled"
    RETRIED = "retried"  # brought back from dead or cancelled, or let out of a wait
    READY = "ready"  # its last dependency is done
    STUCK = "stuck"  # a dependency died or was cancelled
    RETURNED = "returned"  # its agent went away; back to the pool
    STALLED = "stalled"  # running well past its expected duration
    REPRIORITIZED = "reprioritized"  # its priority changed (by a person or a manager)
    EDITED = "edited"  # its title, body, skills, domain, labels... changed (Fleet.edit)
    # agents
    AGENT_REGISTERED = "agent.registered"
    AGENT_UPDATED = "agent.updated"
    AGENT_STATUS = "agent.status"
    AGENT_IDLE = "agent.idle"
    AGENT_OFFLINE = "agent.offline"
    AGENT_PAUSED = "agent.paused"
    AGENT_RESUMED = "agent.resumed"
    AGENT_TERMINATED = "agent.terminated"
    # the fleet
    ASSESSED = "assessed"
    CONFIGURED = "configured"
    PRUNED = "pruned"  # finished tasks and old events deleted (Fleet.prune)
    # schedules (recurring tasks; an occurrence's own event is ``posted``, with ``schedule``)
    SCHEDULE_ADDED = "schedule.added"
    SCHEDULE_PAUSED = "schedule.paused"
    SCHEDULE_RESUMED = "schedule.resumed"
    SCHEDULE_CANCELLED = "schedule.cancelled"
    SCHEDULE_MISSED = "schedule.missed"  # an occurrence could not be posted (and why)


class ScheduleState(StrEnum):
    """Where a schedule of recurring tasks is: ``active`` posts its occurrences as they fall
    due; ``paused`` posts none until resumed; ``cancelled`` is final."""

    ACTIVE = "active"
    PAUSED = "paused"
    CANCELLED = "cancelled"


class Workload(StrEnum):
    """How loaded the fleet is, by the assessment."""

    IDLE = "idle"
    UNDERUTILIZED = "underutilized"
    BALANCED = "balanced"
    OVERLOADED = "overloaded"


class Recommendation(StrEnum):
    """What the assessment advises doing about the fleet's size."""

    SPAWN = "spawn"
    TERMINATE_IDLE = "terminate_idle"
    MAINTAIN = "maintain"


#: The statuses an agent (or a person for it) may report; ``paused`` is set only by a pause
#: (the circuit breaker's, or ``Fleet.pause``), and ended by its time or a resume.
REPORTED_STATUSES = tuple(s for s in AgentStatus if s is not AgentStatus.PAUSED)
#: The states a task may be cancelled in: any not finished.
CANCELLABLE_STATES = tuple(s for s in TaskState if not s.finished)
#: The states ``retry`` acts on: dead or cancelled (brought back), pending (let out of the
#: wait for its retry backoff or its not_before).
RETRIABLE_STATES = (TaskState.DEAD, TaskState.CANCELLED, TaskState.PENDING)


def names(members: Iterable[StrEnum]) -> list[str]:
    """The words of ``members``, in order: what a face offers as choices."""
    return [member.value for member in members]
