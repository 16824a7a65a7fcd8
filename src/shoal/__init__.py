"""shoal: a work-stealing task coordinator for fleets of autonomous agents.

Agents pull the best task they can do under a lease; idle agents steal queued work from
busy ones; dead agents' work comes back; the fleet says when to add or retire agents.

    >>> from shoal import Fleet
    >>> fleet = Fleet.open("memory://")
    >>> _ = fleet.register("ada", skills=["python"])
    >>> task = fleet.post("write the parser", skills=["python"])
    >>> claim = fleet.claim("ada")
    >>> fleet.complete(claim.leases[0], {"ok": True}).task.state.value
    'done'
"""

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Where each public name lives. They are imported on first use (PEP 562), not here: a
#: ``shoal`` CLI call is a new process, and ``import shoal`` -- which every ``shoal.*``
#: import runs first -- loading the Fleet, every store verb and logging cost each call
#: several times what starting Python costs (docs/benchmarks.md, *The CLI's start*).
_HOMES = {
    **dict.fromkeys(("Clock", "ManualClock", "SystemClock"), "shoal.clock"),
    **dict.fromkeys(
        ("BadInput", "Conflict", "DependencyCycle", "FleetFull", "InvalidPriority",
         "InvalidSetting", "InvalidStoreURL", "InvalidTransition", "LeaseLost",
         "SchemaMismatch", "ShoalError", "StoreError", "StoreNotFound", "StoreUnavailable",
         "TooLarge", "UnknownAgent", "UnknownSchedule", "UnknownTask", "WriteConflict"),
        "shoal.errors",
    ),
    "Fleet": "shoal.fleet",
    **dict.fromkeys(
        ("Agent", "AgentStatus", "Assessment", "BatchCompletion", "Claim", "Completion",
         "Event", "FleetStatus", "Lease", "Move", "PruneReport", "ReapReport", "Registration",
         "Schedule", "ScheduleState", "Task", "TaskDetail", "TaskState"),
        "shoal.model",
    ),
    "Settings": "shoal.settings",
}  # fmt: skip


def __getattr__(name: str) -> Any:
    """A public name, imported from its module the first time it is asked for."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'shoal' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:
    from shoal.clock import Clock, ManualClock, SystemClock
    from shoal.errors import (
        BadInput,
        Conflict,
        DependencyCycle,
        FleetFull,
        InvalidPriority,
        InvalidSetting,
        InvalidStoreURL,
        InvalidTransition,
        LeaseLost,
        SchemaMismatch,
        ShoalError,
        StoreError,
        StoreNotFound,
        StoreUnavailable,
        TooLarge,
        UnknownAgent,
        UnknownSchedule,
        UnknownTask,
        WriteConflict,
    )
    from shoal.fleet import Fleet
    from shoal.model import (
        Agent,
        AgentStatus,
        Assessment,
        BatchCompletion,
        Claim,
        Completion,
        Event,
        FleetStatus,
        Lease,
        Move,
        PruneReport,
        ReapReport,
        Registration,
        Schedule,
        ScheduleState,
        Task,
        TaskDetail,
        TaskState,
    )
    from shoal.settings import Settings

__all__ = [
    "Agent",
    "AgentStatus",
    "Assessment",
    "BadInput",
    "BatchCompletion",
    "Claim",
    "Clock",
    "Completion",
    "Conflict",
    "DependencyCycle",
    "Event",
    "Fleet",
    "FleetFull",
    "FleetStatus",
    "InvalidPriority",
    "InvalidSetting",
    "InvalidStoreURL",
    "InvalidTransition",
    "Lease",
    "LeaseLost",
    "ManualClock",
    "Move",
    "PruneReport",
    "ReapReport",
    "Registration",
    "Schedule",
    "ScheduleState",
    "SchemaMismatch",
    "Settings",
    "ShoalError",
    "StoreError",
    "StoreNotFound",
    "StoreUnavailable",
    "SystemClock",
    "Task",
    "TaskDetail",
    "TaskState",
    "TooLarge",
    "UnknownAgent",
    "UnknownSchedule",
    "UnknownTask",
    "WriteConflict",
    "__version__",
]
