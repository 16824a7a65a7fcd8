"""``shoal mcp``: a Model Context Protocol server, so LLM agents join a fleet with no glue code.

An MCP client (Claude Code, Codex, any other) starts ``shoal mcp`` and gets shoal's verbs as
tools: register, claim the best task, wait for one, complete, fail, release, heartbeat, post
work, report status, assess the workload, read the fleet. Every tool goes through ``Fleet``
(never to a store), so an agent behind MCP follows exactly the rules of one using the CLI or
the library: the same claim cascade, the same leases, the same refusals.

Identity
--------
``shoal mcp --agent ID`` fixes the agent this server acts as, registering it at start; then
no call can act as another agent (one that names another is a tool error). Without it, the
tools take an ``agent`` argument, and ``register_agent`` makes that agent the session's
default for later calls. Leases are fenced as in the core: only the current token of a task
may finish it. The server remembers the leases it handed out, so a model may leave the token
out of complete/fail/release; the remembered token is still checked, and a task now held by
someone else is refused before the core is even asked.

Threads
-------
The SDK runs each synchronous tool in a worker thread. They share one ``Fleet``: the SQLite
store holds one connection behind a lock, so each transaction runs alone in this process
(and takes its turn with other processes in the writer queue); reads and writes never
interleave. ``wait_for_task`` is the one long call: it waits in slices of a few seconds,
each one a ``Fleet.claim(wait=...)`` in a worker thread, so the server keeps answering
other calls, a cancelled wait ends within a slice, and no slice holds the store's lock
while it waits.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Annotated, Any, Literal, TypeVar

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from shoal import __version__
from shoal.errors import LeaseLost, ShoalError, UnknownTask
from shoal.faces import posting, render
from shoal.faces.mcp_errors import ForeignAgent, NoAgent, NoToken, describe
from shoal.faces.mcp_models import (
    AgentInfo,
    AssessmentInfo,
    ClaimResult,
    CompletionResult,
    HeartbeatResult,
    LeaseInfo,
    RegistrationResult,
    SettingsResult,
    StateResult,
    TaskDetailInfo,
    TaskInfo,
    TaskList,
    TaskResult,
)
from shoal.faces.mcp_summary import fleet_summary
from shoal.fleet import Fleet
from shoal.model import Claim, FleetStatus, Lease, TaskState

__all__ = ["INSTRUCTIONS", "MAX_WAIT", "FleetDesk", "build_server", "serve"]

F = TypeVar("F", bound=Callable[..., Any])

#: The longest wait_for_task may block, in seconds (clients time out long tool calls).
MAX_WAIT = 600.0
_WAIT_SLICE = 2.0  # seconds per Fleet.claim(wait=...) inside wait_for_task
_MAX_SESSIONS = 10_000  # HTTP sessions whose registered agent is remembered (oldest go first)

INSTRUCTIONS = """\
shoal coordinates a fleet of agents sharing tasks. How to work in it:
1. register_agent once with your skills (skip it if the server was started with --agent).
2. claim_best_task gives you the best task you can do and its lease. Do the work, then
   complete_task (or fail_task if it cannot be done; release_task to hand it back untouched).
