"""Who is asking, and may they: every request to ``shoal serve`` passes here first.

Three checks, in the order a request meets them:

1. **Host and Origin** (``HostCheck``, plain ASGI middleware, so it also guards the live
   stream): a request must name one of the host names the server answers to
   (``shoal.faces.exposure.allowed_hosts``), else 421; a browser request from another
   origin gets 403. That stops a page elsewhere that rebinds its own name to this machine
   (DNS rebinding) from reading or driving the fleet.
2. **Who** (``Guard.principal``): a token, ``Authorization: Bearer shoal_…`` from agents and
   scripts, or the session cookie the sign-in page sets for people. The token is looked up
   in the fleet (``Fleet.authenticate``; a short cache spares the store a read per request).
   A fleet with no token at all, served on loopback only, is *open* -- but loopback is not
   trust: every user of the machine reaches 127.0.0.1. So an open fleet admits only the
   user who started the server, who proves it with the server's *sign-in secret*
   (``shoal.local_secrets``: a file only that user can read). ``shoal serve`` prints a
   sign-in URL holding it (``/login?token=…``, which sets the cookie and sends the browser
   on without it), and the CLI's remote store finds it by itself. Making the first token
   (``shoal token create``) closes the fleet, without a restart; from then on the tokens
   rule and the secret opens nothing. Off loopback a fleet with no token refuses to start
   (``shoal serve``).
3. **May they** (``need``): the route's role (viewer < agent < admin); an agent token acts
   only as its own agent (``Principal.may_act_as``, checked by each agent route).

A wrong token is answered only after ``WRONG_TOKEN_DELAY``, and counted for its client
address the moment it is found wrong (so a burst of concurrent guesses is counted whole):
past ``MAX_FAILURES`` in ``FAILURE_WINDOW`` seconds the address's wrong tokens get 429
instead of 401. A valid token is never refused by the throttle -- it is checked first, one
hash lookup -- so every agent of a hub behind one address (127.0.0.1, a proxy) keeps
working while one of them retries a revoked token. Forms carry a CSRF token tied to the
session (``csrf_token``); the cookie is ``HttpOnly`` and ``SameSite=Strict``. No token is
ever logged, shown or put in a page.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import anyio
from fastapi import HTTPException, Request
from starlette.concurrency import run_in_threadpool

from shoal.access import Credential, Role
from shoal.faces.exposure import SCHEMES, WRONG_TOKEN_DELAY, Exposure, is_loopback
from shoal.fleet import Fleet

__all__ = [
    "COOKIE",
    "FAILURE_WINDOW",
    "MAX_BODY",
    "MAX_FAILURES",
    "BodyLimit",
    "Guard",
    "HostCheck",
    "Principal",
    "need",
]

#: The session cookie the sign-in page sets: the token itself, HttpOnly, SameSite=Strict.
COOKIE = "shoal_session"
#: Methods that change nothing: the only ones the API takes on the session cookie alone.
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
#: Failed sign-ins one client address may make per window before it gets 429.
MAX_FAILURES = 10
FAILURE_WINDOW = 60.0
#: Seconds a looked-up token is trusted before the fleet is asked again (a revoked token
#: stops working within this long).
CACHE_SECONDS = 2.0

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class Principal:
    """Who a request acts for: a token's credential, or the open fleet's local user."""

    role: Role
    agent: str | None = None  # an agent token's one agent
    token_id: str | None = None  # None for the owner of an open fleet (its sign-in secret)
    name: str = ""

    @classmethod
    def of(cls, credential: Credential) -> Principal:
        return cls(credential.role, credential.agent, credential.id, credential.name)

    def allows(self, role: Role) -> bool:
        order = list(Role)
        return order.index(self.role) >= order.index(role)

    def may_act_as(self, agent_id: str) -> bool:
        return self.role is Role.ADMIN or (self.role is Role.AGENT and self.agent == agent_id)

    @property
    def label(self) -> str:
        """How a page names the signed-in user (never the secret)."""
        if self.token_id is None:
            return "local (open fleet)"
        who = f" {self.agent}" if self.agent else ""
        return f"{self.role}{who} · token {self.token_id}"


def _host_names(exposure: Exposure) -> set[str]:
    names = set()
    for name in exposure.allowed:
        names.add(f"[{name}]" if ":" in name and not name.startswith("[") else name)
    return {n.lower() for n in names}


def _strip_port(host: str) -> str:
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class HostCheck:
    """ASGI middleware: 421 for a Host this server does not answer to, 403 for a browser
    request from another origin (DNS rebinding, cross-site requests)."""

    def __init__(self, app: ASGIApp, exposure: Exposure) -> None:
        self.app = app
        self.names = _host_names(exposure)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        hosts = _values(scope, b"host")
        # Two Host headers: the check and the app could each read a different one.
        authority = hosts[0].strip().lower() if len(hosts) == 1 else ""
        if _strip_port(authority) not in self.names:
            await _refuse(send, 421, "this server does not answer to that host name")
            return
        for origin in _values(scope, b"origin"):  # every one of them must be ours
            if origin == "null":
                if scope.get("method", "GET") in ("GET", "HEAD"):
                    continue
            elif self._our_origin(origin, authority):
                continue
            await _refuse(send, 403, "requests from other sites are refused")
            return
        await self.app(scope, receive, send)

    def _our_origin(self, origin: str, authority: str) -> bool:
        """Whether ``origin`` is this server's: one of its names and, for a loopback name
        when the Host header names a port, that port -- a page served on another port of
        this machine (a dev server, a notebook) is another site, though cookies count it the
        same one. (A proxy's public name is not held to the port: a proxy may send the
        upstream's own address as Host.)"""
        scheme, sep, rest = origin.lower().partition("://")
        name = _strip_port(rest)
        if not (sep and scheme in SCHEMES and name in self.names):
            return False
        port = _port_of(authority)
        if port is None or name not in _LOOPBACK:
            return True
        return (_port_of(rest) or _DEFAULT_PORT[scheme]) == port


_DEFAULT_PORT = {"http": "80", "https": "443"}
_LOOPBACK = {"127.0.0.1", "localhost", "[::1]"}


def _values(scope: Scope, name: bytes) -> list[str]:
    return [v.decode("latin-1") for k, v in scope["headers"] if k.lower() == name]


def _port_of(authority: str) -> str | None:
    """The port ``authority`` (``host[:port]``) names, if it names one."""
    host = _strip_port(authority)
    rest = authority[len(host) :]
    return rest[1:] if rest.startswith(":") and rest[1:] else None


async def _refuse(
    send: Send,
    status: int,
    message: str,
    *,
    code: str = "forbidden",
    hint: str = "use the address the server was started for, or add it with --allow-host",
) -> None:
    body = json.dumps({"error": {"code": code, "message": message, "hint": hint}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


#: The largest request body the server reads (a task's body may be 1,000,000 characters).
MAX_BODY = 8 * 1024 * 1024


class BodyLimit:
    """ASGI middleware: a request body over ``MAX_BODY`` bytes gets 413 before it is read
    into memory (by its Content-Length), or is cut off where it passes the limit (a chunked
    one), so no client can make the server hold gigabytes."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name.lower() == b"content-length":
                try:
                    too_big = int(value) > self.limit
                except ValueError:
                    too_big = True
                if too_big:
                    await _refuse(
                        send,
                        413,
                        f"the request body is over {self.limit // 1024 // 1024} MiB",
                        code="too_large",
                        hint="send less: a task's body and payload are for instructions, "
                        "not data (put data where the agent can fetch it)",
                    )
                    return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    return {"type": "http.disconnect"}
            return message

        await self.app(scope, counted, send)


class Guard:
    """Authentication for one server: tokens looked up in the fleet, the owner's sign-in
    secret on an open loopback fleet, wrong tokens counted per address, CSRF tokens."""

    def __init__(self, fleet: Fleet, exposure: Exposure, local_secret: str | None = None) -> None:
        self.fleet = fleet
        self.loopback = is_loopback(exposure.host)
        # The owner's proof on an open fleet; without one given, a secret nobody holds.
        self._local = (local_secret or secrets.token_urlsafe(32)).encode()
        self._secret = secrets.token_bytes(32)  # signs CSRF tokens; new each start
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, Principal | None]] = {}
        self._open: tuple[float, bool] = (0.0, False)
        self._failures: dict[str, deque[float]] = {}

    # -- who

    def is_open(self) -> bool:
        """Whether the owner's sign-in secret opens the fleet: loopback, and no token made."""
        if not self.loopback:
            return False
        now = time.monotonic()
        with self._lock:
            checked, is_open = self._open
            if now - checked < CACHE_SECONDS:
                return is_open
        is_open = not self.fleet.tokens()
        with self._lock:
            self._open = (now, is_open)
        return is_open

    def is_local_secret(self, token: str | None) -> bool:
        """Whether ``token`` is the owner's sign-in secret (compared in constant time)."""
        return bool(token) and hmac.compare_digest(str(token).encode(), self._local)

    def lookup(self, token: str) -> Principal | None:
        """The principal ``token`` proves (cached for ``CACHE_SECONDS``), or None."""
        key = _digest(token)
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and now - hit[0] < CACHE_SECONDS:
                return hit[1]
        credential = self.fleet.authenticate(token)
        found = Principal.of(credential) if credential is not None else None
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[key] = (now, found)
        return found

    def forget(self) -> None:
        """Drop what is cached (after a token is made or revoked through this server)."""
        with self._lock:
            self._cache.clear()
            self._open = (0.0, False)

    @staticmethod
    def presented(request: Request) -> str | None:
        """The token a request carries: a bearer header first, else the session cookie --
        but not for a change made through the API: the cookie is the pages' (whose forms
        carry a CSRF token), and an API write must say who it is in its header."""
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
        if request.url.path.startswith("/api/") and request.method not in SAFE_METHODS:
            return None
        return request.cookies.get(COOKIE) or None

    async def principal(self, request: Request) -> Principal | None:
        """Who ``request`` acts for; None if it carries no valid token. A wrong token is
        slowed and counted for the client's address (``failed``)."""
        token = self.presented(request)
        if token is None:
            return None
        return await self.check(token, request.client.host if request.client else "?")

    async def check(self, token: str, client: str) -> Principal | None:
        """Who ``token`` proves: the owner of an open fleet (the sign-in secret), a token's
        principal, or None -- after ``failed`` for a wrong one (which may raise 429)."""
        if self.is_local_secret(token):
            if await run_in_threadpool(self.is_open):
                return Principal(Role.ADMIN)
            return None  # the fleet has tokens now: the owner signs in with one
        found = await run_in_threadpool(self.lookup, token)
        if found is None:
            await self.failed(client)
        return found

    # -- failures

    async def failed(self, client: str) -> None:
        """Count a wrong token from ``client`` at once, answer it only after
        ``WRONG_TOKEN_DELAY``, and with 429 once the address is past ``MAX_FAILURES`` in
        ``FAILURE_WINDOW`` seconds."""
        now = time.monotonic()
        with self._lock:
            if len(self._failures) > 10_000:
                self._failures.clear()
            seen = self._failures.setdefault(client, deque(maxlen=MAX_FAILURES + 1))
            while seen and now - seen[0] > FAILURE_WINDOW:
                seen.popleft()
            seen.append(now)
            over = len(seen) > MAX_FAILURES
            wait = int(FAILURE_WINDOW - (now - seen[0])) + 1
        await anyio.sleep(WRONG_TOKEN_DELAY)
        if over:
            raise HTTPException(
                429,
                detail={
                    "code": "too_many_failures",
                    "message": f"too many wrong tokens from {client}",
                    "hint": f"wait {wait} s, then use a valid token (shoal token list)",
                },
                headers={"Retry-After": str(wait)},
            )

    # -- CSRF

    def csrf_token(self, principal: Principal) -> str:
        """The form token for ``principal``'s session: an HMAC of who they are, so a page
        from another site cannot know it."""
        who = principal.token_id or "open"
        return hmac.new(self._secret, who.encode(), hashlib.sha256).hexdigest()

    def check_csrf(self, principal: Principal, given: str | None) -> None:
        if not given or not hmac.compare_digest(given, self.csrf_token(principal)):
            raise HTTPException(
                403,
                detail={
                    "code": "csrf",
                    "message": "the form's CSRF token is missing or wrong",
                    "hint": "reload the page and submit the form again",
                },
            )


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def guard_of(request: Request) -> Guard:
    guard: Guard = request.app.state.guard
    return guard


def need(role: Role) -> Callable[[Request], Awaitable[Principal]]:
    """A FastAPI dependency: the request's principal, if it may do what ``role`` may;
    401 without a valid token, 403 with one that does not reach ``role``."""

    async def dependency(request: Request) -> Principal:
        guard = guard_of(request)
        principal = await guard.principal(request)
        if principal is None:
            if await run_in_threadpool(guard.is_open):
                detail = {
                    "code": "unauthorized",
                    "message": "this fleet has no token yet, so it is open only to the user "
                    "who started the server, with the server's sign-in secret",
                    "hint": "as that user, use the sign-in link `shoal serve` printed, or the "
                    "CLI (it finds the secret itself); anyone else needs a token (shoal token "
                    "create, run by that user)",
                }
            else:
                detail = {
                    "code": "unauthorized",
                    "message": "this fleet needs a token",
                    "hint": "send Authorization: Bearer TOKEN (make one: shoal token create)",
                }
            raise HTTPException(401, detail=detail, headers={"WWW-Authenticate": "Bearer"})
        if not principal.allows(role):
            raise HTTPException(
                403,
                detail={
                    "code": "forbidden",
                    "message": f"a {principal.role} token cannot do this; it needs {role}",
                    "hint": f"use a token with role {role} (shoal token create --role {role})",
                },
            )
        request.state.principal = principal
        return principal

    return dependency
