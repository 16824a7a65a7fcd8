"""One connection to a hub's ``/api/v1``: requests out, answers (or shoal's errors) back.

The API refuses with the body the CLI prints for ``--json`` -- ``{"error": {code, message,
hint}}`` -- so a refusal is raised here as the same ``shoal.errors`` class, found by its
code: the CLI prints the same words and exits with the same code as on a local fleet.
What only HTTP can say gets a class of its own, each a ``BadInput`` (exit 2, retrying will
not help): no token or a wrong one (``Unauthorized``), a token whose role or agent may not
do that (``Forbidden``, ``ForeignAgent``), a verb the API has no route for
(``NotOverHTTP``). A server that cannot be reached, or does not answer in time, is
``StoreUnavailable`` (exit 4) naming the URL, like a database that is down; its hint says
whether the change asked for may have been made: not when the connection could not be
opened, maybe when it was lost (or timed out) after the request was sent.

With no token given, a client of a hub on loopback sends the hub's sign-in secret when
this user started it (``shoal.local_secrets.server_secret``): that is how the owner's CLI
uses a fleet served with no token made, and nobody else can.

The client is one ``httpx.Client``: a pool of kept-alive connections shared by the threads
of a worker, a connect timeout, and a read timeout that a long-polling claim raises above
its wait.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import httpx

from shoal import __version__, errors, local_secrets
from shoal.errors import BadInput, InvalidStoreURL, ShoalError, StoreError, StoreUnavailable

__all__ = [
    "API_PREFIX",
    "TOKEN_ENV",
    "ApiClient",
    "Forbidden",
    "ForeignAgent",
    "NotOverHTTP",
    "Unauthorized",
    "base_url",
]

#: Where the token for the API comes from (SHOAL_TOKEN is a lease token in the CLI).
TOKEN_ENV = "SHOAL_API_TOKEN"
API_PREFIX = "/api/v1"
#: Seconds to open a connection, and to wait for an answer (a claim adds its own wait).
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 30.0
#: Connections kept open to the hub: a worker's claim loop, its heartbeats and its tasks'
#: settlements each take one at a time.
POOL_SIZE = 16

_TOKEN_HINT = f"set {TOKEN_ENV} to a token from `shoal token create` (run where the fleet is)"
#: What to do after a change was asked for and no answer came: it may have been made.
_MAYBE_CHANGED = (
    "retry (a change asked for may have been made: look with shoal show or shoal status first)"
)
_RETRY_READ = "retry once the hub is back (shoal serve); a read changes nothing"


class Unauthorized(BadInput):
    """The hub wants a token, and none (or one it does not know) was sent."""

    code = "unauthorized"


class Forbidden(BadInput):
    """The token's role may not do that."""

    code = "forbidden"


class ForeignAgent(BadInput):
    """An agent token acts as its own agent only."""

    code = "foreign_agent"


class NotOverHTTP(BadInput):
    """That is not available over the HTTP API."""

    code = "not_over_http"


def _classes() -> dict[str, type[ShoalError]]:
    """Every error class a refusal's code may name: shoal's own and the ones above."""
    found: dict[str, type[ShoalError]] = {}
    for name in errors.__all__:
        cls = getattr(errors, name)
        if isinstance(cls, type) and issubclass(cls, ShoalError):
            found[cls.code] = cls
    for cls in (Unauthorized, Forbidden, ForeignAgent):
        found[cls.code] = cls
    return found


CLASSES = _classes()
#: The class of a refusal whose code this shoal does not know, by HTTP status.
BY_STATUS: dict[int, type[ShoalError]] = {
    400: BadInput,
    404: BadInput,
    409: errors.Conflict,
    413: BadInput,
    422: BadInput,
    503: StoreUnavailable,
}


#: The codes of a request no route of the hub takes (a hub of another version).
_NO_ROUTE = ("not_found", "method_not_allowed")


def base_url(url: str) -> str:
    """The hub's address from a store URL (``https://hub:8765``, with or without a path
    before ``/api/v1``), without a trailing slash; ``InvalidStoreURL`` if it is not one."""
    text = url.strip()
    try:
        parsed = httpx.URL(text)
    except (httpx.InvalidURL, TypeError) as exc:
        raise InvalidStoreURL(f"{url!r} is not a URL: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise InvalidStoreURL(
            f"{url!r} is not an http:// or https:// address of a shoal server",
            hint="e.g. --store https://hub.example:8765 (what `shoal serve` listens on)",
        )
    if parsed.query or parsed.fragment:
        raise InvalidStoreURL(
            f"{url!r} has a query or a fragment; a hub's URL is its address only",
            hint="e.g. --store https://hub.example:8765",
        )
    path = re.sub(r"/+$", "", parsed.path)
    if path.endswith(API_PREFIX):
        path = path[: -len(API_PREFIX)]
    return str(parsed.copy_with(path=path or "/")).rstrip("/")


def _shown(url: str) -> str:
    """The URL for messages: no user name or password."""
    parsed = httpx.URL(url)
    return str(parsed.copy_with(username=None, password=None)) if parsed.userinfo else url


