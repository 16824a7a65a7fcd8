"""``shoal mcp --transport http``: what the server listens on, who may talk to it, and how.

Over stdio the client is whoever started the server, with the operator's own rights; over
HTTP anyone who reaches the port is a client. So, before any session is served:

- **The address is checked and bound first** (``shoal.faces.exposure``, shared with
  ``shoal serve``): a bad port is exit 2, an address that cannot be bound exit 4.
- **Every bind needs a bearer token.** ``--token-file PATH`` (a file only its owner can
  read: mode 0600 or tighter) or ``$SHOAL_MCP_TOKEN``, at least ``MIN_TOKEN`` characters.
  Without one, ``--host 0.0.0.0`` refuses to start rather than serve the fleet to the
  network. On loopback without one, a token is made at start in a file only this user can
  read (``shoal.local_secrets.mcp_token_file``), since every user of the machine reaches
  127.0.0.1; ``shoal mcp config --transport http`` points clients at it. The check is the
  MCP SDK's own bearer auth (``TokenVerifier``, ``AuthSettings``): 401 without the right
  ``Authorization: Bearer``; the compare is constant-time, and a wrong token waits
  ``WRONG_TOKEN_DELAY`` before the answer, which makes guessing slow. The token is never
  logged or printed.
- **Host and Origin are checked on every bind** (the SDK's DNS-rebinding protection, which
  it only turns on by itself for loopback): the loopback names always, the bound address
  if it is a specific one, and each ``--allow-host NAME``. A request naming another host
  (a web page that rebound its own name to this machine) gets 421, another origin 403.
"""

from __future__ import annotations

import contextlib
import hmac
import socket

import anyio
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette

from shoal.faces.exposure import (
    MIN_TOKEN,
    SCHEMES,
    TOKEN_ENV,
    WRONG_TOKEN_DELAY,
    Exposure,
    bind,
    plan_exposure,
)
from shoal.faces.mcp.http_sessions import SessionLimits, bound_sessions

__all__ = [
    "MIN_TOKEN",
    "TOKEN_ENV",
    "WRONG_TOKEN_DELAY",
    "BearerToken",
    "Exposure",
    "bind",
    "http_app",
    "plan_exposure",
    "run_http",
]

# What both servers share (the address, the token file, the host names) is in
# shoal.faces.exposure; this module adds the MCP SDK's own auth and rebinding check.


def security_settings(exposure: Exposure) -> TransportSecuritySettings:
    """The SDK's Host/Origin check, on for every bind: the names ``exposure`` allows, with or
    without a port, over http or https."""
    hosts, origins = [], []
    for name in exposure.allowed:
        spelled = f"[{name}]" if ":" in name and not name.startswith("[") else name
        hosts += [spelled, f"{spelled}:*"]
        origins += [f"{scheme}://{spelled}{port}" for scheme in SCHEMES for port in ("", ":*")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


class BearerToken:
    """The SDK's ``TokenVerifier`` for one shared secret: a constant-time compare, and a
    pause before refusing so that guessing is slow."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    def __repr__(self) -> str:
        return "BearerToken(<hidden>)"

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode(), self._token):
            # The verified secret is not kept on the request: nothing downstream needs it.
            return AccessToken(token="verified", client_id="shoal-mcp", scopes=[])
        await anyio.sleep(WRONG_TOKEN_DELAY)
        return None


def auth_settings(exposure: Exposure) -> dict[str, object]:
    """``MCPServer``'s keywords for bearer auth with ``exposure``'s token (none without)."""
    if exposure.token is None:
        return {}
    url = f"http://{exposure.address}"
    return {
        "token_verifier": BearerToken(exposure.token),
        "auth": AuthSettings(issuer_url=url, resource_server_url=None),  # type: ignore[arg-type]
    }


def http_app(
    server: MCPServer,
    exposure: Exposure,
    *,
    session_ttl: float,
    limits: SessionLimits | None = None,
) -> Starlette:
    """``server``'s streamable HTTP app: sessions idle past ``session_ttl`` end, and their
    number is bounded (``http_sessions``)."""
    limits = limits or SessionLimits()
    app = server.streamable_http_app(
        session_idle_timeout=session_ttl,
        max_sessions=2 * limits.total,  # a backstop: bound_sessions keeps them to limits
        transport_security=security_settings(exposure),
        host=exposure.host,
    )
    bound_sessions(server, limits)
    return app


def run_http(
    server: MCPServer, exposure: Exposure, sock: socket.socket, *, session_ttl: float
) -> None:
    """Serve ``server`` over streamable HTTP on the bound ``sock`` until stopped."""
    import uvicorn

    app = http_app(server, exposure, session_ttl=session_ttl)
    config = uvicorn.Config(app, log_level=server.settings.log_level.lower())
    with contextlib.closing(sock):
        anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))
