"""What every page of the dashboard shares: the templates, who is signed in, and how a page
says no.

Pages are for people, so a refusal is a page too, never the API's JSON: a request without a
valid session is sent to ``/login`` (303), and a refusal from the guard (403, 429) or from
the Fleet (``ShoalError``: an unknown task, a transition the fleet forbids, a bad setting)
is drawn as a short page with the error's message and hint and the same HTTP status the API
would give (``errors.status_for``). ``PageRoute`` does this for every route of the page
routers, dependencies included, so a route body never needs a try block of its own.

Task text comes from agents and is untrusted: the templates' environment escapes every
value (``autoescape=True``), no template marks task text ``|safe``, and ``text`` also
writes out control and direction-override characters (``shoal.text.safe``) so a title
cannot disguise itself. The only markup made in Python is the charts' SVG (``charts``),
which escapes its own labels.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Depends, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from shoal.access import Role
from shoal.errors import ShoalError
from shoal.faces.render import ago
from shoal.faces.web.errors import status_for
from shoal.faces.web.guard import Guard, Principal, need
from shoal.fleet import Fleet
from shoal.model import Agent
from shoal.settings import format_duration, format_setting
from shoal.text import safe
from shoal.times import iso_time
from shoal.vocabulary import AgentStatus

__all__ = [
    "TEMPLATES",
    "Admin",
    "PageRoute",
    "Viewer",
    "back_to",
    "fleet_of",
    "render",
]

HERE = Path(__file__).parent


def text(value: object) -> str:
    """Untrusted text for a page: controls and direction overrides written out (escaping
    for HTML is the environment's job)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return safe(value)
    return safe(json.dumps(value, ensure_ascii=False, default=str))


def quoted(value: object) -> str:
    """An id for a URL, every character but letters, digits and ``_ . - ~`` escaped, ``/``
    too: Jinja's ``urlencode`` leaves ``/`` alone, and an agent id an older version took
    (``x/../../agents/bob``) would then be a path the browser resolves to another agent."""
    return quote(str(value), safe="")


def duration(seconds: float | None) -> str:
    """Seconds for people, with their unit (``2m``, ``90s``, ``1h30m``), as the CLI writes
    a duration; never a bare ``120.0``."""
    return "" if seconds is None else format_duration(float(seconds))


def shown_status(agent: Agent, now: float) -> str:
    """An agent's status as a page names it: ``paused`` while a pause holds it (whether
    the breaker's or a person's), whatever status was last written."""
    return AgentStatus.PAUSED.value if agent.paused(now) else agent.status.value


def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=True,  # every value is escaped unless a template says otherwise
        undefined=StrictUndefined,  # a misspelt name fails the test, not the page silently
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["text"] = text
    env.filters["quoted"] = quoted
    env.filters["iso"] = iso_time
    env.filters["duration"] = duration
    env.filters["setting"] = format_setting
    env.globals["ago"] = ago
    env.globals["shown_status"] = shown_status
    return env


TEMPLATES = Jinja2Templates(env=_env())


#: Sent with every page: no other site may frame it (a framed page could trick an admin
#: into clicking an action), forms post only here, and the browser trusts content types.
#: Scripts are not restricted to this origin by the policy, so test tools may inject theirs.
PAGE_HEADERS = {
    "Content-Security-Policy": "frame-ancestors 'none'; form-action 'self'; base-uri 'none'; "
    "object-src 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def fleet_of(request: Request) -> Fleet:
    fleet: Fleet = request.app.state.fleet
    return fleet


def guard_of(request: Request) -> Guard:
    guard: Guard = request.app.state.guard
    return guard


FleetDep = Annotated[Fleet, Depends(fleet_of)]
Viewer = Annotated[Principal, Depends(need(Role.VIEWER))]
Admin = Annotated[Principal, Depends(need(Role.ADMIN))]


def render(
    request: Request,
    template: str,
    context: Mapping[str, Any],
    *,
    status: int = 200,
) -> Response:
    """``template`` with what every page shows: who is signed in, whether they may act, and
    the CSRF token their forms carry."""
    principal: Principal | None = getattr(request.state, "principal", None)
    guard = guard_of(request)
    full = {
        "principal": principal,
        "admin": principal is not None and principal.allows(Role.ADMIN),
        "csrf": guard.csrf_token(principal) if principal is not None else "",
        "signed_in": principal is not None and principal.token_id is not None,
        "path": request.url.path,
        **context,
    }
    response = TEMPLATES.TemplateResponse(request, template, full, status_code=status)
    response.headers.update(PAGE_HEADERS)
    return response


def back_to(request: Request, fallback: str = "/") -> str:
    """Where an action returns to: the page it came from (``Referer``) when that is one of
    ours, else ``fallback``. Only a local path is ever used, so an action cannot be made to
    send its user to another site."""
    referer = request.headers.get("referer", "")
    base = str(request.base_url)
    if referer.startswith(base):
        path = "/" + referer[len(base) :]
        if not path.startswith("//"):
            return path
    return fallback


def local_path(value: str | None, fallback: str = "/") -> str:
    """``value`` if it is a path on this site (``/tasks?state=dead``), else ``fallback``.

    Only printable ASCII without spaces or backslashes is taken: a browser drops tabs and
    line breaks from an address and reads ``\\`` as ``/``, so ``/\t/evil.example`` would
    become ``//evil.example``, another site."""
    if (
        value
        and value.startswith("/")
        and not value.startswith("//")
        and all("!" <= c <= "~" and c != "\\" for c in value)
    ):
        return value
    return fallback


def _problem(exc: Exception) -> tuple[int, str, str, str | None]:
    """(status, code, message, hint) of a refusal."""
    if isinstance(exc, ShoalError):
        return status_for(exc), exc.code, exc.message, exc.hint
    if isinstance(exc, RequestValidationError):
        parts = [
            f"{'.'.join(str(p) for p in e.get('loc', ())[1:]) or 'request'}: {e.get('msg')}"
            for e in exc.errors()[:5]
        ]
        return 400, "bad_input", "; ".join(parts), "check the address or the form and try again"
    assert isinstance(exc, HTTPException)
    given: object = exc.detail
    detail: dict[str, Any] = given if isinstance(given, dict) else {"message": str(given)}
    code = str(detail.get("code", f"http_{exc.status_code}"))
    return exc.status_code, code, str(detail.get("message", "")), detail.get("hint")


def refusal(request: Request, exc: Exception) -> Response:
    """The page for a refusal; a missing or wrong session goes to the sign-in page."""
    status, code, message, hint = _problem(exc)
    if status == 401:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        if request.headers.get("hx-request"):  # a region reloading itself: the whole page goes
            page = request.headers.get("hx-current-url", "")
            base = str(request.base_url)
            target = "/" + page[len(base) :] if page.startswith(base) else "/"
            login = f"/login?next={quote(local_path(target), safe='')}"
            return Response(status_code=204, headers={"HX-Redirect": login})
        return RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303)
    headers = getattr(exc, "headers", None) or {}
    context = {"status": status, "code": code, "message": message, "hint": hint}
    response = render(request, "error.html", context, status=status)
    for name, value in headers.items():
        if name.lower() == "retry-after":
            response.headers[name] = value
    if request.headers.get("hx-request"):
        response.headers["HX-Push-Url"] = "false"  # the address stays the page's, not the form's
    return response


class PageRoute(APIRoute):
    """A route whose refusals are pages (module docstring), for the dashboard's routers."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def page_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except (ShoalError, HTTPException, RequestValidationError) as exc:
                return refusal(request, exc)

        return page_handler
