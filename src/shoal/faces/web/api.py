"""``/api/v1``: the Fleet's verbs as JSON over HTTP, for agents and scripts.

Each route is one Fleet call with the same arguments, checks and errors as the CLI's
``--json`` and the MCP tools (``errors``: the same codes, as HTTP statuses). Bodies are
described with pydantic models, so the OpenAPI document (``/api/v1/openapi.json``) says
exactly what each route takes; the values are still checked by the Fleet, which is the one
judge of what is valid on every face.

Who may call what (``guard``, and docs/SECURITY.md's table "Who may do what"): a viewer
reads; an agent token also registers its own agent (but cannot make it a manager), claims,
heartbeats and settles the leases that agent holds, posts tasks and edits the ones its
agent posted (``Task.posted_by``, set from the token, never the body) -- its own work and
no more, since an agent may be steered by the text it reads; an admin does all that as any
agent, plus what acts on others' work or on the fleet (edit any task, cancel, retry,
priority, pause, resume, settings, assess, rebalance, reap). No listing shows a lease
token: only the claim that makes a lease returns it, to the agent that claimed (and
``/agents/{id}/leases`` to that agent or an admin).

Long-poll: ``POST /agents/{id}/claim`` with ``wait`` holds the request until work comes or
``wait`` seconds pass, as ``shoal claim --wait`` does; the server runs it on a thread of its
own pool, so a hundred waiting agents do not stall anyone else.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, HTTPException, Path, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from shoal.access import Role
from shoal.clock import monotonic
from shoal.errors import BadInput, LeaseLost, UnknownAgent
from shoal.faces.web.guard import Principal, need
from shoal.fleet import Fleet
from shoal.model import Claim, Lease
from shoal.times import iso_time
from shoal.validation import AGENT_ID, check_agent_id, check_wait
from shoal.vocabulary import ClaimReason

__all__ = ["router"]

router = APIRouter(prefix="/api/v1", tags=["fleet"])

#: Seconds of a long-poll claim between two looks at whether its client is still there.
WAIT_SLICE = 1.0

Viewer = Annotated[Principal, Depends(need(Role.VIEWER))]
AgentRole = Annotated[Principal, Depends(need(Role.AGENT))]
Admin = Annotated[Principal, Depends(need(Role.ADMIN))]
TaskId = Annotated[int, Path(ge=1, le=2**62)]
#: An agent id the fleet may hold (``shoal.validation.AGENT_ID``: an older version's, with a
#: "/", included); a new agent's id is checked by ``Fleet.register``.
AgentId = Annotated[str, Path(pattern=AGENT_ID.pattern)]
State = Literal["blocked", "pending", "claimed", "done", "dead", "cancelled"]


class ErrorDetail(BaseModel):
    code: str
    message: str
    hint: str | None = None


class ErrorBody(BaseModel):
    """Every refusal: the CLI's ``--json`` error shape."""

    error: ErrorDetail


def _refusal(description: str) -> dict[str, Any]:
    return {"description": description, "model": ErrorBody}


_REFUSALS: dict[int | str, dict[str, Any]] = {
    400: _refusal("bad input: the error says what was wrong and how to fix it"),
    401: _refusal("no valid token (send Authorization: Bearer TOKEN)"),
    403: _refusal("the token's role or agent may not do this, or another site asked"),
    404: _refusal("no such task or agent"),
    409: _refusal("the fleet's state forbids it now (e.g. lease_lost, fleet_full)"),
    413: _refusal("a payload or body past the fleet's caps, or a request past 8 MiB"),
    421: _refusal("the request named a host this server does not answer to"),
    429: _refusal("too many wrong tokens from this address; wait Retry-After seconds"),
    503: _refusal("the store cannot be used right now; retry"),
}


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PostTask(Strict):
    """``Fleet.post``'s arguments (``shoal add``)."""

    title: str
    body: str = ""
    payload: Any = None
    priority: int | str = 5
    skills: list[str] = []
    domain: str | None = None
    to: str | None = None
    after: list[int] = []
    parent: int | None = None
    pinned: bool = False
    expected_duration: float | str | None = None
    lease_ttl: float | str | None = None
    max_attempts: int | None = None
    key: str | None = None
    not_before: float | str | None = None
    retry_delay: float | str | None = None
    group: str | None = None
    labels: list[str] = []


class Register(Strict):
    """``Fleet.register``'s arguments (``shoal register``)."""

    id: str
    role: str = "worker"
    skills: list[str] = []
    domains: list[str] = []
    max_concurrent: int = 1
    manager: bool = False
    ephemeral: bool = False


