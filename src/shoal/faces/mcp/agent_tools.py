"""The MCP tools an agent works with: join, claim, wait, finish, heartbeat, report status.

Each goes through the desk (``sessions``) to know who the call acts as, and through
``Fleet`` for everything else, so an agent behind MCP follows exactly the rules of one
using the CLI or the library: the same claim cascade, the same leases, the same refusals.

``wait_for_task`` is the one long call: it waits in slices of a few seconds, each one a
``Fleet.claim(wait=...)`` in a worker thread, so the server keeps answering other calls, a
cancelled wait ends within a slice (giving back anything a slice claimed), no slice holds
the store's lock while it waits, and the client gets a progress notification per slice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context
from pydantic import Field

from shoal.clock import monotonic
from shoal.faces import render
from shoal.faces.mcp.errors import AlreadyDone
from shoal.faces.mcp.models import (
    AgentInfo,
    ClaimResult,
    CompletionResult,
    HeartbeatResult,
    LeaseInfo,
    RegistrationResult,
    TaskBrief,
    TaskResult,
)
from shoal.faces.mcp.sessions import FleetDesk, Session
from shoal.faces.mcp.tooling import STDIO, AgentArg, TaskIdArg, TokenArg, Toolbox, session_of
from shoal.model import Claim
from shoal.vocabulary import REPORTED_STATUSES, names

__all__ = ["MAX_WAIT", "add_agent_tools"]

#: The longest wait_for_task may block, in seconds (clients time out long tool calls).
MAX_WAIT = 600.0
_WAIT_SLICE = 1.0  # seconds per Fleet.claim(wait=...) inside wait_for_task

#: A stdio session is its server process: when the client ends it, the task goes back. A
#: client that starts a server for every call (MCP Inspector's CLI mode) loses each claim.
KEEP_SESSION = (
    " Keep this MCP session open until then: when it ends, the task goes back to the fleet"
    " (a client that starts a new server for each call cannot keep a claim)."
)

if TYPE_CHECKING:
    StatusArg = str
else:  # the statuses an agent may report, from AgentStatus
    StatusArg = Literal[tuple(names(REPORTED_STATUSES))]


async def _claim_in_thread(desk: FleetDesk, agent: str, wait: float) -> Claim:
    """``desk.claim`` in a worker thread. If the call is cancelled while the thread runs,
    whatever it claimed is released, not left held until its lease runs out."""
    got: list[Claim] = []

    def attempt() -> Claim:
        claim = desk.claim(agent, wait)
        got.append(claim)
        return claim

    try:
        return await anyio.to_thread.run_sync(attempt)
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            for claim in got:
                await anyio.to_thread.run_sync(desk.release_quietly, claim)
        raise


def add_agent_tools(box: Toolbox) -> None:
    """Register the agent's tools on ``box``'s server."""
    desk = box.desk

    def now() -> float:
        return desk.fleet.clock.now()

    def keep(session: Session | None) -> str:
        """What a claim's holder is told to keep: a pinned stdio server's session, which
        is the claim's life (an HTTP session, or an unpinned one, says so elsewhere)."""
        return KEEP_SESSION if desk.pinned and session and session.name == STDIO else ""

    @box.tool(unpinned_only=True)
    def register_agent(
        ctx: Context,
        agent: Annotated[str, Field(description="Your agent id, e.g. dev-1.")],
        role: Annotated[str, Field(description="e.g. developer, reviewer")] = "worker",
        skills: Annotated[list[str] | None, Field(description="Skill names.")] = None,
        domains: Annotated[list[str] | None, Field(description="Domains you know best.")] = None,
        max_concurrent: Annotated[int, Field(ge=1, le=1000, description="Tasks held at once.")] = 1,
        ephemeral: Annotated[bool, Field(description="Retired when idle too long.")] = False,
    ) -> RegistrationResult:
        """Join the fleet as an agent (the protocol's register_node); call it first. Refused
        when max_agents agents are live. Later calls in this session act as this agent, and
        it leaves the fleet when the session ends."""
        reg = desk.register(
            session_of(ctx, desk),
            agent,
            role=role,
            skills=skills,
            domains=domains,
            max_concurrent=max_concurrent,
            ephemeral=ephemeral,
        )
        return RegistrationResult(
            agent=AgentInfo.of(reg.agent),
            created=reg.created,
            live=reg.live,
            max_agents=reg.max_agents,
            message=render.registration_text(reg),
        )

    @box.tool()
    def set_agent_status(
        ctx: Context,
        status: Annotated[StatusArg, Field(description="terminated is final: frees your place.")],
        release: Annotated[bool, Field(description="Give back held tasks, untouched.")] = False,
        agent: AgentArg = None,
    ) -> AgentInfo:
        """Report your status. Set terminated when you leave for good (your tasks go back to
        the others); managers should stay. idle while holding tasks needs release."""
        who = desk.acting(session_of(ctx, desk), agent)
        return AgentInfo.of(desk.fleet.set_status(who, status, release=release))

    @box.tool(idempotent=True)
    def heartbeat(ctx: Context, agent: AgentArg = None) -> HeartbeatResult:
        """Extend the leases of every task you hold; call it during long work, before
        lease.expires_in_s runs out."""
        who = desk.acting(session_of(ctx, desk), agent)
        leases = desk.fleet.heartbeat(who)
        at = now()
        return HeartbeatResult(agent=who, leases=[LeaseInfo.of(lease, at) for lease in leases])

    @box.tool()
    async def claim_best_task(ctx: Context, agent: AgentArg = None) -> ClaimResult:
        """Claim the best task you can do now, with its lease: your own queue, then the pool,
        then a steal. claimed=false says why (reason) and what to do (next_step)."""
        session = session_of(ctx, desk)
        who = await anyio.to_thread.run_sync(desk.acting, session, agent)
        claim = await _claim_in_thread(desk, who, 0.0)
        return ClaimResult.of(claim, now(), keep=keep(session))

    @box.tool()
    async def wait_for_task(
        ctx: Context,
        timeout_seconds: Annotated[
            float, Field(ge=0, le=MAX_WAIT, description=f"At most {MAX_WAIT:g}.")
        ] = 60.0,
        agent: AgentArg = None,
    ) -> ClaimResult:
        """Wait until there is a task you can do, then claim it (as claim_best_task). Sends
        progress while it waits; claimed=false after timeout_seconds."""
        session = session_of(ctx, desk)
        who = await anyio.to_thread.run_sync(desk.acting, session, agent)
        clock = desk.fleet.clock  # a manual clock's wait passes at once, as Fleet.claim's
        began = monotonic(clock)
        deadline = began + timeout_seconds
        await ctx.report_progress(0.0, timeout_seconds, "looking for work")
        while True:
            remaining = max(0.0, deadline - monotonic(clock))
            claim = await _claim_in_thread(desk, who, min(remaining, _WAIT_SLICE))
            waited = round(monotonic(clock) - began, 3)
            if claim or claim.reason != "empty" or remaining <= _WAIT_SLICE:
                return ClaimResult.of(claim, now(), waited, keep=keep(session))
            await ctx.report_progress(waited, timeout_seconds, "waiting for work")

    @box.tool()
    def complete_task(
        ctx: Context,
        task_id: TaskIdArg,
        result: Annotated[Any, Field(description="The outcome, any JSON value.")] = None,
        token: TokenArg = None,
        claim_next: Annotated[bool, Field(description="Also claim your next task.")] = False,
        agent: AgentArg = None,
    ) -> CompletionResult:
        """Mark a task you hold done, with its result; tasks waiting on it become ready. A
        lost lease is refused (stale_lease): drop the result."""
        session = session_of(ctx, desk)
        lease = desk.lease_for(session, agent, task_id, token)
        # The next claim is for the agent that held the task: only if this session holds it.
        then = 1 if claim_next and desk.holds(session, lease.agent) else 0
        done = desk.fleet.complete(lease, result, then_claim=then)
        if done.already_done:  # finished under this lease a moment ago
            raise AlreadyDone(f"task {task_id} is done already; nothing was changed")
        at = now()
        follow = None
        if done.next is not None:
            follow = ClaimResult.of(done.next, at, keep=keep(session))
        step = (
            "See `next` for your next task."
            if follow is not None and follow.claimed
            else "Call claim_best_task for your next task."
        )
        return CompletionResult(
            task=TaskBrief.of(done.task, at),
            released=list(done.released),
            next=follow,
            next_step=step,
        )

    @box.tool()
    def fail_task(
        ctx: Context,
        task_id: TaskIdArg,
        error: Annotated[str, Field(description="What went wrong, for the next try.")] = "",
        retry: Annotated[bool, Field(description="false: dead at once.")] = True,
        token: TokenArg = None,
        agent: AgentArg = None,
    ) -> TaskResult:
        """Report that a task you hold failed: pending again (after a backoff) while
        attempts remain, else dead."""
        lease = desk.lease_for(session_of(ctx, desk), agent, task_id, token)
        task = desk.fleet.fail(lease, error, retry=retry)
        message = f"task {task.id} failed; it is {task.state.value} now"
        return TaskResult.of(task, now(), message)

    @box.tool()
    def release_task(
        ctx: Context, task_id: TaskIdArg, token: TokenArg = None, agent: AgentArg = None
    ) -> TaskResult:
        """Hand a task you hold back untouched (no attempt counted), e.g. when it needs
        skills you lack."""
        lease = desk.lease_for(session_of(ctx, desk), agent, task_id, token)
        task = desk.fleet.release(lease)
        message = f"task {task.id} released; it is {task.state.value} again"
        return TaskResult.of(task, now(), message)
