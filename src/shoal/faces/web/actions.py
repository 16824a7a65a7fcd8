"""What people may do from the dashboard: retry, cancel, release, change a priority, pause,
resume, set a setting, assess.

Each action is a POST form, for admins only (``need(Role.ADMIN)``), and carries the CSRF
token of the session (hidden field ``csrf``, checked with ``Guard.check_csrf`` before the
fleet is touched), so a page on another site cannot drive it. The forms ask for a
confirmation in the browser (``hx-confirm``) before they are sent. Each is one Fleet call;
a refusal from the fleet (a task already done, an unknown agent, a bad setting) is a page
saying why with the API's status (``views.PageRoute``); success sends the reader back (303)
to the page the form was on.

Releasing a task someone holds needs its lease token: the server looks it up
(``Fleet.leases(holder)``), so it never reaches a page. Pausing an agent holds it for
``PAUSE`` (``Fleet.pause``: it claims nothing, its queue goes back to the pool at once, the
leases it holds run on). Resuming lifts a pause, the dashboard's or the circuit breaker's
(``Fleet.resume``), or sets an offline agent back to idle or working.
A priority is changed with ``Fleet.set_priority`` (1..9 or a name).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Path, Request, Response
from fastapi.responses import RedirectResponse

from shoal.errors import InvalidTransition
from shoal.faces.web.guard import Principal
from shoal.faces.web.views import Admin, FleetDep, PageRoute, back_to, guard_of, local_path
from shoal.fleet import Fleet
from shoal.model import Lease
from shoal.vocabulary import AgentStatus

__all__ = ["router"]

router = APIRouter(route_class=PageRoute, tags=["dashboard"], include_in_schema=False)

TaskId = Annotated[int, Path(ge=1, le=2**62)]
#: How long the dashboard's Pause holds an agent (Resume ends it sooner).
PAUSE = "1h"
Csrf = Annotated[str, Form()]
Back = Annotated[str, Form()]


def _checked(request: Request, who: Principal, csrf: str) -> None:
    guard_of(request).check_csrf(who, csrf)


def _done(request: Request, back: str, fallback: str) -> Response:
    """Back (303) to the page the form came from."""
    target = local_path(back, "") or back_to(request, fallback)
    return RedirectResponse(target, status_code=303)


@router.post("/tasks/{task_id}/retry")
def retry(
    request: Request, task_id: TaskId, fleet: FleetDep, who: Admin, csrf: Csrf = "", back: Back = ""
) -> Response:
    _checked(request, who, csrf)
    fleet.retry(task_id)
    return _done(request, back, f"/tasks/{task_id}")


@router.post("/tasks/{task_id}/cancel")
def cancel(
    request: Request, task_id: TaskId, fleet: FleetDep, who: Admin, csrf: Csrf = "", back: Back = ""
) -> Response:
    _checked(request, who, csrf)
    fleet.cancel(task_id)
    return _done(request, back, f"/tasks/{task_id}")


def held_lease(fleet: Fleet, task_id: int) -> Lease:
    """The live lease on ``task_id``, looked up from its holder (the token stays here)."""
    task = fleet.get(task_id)
    holder = task.agent if task.state == "claimed" else None
    lease = (
        next((x for x in fleet.leases(holder) if x.task_id == task_id), None) if holder else None
    )
    if lease is None:
        raise InvalidTransition(
            f"task {task_id} is {task.state.value}; only a task held under a lease is released",
            hint="reload the page: the task may have been finished or released meanwhile",
        )
    return lease


@router.post("/tasks/{task_id}/priority")
def set_priority(
    request: Request,
    task_id: TaskId,
    fleet: FleetDep,
    who: Admin,
    priority: Annotated[str, Form()] = "",
    csrf: Csrf = "",
    back: Back = "",
) -> Response:
    _checked(request, who, csrf)
    fleet.set_priority(task_id, priority)
    return _done(request, back, f"/tasks/{task_id}")


@router.post("/tasks/{task_id}/release")
def release(
    request: Request, task_id: TaskId, fleet: FleetDep, who: Admin, csrf: Csrf = "", back: Back = ""
) -> Response:
    _checked(request, who, csrf)
    fleet.release(held_lease(fleet, task_id))
    return _done(request, back, f"/tasks/{task_id}")


@router.post("/agents/{agent_id:path}/pause")
def pause(
    request: Request, agent_id: str, fleet: FleetDep, who: Admin, csrf: Csrf = "", back: Back = ""
) -> Response:
    _checked(request, who, csrf)
    fleet.pause(agent_id, for_=PAUSE)
    return _done(request, back, "/")


@router.post("/agents/{agent_id:path}/resume")
def resume(
    request: Request, agent_id: str, fleet: FleetDep, who: Admin, csrf: Csrf = "", back: Back = ""
) -> Response:
    _checked(request, who, csrf)
    agent = fleet.agent(agent_id)
    if agent.paused_until is not None:
        fleet.resume(agent_id)
    elif agent.status is AgentStatus.OFFLINE:
        holds = bool(fleet.leases(agent_id))
        fleet.set_status(agent_id, AgentStatus.WORKING if holds else AgentStatus.IDLE)
    return _done(request, back, "/")


@router.post("/settings")
def configure(
    request: Request,
    fleet: FleetDep,
    who: Admin,
    name: Annotated[str, Form()],
    value: Annotated[str, Form()],
    csrf: Csrf = "",
    back: Back = "",
) -> Response:
    _checked(request, who, csrf)
    fleet.configure(**{name.strip(): value.strip()})
    return _done(request, back, "/health")


@router.post("/assess")
def assess(
    request: Request, fleet: FleetDep, who: Admin, csrf: Csrf = "", back: Back = ""
) -> Response:
    _checked(request, who, csrf)
    fleet.assess()
    return _done(request, back, "/health")
