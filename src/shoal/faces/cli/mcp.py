"""What ``shoal mcp`` does before serving: check the SDK is there and its options make sense.

Kept apart from ``mcp_server`` so that the CLI can say "install shoal[mcp]" when the SDK is
missing: this module imports nothing of it until asked to serve.

What it does *not* do is stop at a fleet it cannot use. A store that cannot be opened, a
full fleet or a pinned agent that cannot be registered is reported on stderr, and the
server starts all the same: an MCP client shows a tool error it can act on, where a server
that exits before the handshake is only "failed to start".
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import click
from rich.console import Console

from shoal.errors import BadInput
from shoal.fleet import Fleet
from shoal.model import parse_duration

__all__ = ["SESSION_TTL_ENV", "SESSION_TTL_OPTION", "parse_session_ttl", "run_mcp"]

_NEEDS_AGENT = ("skills", "domains", "manager", "ephemeral")

#: The environment's say on ``--session-ttl`` (the option wins).
SESSION_TTL_ENV = "SHOAL_MCP_SESSION_TTL"
_DEFAULT_TTL = "30m"

#: ``shoal mcp --session-ttl``: how long an HTTP session may stay idle before it ends.
SESSION_TTL_OPTION = click.option(
    "--session-ttl",
    "session_ttl",
    envvar=SESSION_TTL_ENV,
    default=_DEFAULT_TTL,
    show_default=True,
    help="With --transport http: a session idle this long ends; its agent leaves the fleet.",
)


def parse_session_ttl(value: str | float | None = None) -> float:
    """The mcp_session_ttl in seconds: ``value``, else $SHOAL_MCP_SESSION_TTL, else 30m."""
    given = value if value is not None else os.environ.get(SESSION_TTL_ENV) or _DEFAULT_TTL
    seconds = parse_duration(given, "session_ttl")
    if seconds <= 0:
        raise BadInput(f"session_ttl must be more than 0, not {given!r}", hint="e.g. 30m")
    return seconds


def run_mcp(
    fleet: Fleet | Callable[[], Fleet],
    agent: str | None,
    spec: Mapping[str, Any],
    transport: str,
    host: str,
    port: int,
    err: Console,
    session_ttl: str | float | None = None,
) -> None:
    """Serve ``fleet`` (or the fleet ``fleet()`` opens, tried again until it works) as
    ``agent`` (if given, registered with ``spec``, ``Fleet.register``'s keywords) until told
    to stop. ``session_ttl``: how long an HTTP session may stay idle (``parse_session_ttl``)."""
    if agent is None:
        given = [name for name in _NEEDS_AGENT if spec.get(name)]
        if given or spec.get("role", "worker") != "worker" or spec.get("max_concurrent", 1) != 1:
            raise BadInput(
                "--role, --skill, --domain, --max-concurrent, --manager and --ephemeral "
                "describe the agent given with --agent",
                hint="add --agent ID, or leave them out and let each client register_agent",
            )
    seconds = parse_session_ttl(session_ttl)
    try:
        from shoal.faces.mcp.server import FleetDesk, serve
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] == "shoal":
            raise
        raise BadInput(
            f"`shoal mcp` needs the MCP SDK, which is not installed here ({exc.name})",
            hint="pip install 'shoal[mcp]'",
        ) from None
    desk = FleetDesk(fleet, agent, spec)
    fault = desk.start()
    if fault is not None:
        err.print(
            f"shoal mcp: {fault.message}; serving anyway, and the tools will say so "
            "until it is fixed",
            highlight=False,
            markup=False,
        )
    elif (reg := desk.registration) is not None:
        err.print(
            f"shoal mcp: acting as agent {reg.agent.id} ({reg.agent.role}"
            f"{', manager' if reg.agent.manager else ''}); "
            f"active agents {reg.live}/{reg.max_agents}",
            highlight=False,
        )
    if transport == "http":
        where = desk.url or "the fleet"
        err.print(f"shoal mcp: serving {where} at http://{host}:{port}/mcp", highlight=False)
        serve(desk, transport="http", host=host, port=port, session_ttl=seconds)
    else:
        serve(desk)
