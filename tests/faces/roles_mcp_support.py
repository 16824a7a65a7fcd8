"""The walker's MCP faces: the SDK's own client against a worker's server and a manager's,
each over stdio (a `shoal mcp` process of its own) and over streamable HTTP (the same server
in a thread of the test), all on one SQLite fleet.

The worker over stdio is pinned (``--agent w-stdio``), the one over HTTP is not (its session
registers ``w-http``), so both kinds of worker server are walked; both managers are pinned,
as managers always are (``--agent ID --manager``). Another agent is bob, who holds a lease,
or cy, who holds none but was just heard from: someone drives both.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from mcp import ClientSession

from shoal import Fleet
from shoal.errors import UnknownAgent
from shoal.faces.mcp.sessions import FleetDesk
from tests.faces.mcp_support import http_server_here, http_session, stdio_session
from tests.faces.roles_support import Outcome, Try

BOB, CY, DEE = "bob", "cy", "dee"
NOBODY = ["nobody"]
#: The agent each MCP face acts as, by (column, face).
AGENTS = {
    ("worker", "stdio"): "w-stdio",
    ("worker", "http"): "w-http",
    ("manager", "stdio"): "boss-stdio",
    ("manager", "http"): "boss-http",
}
PINNED = {("worker", "stdio"), ("manager", "stdio"), ("manager", "http")}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "anyone", "version": "0"},
    },
}


@dataclass
class McpWorld:
    fleet: Fleet
    url: str
    sessions: dict[tuple[str, str], ClientSession] = field(default_factory=dict)
    endpoint: str = ""  # the worker's HTTP server, for a client with no token
    seed: int = 0


@contextlib.asynccontextmanager
async def mcp_world(fleet: Fleet, url: str) -> AsyncIterator[McpWorld]:
    """Both kinds of server on both transports, each with its client connected."""
    fleet.configure(max_agents=100)
    for agent in (BOB, CY, DEE):
        fleet.register(agent, max_concurrent=1000)
    world = McpWorld(fleet, url, seed=fleet.post("for everyone to read", skills=NOBODY).id)
    held(world, BOB)  # bob is at work: he holds a lease all along
    boss = {"manager": True, "max_concurrent": 1000}
    async with contextlib.AsyncExitStack() as stack:
        pinned = ("--max-concurrent", "1000")
        world.sessions[("worker", "stdio")] = await stack.enter_async_context(
            stdio_session(url, "--agent", "w-stdio", *pinned)
        )
        world.sessions[("manager", "stdio")] = await stack.enter_async_context(
            stdio_session(url, "--agent", "boss-stdio", "--manager", *pinned)
        )
        desks = FleetDesk(Fleet.open(url)), FleetDesk(Fleet.open(url), "boss-http", boss)
        for desk in desks:
            assert desk.start() is None  # as `shoal mcp` does: the pinned agent joins at start
        worker = stack.enter_context(http_server_here(desks[0]))
        manager = stack.enter_context(http_server_here(desks[1]))
        world.endpoint = worker
        world.sessions[("worker", "http")] = session = await stack.enter_async_context(
            http_session(worker)
        )
        joined = await session.call_tool("register_agent", {"agent": "w-http"})
        assert not joined.is_error, joined
        world.sessions[("manager", "http")] = await stack.enter_async_context(http_session(manager))
        yield world


# ---------------------------------------------------------------------- the faces


async def tool(w: McpWorld, key: tuple[str, str], name: str, **arguments: Any) -> Outcome:
    result = await w.sessions[key].call_tool(name, arguments)
    text = " ".join(getattr(block, "text", "") for block in result.content)
    if not result.is_error:
        return Outcome(True)
    code = text.split(":", 1)[0] if ":" in text else None
    clear = "\nnext: " in text and "Error executing tool" not in text
    return Outcome(False, code, message=text if clear else "")


def without_token(w: McpWorld) -> Outcome:
    """A client of the worker's HTTP server with no bearer token (another local user)."""
    answer = httpx.post(
        w.endpoint,
        json=INIT,
        headers={"Accept": "application/json, text/event-stream"},
        timeout=10,
    )
    if answer.is_success:
        return Outcome(True, status=answer.status_code)
    try:
        body = answer.json()
    except ValueError:
        body = {}
    code = body.get("error") if isinstance(body.get("error"), str) else None
    message = str(body.get("error_description", answer.text))
    code = "unauthorized" if answer.status_code == 401 else code
    return Outcome(False, code, answer.status_code, message=message)


