"""The dashboard's pages: the fleet's lanes, the task list and a task's history, the fleet's
health, and signing in.

Every page needs the viewer role (``need(Role.VIEWER)``); people sign in on ``/login`` by
pasting a token, which becomes the session cookie (``guard.COOKIE``: HttpOnly,
SameSite=Strict, Secure over https). On an open fleet (loopback, no token made) its owner
signs in with the link ``shoal serve`` printed (``/login?token=SECRET``), whose secret
becomes the cookie the same way. A page refused for want of a session sends its reader to
``/login`` and back (``views.PageRoute``).

Each page is bounded whatever the fleet's size: the lanes read one status and at most
``lanes.FULL_LANES`` queues; the task list filters a bounded listing (``SCAN`` tasks, said
on the page); the health and agent pages' charts are counted by the store over a bounded
window (``charts``), and an agent's page reads its events from the last ``AGENT_SCAN`` of
the log. The tasks, health and agent pages reload their live part on the live stream's
``fleet`` event (which the stream sends at most twice a second), one request at a time with
the newest change queued behind it -- never dropped, as a throttle would drop the last
change of a burst -- and every 30 s regardless.
The people's actions (retry, cancel, release, pause, resume, settings, assess) are in
``actions``, retrying or cancelling a filtered selection in ``bulk``; the live stream is
``live``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, Path, Query, Request, Response
from fastapi.responses import RedirectResponse
from starlette.concurrency import run_in_threadpool

from shoal.faces.web.charts import (
    DEFAULT_RANGE,
    RANGES,
    CountCache,
    agent_charts,
    fleet_charts,
)
from shoal.faces.web.guard import COOKIE, Guard
from shoal.faces.web.lanes import FULL_LANES, PER_LANE, LaneCache
from shoal.faces.web.live import feed_of
from shoal.faces.web.views import FleetDep, PageRoute, Viewer, local_path, render
from shoal.fleet import Fleet
from shoal.model import Task
from shoal.settings import SETTINGS
from shoal.vocabulary import AgentStatus, TaskState, names

__all__ = ["DEAD_SHOWN", "PAGE", "SCAN", "router"]

router = APIRouter(route_class=PageRoute, tags=["dashboard"], include_in_schema=False)

#: Tasks the task list reads at most per page before filtering by domain, priority and title.
SCAN = 5000
#: Rows a page of the task list shows.
PAGE = 50
#: Dead tasks the health page lists.
DEAD_SHOWN = 200
#: Events a task's page shows (the newest).
HISTORY = 1000
#: Events an agent's page shows (its newest), and how far back in the log it looks for them
#: (the log has no index on agent: reading it back to an agent's last event could read all).
AGENT_EVENTS = 100
AGENT_SCAN = 50_000

TaskId = Annotated[int, Path(ge=1, le=2**62)]


# ---------------------------------------------------------------- signing in


@router.get("/login", summary="Sign in with a token, or with the sign-in link of an open fleet")
async def login_page(
    request: Request, next: str | None = None, token: str | None = None
) -> Response:
    """With ``token`` (the link ``shoal serve`` prints for an open fleet): the sign-in
    secret becomes the session cookie and the browser is sent on to ``next`` without it in
    the address, as a sign-in by the form would."""
    guard: Guard = request.app.state.guard
    if token is not None:
        return await _sign_in(request, token, next or "/")
    is_open = await run_in_threadpool(guard.is_open)
    context = {"next": local_path(next), "open": is_open, "problem": None}
    return render(request, "login.html", context)


@router.post("/login", summary="Sign in: the token becomes the session cookie")
async def login(
    request: Request,
    token: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "/",
) -> Response:
    return await _sign_in(request, token, next)


async def _sign_in(request: Request, token: str, next: str) -> Response:
    """The session cookie for ``token`` and a 303 to ``next`` (a path of this site), or
    the sign-in page again with 401 (a wrong token is slowed and counted: ``failed``)."""
    guard: Guard = request.app.state.guard
    client = request.client.host if request.client else "?"
    token = token.strip()
    found = await guard.check(token, client) if token else None
    if found is None:
        context = {
            "next": local_path(next),
            "open": await run_in_threadpool(guard.is_open),
            "problem": "That token is not one of this fleet's (or it was revoked).",
        }
        return render(request, "login.html", context, status=401)
    response = RedirectResponse(local_path(next), status_code=303)
    response.set_cookie(
        COOKIE,
        token,
        httponly=True,
        samesite="strict",
        path="/",
        secure=request.url.scheme == "https",
    )
    return response


@router.get("/logout", summary="Sign out (a form, so a link elsewhere cannot sign you out)")
def logout_page(request: Request) -> Response:
    return render(request, "logout.html", {})


@router.post("/logout", summary="Sign out: the session cookie is cleared")
def logout(request: Request) -> Response:
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(
        COOKIE, path="/", httponly=True, samesite="strict", secure=request.url.scheme == "https"
    )
    return response


# ---------------------------------------------------------------- the fleet


def _lanes_context(
    request: Request, fleet: FleetDep, agent: str, *, shared: bool
) -> dict[str, Any]:
    """The lanes; ``shared`` (a live reload): read once per change of the fleet for every
    page watching it (``LaneCache``). A page loaded whole (after an action, say) reads them
    afresh, so it shows what it just did even before the live feed has seen it."""
    cache: LaneCache | None = getattr(request.app.state, "lanes", None)
    if cache is None:
        cache = request.app.state.lanes = LaneCache()
    cursor = feed_of(request.app).cursor if shared else None
    return {
        "lanes": cache.lanes(fleet, agent.strip(), cursor),
        "wanted": agent.strip(),
        "per_lane": PER_LANE,
        "full_lanes": FULL_LANES,
    }


@router.get("/", summary="The fleet: every agent's lane, and the pool")
def fleet_page(request: Request, fleet: FleetDep, _: Viewer, agent: str = "") -> Response:
    return render(request, "fleet.html", _lanes_context(request, fleet, agent, shared=False))


@router.get("/lanes", summary="The lanes region alone (reloaded when the fleet changes)")
def lanes_fragment(request: Request, fleet: FleetDep, _: Viewer, agent: str = "") -> Response:
    return render(request, "lanes.html", _lanes_context(request, fleet, agent, shared=True))


# ---------------------------------------------------------------- tasks


def _matches(task: Task, domain: str, priority: int | None, words: str) -> bool:
    if domain and (task.domain or "") != domain:
        return False
    if priority is not None and task.priority != priority:
        return False
    return not words or words in task.title.casefold()


def filtered(
    fleet: Fleet,
    *,
    state: str = "",
    domain: str = "",
    agent: str = "",
    priority: str = "",
    q: str = "",
    before: int | None = None,
) -> tuple[list[Task], list[Task]]:
    """(read, matching): the newest ``SCAN`` tasks of ``state`` and ``agent`` (below
    ``before``), and those of them whose domain, priority and title match -- the task
    list's filter, which the bulk actions act on too."""
    level = int(priority) if priority.strip().isdigit() else None
    scanned = fleet.tasks(
        state=state or None, agent=agent.strip() or None, limit=SCAN, before=before
    )
    words = q.strip().casefold()
    return scanned, [t for t in scanned if _matches(t, domain.strip(), level, words)]