3. For long work, call heartbeat before the lease expires, or the task goes back to others.
4. When nothing is waiting, wait_for_task blocks until work arrives (up to a timeout).
5. add_task posts new work (subtasks with parent=, ordering with after=).
Managers: read_state shows the fleet; assess_workload says whether to spawn agents or retire
idle ones. An idle non-manager agent should set_agent_status terminated when told to.
Errors say what went wrong and what to do next; a refused call changes nothing."""


# ---------------------------------------------------------------------- shared state


class FleetDesk:
    """What the tools share: the fleet, who this server acts as, and the leases it handed out.

    ``fixed`` is the agent given with ``--agent`` (None: each call names its agent, or uses
    the one its session registered). Leases are remembered by task id with their holder,
    so a call may omit a token only for a task this server claimed for the same agent.
    """

    def __init__(self, fleet: Fleet, fixed: str | None = None) -> None:
        self.fleet = fleet
        self.fixed = fixed
        self._lock = threading.Lock()
        self._leases: dict[int, Lease] = {}
        self._session_agents: OrderedDict[str, str] = OrderedDict()

    # identity ------------------------------------------------------------

    def acting(self, session: str | None, agent: str | None) -> str:
        """The agent a call acts as; refuses to act as anyone but the fixed agent."""
        if self.fixed is not None:
            if agent is not None and agent != self.fixed:
                raise ForeignAgent(
                    f"this server acts as agent {self.fixed!r} (shoal mcp --agent "
                    f"{self.fixed}); it cannot act as {agent!r}"
                )
            return self.fixed
        if agent is not None:
            return agent
        with self._lock:
            known = self._session_agents.get(session) if session is not None else None
        if known is None:
            raise NoAgent("this call needs an agent, and this session has not registered one")
        return known

    def adopt(self, session: str | None, agent: str) -> None:
        """Make ``agent`` the session's default for later calls (after register_agent)."""
        if session is None:
            return
        with self._lock:
            self._session_agents[session] = agent
            self._session_agents.move_to_end(session)
            while len(self._session_agents) > _MAX_SESSIONS:
                self._session_agents.popitem(last=False)

    # leases --------------------------------------------------------------

    def remember(self, leases: Sequence[Lease]) -> None:
        with self._lock:
            for lease in leases:
                self._leases[lease.task_id] = lease

    def forget(self, lease: Lease) -> None:
        """Drop the remembered lease if it is ``lease`` (a wrong token forgets nothing)."""
        with self._lock:
            known = self._leases.get(lease.task_id)
            if known is not None and known.token == lease.token:
                del self._leases[lease.task_id]

    @contextlib.contextmanager
    def ending(self, lease: Lease) -> Iterator[None]:
        """Around a call that ends ``lease``: forget it once it is over (done, failed,
        released or lost), but not when the call was refused for another reason."""
        try:
            yield
        except LeaseLost:
            self.forget(lease)
            raise
        self.forget(lease)

    def lease_for(self, agent: str, task_id: int, token: str | None) -> Lease:
        """The lease ``agent`` finishes ``task_id`` with: the given token or the remembered
        one. A task someone else holds now is refused here, whatever the token."""
        if token:
            lease = Lease(task_id=task_id, agent=agent, token=token, expires=0.0)
        else:
            with self._lock:
                remembered = self._leases.get(task_id)
            if remembered is None or remembered.agent != agent:
                raise NoToken(
                    f"no lease token for task {task_id}: this server did not hand agent "
                    f"{agent!r} a lease on it"
                )
            lease = remembered
        task = self.fleet.get(task_id)
        if task.state is TaskState.CLAIMED and task.agent != agent:
            with self._lock:  # what this server remembers for the agent is stale now
                if (stale := self._leases.get(task_id)) is not None and stale.agent == agent:
                    del self._leases[task_id]
            raise LeaseLost(
                f"lease lost: task {task_id} is held by agent {task.agent!r}, not by {agent!r}"
            )
        return lease

    def claim(self, agent: str, wait: float) -> Claim:
        """One claim (waiting up to ``wait`` seconds for work); its leases are remembered."""
        claim = self.fleet.claim(agent, 1, wait=wait)
        self.remember(claim.leases)
        return claim

    def release_quietly(self, claim: Claim) -> None:
        """Give back what a cancelled call claimed, so it does not sit out its lease."""
        for lease in claim.leases:
            with contextlib.suppress(ShoalError):
                self.fleet.release(lease)
            self.forget(lease)


# ---------------------------------------------------------------------- argument types