class ApiClient:
    """Calls to one hub's API with one token; safe to share between threads."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = READ_TIMEOUT,
    ) -> None:
        self.url = base_url(url)
        self.shown = _shown(self.url)
        self.token = (token or "").strip() or None
        # No token given: a hub this user runs on loopback with no token made is opened by
        # its sign-in secret, which only this user can read (shoal.local_secrets).
        found = local_secrets.server_secret(self.url) if self.token is None else None
        self.local = found is not None
        if found is not None:
            self.token = found
        headers = {"User-Agent": f"shoal/{__version__}", "Accept": "application/json"}
        if self.token is not None:
            if not self.token.isascii() or not self.token.isprintable():
                raise Unauthorized(
                    f"the token in {TOKEN_ENV} is not one: it has characters no token has",
                    hint=_TOKEN_HINT,
                )
            headers["Authorization"] = f"Bearer {self.token}"
        self.timeout = timeout
        self._client = httpx.Client(
            base_url=self.url + API_PREFIX,
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=CONNECT_TIMEOUT),
            limits=httpx.Limits(max_connections=POOL_SIZE, max_keepalive_connections=POOL_SIZE),
            # One retry of a connection that failed to open: nothing was sent yet.
            transport=transport or httpx.HTTPTransport(retries=1),
            follow_redirects=False,
        )

    def close(self) -> None:
        self._client.close()

    def get(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        return self.call("GET", path, params=params)

    def post(self, path: str, body: Any = None, *, wait: float = 0.0) -> Any:
        return self.call("POST", path, body=body, wait=wait)

    def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        wait: float = 0.0,
    ) -> Any:
        """The JSON answer of one request; a refusal or a fault raised as a shoal error.
        ``wait``: seconds the server may hold the request (a long-polling claim) before its
        answer is due."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        timeout = httpx.Timeout(self.timeout + wait, connect=CONNECT_TIMEOUT)
        try:
            response = self._client.request(
                method, path, json=body, params=query or None, timeout=timeout
            )
        except httpx.TimeoutException as exc:
            raise self._timed_out(exc, self.timeout + wait) from exc
        except httpx.ConnectError as exc:
            raise StoreUnavailable(
                f"no shoal server answers at {self.shown}: {_why(exc)}",
                hint="start it there (shoal serve), or point --store (or $SHOAL_STORE) at "
                "the hub's address; nothing was changed",
            ) from exc
        except httpx.TransportError as exc:
            # Sent, then the connection was lost before the answer (the hub was killed, a
            # proxy dropped it): the hub may have done what was asked.
            raise StoreUnavailable(
                f"the connection to the shoal server at {self.shown} was lost before it "
                f"answered: {_why(exc)}",
                hint=_MAYBE_CHANGED if method not in ("GET", "HEAD") else _RETRY_READ,
            ) from exc
        if response.is_success:
            try:
                return response.json()
            except ValueError as exc:
                raise _not_shoal(self.shown, response) from exc
        raise self._refusal(response)

    def _timed_out(self, exc: httpx.TimeoutException, seconds: float) -> StoreUnavailable:
        if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
            return StoreUnavailable(
                f"the shoal server at {self.shown} could not be reached within "
                f"{CONNECT_TIMEOUT:g}s",
                hint="check the address and that the hub is up (shoal serve); nothing was changed",
            )
        return StoreUnavailable(
            f"the shoal server at {self.shown} did not answer within {seconds:g}s",
            hint=f"it may be overloaded; {_MAYBE_CHANGED}",
        )

    def _refusal(self, response: httpx.Response) -> ShoalError:
        """The shoal error a refusal names (by its code, else by its status)."""
        try:
            detail = response.json()["error"]
            code, message, hint = detail["code"], detail["message"], detail.get("hint")
        except (ValueError, KeyError, TypeError):
            return _not_shoal(self.shown, response)
        status = response.status_code
        if status == 401 or code == "unauthorized":
            if self.local:
                said = (
                    f"the hub at {self.shown} has access tokens now, so the sign-in secret "
                    "of its owner opens it no more"
                )
            elif self.token is not None:
                said = (
                    f"the hub at {self.shown} refused the token in {TOKEN_ENV} (unknown or revoked)"
                )
            else:
                said = f"the hub at {self.shown} needs a token, and {TOKEN_ENV} is not set"
                if "sign-in secret" in message:  # an open hub: its owner's only
                    return Unauthorized(f"{said}: {message}", hint=hint or _TOKEN_HINT)
            return Unauthorized(said, hint=_TOKEN_HINT)
        if code == "forbidden" and status == 403:
            return Forbidden(message, hint=f"{hint or ''}; {_TOKEN_HINT}".lstrip("; "))
        if status == 421:
            return BadInput(
                f"the hub at {self.shown} does not answer to that host name: {message}",
                hint="start it with --allow-host NAME for the name used here",
            )
        if status == 429:
            return Unauthorized(message, hint=hint or _TOKEN_HINT)
        if code in _NO_ROUTE or code.startswith("http_"):  # another version, or not shoal
            asked = response.request
            return StoreError(
                f"the hub at {self.shown} answered {status} ({message}) to {asked.method} "
                f"{asked.url.path}",
                hint="run the same shoal version on both sides (shoal --version)",
            )
        cls = CLASSES.get(code) or BY_STATUS.get(status)
        if cls is None:
            cls = StoreError
            message = f"the hub at {self.shown} failed ({status} {code}): {message}"
        return cls(message, hint=hint)


def _why(exc: httpx.TransportError) -> str:
    if isinstance(exc, httpx.ConnectError):
        text = str(exc)
        return "connection refused" if "refused" in text.lower() else text or "cannot connect"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _not_shoal(shown: str, response: httpx.Response) -> StoreError:
    kind = response.headers.get("content-type", "no content type").split(";")[0]
    return StoreError(
        f"{shown} answered {response.status_code} ({kind}), not as a shoal server does",
        hint="check the address: it is where `shoal serve` listens (e.g. http://hub:8765)",
    )