@router.get("/tasks", summary="Tasks, newest first, filtered")
def tasks_page(
    request: Request,
    fleet: FleetDep,
    _: Viewer,
    state: str = "",
    domain: str = "",
    agent: str = "",
    priority: str = "",
    q: str = "",
    before: Annotated[int | None, Query(ge=1, le=2**62)] = None,
) -> Response:
    scanned, found = filtered(
        fleet, state=state, domain=domain, agent=agent, priority=priority, q=q, before=before
    )
    shown = found[:PAGE]
    if len(found) > PAGE:
        next_before: int | None = shown[-1].id
    elif len(scanned) == SCAN:
        next_before = scanned[-1].id  # the scan ended before the tasks did
    else:
        next_before = None
    query = {"state": state, "domain": domain, "agent": agent, "priority": priority, "q": q}
    context = {
        "tasks": shown,
        "scanned": len(scanned),
        "scan": SCAN,
        "page": PAGE,
        "next_before": next_before,
        "before": before,
        "filters": query,
        "query": {k: v for k, v in query.items() if v},
        "states": names(TaskState),
        "now": fleet.clock.now(),
        "matched": len(found),
    }
    return render(request, "tasks.html", context)


@router.get("/tasks/{task_id}", summary="One task: its fields, dependencies and history")
def task_page(request: Request, task_id: TaskId, fleet: FleetDep, _: Viewer) -> Response:
    detail = fleet.show(task_id, events=HISTORY)
    task = detail.task
    now = fleet.clock.now()
    trouble = [
        e for e in detail.events if e.kind in ("failed", "expired", "dead", "stalled", "stuck")
    ]
    context = {
        "task": task,
        "detail": detail,
        "now": now,
        "history": HISTORY,
        "trouble": trouble,
        "waiting": task.waiting(now),
        "why": fleet.why_task(task_id),
        "lease_live": task.state is TaskState.CLAIMED,
        "lease_expired": task.state is TaskState.CLAIMED and (task.lease_expires or 0) < now,
    }
    return render(request, "task.html", context)


