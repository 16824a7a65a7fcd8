"""The MCP tool ``explain``: why a task waits, or why an agent -- by default, you -- gets
nothing (``Fleet.why_task``/``why_agent``, the same answer as ``shoal why``).

A read, so every session has it (docs/SECURITY.md, "Who may do what": reading the fleet):
explaining another agent acts as no one. Its ``agent_id`` names whom to explain (as
``pause_agent``'s does), not whom to act as: a pinned server keeps it.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from shoal.errors import BadInput
from shoal.faces import explain as words
from shoal.faces.mcp.tooling import Toolbox, session_of

__all__ = ["ExplainResult", "add_explain_tool"]


class ExplainResult(BaseModel):
    """Why, in words (``summary``) and as data (``why``: reasons with stable codes and
    when each ends; for a task, ``takers`` -- who could take it now and by which step; for
    an agent, ``next`` -- the task its claim would take)."""

    summary: str
    why: dict[str, Any]


def add_explain_tool(box: Toolbox) -> None:
    """Register ``explain`` on ``box``'s server."""
    desk = box.desk

    @box.tool(read_only=True)
    def explain(
        ctx: Context,
        task_id: Annotated[int | None, Field(description="A task: why it waits.")] = None,
        agent_id: Annotated[
            str | None, Field(description="An agent: why it gets nothing (default: you).")
        ] = None,
    ) -> ExplainResult:
        """Why a task is not running (what holds it, until when, who takes it next), or
        why an agent gets no work. Call it when a claim comes back empty."""
        if task_id is not None and agent_id is not None:
            raise BadInput("explain takes task_id or agent_id, not both")
        if task_id is not None:
            told = desk.fleet.why_task(task_id)
            return ExplainResult(summary="\n".join(words.task_lines(told)), why=told.to_dict())
        who = agent_id or desk.you(session_of(ctx, desk))
        if who is None:
            raise BadInput(
                "explain needs task_id or agent_id",
                hint="or call register_agent first, to explain yourself",
            )
        said = desk.fleet.why_agent(who)
        return ExplainResult(summary="\n".join(words.agent_lines(said)), why=said.to_dict())