AgentArg = Annotated[
    str | None,
    Field(
        description="Your agent id. Leave it out when the server was started with --agent, "
        "or after register_agent in this session."
    ),
]
TaskIdArg = Annotated[int, Field(description="The task's id (e.g. from claim_best_task).")]
TokenArg = Annotated[
    str | None,
    Field(
        description="The lease token from claim_best_task or wait_for_task. May be left out "
        "for a task this server claimed for you."
    ),
]
PriorityArg = Annotated[
    int | str,
    Field(
        description="1 (most urgent) to 9, or critical (1), high (2), medium (5), low (8).",
        examples=[2, "high"],
    ),
]
SkillsArg = Annotated[
    list[str] | None,
    Field(description='Skill names, e.g. ["python", "sql"].', examples=[["python"]]),
]
DurationArg = Annotated[
    str | float | None,
    Field(description='Seconds, or a number with a unit: 90, "90s", "10m", "2h".'),
]
StatusArg = Literal["idle", "working", "waiting", "offline", "terminated"]
StateFilter = Literal["blocked", "pending", "claimed", "done", "dead", "cancelled"]


_STDIO = "stdio"  # the one session of a stdio server: the process is the session


def _session(ctx: Context) -> str | None:
    """A key for the MCP session a call came in on, or None when there is none.

    Over stdio the server process serves one client, so the process is the session. Over
    streamable HTTP it is the transport's session id (assigned and checked by the
    transport); a stateless request has none, and must name its agent in each call.
    """
    headers = ctx.headers
    if headers is None:
        return _STDIO
    return headers.get("mcp-session-id")


def _refusals(fn: F) -> F:
    """Turn shoal's refusals into MCP tool errors (isError results the model can act on)."""
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except ShoalError as exc:
                raise ToolError(describe(exc)) from exc

        return run_async  # type: ignore[return-value]

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ShoalError as exc:
            raise ToolError(describe(exc)) from exc

    return run  # type: ignore[return-value]


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


# ---------------------------------------------------------------------- the server