# ---------------------------------------------------------------- health


def _count_cache(request: Request) -> CountCache:
    """The app's kept chart counts (``charts.CountCache``), made at the first use."""
    cache: CountCache | None = getattr(request.app.state, "counts", None)
    if cache is None:
        cache = request.app.state.counts = CountCache()
    return cache


RangeName = Annotated[str, Query(alias="range", pattern="^(1h|24h|7d)$")]


@router.get("/health", summary="Dead and stalled tasks, troubled agents, assessment, charts")
def health_page(
    request: Request, fleet: FleetDep, _: Viewer, span: RangeName = DEFAULT_RANGE
) -> Response:
    status = fleet.status()
    now = status.at
    dead = fleet.tasks(state="dead", limit=DEAD_SHOWN)
    agents = [load.agent for load in status.agents]
    troubled = [
        a for a in agents if a.paused(now) or a.status in (AgentStatus.PAUSED, AgentStatus.OFFLINE)
    ]
    expired = list(status.expired)
    pending = status.counts.get("pending", 0)
    chosen = RANGES[span]
    settings = fleet.settings().to_dict()
    context = {
        "status": status,
        "now": now,
        "dead": dead,
        "dead_shown": DEAD_SHOWN,
        "troubled": troubled,
        "expired": expired,
        "assessment": status.assessment,
        "charts": fleet_charts(fleet, chosen, pending, now, _count_cache(request)),
        "span": chosen,
        "ranges": RANGES,
        "settings": settings,
        "setting_help": {name: SETTINGS[name].help for name in settings if name in SETTINGS},
    }
    return render(request, "health.html", context)


# ---------------------------------------------------------------- an agent


@router.get(
    "/agents/{agent_id:path}", summary="One agent: what it holds, its queue, charts, events"
)
def agent_page(
    request: Request, agent_id: str, fleet: FleetDep, _: Viewer, span: RangeName = DEFAULT_RANGE
) -> Response:
    agent = fleet.agent(agent_id)
    now = fleet.clock.now()
    held = fleet.tasks(state="claimed", agent=agent.id, limit=max(agent.max_concurrent, 1) * 4)
    queued = [t for t in fleet.ready(agent.id, limit=PER_LANE) if t.agent == agent.id]
    top = fleet.events(newest=True, limit=1)
    since = max(0, top[-1].id - AGENT_SCAN) if top else 0
    events = fleet.events(since, agent=agent.id, newest=True, limit=AGENT_EVENTS)
    chosen = RANGES[span]
    context = {
        "agent": agent,
        "now": now,
        "paused": agent.paused(now),
        "held": held,
        "queued": queued,
        "per_lane": PER_LANE,
        "events": events[::-1],
        "agent_events": AGENT_EVENTS,
        "agent_scan": AGENT_SCAN,
        "charts": agent_charts(fleet, agent.id, chosen, now, _count_cache(request)),
        "span": chosen,
        "ranges": RANGES,
    }
    return render(request, "agent.html", context)
