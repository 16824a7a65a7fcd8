"""``/api/v1/schedules``: recurring tasks over HTTP (``Fleet.schedule`` and the schedule
verbs), beside ``api``'s routes and with the same checks, errors and roles.

A schedule keeps posting work long after whoever made it has gone, so making, pausing,
resuming and cancelling one is an admin's (over MCP, a manager's), like cancelling and
retrying tasks; a viewer reads them (docs/SECURITY.md, "Who may do what").
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, status
from pydantic import Field

from shoal.faces.web.api import _REFUSALS, Admin, FleetDep, Strict, Viewer

__all__ = ["router"]

router = APIRouter(prefix="/api/v1", tags=["schedules"])

ScheduleId = Annotated[int, Path(ge=1, le=2**62)]


class AddSchedule(Strict):
    """``Fleet.schedule``'s arguments (``shoal add TITLE --every/--cron``): ``every`` or
    ``cron`` (with ``tz``), ``start``, and ``post``'s arguments for each occurrence."""

    title: str
    every: float | str | None = None
    cron: str | None = None
    tz: str | None = None
    start: float | str | None = None
    body: str = ""
    payload: Any = None
    priority: int | str = 5
    skills: list[str] = Field(default_factory=list)
    domain: str | None = None
    to: str | None = None
    pinned: bool = False
    expected_duration: float | str | None = None
    lease_ttl: float | str | None = None
    max_attempts: int | None = None
    retry_delay: float | str | None = None
    group: str | None = None
    labels: list[str] = Field(default_factory=list)


@router.get("/schedules", responses=_REFUSALS, summary="Every schedule (shoal schedule list)")
def schedules(fleet: FleetDep, _: Viewer) -> list[dict[str, Any]]:
    return [s.to_dict() for s in fleet.schedules()]


@router.get("/schedules/{schedule_id}", responses=_REFUSALS, summary="One schedule")
def schedule(schedule_id: ScheduleId, fleet: FleetDep, _: Viewer) -> dict[str, Any]:
    return fleet.get_schedule(schedule_id).to_dict()


@router.post(
    "/schedules",
    responses=_REFUSALS,
    status_code=status.HTTP_201_CREATED,
    summary="Make a schedule of recurring tasks (shoal add --every/--cron)",
)
def add_schedule(body: AddSchedule, fleet: FleetDep, _: Admin) -> dict[str, Any]:
    fields = body.model_dump()
    return fleet.schedule(fields.pop("title"), **fields).to_dict()


@router.post("/schedules/{schedule_id}/pause", responses=_REFUSALS, summary="Pause a schedule")
def pause(schedule_id: ScheduleId, fleet: FleetDep, _: Admin) -> dict[str, Any]:
    return fleet.pause_schedule(schedule_id).to_dict()


@router.post("/schedules/{schedule_id}/resume", responses=_REFUSALS, summary="Resume a schedule")
def resume(schedule_id: ScheduleId, fleet: FleetDep, _: Admin) -> dict[str, Any]:
    return fleet.resume_schedule(schedule_id).to_dict()


@router.post("/schedules/{schedule_id}/cancel", responses=_REFUSALS, summary="End a schedule")
def cancel(schedule_id: ScheduleId, fleet: FleetDep, _: Admin) -> dict[str, Any]:
    return fleet.cancel_schedule(schedule_id).to_dict()