def build_server(desk: FleetDesk) -> MCPServer:
    """An MCP server with shoal's tools and resources over ``desk``'s fleet."""
    server: MCPServer = MCPServer(
        "shoal",
        title="shoal: a work-stealing task coordinator",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
    )
    fleet = desk.fleet

    def tool(
        name: str | None = None, *, read_only: bool = False, idempotent: bool = False
    ) -> Callable[[F], F]:
        def register(fn: F) -> F:
            server.add_tool(
                _refusals(fn),
                name=name or fn.__name__,
                annotations=ToolAnnotations(
                    read_only_hint=read_only,
                    destructive_hint=False,
                    idempotent_hint=idempotent or read_only,
                    open_world_hint=False,
                ),
            )
            return fn

        return register

    # -- agents ----------------------------------------------------------

    def register_agent(
        ctx: Context,
        agent: Annotated[
            str | None,
            Field(
                description="Your agent id (1-128 letters, digits, _ . : @ / -). Leave it out "
                "when the server was started with --agent."
            ),
        ] = None,
        role: Annotated[str, Field(description="e.g. developer, architect, manager")] = "worker",
        skills: SkillsArg = None,
        domains: Annotated[
            list[str] | None,
            Field(description="Domains you know best; their tasks rank higher for you."),
        ] = None,
        max_concurrent: Annotated[
            int, Field(ge=1, le=1000, description="Tasks you may hold at once.")
        ] = 1,
        manager: Annotated[
            bool,
            Field(description="A manager: exempt from max_agents and never retired as idle."),
        ] = False,
        ephemeral: Annotated[
            bool, Field(description="Terminated by the fleet after idle_timeout without work.")
        ] = False,
    ) -> RegistrationResult:
        """Join the fleet as an agent (or update your live registration). Call this first.

        Refused when the fleet already has max_agents live agents (managers do not count):
        then do not start working. Registering again with the same id updates skills and
        the rest; a terminated id starts anew. Later calls in this session act as this
        agent by default.
        """
        who = desk.acting(_session(ctx), agent)
        reg = fleet.register(
            who,
            role=role,
            skills=skills,
            domains=domains,
            max_concurrent=max_concurrent,
            manager=manager,
            ephemeral=ephemeral,
        )
        desk.adopt(_session(ctx), who)
        return RegistrationResult(
            agent=AgentInfo.of(reg.agent),
            created=reg.created,
            live=reg.live,
            max_agents=reg.max_agents,
            message=render.registration_text(reg),
        )

    tool()(register_agent)
    server.add_tool(
        _refusals(register_agent),
        name="register_node",
        description="Alias of register_agent (the name the anti-idle protocol uses): join the "
        "fleet as an agent, refused when max_agents live agents already exist.",
    )

    @tool()
    def set_agent_status(
        ctx: Context,
        status: Annotated[
            StatusArg,
            Field(
                description="idle (no work), working, waiting (between tasks), offline, or "
                "terminated (final: releases your tasks and frees your place in the fleet)."
            ),
        ],
        agent: AgentArg = None,
    ) -> AgentInfo:
        """Report your status. Entering idle stamps idle_since; leaving it clears it.

        Set terminated before you exit for good: your held tasks go back to the others and
        your place under max_agents is freed. Managers should stay.
        """
        who = desk.acting(_session(ctx), agent)
        return AgentInfo.of(fleet.set_status(who, status))

    @tool()
    def heartbeat(ctx: Context, agent: AgentArg = None) -> HeartbeatResult:
        """Say you are alive and extend the leases of every task you hold.

        Call it during long work, well before a lease expires (see lease.expires_at);
        a task whose lease ran out goes back to the others.
        """
        who = desk.acting(_session(ctx), agent)
        leases = fleet.heartbeat(who)
        desk.remember(leases)
        return HeartbeatResult(agent=who, leases=[LeaseInfo.of(lease) for lease in leases])

    # -- claiming --------------------------------------------------------

    @tool()
    async def claim_best_task(ctx: Context, agent: AgentArg = None) -> ClaimResult:
        """Claim the best task you can do right now, with its lease; or say why there is none.

        The order: your own queue first (work routed to you or spawned by you), then the
        shared pool by priority, domain match and age, then a task stolen from the busiest
        agent's backlog. Returns claimed=false with reason "empty" (nothing you can do is
        waiting: call wait_for_task) or "busy" (you hold max_concurrent tasks already).
        """
        who = desk.acting(_session(ctx), agent)
        claim = await _claim_in_thread(desk, who, 0.0)
        return ClaimResult.of(claim)

    @tool()
    async def wait_for_task(
        ctx: Context,
        timeout_seconds: Annotated[
            float,
            Field(
                ge=0,
                le=MAX_WAIT,
                description=f"How long to wait for work, in seconds (at most {MAX_WAIT:g}).",
            ),
        ] = 60.0,
        agent: AgentArg = None,
    ) -> ClaimResult:
        """Wait until there is a task you can do, then claim it (like claim_best_task).

        Use it instead of polling when claim_best_task says "empty": it returns as soon as
        work you can do is posted or freed, or with claimed=false after timeout_seconds.
        """
        who = desk.acting(_session(ctx), agent)
        began = time.monotonic()
        deadline = began + timeout_seconds
        while True:
            remaining = max(0.0, deadline - time.monotonic())
            claim = await _claim_in_thread(desk, who, min(remaining, _WAIT_SLICE))
            waited = round(time.monotonic() - began, 3)
            if claim or claim.reason == "busy" or remaining <= _WAIT_SLICE:
                return ClaimResult.of(claim, waited)
            await ctx.report_progress(waited, timeout_seconds, "waiting for work")

    @tool()
    def complete_task(
        ctx: Context,
        task_id: TaskIdArg,
        result: Annotated[
            Any, Field(description="The outcome, any JSON value (text, number, object).")
        ] = None,
        token: TokenArg = None,
        claim_next: Annotated[
            bool,
            Field(description="Also claim your next task in the same step (see `next`)."),
        ] = False,
        agent: AgentArg = None,
    ) -> CompletionResult:
        """Mark a task you hold as done, with its result. Tasks waiting on it become ready.

        Completing twice with the same lease is harmless (already_done=true). If your lease
        was lost (it expired and the task went to someone else), this is refused: drop
        the result and claim a new task.
        """
        who = desk.acting(_session(ctx), agent)
        lease = desk.lease_for(who, task_id, token)
        with desk.ending(lease):
            done = fleet.complete(lease, result, then_claim=1 if claim_next else 0)
        follow = None
        if done.next is not None:
            desk.remember(done.next.leases)
            follow = ClaimResult.of(done.next)
        step = (
            "See `next` for your next task."
            if follow is not None and follow.claimed
            else "Call claim_best_task for your next task."
        )
        return CompletionResult(
            task=TaskInfo.of(done.task),
            already_done=done.already_done,
            released=list(done.released),
            next=follow,
            next_step=step,
        )

    @tool()
    def fail_task(
        ctx: Context,
        task_id: TaskIdArg,
        error: Annotated[str, Field(description="What went wrong, for whoever tries next.")] = "",
        retry: Annotated[
            bool, Field(description="false: the task is dead at once, not retried.")
        ] = True,
        token: TokenArg = None,
        agent: AgentArg = None,
    ) -> TaskResult:
        """Report that a task you hold failed. It goes back to pending for another attempt
        while attempts remain (and retry is true), else it is dead."""
        who = desk.acting(_session(ctx), agent)
        lease = desk.lease_for(who, task_id, token)
        with desk.ending(lease):
            task = fleet.fail(lease, error, retry=retry)
        return TaskResult(
            task=TaskInfo.of(task), message=f"task {task.id} failed; it is {task.state.value} now"
        )

    @tool()
    def release_task(
        ctx: Context, task_id: TaskIdArg, token: TokenArg = None, agent: AgentArg = None
    ) -> TaskResult:
        """Hand a task you hold back untouched (not counted as a failed attempt), e.g. when
        it needs skills you lack. It is pending again for others."""
        who = desk.acting(_session(ctx), agent)
        lease = desk.lease_for(who, task_id, token)
        with desk.ending(lease):
            task = fleet.release(lease)
        return TaskResult(
            task=TaskInfo.of(task),
            message=f"task {task.id} released; it is {task.state.value} again",
        )

    # -- posting and reading work ----------------------------------------

    @tool()
    def add_task(
        title: Annotated[str, Field(description="A short imperative title.")],
        body: Annotated[str, Field(description="What to do, in full.")] = "",
        priority: PriorityArg = 5,
        skills: SkillsArg = None,
        domain: Annotated[
            str | None, Field(description="The domain it belongs to (affinity).")
        ] = None,
        to: Annotated[
            str | None, Field(description="Route it to this agent's queue instead of the pool.")
        ] = None,
        after: Annotated[
            list[int] | None,
            Field(description="Task ids that must be done before this one can start."),
        ] = None,
        parent: Annotated[
            int | None,
            Field(
                description="The task this one was spawned from; if you hold it, the new task "
                "goes to the head of your own queue."
            ),
        ] = None,
        payload: Annotated[Any, Field(description="Any JSON data for the agent.")] = None,
        pinned: Annotated[
            bool, Field(description="Only agent `to` may run it; never stolen.")
        ] = False,
        expected_duration: DurationArg = None,
        lease_ttl: DurationArg = None,
        max_attempts: Annotated[
            int | None, Field(ge=1, description="Claims before the task is dead.")
        ] = None,
        key: Annotated[
            str | None,
            Field(description="Idempotency key: adding the same key again returns the first task."),
        ] = None,
    ) -> TaskResult:
        """Post a task for the fleet: to the shared pool, or to one agent's queue with `to`.

        Subtasks: pass parent= (the task you hold) to keep them with you, after= to order them.
        """
        task, created = posting.post(
            fleet,
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
        )
        return TaskResult(
            task=TaskInfo.of(task),
            created=created,
            message=posting.post_message(task, created, key),
        )

    @tool(read_only=True)
    def list_tasks(
        state: Annotated[StateFilter | None, Field(description="Only tasks in this state.")] = None,
        agent: Annotated[
            str | None, Field(description="Only tasks of this agent (queued, held or last held).")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="At most this many.")] = 50,
    ) -> TaskList:
        """List tasks, newest first, optionally only one state or one agent's."""
        return TaskList(
            tasks=[TaskInfo.of(t) for t in fleet.tasks(state=state, agent=agent, limit=limit)]
        )

    @tool(read_only=True)
    def get_task(
        task_id: TaskIdArg,
        events: Annotated[
            int, Field(ge=0, le=1000, description="How many of its latest events to include.")
        ] = 20,
    ) -> TaskDetailInfo:
        """One task in full: its fields, what it waits for, what waits for it, its history."""
        return TaskDetailInfo.of(fleet.show(task_id, events=events))

    # -- the hub ---------------------------------------------------------

    @tool()
    def assess_workload() -> AssessmentInfo:
        """Assess the workload: idle, underutilized, balanced or overloaded, and what to do
        -- spawn (start another agent, with missing_skills), terminate_idle (retire an idle
        agent) or maintain. It only recommends; managers act on it."""
        return AssessmentInfo.of(fleet.assess())

    @tool()
    def configure_fleet(
        changes: Annotated[
            dict[str, str | int | float] | None,
            Field(
                description='Settings to change, by name, e.g. {"steal_threshold": 0, '
                '"locality_wait": "20m", "order": "longest_first"}. Leave it out '
                "to read the settings."
            ),
        ] = None,
    ) -> SettingsResult:
        """Read the fleet's settings, or change some at run time -- all of them or none: a
        bad name or value is refused with what is allowed and changes nothing. The claim is
        steered by steal_threshold (queue depth a dry agent may steal from), domain_wait and
        locality_wait (how long other domains' new work is left to its own agents) and order
        (priority, or longest_first by expected_duration)."""
        before = fleet.settings().to_dict()
        settings = fleet.configure(**changes) if changes else fleet.settings()
        changed = sorted(k for k, v in settings.to_dict().items() if before[k] != v)
        message = f"changed {', '.join(changed)}" if changed else "no setting changed"
        return SettingsResult(settings=settings.to_dict(), changed=changed, message=message)

    def state_now(you: str | None) -> tuple[str, FleetStatus]:
        status = fleet.status()
        ready = fleet.ready(limit=5)
        return fleet_summary(status, ready, you, fleet.url), status

    @tool(read_only=True)
    def read_state(ctx: Context) -> Annotated[CallToolResult, StateResult]:
        """The fleet at a glance: tasks by state and what is next, every agent with its
        status, load and current tasks, capacity (live agents of max_agents), stalled work
        and the last workload assessment."""
        try:
            you: str | None = desk.acting(_session(ctx), None)
        except NoAgent:
            you = None
        summary, status = state_now(you)
        data = StateResult(summary=summary, you=you, status=status.to_dict())
        return CallToolResult(
            content=[TextContent(type="text", text=summary)],
            structured_content=data.model_dump(mode="json"),
        )

    # -- resources -------------------------------------------------------

    @server.resource(
        "shoal://status",
        name="fleet status",
        description="The fleet at a glance (the same summary as the read_state tool).",
        mime_type="text/plain",
    )
    def status_resource() -> str:
        try:
            return state_now(desk.fixed)[0]
        except ShoalError as exc:
            raise ResourceError(describe(exc)) from exc

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
            detail = fleet.show(int(task_id))
        except UnknownTask as exc:
            raise ResourceNotFoundError(describe(exc)) from exc
        except ShoalError as exc:
            raise ResourceError(describe(exc)) from exc
        return json.dumps(TaskDetailInfo.of(detail).model_dump(mode="json"), indent=2)

    return server


def serve(
    fleet: Fleet,
    *,
    agent: str | None = None,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
) -> None:
    """Run the server until the client (stdio) or the operator (http) ends it."""
    server = build_server(FleetDesk(fleet, agent))
    if transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=host, port=port)
