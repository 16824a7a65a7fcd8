"""``shoal mcp``: serve the fleet to LLM agents over MCP (``shoal mcp config`` is in
mcp_config.py). Before serving it checks the SDK is there and the
options make sense.

Kept apart from ``shoal.faces.mcp`` so that the CLI can say "install shoal[mcp]" when the
SDK is missing: this module imports nothing of it until asked to serve.

What it does *not* do is stop at a fleet it cannot use. A store that cannot be opened, a
full fleet or a pinned agent that cannot be registered is reported on stderr, and the
server starts all the same: an MCP client shows a tool error it can act on, where a server
that exits before the handshake is only "failed to start".

Setting up and serving are two steps (``set_up_mcp``, ``serve_set_up``), so that a program
can have the command set a server up from its command line and serve it in its own process
(``mcp_set_up``): the tests do, over the SDK's in-memory streams, instead of starting a
process for every session whose subject is not the process.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console

from shoal.errors import BadInput
from shoal.extras import install_hint, missing_extra
from shoal.faces.cli.app import App, agent_option, pass_app
from shoal.faces.cli.mcp_config import mcp_config_command
from shoal.fleet import Fleet
from shoal.validation import parse_duration

if TYPE_CHECKING:  # the MCP SDK is imported only to serve (the module docstring says why)
    from shoal.faces.mcp.http_serving import Exposure
    from shoal.faces.mcp.sessions import FleetDesk

__all__ = [
    "SESSION_TTL_ENV",
    "SESSION_TTL_OPTION",
    "McpSetUp",
    "add_mcp_commands",
    "mcp_set_up",
    "parse_session_ttl",
    "serve_set_up",
    "set_up_mcp",
]

_NEEDS_AGENT = ("skills", "domains", "manager", "ephemeral")
#: ``ctx.meta``'s mark that the command is set up for ``mcp_set_up``'s caller, not served.
_SET_UP_ONLY = "shoal.mcp.set_up_only"

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


@dataclass(frozen=True)
class McpSetUp:
    """A `shoal mcp` set up and not yet served: the desk (its fleet opened, its pinned agent
    registered, or the fault that stopped either), the bound socket and exposure for
    ``--transport http`` (None: stdio), and how long an HTTP session may stay idle."""

    desk: FleetDesk
    http: tuple[Exposure, socket.socket] | None
    session_ttl: float


def set_up_mcp(
    fleet: Fleet | Callable[[], Fleet],
    agent: str | None,
    spec: Mapping[str, Any],
    transport: str,
    host: str,
    port: int,
    err: Console,
    session_ttl: str | float | None = None,
    token_file: Path | None = None,
    allow_hosts: Sequence[str] = (),
) -> McpSetUp:
    """Set up a server of ``fleet`` (or the fleet ``fleet()`` opens, tried again until it
    works) acting as ``agent`` (if given, registered with ``spec``, ``Fleet.register``'s
    keywords), for ``serve_set_up`` to serve until told to stop. ``session_ttl``: how long
    an HTTP session may stay idle (``parse_session_ttl``).

    Over HTTP, the address, the bearer token and the host names let through are checked,
    and the address bound, before the fleet is touched: a bad one changes nothing
    (``http_serving``)."""
    if agent is None:
        given = [name for name in _NEEDS_AGENT if spec.get(name)]
        if given or spec.get("role", "worker") != "worker" or spec.get("max_concurrent", 1) != 1:
            raise BadInput(
                "--role, --skill, --domain, --max-concurrent, --manager and --ephemeral "
                "describe the agent given with --agent",
                hint="add --agent ID, or leave them out and let each client register_agent",
            )
    if transport != "http" and (token_file is not None or allow_hosts):
        raise BadInput(
            "--token-file and --allow-host are for --transport http",
            hint="add --transport http, or leave them out (stdio needs no token)",
        )
    seconds = parse_session_ttl(session_ttl)
    try:
        from shoal.faces.mcp.http_serving import bind, plan_exposure
        from shoal.faces.mcp.server import FleetDesk
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] == "shoal":
            raise
        raise BadInput(missing_extra("mcp", "`shoal mcp`"), hint=install_hint("mcp")) from None
    http = None
    if transport == "http":
        exposure = plan_exposure(host, port, token_file=token_file, allow_hosts=allow_hosts)
        http = (exposure, bind(exposure))
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
    if http is not None:
        where, (exposure, _) = desk.url or "the fleet", http
        err.print(
            f"shoal mcp: serving {where} at http://{exposure.address}/mcp (bearer token required)",
            highlight=False,
            markup=False,
        )
        if exposure.made_token is not None:
            err.print(
                f"shoal mcp: the token is in {exposure.made_token} (yours alone); "
                f"`shoal mcp config --transport http --port {exposure.port}` points a "
                "client at it",
                highlight=False,
                markup=False,
            )
    return McpSetUp(desk, http, seconds)


def serve_set_up(set_up: McpSetUp) -> None:
    """Serve what ``set_up_mcp`` set up until the client (stdio) or the operator (http) ends
    it; then the desk closes (``serve``)."""
    from shoal.faces.mcp.server import serve

    desk, http = set_up.desk, set_up.http
    if http is None:
        serve(desk, session_ttl=set_up.session_ttl)
        return
    from shoal.runtime.reaper import Reaper

    with Reaper(lambda: desk.fleet):  # a server that runs for days keeps the record up
        serve(desk, http=http, session_ttl=set_up.session_ttl)


@contextlib.contextmanager
def mcp_set_up(args: Sequence[str]) -> Iterator[McpSetUp]:
    """The command line ``shoal ARGS`` (``[--store URL] mcp [OPTIONS]``) run by the CLI
    itself -- the same options, checks, fleet and pinned agent, the same lines on stderr --
    up to serving, and handed over instead: for a caller that serves the desk some other
    way in its own process (the tests, over the MCP SDK's in-memory streams, with no
    process to start). Leaving the block ends it as the command ends once served: the desk
    closes (its sessions end, the pinned agent leaves), then the command (the fleet)."""
    from shoal.faces.cli.root import cli

    with cli.make_context("shoal", list(args), obj=App()) as ctx:
        ctx.meta[_SET_UP_ONLY] = True
        set_up = cli.invoke(ctx)
        if not isinstance(set_up, McpSetUp):
            raise BadInput("not a `shoal mcp` command line", hint="shoal [--store URL] mcp ...")
        try:
            yield set_up
        finally:
            set_up.desk.close()  # as serve() ends
            if set_up.http is not None:
                set_up.http[1].close()


@click.group(
    "mcp", invoke_without_command=True, short_help="Serve the fleet to LLM agents over MCP."
)
@agent_option("Act as this agent only (registered at start).", from_env=False)
@click.option("--role", default="worker", show_default=True, help="With --agent: its role.")
@click.option("--skill", "-s", "skills", multiple=True, help="With --agent: a skill (repeat).")
@click.option("--domain", "-d", "domains", multiple=True, help="With --agent: a domain (repeat).")
@click.option("--max-concurrent", default=1, show_default=True, help="With --agent.")
@click.option("--manager", is_flag=True, help="With --agent: a manager.")
@click.option("--ephemeral", is_flag=True, help="With --agent: retired when idle too long.")
@click.option(
    "--transport", type=click.Choice(["stdio", "http"]), default="stdio", help="stdio or http."
)
@click.option("--host", default="127.0.0.1", show_default=True, help="With --transport http.")
@click.option("--port", default=8765, show_default=True, help="With --transport http.")
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --transport http: clients must send this file's bearer token (chmod 600); "
    "needed off loopback. Or set SHOAL_MCP_TOKEN. On loopback without either, a token is "
    "made in a file only you can read (shoal mcp config points clients at it).",
)
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME",
    help="With --transport http: a host name clients may use in Host/Origin (repeat); "
    "loopback names are always allowed.",
)
@SESSION_TTL_OPTION
@pass_app
@click.pass_context
def mcp(
    ctx: click.Context,
    app: App,
    agent: str | None,
    role: str,
    skills: tuple[str, ...],
    domains: tuple[str, ...],
    max_concurrent: int,
    manager: bool,
    ephemeral: bool,
    transport: str,
    host: str,
    port: int,
    token_file: Path | None,
    allow_hosts: tuple[str, ...],
    session_ttl: str,
) -> McpSetUp | None:
    """Serve the fleet to LLM agents over the Model Context Protocol (stdio by default).

    With --agent, this server acts as that one agent (registered at start with the
    --skill/--domain/... given) and refuses to act as any other; without it, tools take
    an `agent` argument. Needs the MCP SDK: pip install 'shoal[mcp]'. `shoal mcp config
    --client claude` prints the JSON that registers it with a client.
    """
    if ctx.invoked_subcommand is not None:  # `shoal mcp config`: not serving
        return None
    spec = {
        "role": role,
        "skills": skills,
        "domains": domains,
        "max_concurrent": max_concurrent,
        "manager": manager,
        "ephemeral": ephemeral,
    }
    app.refuse_memory()
    # The opener, not an open fleet: a store that cannot be opened yet (or a full fleet)
    # must not stop the server before the handshake -- its tools say what is wrong.
    set_up = set_up_mcp(
        app.fleet,
        agent,
        spec,
        transport,
        host,
        port,
        app.err,
        session_ttl,
        token_file=token_file,
        allow_hosts=allow_hosts,
    )
    if ctx.meta.get(_SET_UP_ONLY):  # mcp_set_up: its caller serves it
        return set_up
    serve_set_up(set_up)
    return None


mcp.add_command(mcp_config_command)  # shoal mcp config


def add_mcp_commands(group: click.Group) -> None:
    """Register ``shoal mcp`` (and ``shoal mcp config``) on the ``shoal`` group."""
    group.add_command(mcp)