class ClaimBody(Strict):
    n: int = 1
    wait: float | str = 0.0


class Complete(Strict):
    token: str
    result: Any = None
    then_claim: int = 0


class Fail(Strict):
    token: str
    error: str = ""
    retry: bool = True


class Release(Strict):
    token: str


class SetStatus(Strict):
    status: str
    why: str | None = None
    release: bool = False


class Rebalance(Strict):
    dry_run: bool = False


def fleet_of(request: Request) -> Fleet:
    fleet: Fleet = request.app.state.fleet
    return fleet


FleetDep = Annotated[Fleet, Depends(fleet_of)]


def _acts_as(principal: Principal, agent_id: str) -> None:
    """403 unless ``principal`` may act as ``agent_id`` (an agent token: only its own)."""
    if not principal.may_act_as(agent_id):
        raise HTTPException(
            403,
            detail={
                "code": "foreign_agent",
                "message": f"this token acts as agent {principal.agent}, not {agent_id}",
                "hint": "use the agent's own token, or an admin token",
            },
        )


def _is_manager(fleet: Fleet, agent_id: str) -> bool:
    try:
        return fleet.agent(agent_id).manager
    except UnknownAgent:
        return False


def _holder_check(fleet: Fleet, principal: Principal, task_id: int) -> None:
    """An agent token settles only its own agent's leases: the task must be held by it."""
    if principal.role is Role.ADMIN:
        return
    task = fleet.get(task_id)
    if task.agent != principal.agent:
        raise LeaseLost(
            f"task {task_id} is not held by agent {principal.agent}, whose token this is",
            hint="an agent token settles only the leases its own agent holds",
        )


def _lease(task_id: int, token: str) -> Lease:
    if not token:
        raise BadInput(f"the lease token of task {task_id} is needed", hint="the claim gave it")
    return Lease(task_id=task_id, agent="", token=token, expires=0.0)


# ---------------------------------------------------------------- reading


@router.get("/status", responses=_REFUSALS, summary="The fleet at a glance (shoal status)")
def status(fleet: FleetDep, _: Viewer) -> dict[str, Any]:
    return fleet.status().to_dict()


def _next_page(request: Request, response: Response, **cursor: int | str) -> None:
    """Say where the next page is (RFC 8288 ``Link: <...>; rel="next"``): this request's
    URL with the cursor of its last row. A list without one is whole."""
    response.headers["Link"] = f'<{request.url.include_query_params(**cursor)}>; rel="next"'


@router.get("/tasks", responses=_REFUSALS, summary="Tasks, newest first (shoal list)")
def tasks(
    request: Request,
    response: Response,
    fleet: FleetDep,
    _: Viewer,
    state: State | None = None,
    agent: str | None = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
    before: Annotated[int | None, Query(ge=1)] = None,
    key: str | None = None,
    label: str | None = None,
) -> list[dict[str, Any]]:
    """A page of ``limit`` tasks older than task ``before``; when there are more, the
    ``Link`` header's ``rel="next"`` is the next page (``before`` = the last id here).
    With ``key``: the task posted with that idempotency key, if any (a list of one).
    With ``label``: only tasks carrying that label."""
    if key is not None:
        return [t.to_dict() for t in [fleet.by_key(key)] if t is not None]
    found = fleet.tasks(state=state, agent=agent, limit=limit + 1, before=before, label=label)
    if len(found) > limit:
        found = found[:limit]
        _next_page(request, response, before=found[-1].id)
    return [t.to_dict() for t in found]


@router.get("/tasks/{task_id}", responses=_REFUSALS, summary="One task and its history")
def show(
    task_id: TaskId,
    fleet: FleetDep,
    _: Viewer,
    events: Annotated[int, Query(ge=0, le=1000)] = 50,
) -> dict[str, Any]:
    return fleet.show(task_id, events=events).to_dict()


@router.get("/tasks/{task_id}/why", responses=_REFUSALS, summary="Why a task waits (shoal why)")
def why_task(task_id: TaskId, fleet: FleetDep, _: Viewer) -> dict[str, Any]:
    return fleet.why_task(task_id).to_dict()


@router.get("/ready", responses=_REFUSALS, summary="Pending tasks in claim order")
def ready(
    fleet: FleetDep,
    _: Viewer,
    agent: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 20,
) -> list[dict[str, Any]]:
    return [t.to_dict() for t in fleet.ready(agent, limit=limit)]


