"""What ``shoal mcp`` does before serving: check the SDK is there, register the fixed agent.

Kept apart from ``mcp_server`` so that the CLI can say "install shoal[mcp]" when the SDK is
missing: this module imports nothing of it until asked to serve.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console

from shoal.errors import BadInput
from shoal.fleet import Fleet

__all__ = ["run_mcp"]

_NEEDS_AGENT = ("skills", "domains", "manager", "ephemeral")


def run_mcp(
    fleet: Fleet,
    agent: str | None,
    spec: Mapping[str, Any],
    transport: str,
    host: str,
    port: int,
    err: Console,
) -> None:
    """Register ``agent`` (if given) with ``spec`` (``Fleet.register``'s keywords), then serve
    until told to stop."""
    if agent is None:
        given = [name for name in _NEEDS_AGENT if spec.get(name)]
        if given or spec.get("role", "worker") != "worker" or spec.get("max_concurrent", 1) != 1:
            raise BadInput(
                "--role, --skill, --domain, --max-concurrent, --manager and --ephemeral "
                "describe the agent given with --agent",
                hint="add --agent ID, or leave them out and let each client register_agent",
            )
    try:
        from shoal.faces.mcp_server import serve
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] == "shoal":
            raise
        raise BadInput(
            f"`shoal mcp` needs the MCP SDK, which is not installed here ({exc.name})",
            hint="pip install 'shoal[mcp]'",
        ) from None
    if agent is not None:
        reg = fleet.register(agent, **spec)
        err.print(
            f"shoal mcp: acting as agent {agent} ({reg.agent.role}"
            f"{', manager' if reg.agent.manager else ''}); "
            f"active agents {reg.live}/{reg.max_agents}",
            highlight=False,
        )
    if transport == "http":
        err.print(f"shoal mcp: serving {fleet.url} at http://{host}:{port}/mcp", highlight=False)
        serve(fleet, agent=agent, transport="http", host=host, port=port)
    else:
        serve(fleet, agent=agent)
