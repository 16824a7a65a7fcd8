"""The MCP tools of recurring tasks: make a schedule, list them, pause, resume or cancel one
(``set_schedule_state``, as ``set_agent_status`` sets an agent's: one tool, not three, keeps
the tool list every session carries short).

A schedule keeps posting work long after the session that made it has ended, so making and
changing one acts on the fleet, not on a session's own work: a manager's server offers those
(``manager_only``), as it offers cancelling tasks. Listing is reading the fleet, which
every session may do (docs/SECURITY.md, "Who may do what").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from shoal.faces.mcp.models import Time
from shoal.faces.mcp.tooling import Toolbox
from shoal.model import Schedule
from shoal.vocabulary import ScheduleState, names

__all__ = ["ScheduleInfo", "ScheduleList", "add_schedule_tools"]

if TYPE_CHECKING:
    ScheduleStateArg = str
else:  # the words of ScheduleState, so a new one is offered without a change here
    ScheduleStateArg = Literal[tuple(names(ScheduleState))]


class ScheduleInfo(BaseModel):
    """A schedule: how it recurs (every seconds, or cron in tz), its next tick, the
    latest occurrence posted, and ticks skipped while that one was unfinished."""

    id: int
    title: str
    state: str
    every: float | None
    cron: str | None
    tz: str | None
    next_at: Time
    last_task: int | None
    posted: int
    skipped: int

    @classmethod
    def of(cls, schedule: Schedule) -> ScheduleInfo:
        return cls.model_validate(schedule.to_dict())


class ScheduleList(BaseModel):
    schedules: list[ScheduleInfo]


def add_schedule_tools(box: Toolbox) -> None:
    """Register the schedule tools on ``box``'s server."""
    desk = box.desk

    @box.tool(manager_only=True)
    def add_schedule(
        ctx: Context,
        title: Annotated[str, Field(description="A short imperative title.")],
        every: Annotated[str | float | None, Field(description='e.g. "30m"')] = None,
        cron: Annotated[str | None, Field(description='e.g. "0 3 * * *"')] = None,
        tz: Annotated[str | None, Field(description='cron\'s zone ("Europe/Paris"); UTC')] = None,
        start: Annotated[str | None, Field(description="First tick, ISO 8601.")] = None,
        body: Annotated[str, Field(description="What to do.")] = "",
        priority: Annotated[int | str, Field(description="1-9, or high...")] = 5,
        skills: Annotated[list[str] | None, Field(description="Skills it needs.")] = None,
        to: Annotated[str | None, Field(description="An agent's queue, not the pool.")] = None,
    ) -> ScheduleInfo:
        """Manager: post a task again and again, `every` so often or at `cron` times; at
        most one pending at a time, missed ticks not made up."""
        made = desk.fleet.schedule(
            title,
            every=every,
            cron=cron,
            tz=tz,
            start=start,
            body=body,
            priority=priority,
            skills=skills,
            to=to,
        )
        return ScheduleInfo.of(made)

    @box.tool(read_only=True)
    def list_schedules(ctx: Context) -> ScheduleList:
        """The fleet's schedules of recurring tasks, cancelled ones too."""
        return ScheduleList(schedules=[ScheduleInfo.of(s) for s in desk.fleet.schedules()])

    @box.tool(manager_only=True)
    def set_schedule_state(
        ctx: Context,
        schedule_id: Annotated[int, Field(ge=1, description="The schedule.")],
        state: Annotated[ScheduleStateArg, Field(description="Its new state.")],
    ) -> ScheduleInfo:
        """Manager: pause a schedule, make it active again (from the next tick to come), or
        cancel it for good (tasks it posted stay)."""
        verbs = {
            "paused": desk.fleet.pause_schedule,
            "active": desk.fleet.resume_schedule,
            "cancelled": desk.fleet.cancel_schedule,
        }
        return ScheduleInfo.of(verbs[state](schedule_id))
