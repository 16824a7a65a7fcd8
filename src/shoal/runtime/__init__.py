"""Running agents: ``worker`` (one agent: claim, run, heartbeat, idle, leave), ``command``
(a shell command per task), ``hub`` (reap, rebalance, assess on an interval) and
``supervisor`` (local worker processes, as many as the work calls for).

    >>> from shoal.runtime import Worker, TaskContext
"""

from shoal.runtime.command import CommandFailed, CommandNotStarted, CommandOutcome
from shoal.runtime.hub import Hub, HubAction
from shoal.runtime.supervisor import Supervisor, SupervisorEvent, WorkerSpec
from shoal.runtime.worker import (
    CommandHandler,
    Deferred,
    TaskContext,
    Worker,
    WorkerFault,
    WorkerReport,
)

__all__ = [
    "CommandFailed",
    "CommandHandler",
    "CommandNotStarted",
    "CommandOutcome",
    "Deferred",
    "Hub",
    "HubAction",
    "Supervisor",
    "SupervisorEvent",
    "TaskContext",
    "Worker",
    "WorkerFault",
    "WorkerReport",
    "WorkerSpec",
]
