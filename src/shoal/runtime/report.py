"""What a worker did and why it stopped: the value ``Worker.run`` returns (kept apart from
the worker's loop so that module stays about running tasks)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["WorkerReport"]


@dataclass
class WorkerReport:
    """What a worker did, and why it stopped: ``reason`` is ``idle`` (ephemeral, idle past
    its grace), ``stopped`` (asked to), ``terminated`` (its agent was terminated from
    outside) or ``fault`` (it could not run tasks: see ``WorkerFault``); ``why`` says it in
    words, and ``hint`` how to fix a fault."""

    agent: str
    reason: str = ""
    why: str = ""
    hint: str = ""
    done: int = 0
    failed: int = 0
    released: int = 0
    lost: int = 0
    deferred: int = 0
    stolen: int = 0
    busy_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "busy_seconds": round(self.busy_seconds, 3)}
