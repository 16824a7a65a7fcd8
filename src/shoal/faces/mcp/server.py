"""``shoal mcp``: a Model Context Protocol server, so LLM agents join a fleet with no glue code.

An MCP client (Claude Code, Codex, any other) starts ``shoal mcp`` and gets shoal's verbs as
tools: register, claim the best task, wait for one, complete, fail, release, heartbeat, post
work, cancel and retry it, report status, assess the workload, read the fleet. Every tool
goes through ``Fleet`` (never to a store), so an agent behind MCP follows exactly the rules
of one using the CLI or the library.

The server is assembled here from parts with one job each: ``sessions`` (who a session
acts as, and how it leaves the fleet when it ends), ``tooling`` (functions as tools,
refusals as tool errors, a short tool list), ``agent_tools`` and ``fleet_tools`` (the
tools), ``models`` (their results) and ``errors`` (what a refusal says).

Threads
-------
The SDK's worker threads share one ``Fleet``: the SQLite store holds one connection behind a
lock, so each transaction runs alone in this process (and takes its turn with other
processes in the writer queue); reads and writes never interleave.

Stopping
--------
Over stdio the session is the process: it ends at EOF (the client closing), and SIGTERM is
treated like it, so the session's agent leaves the fleet cleanly either way. Over HTTP each
session ends when its client deletes it, when it has been idle (no request in flight, no
open stream) for ``session_ttl``, or when the server stops.
"""

from __future__ import annotations

import contextlib
import signal
import socket
from collections.abc import Iterator
from typing import Any

from mcp.server.mcpserver import MCPServer

from shoal import __version__
from shoal.faces.mcp.agent_tools import MAX_WAIT, add_agent_tools
from shoal.faces.mcp.explain_tool import add_explain_tool
from shoal.faces.mcp.fleet_tools import add_fleet_tools, add_resources
from shoal.faces.mcp.http_serving import Exposure, auth_settings, run_http
from shoal.faces.mcp.schedule_tools import add_schedule_tools
from shoal.faces.mcp.sessions import FleetDesk
from shoal.faces.mcp.tooling import ShoalServer, Toolbox

__all__ = [
    "DEFAULT_SESSION_TTL",
    "MAX_WAIT",
    "Exposure",
    "FleetDesk",
    "build_server",
    "instructions",
    "serve",
]

#: How long an HTTP session may stay idle before it ends (its agent leaves the fleet).
DEFAULT_SESSION_TTL = 1800.0

_FIRST = {
    False: "1. register_agent once with your id and skills.",
    True: "1. You are agent {agent}: this server registered you (no need to register).",
}

_STEPS = """\
2. claim_best_task gives you the best task you can do and its lease. Do the work, then
   complete_task (or fail_task if it cannot be done; release_task to hand it back untouched).
3. For long work, call heartbeat before the lease expires, or the task goes back to others.
4. When nothing is waiting, wait_for_task blocks until work arrives (up to a timeout);
   explain says why you get nothing, or why a task waits, and until when.
5. add_task posts new work (subtasks with parent=, ordering with after=).
{role}
When this session ends, your agent leaves the fleet and the tasks you hold go back to the
others.
Errors start with a code (e.g. stale_lease, already_done, fleet_full), say what went wrong
and what to do next; a refused call changes nothing."""


_ROLE = {
    True: "You are the manager: read_state shows the fleet; assess_workload says whether to\n"
    "spawn agents or retire idle ones; cancel_task and retry_task clean up; set_task_priority\n"
    "reorders work; edit_task fixes a task's text, skills or labels; pause_agent and\n"
    "resume_agent hold an agent back and let it go; set_group_limit caps a concurrency\n"
    "group (one deploy at a time).",
    False: "Others' work and the fleet's settings are a manager's. When told to, an idle "
    "agent should\nset_agent_status terminated.",
}


def instructions(agent: str | None, manager: bool = False) -> str:
    """What the server tells a client at the handshake: how to work in the fleet (as its
    manager, with ``manager``)."""
    first = _FIRST[agent is not None].format(agent=agent)
    steps = _STEPS.format(role=_ROLE[manager])
    head = "shoal coordinates a fleet of agents sharing tasks. How to work in it:"
    return f"{head}\n{first}\n{steps}"


def build_server(desk: FleetDesk, exposure: Exposure | None = None) -> MCPServer:
    """An MCP server with shoal's tools and resources over ``desk``'s fleet; served over
    HTTP as ``exposure`` says, with its bearer token if it has one (``http_serving``)."""
    server = ShoalServer(
        desk,
        **(auth_settings(exposure) if exposure is not None else {}),
        name="shoal",
        title="shoal: a work-stealing task coordinator",
        instructions=instructions(desk.fixed, desk.manager),
        version=__version__,
        log_level="WARNING",
    )
    box = Toolbox(server, desk)
    add_agent_tools(box)
    add_fleet_tools(box)
    add_schedule_tools(box)
    add_explain_tool(box)
    add_resources(server, desk)
    return server


def serve(
    desk: FleetDesk,
    *,
    http: tuple[Exposure, socket.socket] | None = None,
    session_ttl: float = DEFAULT_SESSION_TTL,
) -> None:
    """Run the server until the client (stdio) or the operator (http) ends it; then every
    session still open ends and the pinned agent leaves the fleet. ``http``: serve over
    streamable HTTP as the exposure says, on its socket (bound already: ``http_serving``),
    instead of stdio."""
    server = build_server(desk, http[0] if http is not None else None)
    try:
        with _sigterm_as_interrupt():
            if http is None:
                server.run("stdio")
            else:
                run_http(server, *http, session_ttl=session_ttl)
    except KeyboardInterrupt:
        pass
    finally:
        desk.close()


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops the server the way Ctrl-C does, so ``serve``'s cleanup still runs: a
    stdio client that gives up waiting for EOF sends it, and uvicorn, having shut down
    gracefully, raises it again to end the process."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave the signal alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
