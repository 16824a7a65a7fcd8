"""Retrying or cancelling many tasks at once: every task the task list's filter matches.

Two steps, so nobody acts on a selection they have not seen. ``GET /bulk`` (with the task
list's filter and ``action=retry|cancel``) is a confirmation page: the tasks the action
applies to among those the filter matches (a retry: dead and cancelled ones, and pending
ones waiting out a backoff; a cancel: blocked, pending and claimed ones), at most
``MAX_BULK``, each listed. Its form posts exactly those ids -- what was shown is what is
acted on, even if the fleet has changed since -- with the session's CSRF token to
``POST /bulk``, which acts on each in turn (one Fleet call each, as the one-task buttons
make) and shows what was done and what the fleet refused, task by task (a task finished
meanwhile is refused, not an error for the rest).

Both need an admin (docs/SECURITY.md: people with an admin token, and the owner, cancel and
retry; a viewer is refused with 403 and nothing changes).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Query, Request, Response

from shoal.errors import BadInput, ShoalError
from shoal.faces.web.pages import filtered
from shoal.faces.web.views import Admin, FleetDep, PageRoute, guard_of, local_path, render
from shoal.model import Task
from shoal.vocabulary import TaskState

__all__ = ["MAX_BULK", "router"]

router = APIRouter(route_class=PageRoute, tags=["dashboard"], include_in_schema=False)

#: Tasks one bulk action acts on at most (the rest: run it again).
MAX_BULK = 500
Action = Annotated[str, Query(pattern="^(retry|cancel)$")]


def applies(action: str, task: Task, now: float) -> bool:
    """Whether ``action`` can apply to ``task`` as it is: the same rule as the one-task
    buttons (``_forms.html``)."""
    if action == "retry":
        return task.state in (TaskState.DEAD, TaskState.CANCELLED) or task.waiting(now)
    return task.state in (TaskState.BLOCKED, TaskState.PENDING, TaskState.CLAIMED)


@router.get("/bulk", summary="Confirm a retry or cancel of every task the filter matches")
def confirm(
    request: Request,
    fleet: FleetDep,
    _: Admin,
    action: Action,
    state: str = "",
    domain: str = "",
    agent: str = "",
    priority: str = "",
    q: str = "",
) -> Response:
    now = fleet.clock.now()
    filters = {"state": state, "domain": domain, "agent": agent, "priority": priority, "q": q}
    scanned, found = filtered(
        fleet, state=state, domain=domain, agent=agent, priority=priority, q=q
    )
    chosen = [t for t in found if applies(action, t, now)]
    query = {k: v for k, v in filters.items() if v}
    context = {
        "action": action,
        "tasks": chosen[:MAX_BULK],
        "left_out": max(0, len(chosen) - MAX_BULK),
        "matched": len(found),
        "scanned": len(scanned),
        "query": query,
        "done": None,
        "refused": None,
        "now": now,
    }
    return render(request, "bulk.html", context)


@router.post("/bulk", summary="Retry or cancel the tasks a confirmation page listed")
def act(
    request: Request,
    fleet: FleetDep,
    who: Admin,
    action: Annotated[str, Form(pattern="^(retry|cancel)$")],
    task: Annotated[list[int], Form()],
    csrf: Annotated[str, Form()] = "",
    back: Annotated[str, Form()] = "/tasks",
) -> Response:
    guard_of(request).check_csrf(who, csrf)
    if len(task) > MAX_BULK:
        raise BadInput(f"at most {MAX_BULK} tasks at once, not {len(task)}")
    done: list[Task] = []
    refused: list[tuple[int, str]] = []
    for task_id in dict.fromkeys(task):  # each once, in the order shown
        try:
            done.append(fleet.retry(task_id) if action == "retry" else fleet.cancel(task_id))
        except ShoalError as exc:
            refused.append((task_id, exc.message))
    context = {
        "action": action,
        "tasks": done,
        "left_out": 0,
        "matched": len(task),
        "scanned": 0,
        "query": {},
        "done": done,
        "refused": refused,
        "back": local_path(back, "/tasks"),
        "now": fleet.clock.now(),
    }
    return render(request, "bulk.html", context)