@router.get("/agents", responses=_REFUSALS, summary="Every agent (shoal agents)")
def agents(
    request: Request,
    response: Response,
    fleet: FleetDep,
    _: Viewer,
    limit: Annotated[int | None, Query(ge=1, le=10_000)] = None,
    after: Annotated[str | None, Query(description="the last agent id of the page before")] = None,
) -> list[dict[str, Any]]:
    """The agents by id (code point order), all of them, or ``limit`` after agent
    ``after``; when there are more, the ``Link`` header's ``rel="next"`` is the next page."""
    if after is not None:
        check_agent_id(after)
    found = [a for a in sorted(fleet.agents(), key=lambda a: a.id) if after is None or a.id > after]
    if limit is not None and len(found) > limit:
        found = found[:limit]
        _next_page(request, response, after=found[-1].id)
    return [a.to_dict() for a in found]


@router.get(
    "/agents/{agent_id:path}/leases",
    responses=_REFUSALS,
    summary="The leases an agent holds, with their tokens (that agent or an admin only)",
)
def leases(agent_id: AgentId, fleet: FleetDep, who: AgentRole) -> list[dict[str, Any]]:
    _acts_as(who, agent_id)
    now = fleet.clock.now()
    return [lease.to_dict(now) for lease in fleet.leases(agent_id)]


@router.get(
    "/agents/{agent_id:path}/why",
    responses=_REFUSALS,
    summary="Why an agent gets nothing, or what its claim would take (shoal why --agent)",
)
def why_agent(agent_id: AgentId, fleet: FleetDep, _: Viewer) -> dict[str, Any]:
    return fleet.why_agent(agent_id).to_dict()


@router.get("/agents/{agent_id:path}", responses=_REFUSALS, summary="One agent")
def agent(agent_id: AgentId, fleet: FleetDep, _: Viewer) -> dict[str, Any]:
    return fleet.agent(agent_id).to_dict()


@router.get("/events", responses=_REFUSALS, summary="The event log after a cursor")
def events(
    request: Request,
    response: Response,
    fleet: FleetDep,
    _: Viewer,
    since: Annotated[int, Query(ge=0, le=2**62)] = 0,
    task: Annotated[int | None, Query(ge=1, le=2**62)] = None,
    agent: str | None = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    newest: bool = False,
) -> dict[str, Any]:
    """Events with id above ``since``, oldest first (with ``newest``: the last ``limit`` of
    them, a tail); ``cursor`` is the ``since`` of the next call (the last id seen, or
    ``since`` again when there was nothing new). When the log holds more past this page
    already, the ``Link`` header's ``rel="next"`` is the next page (the body keeps its
    shape)."""
    found = fleet.events(since, task=task, agent=agent, limit=limit + 1, newest=newest)
    more = len(found) > limit
    if more:
        found = found[1:] if newest else found[:limit]
    if more and not newest:
        _next_page(request, response, since=found[-1].id)
    cursor = found[-1].id if found else since
    return {"events": [e.to_dict() for e in found], "cursor": cursor}


@router.get("/settings", responses=_REFUSALS, summary="The fleet's settings")
def settings(fleet: FleetDep, _: Viewer) -> dict[str, Any]:
    return fleet.settings().to_dict()


# ---------------------------------------------------------------- agents acting


@router.post("/agents", responses=_REFUSALS, summary="Register an agent (shoal register)")
def register(body: Register, fleet: FleetDep, who: AgentRole) -> dict[str, Any]:
    """An agent token registers its own agent, but cannot make it a manager: that is an
    admin's grant (an agent already made a manager may say so again)."""
    _acts_as(who, body.id)
    if body.manager and who.role is not Role.ADMIN and not _is_manager(fleet, body.id):
        raise HTTPException(
            403,
            detail={
                "code": "forbidden",
                "message": f"an agent token cannot make agent {body.id} a manager",
                "hint": "register it without manager, or have an admin register it as a "
                "manager (an admin token, or shoal register --manager where the fleet is)",
            },
        )
    registration = fleet.register(
        body.id,
        role=body.role,
        skills=body.skills,
        domains=body.domains,
        max_concurrent=body.max_concurrent,
        manager=body.manager,
        ephemeral=body.ephemeral,
    )
    return registration.to_dict()


