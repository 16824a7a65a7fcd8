"""The MCP tools about the fleet as a whole: post and read work, cancel and retry it, read
the state, assess the workload, change settings -- and the resources that show the same.

None of these act as an agent, so a server pinned to an agent that could not be registered
(a full fleet) still answers them: a model can read why it is not working. Posting and
reading are every session's; the rest acts on others' work or the fleet itself, so only a
manager's server offers it (``manager_only``; ``sessions`` says who is one). Editing is
between: a post records the session's agent (``FleetDesk.poster``), and that agent may edit
what it posted -- a manager, anything (``not_yours`` otherwise, nothing changed).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from shoal.errors import BadInput, ShoalError, UnknownTask
from shoal.faces import posting
from shoal.faces.mcp.errors import NoAgent, NotYours, describe
from shoal.faces.mcp.models import (
    AgentInfo,
    AssessmentInfo,
    GroupResult,
    PostResult,
    SettingsResult,
    StateResult,
    TaskBrief,
    TaskDetailInfo,
    TaskList,
    TaskResult,
    iso_times,
)
from shoal.faces.mcp.sessions import FleetDesk
from shoal.faces.mcp.summary import fleet_summary
from shoal.faces.mcp.tooling import TaskIdArg, Toolbox, session_of
from shoal.vocabulary import TaskState, names

__all__ = ["add_fleet_tools", "add_resources"]

if TYPE_CHECKING:
    StateFilter = str
else:  # the words of TaskState, so a new state is offered without a change here
    StateFilter = Literal[tuple(names(TaskState))]
DurationArg = Annotated[str | float | None, Field(description='Seconds, or "90s", "10m", "2h".')]


def _summary(desk: FleetDesk, you: str | None) -> tuple[str, dict[str, Any]]:
    fleet = desk.fleet
    status = fleet.status()
    text = fleet_summary(status, fleet.ready(limit=5), you, fleet.where)
    return text, iso_times(status.to_dict())


def add_fleet_tools(box: Toolbox) -> None:
    """Register the fleet-wide tools on ``box``'s server."""
    desk = box.desk

    def now() -> float:
        return desk.fleet.clock.now()

    @box.tool()
    def add_task(
        ctx: Context,
        title: Annotated[str, Field(description="A short imperative title.")],
        body: Annotated[str, Field(description="What to do, in full.")] = "",
        priority: Annotated[
            int | str, Field(description="1 (most urgent) to 9, or critical, high, medium, low.")
        ] = 5,
        skills: Annotated[list[str] | None, Field(description="Skills it needs.")] = None,
        domain: Annotated[str | None, Field(description="Its domain (affinity).")] = None,
        to: Annotated[str | None, Field(description="An agent's queue, not the pool.")] = None,
        after: Annotated[list[int] | None, Field(description="Tasks to finish first.")] = None,
        parent: Annotated[int | None, Field(description="The task it was spawned from.")] = None,
        payload: Annotated[Any, Field(description="Any JSON data for the agent.")] = None,
        pinned: Annotated[bool, Field(description="Only agent `to` may run it.")] = False,
        expected_duration: DurationArg = None,
        lease_ttl: DurationArg = None,
        max_attempts: Annotated[int | None, Field(ge=1, description="Claims before dead.")] = None,
        key: Annotated[str | None, Field(description="Idempotency key.")] = None,
        not_before: Annotated[
            str | None, Field(description="Not claimable before (ISO 8601, 2026-12-01T09:00Z).")
        ] = None,
        retry_delay: DurationArg = None,
        group: Annotated[
            str | None, Field(description="Its concurrency group (e.g. deploy).")
        ] = None,
        labels: Annotated[list[str] | None, Field(description="Names to find it by.")] = None,
    ) -> PostResult:
        """Post a task to the pool, or to an agent's queue with `to`. Subtasks: parent= (a
        task you hold: they stay with you), after= to order them."""
        poster = desk.poster(session_of(ctx, desk))
        if key is not None and poster is None:
            raise NoAgent(
                "a post with a key needs an agent: a key gives back only its poster's own "
                "task, and this session has not registered one",
                hint="call register_agent first, or post without a key",
            )
        task, created = posting.post(
            desk.fleet,
            title,
            body=body,
            payload=payload,
            priority=priority,
            skills=skills,
            domain=domain,
            to=to,
            after=after,
            parent=parent,
            pinned=pinned,
            expected_duration=expected_duration,
            lease_ttl=lease_ttl,
            max_attempts=max_attempts,
            key=key,
            not_before=not_before,
            retry_delay=retry_delay,
            group=group,
            labels=labels,
            posted_by=poster,
        )
        at = now()
        message = posting.post_message(task, created, key, at)
        return PostResult.posted(task, at, message, created)

    @box.tool(read_only=True)
    def list_tasks(
        ctx: Context,
        state: Annotated[StateFilter | None, Field(description="Only this state.")] = None,
        agent: Annotated[str | None, Field(description="Only this agent's.")] = None,
        label: Annotated[str | None, Field(description="Only with this label.")] = None,
        limit: Annotated[int, Field(ge=1, le=200, description="Page size.")] = 20,
        cursor: Annotated[str | None, Field(description="next_cursor of the last page.")] = None,
    ) -> TaskList:
        """List tasks, newest first, a page at a time (get_task shows one in full)."""
        before = None
        if cursor is not None:
            if not cursor.isdigit():
                raise BadInput(f"cursor {cursor!r} is not one list_tasks gave")
            before = int(cursor)
        found = desk.fleet.tasks(
            state=state, agent=agent, label=label, limit=limit + 1, before=before
        )
        page, more = found[:limit], len(found) > limit
        at = now()
        return TaskList(
            tasks=[TaskBrief.of(t, at) for t in page],
            next_cursor=str(page[-1].id) if more else None,
        )

    @box.tool(read_only=True)
    def get_task(
        ctx: Context,
        task_id: TaskIdArg,
        events: Annotated[int, Field(ge=0, le=1000, description="Latest events shown.")] = 20,
    ) -> TaskDetailInfo:
        """One task in full: fields, what it waits for, what waits for it, its history."""
        return TaskDetailInfo.of(desk.fleet.show(task_id, events=events), now())

    @box.tool(destructive=True, manager_only=True)
    def cancel_task(ctx: Context, task_id: TaskIdArg) -> TaskResult:
        """Manager: cancel a task that is not finished (a holder's lease ends)."""
        task = desk.fleet.cancel(task_id)
        return TaskResult.of(task, now(), f"task {task.id} cancelled")

    @box.tool(manager_only=True)
    def retry_task(ctx: Context, task_id: TaskIdArg) -> TaskResult:
        """Manager: bring back a dead or cancelled task, or let a task waiting out its
        retry backoff be claimed now."""
        task = desk.fleet.retry(task_id)
        return TaskResult.of(task, now(), f"task {task.id} is {task.state.value} again")

    @box.tool(manager_only=True)
    def set_task_priority(
        ctx: Context,
        task_id: TaskIdArg,
        priority: Annotated[
            int | str, Field(description="1 (most urgent) to 9, or critical, high, medium, low.")
        ],
    ) -> TaskResult:
        """Manager: change the priority of a task that is not finished; the next claims
        take it in its new place."""
        task = desk.fleet.set_priority(task_id, priority)
        return TaskResult.of(task, now(), f"task {task.id} now has priority {task.priority}")

    @box.tool()
    def edit_task(
        ctx: Context,
        task_id: TaskIdArg,
        title: Annotated[str | None, Field(description="A new title.")] = None,
        body: Annotated[str | None, Field(description="A new body.")] = None,
        priority: Annotated[int | str | None, Field(description="1 to 9, or a name.")] = None,
        skills: Annotated[list[str] | None, Field(description="Its skills, all of them.")] = None,
        domain: Annotated[str | None, Field(description="Its domain.")] = None,
        labels: Annotated[list[str] | None, Field(description="Its labels, all of them.")] = None,
        expected_duration: DurationArg = None,
        clear: Annotated[
            list[Literal["domain", "expected_duration"]] | None,
            Field(description="Fields to clear."),
        ] = None,
    ) -> TaskResult:
        """Change a task you posted (a manager: any) that is not finished: text, priority,
        skills, domain, labels, expected duration. Only what you pass changes; a claimed
        task keeps its skills and domain."""
        if not desk.manager:
            you = desk.poster(session_of(ctx, desk))
            if you is None or desk.fleet.get(task_id).posted_by != you:
                raise NotYours(f"task {task_id} was not posted by this session's agent")
        given = {
            "title": title,
            "body": body,
            "priority": priority,
            "skills": skills,
            "domain": domain,
            "labels": labels,
            "expected_duration": expected_duration,
        }
        changes: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
        changes |= dict.fromkeys(clear or ())
        task = desk.fleet.edit(task_id, **changes)
        return TaskResult.of(task, now(), f"task {task.id} edited")

    @box.tool(manager_only=True)
    def pause_agent(
        ctx: Context,
        agent_id: Annotated[str, Field(description="The agent to pause.")],
        duration: Annotated[
            str | float, Field(description='How long: seconds, or "30m", "2h".')
        ] = 3600.0,
    ) -> AgentInfo:
        """Manager: stop an agent claiming for a while (its queue goes back to the pool;
        tasks it holds stay its own); resume_agent ends the pause early."""
        return AgentInfo.of(desk.fleet.pause(agent_id, for_=duration))

    @box.tool(manager_only=True)
    def resume_agent(
        ctx: Context, agent_id: Annotated[str, Field(description="The paused agent.")]
    ) -> AgentInfo:
        """Manager: let an agent the circuit breaker paused (status paused, after
        failing task after task) claim again, once what made it fail is fixed."""
        return AgentInfo.of(desk.fleet.resume(agent_id))

    @box.tool(manager_only=True)
    def assess_workload(ctx: Context) -> AssessmentInfo:
        """Manager: is the fleet idle, underutilized, balanced or overloaded, and should
        agents be spawned (with missing_skills) or idle ones retired."""
        return AssessmentInfo.of(desk.fleet.assess())

    @box.tool(manager_only=True)
    def configure_fleet(
        ctx: Context,
        changes: Annotated[
            dict[str, str | int | float] | None,
            Field(description='e.g. {"max_agents": 6, "lease_ttl": "15m"}; none: read.'),
        ] = None,
    ) -> SettingsResult:
        """Manager: read the fleet's settings, or change some (all or none: a bad name or
        value changes nothing)."""
        fleet = desk.fleet
        before = fleet.settings().to_dict()
        settings = fleet.configure(**changes) if changes else fleet.settings()
        changed = sorted(k for k, v in settings.to_dict().items() if before[k] != v)
        message = f"changed {', '.join(changed)}" if changed else "no setting changed"
        return SettingsResult(settings=settings.to_dict(), changed=changed, message=message)

    @box.tool(manager_only=True)
    def set_group_limit(
        ctx: Context,
        group: Annotated[str, Field(description="The group, as tasks name it (e.g. deploy).")],
        max: Annotated[
            int | None, Field(description="At most this many held at once; null lifts it.")
        ],
    ) -> GroupResult:
        """Manager: let at most `max` tasks of a concurrency group be held at once,
        fleet-wide ("one deploy at a time": max 1); claims pass over a full group's tasks
        and take the next best. max null lifts the limit."""
        fleet = desk.fleet
        found = fleet.clear_group(group) if max is None else fleet.set_group(group, max)
        said = "no limit" if found.max is None else f"at most {found.max} held"
        return GroupResult(**found.to_dict(), message=f"group {found.name}: {said}")

    @box.tool(read_only=True)
    def read_state(ctx: Context) -> Annotated[CallToolResult, StateResult]:
        """The fleet at a glance: tasks by state, what is next, every agent's status and
        load, capacity (live of max_agents), stalled work, the last assessment."""
        you = desk.you(session_of(ctx, desk))
        summary, status = _summary(desk, you)
        data = StateResult(summary=summary, you=you, status=status)
        return CallToolResult(
            content=[TextContent(type="text", text=summary)],
            structured_content=data.model_dump(mode="json"),
        )


