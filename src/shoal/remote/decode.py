"""The API's JSON back into shoal's model values: the inverse of each ``to_dict``.

A ``RemoteFleet`` returns the same frozen values a local ``Fleet`` does, so a face or the
worker cannot tell where the fleet is. Moments arrive as ISO 8601 UTC text (``iso_time``,
to the millisecond) and leave here as epoch seconds again (``parse_moment``).

What the JSON does not carry comes back as the nearest honest value, each noted where it
is decoded: a task's ``stalled_at`` (the API says only whether it is stalled), a grant's
``origin`` (the victim of a steal), and the tasks an agent holds in a status snapshot
(their id and title only).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from shoal.errors import BadInput, StoreError
from shoal.model import (
    Agent,
    AgentLoad,
    Assessment,
    Claim,
    Completion,
    Event,
    FleetStatus,
    Grant,
    Group,
    Lease,
    Move,
    ReapReport,
    Registration,
    Schedule,
    Task,
    TaskDetail,
)
from shoal.settings import Settings
from shoal.times import parse_moment
from shoal.vocabulary import AgentStatus, ClaimReason, ClaimSource, ScheduleState, TaskState

__all__ = [
    "Malformed",
    "agent",
    "assessment",
    "checked",
    "claim",
    "completion",
    "event",
    "fleet_status",
    "group",
    "lease",
    "move",
    "reap_report",
    "registration",
    "schedule",
    "settings",
    "task",
    "task_detail",
]

Data = Mapping[str, Any]
T = TypeVar("T")


class Malformed(StoreError):
    """The server's answer is not what this shoal expects: another version, or not shoal."""

    code = "bad_answer"


def _moment(value: object) -> float | None:
    return None if value is None else parse_moment(value, "a time from the server")


def _float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


def _ids(values: object) -> tuple[int, ...]:
    return tuple(int(v) for v in values or ())  # type: ignore[attr-defined]


def task(data: Data) -> Task:
    updated = _moment(data["updated_at"]) or 0.0
    return Task(
        id=int(data["id"]),
        title=data["title"],
        state=TaskState(data["state"]),
        priority=int(data["priority"]),
        body=data.get("body", ""),
        payload=data.get("payload"),
        skills=tuple(data.get("skills", ())),
        domain=data.get("domain"),
        agent=data.get("agent"),
        pinned=bool(data.get("pinned", False)),
        stolen=bool(data.get("stolen", False)),
        parent=data.get("parent"),
        key=data.get("key"),
        attempts=int(data.get("attempts", 0)),
        max_attempts=data.get("max_attempts"),
        lease_ttl=_float(data.get("lease_ttl")),
        expected_duration=_float(data.get("expected_duration")),
        lease_expires=_moment(data.get("lease_expires")),
        result=data.get("result"),
        error=data.get("error"),
        waiting_on=int(data.get("waiting_on", 0)),
        created_at=_moment(data["created_at"]) or 0.0,
        updated_at=updated,
        claimed_at=_moment(data.get("claimed_at")),
        finished_at=_moment(data.get("finished_at")),
        # The API says only whether a task is stalled; its last change is the nearest moment.
        stalled_at=updated if data.get("stalled") else None,
        ready_at=_moment(data.get("ready_at")),
        retry_delay=_float(data.get("retry_delay")),
        group=data.get("group"),
        labels=tuple(data.get("labels", ())),
        posted_by=data.get("posted_by"),
        left_out=_left_out(data),
    )


def _left_out(data: Data) -> tuple[str, ...] | None:
    """A listing's task comes without ``payload`` and ``result`` (``Task.left_out``)."""
    if "payload" in data or "result" in data:
        return None
    held = (("payload", "has_payload"), ("result", "has_result"))
    return tuple(name for name, flag in held if data.get(flag))


def _brief_task(data: Data, state: TaskState) -> Task:
    """A task of which the answer gives only its id and title (and maybe its agent)."""
    return Task(
        id=int(data["id"]),
        title=data.get("title", ""),
        state=state,
        priority=5,
        agent=data.get("agent"),
    )


def task_detail(data: Data) -> TaskDetail:
    return TaskDetail(
        task(data),
        _ids(data.get("after")),
        _ids(data.get("dependents")),
        tuple(event(e) for e in data.get("events", ())),
    )


def agent(data: Data) -> Agent:
    return Agent(
        id=data["id"],
        role=data.get("role", "worker"),
        skills=tuple(data.get("skills", ())),
        domains=tuple(data.get("domains", ())),
        max_concurrent=int(data.get("max_concurrent", 1)),
        manager=bool(data.get("manager", False)),
        ephemeral=bool(data.get("ephemeral", False)),
        status=AgentStatus(data["status"]),
        idle_since=_moment(data.get("idle_since")),
        last_seen=_moment(data.get("last_seen")) or 0.0,
        registered_at=_moment(data.get("registered_at")) or 0.0,
        incarnation=int(data.get("incarnation", 1)),
        queued=int(data.get("queued", 0)),
        failures=int(data.get("failures", 0)),
        paused_until=_moment(data.get("paused_until")),
    )