@router.post(
    "/agents/{agent_id:path}/claim",
    responses=_REFUSALS,
    summary="Claim the best tasks for an agent: own queue, pool, then a steal",
)
async def claim(
    agent_id: AgentId,
    request: Request,
    fleet: FleetDep,
    who: AgentRole,
    body: ClaimBody | None = None,
) -> dict[str, Any]:
    """Up to ``n`` tasks under leases; with ``wait`` (seconds or 30s, 5m), held until work
    comes. An empty claim answers 200 with ``claimed: []`` and the ``reason``.

    The wait runs in slices of a second, and between slices the server checks the client
    is still there: a client that hung up is not handed a lease nobody would work on."""
    _acts_as(who, agent_id)
    asked = body or ClaimBody()
    deadline = monotonic(fleet.clock) + check_wait(asked.wait)
    while True:
        remaining = deadline - monotonic(fleet.clock)
        found = await run_in_threadpool(
            fleet.claim, agent_id, asked.n, wait=max(0.0, min(remaining, WAIT_SLICE))
        )
        if found or found.reason is not ClaimReason.EMPTY or remaining <= WAIT_SLICE:
            return found.to_dict(fleet.clock.now())
        if await request.is_disconnected():
            return Claim(reason=ClaimReason.EMPTY).to_dict()


@router.post("/agents/{agent_id:path}/heartbeat", responses=_REFUSALS, summary="Renew every lease")
def heartbeat(agent_id: AgentId, fleet: FleetDep, who: AgentRole) -> dict[str, Any]:
    _acts_as(who, agent_id)
    renewed = fleet.heartbeat(agent_id)
    now = fleet.clock.now()
    return {"renewed": [{**r.to_dict(now), "token": None} for r in renewed]}


@router.post("/agents/{agent_id:path}/status", responses=_REFUSALS, summary="Set an agent's status")
def set_status(
    agent_id: AgentId, body: SetStatus, fleet: FleetDep, who: AgentRole
) -> dict[str, Any]:
    _acts_as(who, agent_id)
    return fleet.set_status(agent_id, body.status, why=body.why, release=body.release).to_dict()


class Pause(Strict):
    for_: float | str = Field(default="1h", alias="for")


@router.post("/agents/{agent_id:path}/pause", responses=_REFUSALS, summary="Pause an agent")
def pause(
    agent_id: AgentId, fleet: FleetDep, _: Admin, body: Pause | None = None
) -> dict[str, Any]:
    """Hold the agent for ``for`` (default 1h) or until resumed: its claims get nothing,
    its queue goes back to the pool, the tasks it holds run on."""
    return fleet.pause(agent_id, for_=(body or Pause()).for_).to_dict()


@router.post("/agents/{agent_id:path}/resume", responses=_REFUSALS, summary="Resume a paused agent")
def resume(agent_id: AgentId, fleet: FleetDep, _: Admin) -> dict[str, Any]:
    return fleet.resume(agent_id).to_dict()


_REPLAYED: dict[int | str, dict[str, Any]] = {
    200: {"description": "the key was posted before: the task first posted with it"},
}


@router.post(
    "/tasks",
    responses={**_REPLAYED, **_REFUSALS},
    status_code=201,
    summary="Post a task (shoal add)",
)
def post(
    body: PostTask,
    fleet: FleetDep,
    response: Response,
    who: AgentRole,
    idempotency_key: Annotated[str | None, Header()] = None,
) -> dict[str, Any]:
    """A repeated ``key`` (or ``Idempotency-Key`` header) returns the task first posted
    with it, with status 200, and adds nothing. Of posts racing with one key, only the one
    whose transaction made the task answers 201."""
    fields = body.model_dump()
    key = fields.pop("key") or idempotency_key
    posted_by = who.agent if who.role is Role.AGENT else None  # the token's, never the body's
    task, made = fleet.post_new(**fields, key=key, posted_by=posted_by)
    if not made:
        response.status_code = 200
    return task.to_dict()


@router.post("/tasks/{task_id}/complete", responses=_REFUSALS, summary="Complete a held task")
def complete(task_id: TaskId, body: Complete, fleet: FleetDep, who: AgentRole) -> dict[str, Any]:
    _holder_check(fleet, who, task_id)
    if body.then_claim and who.role is not Role.ADMIN and who.agent is None:
        raise BadInput("then_claim needs an agent token")
    done = fleet.complete(_lease(task_id, body.token), body.result, then_claim=body.then_claim)
    return done.to_dict(fleet.clock.now())


@router.post("/tasks/{task_id}/fail", responses=_REFUSALS, summary="Fail a held task")
def fail(task_id: TaskId, body: Fail, fleet: FleetDep, who: AgentRole) -> dict[str, Any]:
    _holder_check(fleet, who, task_id)
    return fleet.fail(_lease(task_id, body.token), body.error, retry=body.retry).to_dict()


@router.post("/tasks/{task_id}/release", responses=_REFUSALS, summary="Give a held task back")
def release(task_id: TaskId, body: Release, fleet: FleetDep, who: AgentRole) -> dict[str, Any]:
    _holder_check(fleet, who, task_id)
    return fleet.release(_lease(task_id, body.token)).to_dict()