# ---------------------------------------------------------------------- the fleet readied


def held(w: McpWorld, agent: str) -> tuple[int, str]:
    """(task, token) of a lease ``agent`` holds on a task of its own."""
    task = w.fleet.post(f"{agent}'s work", to=agent, pinned=True, priority=1).id
    lease = next(x for x in w.fleet.claim(agent, 1000).leases if x.task_id == task)
    return task, lease.token


def pending(w: McpWorld) -> int:
    return w.fleet.post("in the pool", skills=NOBODY).id


def cancelled(w: McpWorld) -> int:
    """A task to retry (a failed one would trip bob's circuit breaker, in time)."""
    task = pending(w)
    w.fleet.cancel(task)
    return task


# ---------------------------------------------------------------------- the powers

Key = tuple[str, str]
Tries = list[Try]
AsyncAct = Callable[[], Awaitable[Outcome]]


def call(w: McpWorld, key: Key, name: str, **arguments: Any) -> Try:
    return Try(f"{name} {arguments}", lambda: lambda: tool(w, key, name, **arguments))


def ready(what: str, setup: Callable[[], AsyncAct]) -> Try:
    return Try(what, setup)


def read_fleet(w: McpWorld, key: Key) -> Tries:
    return [
        call(w, key, "read_state"),
        call(w, key, "list_tasks"),
        call(w, key, "get_task", task_id=w.seed),
        call(w, key, "list_schedules"),
        call(w, key, "explain", task_id=w.seed),
        call(w, key, "explain", agent_id=BOB),
    ]


def read_settings(w: McpWorld, key: Key) -> Tries:
    return [call(w, key, "configure_fleet")]


def post_task(w: McpWorld, key: Key) -> Tries:
    return [
        call(w, key, "add_task", title="to the pool", skills=NOBODY),
        call(w, key, "add_task", title="to bob's queue", to=BOB, skills=NOBODY),
        call(w, key, "add_task", title="a subtask", parent=w.seed, skills=NOBODY),
    ]


def register_own(w: McpWorld, key: Key) -> Tries:
    if key in PINNED:
        return []  # the operator's --agent registered it (the table's note 1)
    return [call(w, key, "register_agent", agent=AGENTS[key], max_concurrent=1000)]


def work_as_own(w: McpWorld, key: Key) -> Tries:
    return [
        call(w, key, "heartbeat"),
        call(w, key, "claim_best_task"),
        call(w, key, "set_agent_status", status="waiting"),
    ]


def settle_own(w: McpWorld, key: Key) -> Tries:
    def setup() -> AsyncAct:
        w.fleet.post("mine", to=AGENTS[key], pinned=True, priority=1)

        async def act() -> Outcome:
            claim = await w.sessions[key].call_tool("claim_best_task", {})
            task = (claim.structured_content or {}).get("task") or {}
            if claim.is_error or "id" not in task:
                return Outcome(False, "no_claim", message=str(claim.content))
            return await tool(w, key, "release_task", task_id=task["id"])

        return act

    return [ready("claim, then release without a token", setup)]


def work_as_another(w: McpWorld, key: Key) -> Tries:
    tries: Tries = []
    for other in (CY, BOB):

        def seen(other: str = other) -> None:
            try:  # someone drives it: the fleet has just heard from it
                w.fleet.heartbeat(other)
            except UnknownAgent:  # a try the code should have refused ended it
                w.fleet.register(other, max_concurrent=1000)

        def on(name: str, other: str = other, **arguments: Any) -> Try:
            def setup() -> AsyncAct:
                seen(other)
                return lambda: tool(w, key, name, agent=other, **arguments)

            return Try(f"{name} as {other}", setup)

        if key not in PINNED:
            tries.append(on("register_agent", max_concurrent=1000))
        tries += [
            on("heartbeat"),
            on("claim_best_task"),
            on("set_agent_status", status="terminated"),
        ]
    return tries


def settle_another_with_token(w: McpWorld, key: Key) -> Tries:
    def setup() -> AsyncAct:
        task, token = held(w, BOB)
        return lambda: tool(w, key, "release_task", task_id=task, token=token)

    return [ready("release bob's task with its token", setup)]