def registration(data: Data) -> Registration:
    return Registration(
        agent(data["agent"]), bool(data["created"]), int(data["live"]), int(data["max_agents"])
    )


def lease(data: Data) -> Lease:
    """A lease; a listing that hides tokens gives ``""`` for it."""
    return Lease(
        task_id=int(data["task_id"]),
        agent=data.get("agent") or "",
        token=data.get("token") or "",
        expires=_moment(data["expires"]) or 0.0,
    )


def grant(data: Data) -> Grant:
    # ``origin`` (whose queue a steal took it from) is not in the API's answer.
    return Grant(task(data["task"]), lease(data["lease"]), ClaimSource(data["source"]))


def claim(data: Data) -> Claim:
    reason = data.get("reason")
    return Claim(
        tuple(grant(g) for g in data.get("claimed", ())),
        None if reason is None else ClaimReason(reason),
        _moment(data.get("retry_at")),
    )


def completion(data: Data) -> Completion:
    following = data.get("next")
    return Completion(
        task(data["task"]),
        bool(data.get("already_done", False)),
        _ids(data.get("released")),
        None if following is None else claim(following),
    )


def event(data: Data) -> Event:
    return Event(
        id=int(data["id"]),
        at=_moment(data["at"]) or 0.0,
        kind=data["kind"],
        task_id=data.get("task_id"),
        agent=data.get("agent"),
        data=dict(data.get("data") or {}),
    )


def move(data: Data) -> Move:
    return Move(
        int(data["task_id"]), data["title"], int(data["priority"]), data["from"], data["to"]
    )


def reap_report(data: Data) -> ReapReport:
    return ReapReport(
        expired=_ids(data.get("expired")),
        dead=_ids(data.get("dead")),
        offline=tuple(data.get("offline", ())),
        returned=_ids(data.get("returned")),
        terminated=tuple(data.get("terminated", ())),
        stalled=_ids(data.get("stalled")),
        resumed=tuple(data.get("resumed", ())),
        posted=_ids(data.get("posted")),
    )


def schedule(data: Data) -> Schedule:
    return Schedule(
        id=int(data["id"]),
        task=dict(data["task"]),
        every=_float(data["every"]),
        cron=data["cron"],
        tz=data["tz"],
        state=ScheduleState(data["state"]),
        next_at=_moment(data["next_at"]) or 0.0,
        created_at=_moment(data["created_at"]) or 0.0,
        last_task=None if data["last_task"] is None else int(data["last_task"]),
        posted=int(data["posted"]),
        skipped=int(data["skipped"]),
    )


def assessment(data: Data) -> Assessment:
    return Assessment.from_dict(data)


def fleet_status(data: Data) -> FleetStatus:
    # Each agent's held tasks and the stalled ones come as id and title (and agent) only.
    loads = tuple(
        AgentLoad(
            agent(a),
            tuple(_brief_task(t, TaskState.CLAIMED) for t in a.get("current_tasks", ())),
        )
        for a in data.get("agents", ())
    )
    capacity = data.get("capacity", {})
    found = data.get("assessment")
    return FleetStatus(
        at=_moment(data["at"]) or 0.0,
        agents=loads,
        counts=dict(data.get("counts", {})),
        pool=int(data.get("pool", 0)),
        live=int(capacity.get("live", 0)),
        max_agents=int(capacity.get("max_agents", 0)),
        stalled=tuple(_brief_task(t, TaskState.CLAIMED) for t in data.get("stalled", ())),
        assessment=None if found is None else assessment(found),
        stuck=_ids(data.get("stuck")),
        waiting=int(data.get("waiting", 0)),
        next_ready=_moment(data.get("next_ready")),
        expired=tuple(_expired_task(t) for t in data.get("expired", ())),
        groups=tuple(group(g) for g in data.get("groups", ())),
    )


def group(data: Data) -> Group:
    most = data.get("max")
    return Group(data["name"], None if most is None else int(most), int(data.get("held", 0)))


def _expired_task(data: Data) -> Task:
    """A claimed task whose lease ran out, as the status lists it: id, title, agent, when."""
    brief = _brief_task(data, TaskState.CLAIMED)
    return replace(brief, lease_expires=_moment(data.get("expired")))


def settings(data: Data) -> Settings:
    return Settings.from_mapping(data)


def checked(decode: Callable[[Data], T], data: Any, what: str) -> T:
    """``decode(data)``, or ``Malformed`` naming ``what`` when the answer does not fit."""
    try:
        return decode(data)
    except (KeyError, TypeError, ValueError, AttributeError, BadInput) as exc:
        raise Malformed(
            f"the server's answer to {what} is not what this shoal expects ({exc!r})",
            hint="run the same shoal version on both sides (shoal --version)",
        ) from exc
