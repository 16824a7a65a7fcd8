"""Talking to a real `shoal mcp` with the MCP SDK's own client, as an agent's host would.

Over stdio each connection starts its own server process (as Claude Code does); over
streamable HTTP one server process serves many clients. Both run the installed `shoal`
script against a real SQLite fleet. ``http_server_here`` serves HTTP from this process
instead, so its fleet can run on a ManualClock and its session limits be set small.

``memory_session`` is the server `shoal mcp ARGS` runs over stdio, set up by that command's
own code but served from this process over the SDK's in-memory streams: for the tests whose
subject is the server (its tools, sessions and agents), not its transport or its process.
A process each cost a second of CPU or more (Python, the SDK's import, shoal), and the
suite opened about a hundred; ``stdio_session`` stays for what only a process shows.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.memory import create_client_server_memory_streams

from shoal.local_secrets import mcp_token_file, read_secret

if TYPE_CHECKING:
    from shoal.faces.mcp.http_sessions import SessionLimits
    from shoal.faces.mcp.sessions import FleetDesk

SCRIPT = Path(sys.executable).with_name("shoal")
COMMAND = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "shoal.faces.cli"]
ENV_NAMES = ("SHOAL_STORE", "SHOAL_AGENT", "SHOAL_TOKEN")

#: What every session may do: its own work, posting work, reading the fleet.
WORKER_TOOLS = {
    "register_agent",
    "claim_best_task",
    "wait_for_task",
    "complete_task",
    "fail_task",
    "release_task",
    "heartbeat",
    "add_task",
    "edit_task",
    "set_agent_status",
    "read_state",
    "list_tasks",
    "get_task",
    "list_schedules",
    "explain",
}
#: What only a manager's server (--agent ID --manager) offers: others' work, the fleet.
MANAGER_TOOLS = {
    "assess_workload",
    "configure_fleet",
    "cancel_task",
    "retry_task",
    "set_task_priority",
    "pause_agent",
    "resume_agent",
    "set_group_limit",
    "add_schedule",
    "set_schedule_state",
}


def server_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_NAMES}
    return {**env, **(extra or {})}


@asynccontextmanager
async def stdio_session(
    url: str, *args: str, env: Mapping[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """A client connected to its own `shoal --store URL mcp ARGS...` over stdio. Leaving the
    block closes the server's stdin and waits for it to exit (the session's end)."""
    params = StdioServerParameters(
        command=COMMAND[0],
        args=[*COMMAND[1:], "--store", url, "mcp", *args],
        env=server_env(env),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


#: How long a server served in this process may take to stop once its client has gone (its
#: input ended); then it is cancelled, as stdio_client ends a server slow to exit.
STOP_GRACE = 5.0


@asynccontextmanager
async def memory_session(url: str, *args: str) -> AsyncIterator[ClientSession]:
    """A client connected to the server `shoal --store URL mcp ARGS...` runs, set up by the
    command itself (``mcp_set_up``: its options, checks, fleet and pinned agent) and served
    from this process over the SDK's in-memory streams as ``serve`` serves stdio. Leaving
    the block ends it as closing stdin ends `shoal mcp`: the server reads the end of its
    input and stops, then the desk closes (the session ends, its agents leave the fleet)."""
    from shoal.faces.cli.mcp import mcp_set_up
    from shoal.faces.mcp.server import build_server

    with mcp_set_up(["--store", url, "mcp", *args]) as set_up:
        # What MCPServer.run("stdio") runs, on these streams instead of stdin and stdout.
        served = build_server(set_up.desk)._lowlevel_server
        async with (
            create_client_server_memory_streams() as ((read, write), (server_read, server_write)),
            anyio.create_task_group() as group,
        ):
            stopped = anyio.Event()

            async def serve() -> None:
                try:
                    options = served.create_initialization_options()
                    await served.run(server_read, server_write, options)
                finally:
                    stopped.set()

            group.start_soon(serve)
            try:
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    yield session
            finally:
                await write.aclose()  # the end of the server's input
                with anyio.move_on_after(STOP_GRACE):
                    await stopped.wait()
                group.cancel_scope.cancel()


@asynccontextmanager
async def http_session(
    endpoint: str, *, delete: bool = True, token: str | None = None
) -> AsyncIterator[ClientSession]:
    """A client connected to a running `shoal mcp --transport http` at ``endpoint``. Leaving
    the block ends the session with a DELETE, unless ``delete`` is false: then the client
    just goes away, as a crashed one would. ``token``: the bearer token it sends; without
    one, the token a loopback server made in its owner's file (``made_token``)."""
    token = token or made_token(endpoint)
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with (
        create_mcp_http_client(headers=headers) as client,
        streamable_http_client(endpoint, http_client=client, terminate_on_close=delete) as (
            read,
            write,
        ),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def made_token(endpoint: str) -> str | None:
    """The token `shoal mcp --transport http` made at start for a loopback ``endpoint``
    (given none), as its owner reads it; None if it made none."""
    port = urlsplit(endpoint).port
    assert port is not None
    return read_secret(mcp_token_file(port), "the bearer token of shoal mcp")


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; its structured result."""
    result = await session.call_tool(tool, arguments)
    text = " ".join(getattr(block, "text", "") for block in result.content)
    assert not result.is_error, f"{tool}({arguments}) failed: {text}"
    assert result.structured_content is not None, f"{tool} returned no structured content"
    return result.structured_content


async def refused(session: ClientSession, tool: str, **arguments: Any) -> str:
    """Call a tool that must be refused with a tool error; the error's text."""
    result = await session.call_tool(tool, arguments)
    text = " ".join(getattr(block, "text", "") for block in result.content)
    assert result.is_error, f"{tool}({arguments}) was not refused: {result.structured_content}"
    assert "Error executing tool" not in text, f"the SDK's words, not shoal's: {text}"
    assert "\nnext: " in text, f"a refusal says what to do next: {text}"
    return text


async def tool_list_tokens(session: ClientSession) -> int:
    """The size of the server's tool list in tokens, as a model would carry it: about one
    token per four characters of the tools/list result's JSON."""
    listed = await session.list_tools()
    text = json.dumps(listed.model_dump(mode="json", by_alias=True, exclude_none=True))
    return len(text) // 4


async def eventually(condition: Callable[[], Any], what: str, within: float) -> float:
    """Poll ``condition`` until it is true; how long that took. Fails after ``within`` s."""
    began = time.monotonic()
    while not condition():
        if time.monotonic() - began > within:
            raise AssertionError(f"{what}: not within {within} s")
        await anyio.sleep(0.01)
    return time.monotonic() - began


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def http_server(url: str, *args: str, env: Mapping[str, str] | None = None) -> Iterator[str]:
    """Run `shoal mcp --transport http` on a free port; yield its endpoint once it listens."""
    port = free_port()
    proc = subprocess.Popen(
        [*COMMAND, "--store", url, "mcp", "--transport", "http", "--port", str(port), *args],
        env=server_env(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise RuntimeError(f"shoal mcp exited with {proc.returncode}: {err}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError("shoal mcp --transport http did not listen") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()


@contextmanager
def http_server_here(
    desk: FleetDesk, *, session_ttl: float = 1800.0, limits: SessionLimits | None = None
) -> Iterator[str]:
    """Serve ``desk`` as `shoal mcp --transport http` does, from a thread of this process, on
    a free loopback port; yield its endpoint. Stopping ends its sessions and closes the desk."""
    import uvicorn

    from shoal.faces.mcp.http_serving import bind, http_app, plan_exposure
    from shoal.faces.mcp.server import build_server

    exposure = plan_exposure("127.0.0.1", free_port())
    sock = bind(exposure)
    server = build_server(desk, exposure)
    app = http_app(server, exposure, session_ttl=session_ttl, limits=limits)
    serving = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=anyio.run, args=(serving.serve, [sock]), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not serving.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the in-process MCP server did not start")
            time.sleep(0.01)
        yield f"http://{exposure.address}/mcp"
    finally:
        serving.should_exit = True
        thread.join(30)
        sock.close()
        desk.close()