def release_another_without_token(w: McpWorld, key: Key) -> Tries:
    def on(name: str) -> Try:
        def setup() -> AsyncAct:
            task, _ = held(w, BOB)
            return lambda: tool(w, key, name, task_id=task)

        return Try(f"{name} on bob's task, no token", setup)

    return [on("release_task"), on("complete_task"), on("fail_task")]


def change_tasks(w: McpWorld, key: Key) -> Tries:
    def on(name: str, make: Callable[[McpWorld], int], **arguments: Any) -> Try:
        def setup() -> AsyncAct:
            task = make(w)
            return lambda: tool(w, key, name, task_id=task, **arguments)

        return Try(name, setup)

    return [
        on("cancel_task", pending),
        on("retry_task", cancelled),
        on("set_task_priority", pending, priority=1),
    ]


def edit_tasks(w: McpWorld, key: Key) -> Tries:
    def setup() -> AsyncAct:
        task = pending(w)
        return lambda: tool(w, key, "edit_task", task_id=task, title="retitled")

    return [Try("edit_task", setup)]


def edit_own_tasks(w: McpWorld, key: Key) -> Tries:
    """A task the face's own agent posted (as add_task records it)."""

    def setup() -> AsyncAct:
        task = w.fleet.post("its own", skills=NOBODY, posted_by=AGENTS.get(key, BOB)).id
        return lambda: tool(w, key, "edit_task", task_id=task, title="retitled")

    return [Try("edit_task on its own", setup)]


def pause_resume(w: McpWorld, key: Key) -> Tries:
    def resume() -> AsyncAct:
        w.fleet.pause(DEE, for_="1h")
        return lambda: tool(w, key, "resume_agent", agent_id=DEE)

    return [
        call(w, key, "pause_agent", agent_id=DEE, duration="1h"),
        ready("resume_agent dee", resume),
        call(w, key, "pause_agent", agent_id=AGENTS[key], duration="1h"),
    ]


def configure(w: McpWorld, key: Key) -> Tries:
    return [
        call(w, key, "configure_fleet", changes={"max_agents": 100}),
        call(w, key, "configure_fleet", changes={"lease_ttl": "1s"}),  # refused cells only
    ]


def set_groups(w: McpWorld, key: Key) -> Tries:
    return [call(w, key, "set_group_limit", group="deploy", max=1)]


def assess(w: McpWorld, key: Key) -> Tries:
    return [call(w, key, "assess_workload")]


def make_manager(w: McpWorld, key: Key) -> Tries:
    return [call(w, key, "register_agent", agent=AGENTS[key], manager=True)]


def schedules(w: McpWorld, key: Key) -> Tries:
    def on(state: str) -> Try:
        def setup() -> AsyncAct:
            made = w.fleet.schedule("recurring", every="1h", skills=NOBODY)
            if state == "active":
                w.fleet.pause_schedule(made.id)
            return lambda: tool(w, key, "set_schedule_state", schedule_id=made.id, state=state)

        return Try(f"set_schedule_state {state}", setup)

    return [
        call(w, key, "add_schedule", title="recurring", every="1h", skills=NOBODY),
        on("paused"),
        on("active"),
        on("cancelled"),
    ]


def nothing(w: McpWorld, key: Key) -> Tries:
    return []  # no such tool on any server


#: Each row of the table (by its bold words), as an MCP session tries it.
POWERS: dict[str, Callable[[McpWorld, Key], Tries]] = {
    "Read the fleet": read_fleet,
    "Read the settings": read_settings,
    "Post a task": post_task,
    "Register its own agent": register_own,
    "Claim, heartbeat, set the status of its own agent": work_as_own,
    "Settle a lease its agent holds": settle_own,
    "Act as another agent": work_as_another,
    "Settle another agent's lease, given its token": settle_another_with_token,
    "Release another agent's task without its token": release_another_without_token,
    "Cancel, retry or reprioritise a task": change_tasks,
    "Edit a task": edit_tasks,
    "Edit a task its agent posted": edit_own_tasks,
    "Pause or resume an agent": pause_resume,
    "Change the settings": configure,
    "Set or lift a group's limit": set_groups,
    "Assess the workload": assess,
    "Make an agent a manager": make_manager,
    "Make, pause, resume or cancel a schedule": schedules,
    "Rebalance queues, reap lapsed leases": nothing,
    "Make or revoke access tokens, prune history, import tasks": nothing,
}