# ---------------------------------------------------------------- people and the hub


@router.post("/tasks/{task_id}/retry", responses=_REFUSALS, summary="Retry a dead/cancelled task")
def retry(task_id: TaskId, fleet: FleetDep, _: Admin) -> dict[str, Any]:
    return fleet.retry(task_id).to_dict()


@router.post("/tasks/{task_id}/cancel", responses=_REFUSALS, summary="Cancel a task")
def cancel(task_id: TaskId, fleet: FleetDep, _: Admin) -> dict[str, Any]:
    return fleet.cancel(task_id).to_dict()


class SetPriority(Strict):
    priority: int | str


@router.post("/tasks/{task_id}/priority", responses=_REFUSALS, summary="Change a priority")
def set_priority(task_id: TaskId, body: SetPriority, fleet: FleetDep, _: Admin) -> dict[str, Any]:
    return fleet.set_priority(task_id, body.priority).to_dict()


class EditTask(Strict):
    """``Fleet.edit``'s changes: only the fields given change; null clears a domain or an
    expected duration."""

    title: str | None = None
    body: str | None = None
    priority: int | str | None = None
    skills: list[str] | None = None
    domain: str | None = None
    labels: list[str] | None = None
    expected_duration: float | str | None = None


@router.post("/tasks/{task_id}/edit", responses=_REFUSALS, summary="Edit a task (shoal edit)")
def edit(task_id: TaskId, body: EditTask, fleet: FleetDep, who: AgentRole) -> dict[str, Any]:
    """An admin edits any task; an agent token only the tasks its agent posted (403
    ``forbidden`` otherwise, saying so; nothing changed). A held task keeps its skills and domain
    (409 ``invalid_transition``)."""
    if who.role is not Role.ADMIN and (
        who.agent is None or fleet.get(task_id).posted_by != who.agent
    ):
        raise HTTPException(
            403,
            detail={
                "code": "forbidden",
                "message": f"task {task_id} was not posted by agent {who.agent}, whose token "
                "this is",
                "hint": "an agent token edits only the tasks its agent posted; an admin any",
            },
        )
    return fleet.edit(task_id, **body.model_dump(exclude_unset=True)).to_dict()


@router.post("/settings", responses=_REFUSALS, summary="Change settings (all or none apply)")
def configure(changes: dict[str, Any], fleet: FleetDep, _: Admin) -> dict[str, Any]:
    return fleet.configure(**changes).to_dict()


class SetGroup(Strict):
    max: int | str


@router.get("/groups", responses=_REFUSALS, summary="Concurrency groups: limits, tasks held")
def groups(fleet: FleetDep, _: Viewer) -> dict[str, Any]:
    return {"groups": [g.to_dict() for g in fleet.groups()]}


@router.post("/groups/{name}", responses=_REFUSALS, summary="Set a group's limit")
def set_group(name: str, body: SetGroup, fleet: FleetDep, _: Admin) -> dict[str, Any]:
    return fleet.set_group(name, body.max).to_dict()  # type: ignore[arg-type]  # checked there


@router.post("/groups/{name}/clear", responses=_REFUSALS, summary="Lift a group's limit")
def clear_group(name: str, fleet: FleetDep, _: Admin) -> dict[str, Any]:
    return fleet.clear_group(name).to_dict()


@router.post("/assess", responses=_REFUSALS, summary="Assess the workload: spawn or retire?")
def assess(fleet: FleetDep, _: Admin) -> dict[str, Any]:
    """An admin's, as on MCP it is a manager's: the fleet records the assessment, and what
    acts on the fleet as a whole is no agent's (its ``recommendation`` is read in
    ``GET /status``)."""
    return fleet.assess().to_dict()


@router.post("/rebalance", responses=_REFUSALS, summary="Move queued tasks to idle agents")
def rebalance(fleet: FleetDep, _: Admin, body: Rebalance | None = None) -> dict[str, Any]:
    moves = fleet.rebalance(dry_run=(body or Rebalance()).dry_run)
    return {"moves": [m.to_dict() for m in moves]}


@router.post("/reap", responses=_REFUSALS, summary="Expire leases, mark silent agents offline")
def reap(fleet: FleetDep, _: Admin) -> dict[str, Any]:
    return fleet.reap().to_dict()


@router.get("/health", summary="Whether the server can read its fleet (no token needed)")
def health(fleet: FleetDep) -> dict[str, Any]:
    fleet.settings()
    return {"ok": True, "time": iso_time(fleet.clock.now())}