def add_resources(server: MCPServer, desk: FleetDesk) -> None:
    """The fleet's status and its tasks as resources (shoal://status, shoal://tasks/ID)."""

    @server.resource(
        "shoal://status",
        name="fleet status",
        description="The fleet at a glance (the read_state summary).",
        mime_type="text/plain",
    )
    def status_resource() -> str:
        try:
            return _summary(desk, desk.fixed)[0]
        except ShoalError as exc:
            raise ResourceError(describe(exc, pinned=desk.pinned)) from exc

    @server.resource(
        "shoal://tasks/{task_id}",
        name="task",
        description="One task in full, as JSON: fields, dependencies, dependents, history.",
        mime_type="application/json",
    )
    def task_resource(task_id: str) -> str:
        if not task_id.isdigit():
            raise ResourceNotFoundError(f"{task_id!r} is not a task id; use shoal://tasks/12")
        try:
            detail = desk.fleet.show(int(task_id))
        except UnknownTask as exc:
            raise ResourceNotFoundError(describe(exc, pinned=desk.pinned)) from exc
        except ShoalError as exc:
            raise ResourceError(describe(exc, pinned=desk.pinned)) from exc
        shown = TaskDetailInfo.of(detail, desk.fleet.clock.now())
        return json.dumps(shown.model_dump(mode="json"), indent=2)
