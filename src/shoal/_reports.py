"""What the hub's jobs return, as frozen values: rebalance's moves, a reap's and a prune's
reports, and the workload assessment.

They are ``shoal.model``'s values (``model`` exports them, and that is where to import them
from); they live here so ``model`` stays a reading, and they need nothing else of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shoal._values import value
from shoal.times import iso_time, parse_moment
from shoal.vocabulary import Recommendation, Workload

__all__ = ["Assessment", "Move", "PruneReport", "ReapReport"]


@value
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


@value
class ReapReport:
    """What one monitor pass did."""

    expired: tuple[int, ...] = ()  # leases expired, task back to pending
    dead: tuple[int, ...] = ()  # leases expired with attempts used up
    offline: tuple[str, ...] = ()  # agents marked offline
    returned: tuple[int, ...] = ()  # their queued tasks, back in the pool
    terminated: tuple[str, ...] = ()  # ephemeral agents idle too long
    stalled: tuple[int, ...] = ()  # tasks running well past their expected duration
    resumed: tuple[str, ...] = ()  # agents whose circuit-breaker pause ran out
    posted: tuple[int, ...] = ()  # occurrences of schedules that fell due

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
                self.posted,
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
            "posted": list(self.posted),
        }


@value
class PruneReport:
    """What a prune deleted -- or, in a dry run, would delete: tasks that finished before
    ``cutoff``, with their events, and the events of no task logged before it. ``cutoff``
    is None when nothing was asked (the fleet keeps all its history)."""

    cutoff: float | None = None
    tasks: int = 0
    events: int = 0
    dry_run: bool = False
    more: bool = False  # stopped at its limit with more left to prune
    squashed: str | None = None  # the git store's one commit that replaced its history

    def __bool__(self) -> bool:
        return bool(self.tasks or self.events)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cutoff": iso_time(self.cutoff),
            "tasks": self.tasks,
            "events": self.events,
            "dry_run": self.dry_run,
            "more": self.more,
            "squashed": self.squashed,
        }


@value
class Assessment:
    """The workload assessment and what to do about it.

    ``workload`` is idle / underutilized / balanced / overloaded (``Workload``);
    ``recommendation`` is spawn / terminate_idle / maintain (``Recommendation``).
    ``missing_skills`` are skills that pending tasks need and no live agent has: an agent
    spawned for this fleet should bring them.
    """

    workload: Workload
    recommendation: Recommendation
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
            workload=Workload(data["workload"]),
            recommendation=Recommendation(data["recommendation"]),
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
