"""How many HTTP sessions ``shoal mcp --transport http`` keeps, and which go first.

Every session the SDK opens (a request without an ``mcp-session-id``, normally
``initialize``) is kept, with its streams and its server task, until its client deletes it
or it has been idle for ``--session-ttl``. A client that never deletes -- one that crashed,
one that opens a session per call, or one that means harm -- would pile them up for the
whole TTL. So the sessions are bounded, per client (the peer's address) and in total
(``SessionLimits``): once a new session is open, the sessions past either bound end,
idle ones only (no request in flight, no open stream), those that hold no agent before
those that do, the longest idle first. They end the way the SDK's own idle timeout ends
one (their agent leaves the fleet as it would then). When every session in the way has a
request in flight, a new one is refused with 503 before it is opened.

Counting happens inside the SDK's session manager (behind its body limit), after the
bearer check: a request without the token never opens, or ends, a session. The manager's table
of sessions and each transport's idle scope are the SDK's own bookkeeping, read here
rather than kept twice; the SDK's ``max_sessions`` stays as a backstop twice as high.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "MAX_SESSIONS",
    "MAX_SESSIONS_PER_CLIENT",
    "SessionBounds",
    "SessionLimits",
    "bound_sessions",
]

#: Open HTTP sessions one server keeps at most, and one client's (peer address) share.
MAX_SESSIONS = 1000
MAX_SESSIONS_PER_CLIENT = 200

_SESSION_HEADER = MCP_SESSION_ID_HEADER.lower().encode("latin-1")
_VERSION_HEADER = b"mcp-protocol-version"


@dataclass(frozen=True, slots=True)
class SessionLimits:
    """The bounds on open HTTP sessions: in all, and per client (peer address)."""

    total: int = MAX_SESSIONS
    per_client: int = MAX_SESSIONS_PER_CLIENT


class SessionBounds:
    """The session manager's ASGI app, with the number of open sessions bounded.

    ``holding`` names the sessions (by id) that hold an agent, so they are ended last.
    """

    def __init__(
        self,
        app: ASGIApp,
        manager: StreamableHTTPSessionManager,
        holding: Callable[[], set[str]],
        limits: SessionLimits,
    ) -> None:
        self.app = app
        self.manager = manager
        self.holding = holding
        self.limits = limits
        self._clients: dict[str, str] = {}  # session id -> the client that opened it

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not _opens_session(scope):
            await self.app(scope, receive, send)
            return
        client = _client_of(scope)
        full = self._full(client)
        if full is not None:
            response = JSONResponse(
                {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {"code": -32603, "message": f"Too many open sessions ({full})"},
                },
                status_code=503,
            )
            await response(scope, receive, send)
            return
        opened: list[str] = []

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                headers = message["headers"]
                opened.extend(v.decode("latin-1") for k, v in headers if k == _SESSION_HEADER)
            await send(message)

        await self.app(scope, receive, watch)
        if opened:
            self._clients[opened[0]] = client
            self._trim(client, keep=opened[0])

    # ------------------------------------------------------------------ bookkeeping

    def _open(self) -> dict[str, StreamableHTTPServerTransport]:
        """The sessions open now (not ending already), by id; forgets the clients of
        sessions that are gone."""
        table: dict[str, StreamableHTTPServerTransport] = getattr(
            self.manager, "_server_instances", {}
        )
        for gone in self._clients.keys() - table.keys():
            del self._clients[gone]
        return {sid: t for sid, t in table.items() if not _ending(t)}

    def _full(self, client: str) -> str | None:
        """Why no session can be opened for ``client`` now (None: one can): a bound is
        reached and no session in the way is idle."""
        sessions = self._open()
        mine = [sid for sid in sessions if self._clients.get(sid) == client]
        if len(mine) >= self.limits.per_client and not _idle(sessions, mine):
            return f"{len(mine)} of this client's, all busy"
        if len(sessions) >= self.limits.total and not _idle(sessions, list(sessions)):
            return f"{len(sessions)}, all busy"
        return None

    def _trim(self, client: str, keep: str) -> None:
        """End idle sessions until ``client``'s and all are within their bounds (``keep``,
        the one just opened, stays)."""
        sessions = self._open()
        mine = [sid for sid in sessions if self._clients.get(sid) == client and sid != keep]
        held = self.holding()
        for sid in _victims(sessions, mine, held, len(mine) + 1 - self.limits.per_client):
            del sessions[sid]
        others = [sid for sid in sessions if sid != keep]
        for sid in _victims(sessions, others, held, len(sessions) - self.limits.total):
            del sessions[sid]


def _victims(
    sessions: dict[str, StreamableHTTPServerTransport],
    among: list[str],
    held: set[str],
    count: int,
) -> list[str]:
    """End ``count`` idle sessions of ``among`` (no agent first, then the longest idle:
    the earliest idle deadline); the ids of those ended."""
    if count <= 0:
        return []
    idle = sorted(_idle(sessions, among), key=lambda sid: (sid in held, _deadline(sessions[sid])))
    ended = idle[:count]
    for sid in ended:
        scope = sessions[sid].idle_scope
        assert scope is not None
        scope.cancel()  # what the idle timeout does: the session ends, its agent leaves
    return ended


def _idle(sessions: dict[str, StreamableHTTPServerTransport], among: list[str]) -> list[str]:
    return [sid for sid in among if math.isfinite(_deadline(sessions[sid]))]


def _deadline(transport: StreamableHTTPServerTransport) -> float:
    """When the transport's idle timeout fires: infinite while a request is in flight."""
    scope = transport.idle_scope
    return math.inf if scope is None else scope.deadline


def _ending(transport: StreamableHTTPServerTransport) -> bool:
    scope = transport.idle_scope
    return transport.is_terminated or (scope is not None and scope.cancel_called)


def _opens_session(scope: Scope) -> bool:
    """Whether the SDK would open a session for this request: a POST without a session id,
    of a protocol version that has sessions (or none named)."""
    if scope["type"] != "http" or scope["method"] != "POST":
        return False
    headers = dict(scope["headers"])
    if _SESSION_HEADER in headers:
        return False
    version = headers.get(_VERSION_HEADER)
    return version is None or version.decode("latin-1") in HANDSHAKE_PROTOCOL_VERSIONS


def _client_of(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else ""


def bound_sessions(server: MCPServer, limits: SessionLimits | None = None) -> None:
    """Bound the sessions of ``server``'s streamable HTTP app (``streamable_http_app`` must
    have been called): the sessions a ``ShoalServer``'s desk holds agents in end last."""
    manager = server.session_manager
    desk = getattr(server, "desk", None)
    holding: Callable[[], set[str]] = desk.holding if desk is not None else set
    limited = manager.asgi_app  # the SDK's body limit first, then the bounds
    limited.app = SessionBounds(limited.app, manager, holding, limits or SessionLimits())
