"""The walker's HTTP faces: the API and the dashboard through a real HTTP client (Starlette's
TestClient over the app), the CLI through a hub (``--store http://…`` against the same app
under uvicorn), and the owner's CLI on the store itself.

One fleet serves every column (``HttpWorld``): agents ada (the agent token's), bob (holds
leases: "another agent") and dee (paused and resumed). Each power is a function of the
world, who asks and the face, giving the tries that face has for it (none: the face has no
such verb). Tasks a try makes need the skill ``nobody``, so no claim takes them by chance.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from shoal import Fleet, Lease
from shoal.faces.web.guard import Principal
from tests.faces.roles_support import Outcome, Try, now

ADA, BOB, DEE = "ada", "bob", "dee"
NOBODY = ["nobody"]  # a skill no agent has: tasks the walker makes are claimed only on purpose
BASE = "http://127.0.0.1:8765"

#: The faces each column of the table is walked through here (MCP's are elsewhere).
FACES = {
    "viewer": ("viewer", ("api", "dashboard", "hub-cli")),
    "agent": ("agent", ("api", "hub-cli")),
    "admin-api": ("admin", ("api", "hub-cli")),
    "admin-dashboard": ("admin", ("dashboard",)),
    "owner": ("owner", ("cli",)),
    "anyone": ("anyone", ("api", "dashboard", "hub-cli")),
}

#: ``cli(args, token)``: the exit code and stdout of `shoal --json ARGS` in this process,
#: against the store (token None) or the hub with that token ("" for none).
CliRun = Callable[[list[str], str | None], tuple[int, str]]


@dataclass
class HttpWorld:
    fleet: Fleet
    url: str  # the store's
    hub: str  # the hub's (the same fleet, served)
    app: FastAPI
    tokens: dict[str, str]  # by who: viewer, agent, admin
    api: dict[str, TestClient] = field(default_factory=dict)
    dash: dict[str, TestClient] = field(default_factory=dict)
    csrf: dict[str, str] = field(default_factory=dict)
    cli: CliRun | None = None
    seed: int = 0  # a task every reader may read


def make_world(fleet: Fleet, url: str, hub: str, app: FastAPI) -> HttpWorld:
    fleet.configure(max_agents=100)
    for agent in (ADA, BOB, DEE):
        fleet.register(agent, max_concurrent=1000)
    viewer = fleet.create_token("viewer", name="walker")
    agent = fleet.create_token("agent", agent=ADA, name="walker")
    admin = fleet.create_token("admin", name="walker")
    world = HttpWorld(
        fleet, url, hub, app, {"viewer": viewer[1], "agent": agent[1], "admin": admin[1]}
    )
    world.seed = fleet.post("for everyone to read", skills=NOBODY).id
    for who in ("viewer", "agent", "admin", "anyone"):
        token = world.tokens.get(who, "")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        world.api[who] = TestClient(app, base_url=BASE, headers=headers)
        page = TestClient(app, base_url=BASE, follow_redirects=False)
        if token:
            assert page.post("/login", data={"token": token}).status_code == 303
        world.dash[who] = page
    for who, credential in (("viewer", viewer[0]), ("agent", agent[0]), ("admin", admin[0])):
        world.csrf[who] = app.state.guard.csrf_token(Principal.of(credential))
    return world


def close_world(world: HttpWorld) -> None:
    for client in [*world.api.values(), *world.dash.values()]:
        client.close()


# ---------------------------------------------------------------------- the faces


def _refusal(body: Any) -> tuple[str | None, str]:
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None, ""
    return error.get("code"), f"{error.get('message', '')} {error.get('hint') or ''}"


def api(w: HttpWorld, who: str, method: str, path: str, body: Any = None) -> Outcome:
    answer = w.api[who].request(method, f"/api/v1{path}", json=body)
    if answer.is_success:
        return Outcome(True, status=answer.status_code)
    code, message = _refusal(answer.json())
    return Outcome(False, code, answer.status_code, message=message)


def page(w: HttpWorld, who: str, path: str, form: dict[str, str] | None = None) -> Outcome:
    """A page read (``form`` None) or a form sent, as a browser signed in as ``who``."""
    client = w.dash[who]
    if form is None:
        answer = client.get(path)
        ok = answer.status_code == 200
    else:
        data = {"csrf": w.csrf.get(who, ""), "back": "/", **form}
        answer = client.post(path, data=data)
        ok = answer.status_code == 303 and not _to_login(answer.headers)
    if ok:
        return Outcome(True, status=answer.status_code)
    if answer.status_code == 303 and _to_login(answer.headers):
        return Outcome(False, "unauthorized", 401, message="sent to the sign-in page")
    found = answer.text.split('data-code="', 1)
    code = found[1].split('"', 1)[0] if len(found) == 2 else None
    return Outcome(False, code, answer.status_code, message=answer.text)


def _to_login(headers: Any) -> bool:
    return str(headers.get("location", "")).startswith("/login")


def cli(w: HttpWorld, who: str, *args: str) -> Outcome:
    """`shoal --json ARGS`: the owner's on the store, anyone else's through the hub."""
    assert w.cli is not None
    token = None if who == "owner" else w.tokens.get(who, "")
    code, out = w.cli(list(args), token)
    if code in (0, 1):  # 1: nothing to do (an empty claim), not a refusal
        return Outcome(True, exit=code)
    try:
        body = json.loads(out)
    except ValueError:
        return Outcome(False, None, exit=code, message=out)
    error, message = _refusal(body)
    return Outcome(False, error, exit=code, message=message)


# ---------------------------------------------------------------------- the fleet readied


def held(w: HttpWorld, agent: str) -> Lease:
    """A lease ``agent`` holds on a task of its own."""
    task = w.fleet.post(f"{agent}'s work", to=agent, pinned=True, priority=1).id
    claim = w.fleet.claim(agent, 1000)
    return next(lease for lease in claim.leases if lease.task_id == task)


def pending(w: HttpWorld) -> int:
    return w.fleet.post("in the pool", skills=NOBODY).id


def cancelled(w: HttpWorld) -> int:
    """A task to retry (a failed one would trip bob's circuit breaker, in time)."""
    task = pending(w)
    w.fleet.cancel(task)
    return task


def paused(w: HttpWorld, agent: str) -> str:
    w.fleet.pause(agent, for_="1h")
    return agent


def own(who: str) -> str:
    """The agent ``who`` acts as: the agent token's (the others try the same one)."""
    return ADA


# ---------------------------------------------------------------------- the powers

Tries = list[Try]


def read_fleet(w: HttpWorld, who: str, face: str) -> Tries:
    t = w.seed
    if face == "api":
        paths = ("/status", "/tasks", f"/tasks/{t}", "/agents", f"/agents/{ADA}", "/events")
        paths += ("/schedules",)
        paths += (f"/tasks/{t}/why", f"/agents/{ADA}/why")
        return [now(f"GET {p}", lambda p=p: api(w, who, "GET", p)) for p in paths]
    if face == "dashboard":
        paths = ("/", "/tasks", f"/tasks/{t}", "/health")
        return [now(f"page {p}", lambda p=p: page(w, who, p)) for p in paths]
    commands = (["status"], ["list"], ["show", str(t)], ["agents"], ["events"], ["why", str(t)])
    commands += (["schedule", "list"],)
    return [now(" ".join(c), lambda c=c: cli(w, who, *c)) for c in commands]


def read_settings(w: HttpWorld, who: str, face: str) -> Tries:
    if face == "api":
        return [now("GET /settings", lambda: api(w, who, "GET", "/settings"))]
    if face == "dashboard":
        return [now("page /health (settings)", lambda: page(w, who, "/health"))]
    return [now("config list", lambda: cli(w, who, "config", "list"))]


def post_task(w: HttpWorld, who: str, face: str) -> Tries:
    if face == "api":
        bodies = [
            {"title": "to the pool", "skills": NOBODY},
            {"title": "to bob's queue", "to": BOB, "skills": NOBODY},
            {"title": "a subtask", "parent": w.seed, "skills": NOBODY},
        ]
        return [
            now(f"POST /tasks {b}", lambda b=b: api(w, who, "POST", "/tasks", b)) for b in bodies
        ]
    if face == "dashboard":
        return []
    return [now("add", lambda: cli(w, who, "add", "posted", "--skill", "nobody"))]


def register_own(w: HttpWorld, who: str, face: str) -> Tries:
    me = own(who)
    if face == "api":
        body = {"id": me, "max_concurrent": 1000}
        return [now(f"POST /agents {me}", lambda: api(w, who, "POST", "/agents", body))]
    if face == "dashboard":
        return []
    return [now(f"register {me}", lambda: cli(w, who, "register", me, "--max-concurrent", "1000"))]


def work_as_own(w: HttpWorld, who: str, face: str) -> Tries:
    return _work_as(w, who, face, own(who))


def work_as_another(w: HttpWorld, who: str, face: str) -> Tries:
    tries = _work_as(w, who, face, BOB)
    if face == "api":
        body = {"id": BOB, "max_concurrent": 1000}
        tries += [
            now("GET /agents/bob/leases", lambda: api(w, who, "GET", f"/agents/{BOB}/leases")),
            now("POST /agents bob", lambda: api(w, who, "POST", "/agents", body)),
        ]
    elif face == "hub-cli":
        register = ("register", BOB, "--max-concurrent", "1000")
        tries.append(now("register bob", lambda: cli(w, who, *register)))
    return tries


def _work_as(w: HttpWorld, who: str, face: str, agent: str) -> Tries:
    if face == "api":
        return [
            now(f"heartbeat {agent}", lambda: api(w, who, "POST", f"/agents/{agent}/heartbeat")),
            now(f"claim {agent}", lambda: api(w, who, "POST", f"/agents/{agent}/claim")),
            now(
                f"status {agent}",
                lambda: api(w, who, "POST", f"/agents/{agent}/status", {"status": "waiting"}),
            ),
        ]
    if face == "dashboard":
        return []
    return [
        now(f"heartbeat {agent}", lambda: cli(w, who, "heartbeat", agent)),
        now(f"claim --agent {agent}", lambda: cli(w, who, "claim", "--agent", agent)),
        now(f"set-status {agent}", lambda: cli(w, who, "set-status", agent, "waiting")),
    ]


def _settle(w: HttpWorld, who: str, face: str, holder: str) -> Tries:
    """Release, complete and fail a lease ``holder`` holds, with its token."""
    verbs = (("release", "release"), ("complete", "done"), ("fail", "fail"))
    tries: Tries = []
    for route, command in verbs:
        if face == "api":

            def act(route: str = route) -> Callable[[], Outcome]:
                lease = held(w, holder)
                body = {"token": lease.token}
                return lambda: api(w, who, "POST", f"/tasks/{lease.task_id}/{route}", body)

            tries.append(Try(f"{route} {holder}'s lease with its token", act))
        elif face in ("hub-cli", "cli"):

            def run(command: str = command) -> Callable[[], Outcome]:
                lease = held(w, holder)
                return lambda: cli(w, who, command, str(lease.task_id), "--token", lease.token)

            tries.append(Try(f"{command} {holder}'s lease with its token", run))
    return tries


def settle_own(w: HttpWorld, who: str, face: str) -> Tries:
    return _settle(w, who, face, own(who))


def settle_another_with_token(w: HttpWorld, who: str, face: str) -> Tries:
    return _settle(w, who, face, BOB)


def release_another_without_token(w: HttpWorld, who: str, face: str) -> Tries:
    if face == "api":

        def look_up() -> Callable[[], Outcome]:
            task = held(w, BOB).task_id

            def act() -> Outcome:
                found = w.api[who].get(f"/api/v1/agents/{BOB}/leases")
                if not found.is_success:
                    code, message = _refusal(found.json())
                    return Outcome(False, code, found.status_code, message=message)
                token = next(x["token"] for x in found.json() if x["task_id"] == task)
                return api(w, who, "POST", f"/tasks/{task}/release", {"token": token})

            return act

        def guess() -> Callable[[], Outcome]:
            task = held(w, BOB).task_id
            return lambda: api(w, who, "POST", f"/tasks/{task}/release", {"token": "0" * 16})

        return [
            Try("read bob's lease token, then release", look_up),
            Try("release with a guessed token", guess),
        ]
    if face == "dashboard":

        def form() -> Callable[[], Outcome]:
            task = held(w, BOB).task_id
            return lambda: page(w, who, f"/tasks/{task}/release", {})

        return [Try("Release on bob's task", form)]

    def by_name() -> Callable[[], Outcome]:
        task = held(w, BOB).task_id
        return lambda: cli(w, who, "release", str(task), "--agent", BOB)

    return [Try("release TASK --agent bob", by_name)]


def change_tasks(w: HttpWorld, who: str, face: str) -> Tries:
    def on(verb: str, ready: Callable[[HttpWorld], int]) -> Try:
        def setup() -> Callable[[], Outcome]:
            task = ready(w)
            if face == "api":
                body = {"priority": 1} if verb == "priority" else None
                return lambda: api(w, who, "POST", f"/tasks/{task}/{verb}", body)
            if face == "dashboard":
                form = {"priority": "1"} if verb == "priority" else {}
                return lambda: page(w, who, f"/tasks/{task}/{verb}", form)
            args = {"cancel": ["cancel"], "retry": ["retry"], "priority": ["set-priority"]}[verb]
            return lambda: cli(w, who, *args, str(task), *(["1"] if verb == "priority" else []))

        return Try(f"{verb} a task", setup)

    return [on("cancel", pending), on("retry", cancelled), on("priority", pending)]


def edit_tasks(w: HttpWorld, who: str, face: str) -> Tries:
    def setup() -> Callable[[], Outcome]:
        task = pending(w)
        if face == "api":
            return lambda: api(w, who, "POST", f"/tasks/{task}/edit", {"title": "retitled"})
        return lambda: cli(w, who, "edit", str(task), "--title", "retitled")

    return [] if face == "dashboard" else [Try("edit a task", setup)]


def edit_own_tasks(w: HttpWorld, who: str, face: str) -> Tries:
    """A task the agent token's agent (ada) posted, edited by each face."""

    def setup() -> Callable[[], Outcome]:
        task = w.fleet.post("ada's", skills=NOBODY, posted_by=ADA).id
        if face == "api":
            return lambda: api(w, who, "POST", f"/tasks/{task}/edit", {"title": "retitled"})
        return lambda: cli(w, who, "edit", str(task), "--title", "retitled")

    return [] if face == "dashboard" else [Try("edit a task its agent posted", setup)]


def pause_resume(w: HttpWorld, who: str, face: str) -> Tries:
    def on(verb: str, agent: str, ready: bool) -> Try:
        def setup() -> Callable[[], Outcome]:
            if ready:
                paused(w, agent)
            if face == "api":
                return lambda: api(w, who, "POST", f"/agents/{agent}/{verb}")
            if face == "dashboard":
                return lambda: page(w, who, f"/agents/{agent}/{verb}", {})
            return lambda: cli(w, who, "agent", verb, agent)

        return Try(f"{verb} {agent}", setup)

    return [on("pause", DEE, False), on("resume", DEE, True), on("pause", own(who), False)]


def configure(w: HttpWorld, who: str, face: str) -> Tries:
    changes = (("max_agents", "100"), ("lease_ttl", "1s"))  # the second: refused cells only
    if face == "api":
        return [
            now(f"settings {k}={v}", lambda k=k, v=v: api(w, who, "POST", "/settings", {k: v}))
            for k, v in changes
        ]
    if face == "dashboard":
        return [
            now(f"form {k}={v}", lambda k=k, v=v: setting_form(w, who, k, v)) for k, v in changes
        ]
    return [
        now(f"config set {k} {v}", lambda k=k, v=v: cli(w, who, "config", "set", k, v))
        for k, v in changes
    ]


def setting_form(w: HttpWorld, who: str, name: str, value: str) -> Outcome:
    return page(w, who, "/settings", {"name": name, "value": value})


def set_groups(w: HttpWorld, who: str, face: str) -> Tries:
    if face == "api":
        return [
            now("POST /groups/deploy", lambda: api(w, who, "POST", "/groups/deploy", {"max": 1})),
            now("POST /groups/deploy/clear", lambda: api(w, who, "POST", "/groups/deploy/clear")),
        ]
    if face == "dashboard":
        return []
    return [
        now("group set deploy --max 1", lambda: cli(w, who, "group", "set", "deploy", "--max", "1"))
    ]


def assess(w: HttpWorld, who: str, face: str) -> Tries:
    if face == "api":
        return [now("POST /assess", lambda: api(w, who, "POST", "/assess"))]
    if face == "dashboard":
        return [now("form /assess", lambda: page(w, who, "/assess", {}))]
    return [now("assess", lambda: cli(w, who, "assess"))]


def make_manager(w: HttpWorld, who: str, face: str) -> Tries:
    # An admin (or the owner) makes a new manager; the others try to make their own agent one.
    me = f"boss-{face}" if who in ("admin", "owner") else own(who)
    if face == "api":
        body = {"id": me, "manager": True, "max_concurrent": 1000}
        return [now(f"register {me} as a manager", lambda: api(w, who, "POST", "/agents", body))]
    if face == "dashboard":
        return []
    args = ("register", me, "--manager", "--max-concurrent", "1000")
    return [now(f"register {me} --manager", lambda: cli(w, who, *args))]


def hub_jobs(w: HttpWorld, who: str, face: str) -> Tries:
    if face == "api":
        return [
            now("rebalance, dry", lambda: api(w, who, "POST", "/rebalance", {"dry_run": True})),
            now("reap", lambda: api(w, who, "POST", "/reap")),
        ]
    if face == "dashboard":
        return []
    return [
        now("rebalance --dry-run", lambda: cli(w, who, "rebalance", "--dry-run")),
        now("reap", lambda: cli(w, who, "reap")),
    ]


def schedules(w: HttpWorld, who: str, face: str) -> Tries:
    if face == "dashboard":
        return []

    def make() -> Callable[[], Outcome]:
        if face == "api":
            body = {"title": "recurring", "every": "1h", "skills": NOBODY}
            return lambda: api(w, who, "POST", "/schedules", body)
        return lambda: cli(w, who, "add", "recurring", "--every", "1h", "-s", NOBODY[0])

    def on(verb: str) -> Try:
        def setup() -> Callable[[], Outcome]:
            made = w.fleet.schedule("recurring", every="1h", skills=NOBODY)
            if verb == "resume":
                w.fleet.pause_schedule(made.id)
            if face == "api":
                return lambda: api(w, who, "POST", f"/schedules/{made.id}/{verb}")
            return lambda: cli(w, who, "schedule", verb, str(made.id))

        return Try(f"{verb} a schedule", setup)

    return [Try("make a schedule", make), on("pause"), on("resume"), on("cancel")]


def owners_only(w: HttpWorld, who: str, face: str) -> Tries:
    if face != "cli":
        return []  # no route: the CLI through a hub says not_over_http (test_remote.py)
    return [now("token list", lambda: cli(w, who, "token", "list"))]


#: Each row of the table (by its bold words), as these faces try it.
POWERS: dict[str, Callable[[HttpWorld, str, str], Tries]] = {
    "Read the fleet": read_fleet,
    "Read the settings": read_settings,
    "Post a task": post_task,
    "Register its own agent": register_own,
    "Claim, heartbeat, set the status of its own agent": work_as_own,
    "Settle a lease its agent holds": settle_own,
    "Act as another agent": work_as_another,
    "Settle another agent's lease, given its token": settle_another_with_token,
    "Release another agent's task without its token": release_another_without_token,
    "Cancel, retry or reprioritise a task": change_tasks,
    "Edit a task": edit_tasks,
    "Edit a task its agent posted": edit_own_tasks,
    "Pause or resume an agent": pause_resume,
    "Change the settings": configure,
    "Set or lift a group's limit": set_groups,
    "Assess the workload": assess,
    "Make an agent a manager": make_manager,
    "Make, pause, resume or cancel a schedule": schedules,
    "Rebalance queues, reap lapsed leases": hub_jobs,
    "Make or revoke access tokens, prune history, import tasks": owners_only,
}
