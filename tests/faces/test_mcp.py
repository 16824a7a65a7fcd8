"""`shoal mcp`, driven by the MCP SDK's real client.

What an agent's host relies on: the tools are there, described and typed; two agents racing
through the server never get the same task and leave none behind; wait_for_task wakes when
work arrives; and a bad call is a tool error that says what to do and changes nothing.

The race and the wake-up run against real server processes over stdio (each agent's its
own, as each host starts one); the other tests against the same server set up by the same
command, served in this process (``memory_session``): their subject is the server.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from shoal import Fleet, ManualClock, TaskState
from shoal.extras import install_hint
from tests.faces.mcp_support import (
    MANAGER_TOOLS,
    WORKER_TOOLS,
    call,
    memory_session,
    refused,
    server_env,
    stdio_session,
    tool_list_tokens,
)
from tests.helpers import snapshot

pytestmark = pytest.mark.anyio

#: A model carries the tool list in its context all along: a server pinned to a working
#: agent keeps it under this many tokens (characters / 4 of the tools/list JSON)...
TOKEN_BUDGET = 3000
#: ...and a manager's server, which adds the tools that steer the fleet (settings, pauses,
#: edits, concurrency groups, schedules), under this many.
MANAGER_TOKEN_BUDGET = 4000
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    Fleet.init(url).close()
    return url


async def test_every_tool_is_described_and_typed(url: str) -> None:
    async with memory_session(url) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        resources = [str(r.uri) for r in (await session.list_resources()).resources]
        templates = (await session.list_resource_templates()).resource_templates
    async with memory_session(url, "--agent", "boss", "--manager") as boss:
        managers = {tool.name: tool for tool in (await boss.list_tools()).tools}
    assert set(tools) == WORKER_TOOLS
    assert set(managers) == WORKER_TOOLS - {"register_agent"} | MANAGER_TOOLS
    for tool in [*tools.values(), *managers.values()]:
        assert len(tool.description or "") > 40, f"{tool.name} has no real description"
        assert tool.input_schema["type"] == "object"
        assert "title" not in tool.input_schema, "generated titles only cost tokens"
        for name, prop in tool.input_schema.get("properties", {}).items():
            assert prop.get("description"), f"{tool.name}.{name} is not described"
        assert tool.annotations is not None and tool.annotations.open_world_hint is False
    assert set(tools["add_task"].input_schema["required"]) == {"title"}
    assert tools["list_tasks"].annotations.read_only_hint  # type: ignore[union-attr]
    assert "agent" in tools["claim_best_task"].input_schema["properties"]
    assert "shoal://status" in resources
    assert [t.uri_template for t in templates] == ["shoal://tasks/{task_id}"]


async def test_a_pinned_server_lists_no_agent_parameters_and_no_register_tool(url: str) -> None:
    async with memory_session(url, "--agent", "ada") as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        text = await refused(session, "register_node", agent="ada")
    assert set(tools) == WORKER_TOOLS - {"register_agent"}
    for tool in tools.values():
        if tool.name != "list_tasks":  # whose `agent` is a filter, not who you are
            assert "agent" not in tool.input_schema.get("properties", {}), tool.name
    assert "agent" in tools["list_tasks"].input_schema["properties"]
    assert "unknown_tool" in text and "registered you as agent ada already" in text


async def test_the_pinned_tool_list_fits_the_token_budget(url: str) -> None:
    async with memory_session(url, "--agent", "ada", "--manager") as pinned:
        manager_tokens = await tool_list_tokens(pinned)
    async with memory_session(url, "--agent", "bob") as pinned:
        worker_tokens = await tool_list_tokens(pinned)
    async with memory_session(url) as unpinned:
        unpinned_tokens = await tool_list_tokens(unpinned)
    print(
        f"tool list: {manager_tokens} tokens for a manager, {worker_tokens} for a pinned "
        f"worker, {unpinned_tokens} unpinned"
    )
    assert worker_tokens < TOKEN_BUDGET
    assert manager_tokens < MANAGER_TOKEN_BUDGET
    assert worker_tokens < unpinned_tokens < manager_tokens


async def test_two_agents_race_and_no_task_is_handed_out_twice(url: str) -> None:
    with Fleet.open(url) as fleet:
        posted = set(fleet.post_many({"title": f"task {i}"} for i in range(100)))
    taken: dict[str, list[int]] = {}

    async def drain(agent: str) -> None:
        mine = taken.setdefault(agent, [])
        async with stdio_session(url, "--agent", agent) as session:
            while True:
                claim = await call(session, "claim_best_task")
                if not claim["claimed"]:
                    assert claim["reason"] == "empty"
                    return
                mine.append(claim["task"]["id"])
                await call(session, "complete_task", task_id=claim["task"]["id"], result=agent)

    async with anyio.create_task_group() as group:
        group.start_soon(drain, "ada")
        group.start_soon(drain, "bob")

    everything = taken["ada"] + taken["bob"]
    assert len(everything) == len(set(everything)), "a task was handed out twice"
    assert set(everything) == posted, "a task was left behind"
    print(f"race: ada took {len(taken['ada'])}, bob took {len(taken['bob'])}")
    with Fleet.open(url) as fleet:
        done = [fleet.get(t.id) for t in fleet.tasks(state=TaskState.DONE, limit=1000)]
        assert {t.id for t in done} == posted
        assert all(t.result in ("ada", "bob") and t.attempts == 1 for t in done)
        claims = [e for e in fleet.events(limit=100_000) if e.kind == "claimed"]
        assert len(claims) == 100


async def test_wait_for_task_wakes_when_another_client_adds_work(url: str) -> None:
    async with (
        stdio_session(url, "--agent", "ada") as waiter,
        stdio_session(url, "--agent", "boss", "--manager") as boss,
    ):
        outcome: dict[str, Any] = {}

        async def wait() -> None:
            outcome["claim"] = await call(waiter, "wait_for_task", timeout_seconds=30)
            outcome["returned"] = time.perf_counter()

        async with anyio.create_task_group() as group:
            group.start_soon(wait)
            with Fleet.open(url) as fleet:  # the waiter found nothing and is waiting now
                deadline = time.monotonic() + 20
                while fleet.agent("ada").status.value != "idle":
                    assert time.monotonic() < deadline, "wait_for_task never looked for work"
                    await anyio.sleep(0.01)
            posted = time.perf_counter()
            added = await call(boss, "add_task", title="urgent fix", priority="critical")
        latency = outcome["returned"] - posted
    claim = outcome["claim"]
    assert claim["claimed"] and claim["task"]["id"] == added["task"]["id"]
    assert claim["task"]["agent"] == "ada"
    print(f"wait_for_task returned {latency * 1000:.0f} ms after add_task was sent")
    assert latency < 10, "the waiter was not woken by the new task (it timed out instead)"


async def test_wait_for_task_reports_progress_while_it_waits(url: str) -> None:
    updates: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        updates.append((done, total, message))

    async with memory_session(url, "--agent", "ada", "--skill", "rare") as session:
        result = await session.call_tool(
            "wait_for_task", {"timeout_seconds": 2.5}, progress_callback=progress
        )
    assert not result.is_error and result.structured_content is not None
    assert result.structured_content["reason"] == "empty"
    assert len(updates) >= 2, updates  # at the start, then after each slice of the wait
    assert updates[0][0] == 0 and all(total == 2.5 for _, total, _ in updates)
    assert [done for done, _, _ in updates] == sorted(done for done, _, _ in updates)
    assert updates[-1][2] == "waiting for work"


async def test_wait_for_task_keeps_the_fleets_time(url: str) -> None:
    """On a manual clock the whole wait passes on that clock, as Fleet.claim's does: a test
    (the MCP fuzz's above all) never waits a real minute for a task that is not coming."""
    from mcp import Client

    from shoal.faces.mcp.server import FleetDesk, build_server

    clock = ManualClock(time.time())
    desk = FleetDesk(Fleet.open(url, clock=clock), "ada", {"skills": ["rare"]})
    assert desk.start() is None
    began, at = time.monotonic(), clock.now()
    with anyio.fail_after(30):
        async with Client(build_server(desk)) as client:
            result = await client.call_tool("wait_for_task", {"timeout_seconds": 600})
    desk.close()
    assert not result.is_error and result.structured_content is not None
    assert result.structured_content["reason"] == "empty"
    assert result.structured_content["waited_seconds"] >= 600
    assert clock.now() - at >= 600
    assert time.monotonic() - began < 30


async def test_bad_calls_are_tool_errors_that_change_nothing(url: str) -> None:
    with Fleet.open(url) as fleet:
        first, second = fleet.post("first").id, fleet.post("second").id
    async with (
        memory_session(url, "--agent", "ada") as ada,
        memory_session(url) as anyone,
    ):
        text = await refused(anyone, "claim_best_task")
        assert "no_agent" in text and "register_agent" in text
        await call(anyone, "register_agent", agent="bob")
        mine = await call(ada, "claim_best_task")
        bobs = await call(anyone, "claim_best_task", agent="bob")
        assert {mine["task"]["id"], bobs["task"]["id"]} == {first, second}
        with Fleet.open(url) as fleet:
            before = snapshot(fleet)

        text = await refused(anyone, "add_task", title="x", priority="urgent")
        assert "invalid_priority" in text and "critical" in text
        text = await refused(anyone, "add_task", title="x", priority=0)
        assert "out of range" in text
        text = await refused(anyone, "claim_best_task", agent="ghost")
        assert "unknown_agent" in text and "register_agent" in text
        text = await refused(ada, "complete_task", task_id=mine["task"]["id"], token="0" * 16)
        assert text.startswith("stale_lease:") and "claim_best_task" in text
        text = await refused(ada, "claim_best_task", agent="bob")
        assert text.startswith("foreign_agent:") and "'ada'" in text
        text = await refused(ada, "set_agent_status", status="terminated", agent="bob")
        assert text.startswith("foreign_agent:")
        text = await refused(anyone, "claim_best_task", agent="bob", tsk=1)
        assert text.startswith("bad_input:") and "takes no tsk" in text
        text = await refused(anyone, "register_agent", agent="bad id!")
        assert "bad_input" in text and "agent id" in text
        text = await refused(ada, "complete_task", task_id=bobs["task"]["id"], token="0" * 16)
        assert text.startswith("stale_lease:") and "not the lease" in text and "bob" not in text
        text = await refused(ada, "release_task", task_id=bobs["task"]["id"])
        assert text.startswith("stale_lease:") and "not yours" in text and "bob" not in text
        text = await refused(anyone, "release_task", task_id=mine["task"]["id"], agent="bob")
        assert text.startswith("stale_lease:") and "ada" not in text
        text = await refused(ada, "complete_task", task_id=999)
        assert text.startswith("unknown_task:") and "list_tasks" in text
        text = await refused(anyone, "get_task", task_id=999)
        assert text.startswith("unknown_task:")
        text = await refused(anyone, "add_task", title="x", after=[999])
        assert text.startswith("unknown_task:")
        text = await refused(anyone, "set_agent_status", status="asleep", agent="bob")
        assert text.startswith("bad_input:") and "status" in text and "terminated" in text
        text = await refused(anyone, "list_tasks", cursor="next")
        assert text.startswith("bad_input:") and "cursor" in text
        text = await refused(anyone, "no_such_tool")
        assert text.startswith("unknown_tool:")

        with Fleet.open(url) as fleet:
            assert snapshot(fleet) == before
        # The real lease still works after all that: nothing was disturbed.
        await call(ada, "complete_task", task_id=mine["task"]["id"], result="ok")
        with Fleet.open(url) as fleet:
            assert fleet.get(mine["task"]["id"]).state is TaskState.DONE


async def test_already_done_unknown_task_and_stale_lease_say_what_to_do(url: str) -> None:
    with Fleet.open(url) as fleet:
        done_id, slow_id = fleet.post("quick", priority=1).id, fleet.post("slow").id
    async with memory_session(url, "--agent", "ada", "--max-concurrent", "2") as ada:
        quick = await call(ada, "claim_best_task")
        slow = await call(ada, "claim_best_task")
        assert [quick["task"]["id"], slow["task"]["id"]] == [done_id, slow_id]
        await call(ada, "complete_task", task_id=done_id, result=1)
        with Fleet.open(url) as fleet:
            before = snapshot(fleet)
        for token in (None, quick["lease"]["token"]):  # read from the store, then given
            args = {"task_id": done_id} | ({"token": token} if token else {})
            text = await refused(ada, "complete_task", **args)
            assert text.startswith("already_done:") and "done already by agent ada" in text
            assert "do not finish it again" in text and "claim_best_task" in text
        text = await refused(ada, "fail_task", task_id=done_id, error="late")
        assert text.startswith("already_done:")
        text = await refused(ada, "complete_task", task_id=12345)
        assert text.startswith("unknown_task:") and "there is no task 12345" in text
        assert "list_tasks" in text
        with Fleet.open(url) as fleet:
            assert snapshot(fleet) == before
        # An hour on, the slow task's lease is long gone and bob has it now.
        with Fleet.open(url, clock=ManualClock(time.time() + 3600)) as later:
            later.register("bob", manager=True)
            assert later.claim("bob").tasks[0].id == slow_id
            before = snapshot(later)
        text = await refused(ada, "complete_task", task_id=slow_id, result="late")
        assert text.startswith("stale_lease:") and "not yours" in text and "bob" not in text
        assert "drop its result" in text and "claim_best_task" in text
        with Fleet.open(url) as fleet:
            assert snapshot(fleet) == before


async def test_a_lost_lease_says_so_and_names_no_one(url: str) -> None:
    with Fleet.open(url) as fleet:
        task = fleet.post("slow work").id
    async with memory_session(url, "--agent", "ada") as ada:
        claim = await call(ada, "claim_best_task")
        assert claim["task"]["id"] == task
        # An hour on, ada's lease is long gone: another agent's claim takes the task back.
        with Fleet.open(url, clock=ManualClock(time.time() + 3600)) as later:
            later.register("bob", manager=True)
            assert later.claim("bob").tasks[0].id == task
            before = snapshot(later)
        text = await refused(ada, "complete_task", task_id=task, result="late")
        assert "stale_lease" in text and "not yours" in text and "claim_best_task" in text
        assert "bob" not in text, "a refusal names no other agent"
        with Fleet.open(url) as fleet:
            assert snapshot(fleet) == before
            assert fleet.get(task).agent == "bob"


async def test_claim_then_complete_without_a_token_and_claim_the_next(url: str) -> None:
    async with memory_session(url) as session:
        reg = await call(session, "register_agent", agent="cy", skills=["python"])
        assert reg["created"] and reg["message"].endswith("Active agents: 1/4")
        first = await call(session, "add_task", title="parse", skills=["python"], priority=2)
        await call(session, "add_task", title="lint", priority="low")
        claim = await call(session, "claim_best_task")  # the session's agent: cy
        assert claim["task"]["id"] == first["task"]["id"] and claim["source"] == "pool"
        beat = await call(session, "heartbeat")
        assert [lease["task_id"] for lease in beat["leases"]] == [first["task"]["id"]]
        done = await call(
            session, "complete_task", task_id=first["task"]["id"], result={"ok": 1}, claim_next=True
        )
        assert done["task"]["state"] == "done"
        assert done["next"]["claimed"] and done["next"]["task"]["title"] == "lint"
        failed = await call(session, "fail_task", task_id=done["next"]["task"]["id"], error="x")
        assert failed["task"]["state"] == "pending" and failed["ready_at"] is not None
        shown = await call(session, "get_task", task_id=first["task"]["id"])
        assert shown["task"]["result"] == {"ok": 1}
        state = await session.call_tool("read_state", {})
        text = state.content[0].text  # type: ignore[union-attr]
        assert "you are agent cy" in text and "1 done" in text and "Agents: 1/4" in text
        assert state.structured_content is not None
        assert state.structured_content["status"]["capacity"] == {"live": 1, "max_agents": 4}
        listed = await call(session, "list_tasks", state="done")
        assert [t["title"] for t in listed["tasks"]] == ["parse"]
        resource = await session.read_resource(f"shoal://tasks/{first['task']['id']}")
        assert '"state": "done"' in resource.contents[0].text  # type: ignore[union-attr]
        status = await session.read_resource("shoal://status")
        assert "1 done" in status.contents[0].text  # type: ignore[union-attr]


async def test_lists_are_compact_and_paged_with_a_cursor(url: str) -> None:
    with Fleet.open(url) as fleet:
        posted = fleet.post_many({"title": f"task {i}", "body": "x" * 500} for i in range(45))
        labelled = fleet.post_many({"title": f"bug {i}", "labels": ["bug"]} for i in range(3))
    async with memory_session(url) as session:
        bugs = await call(session, "list_tasks", label="bug")
        pages, cursor = [], None
        while True:
            args = {"cursor": cursor} if cursor else {}
            page = await call(session, "list_tasks", **args)
            pages.append(page["tasks"])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        small = await call(session, "list_tasks", limit=5, state="pending")
    assert [len(p) for p in pages] == [20, 20, 8]
    assert [t["id"] for p in pages for t in p] == sorted(posted + labelled, reverse=True)
    assert [t["id"] for t in bugs["tasks"]] == sorted(labelled, reverse=True)
    brief = {"id", "title", "state", "priority", "domain", "agent", "age_s", "lease_expired"}
    assert set(pages[0][0]) == brief
    assert len(small["tasks"]) == 5 and small["next_cursor"] is not None


async def test_a_task_whose_holder_died_reads_as_not_running(url: str) -> None:
    """dan claimed a task 14 minutes ago under a 10-minute lease and died; nobody claimed or
    reaped since, so the store still says claimed. What a model reads -- list_tasks,
    get_task, the task's resource -- says its lease ran out, as `shoal list` does ("lease
    expired: not running"), so it is not left alone as dan's running work; eve's task,
    claimed then under an hour's lease, reads as running."""
    with Fleet.open(url, clock=ManualClock(time.time() - 14 * 60)) as fleet:
        fleet.register("dan")
        dead = fleet.post("migrate the schema").id
        assert fleet.claim("dan").tasks[0].id == dead
        fleet.register("eve")
        live = fleet.post("write the notes", lease_ttl="1h").id
        assert fleet.claim("eve").tasks[0].id == live
    async with memory_session(url) as session:
        listed = {t["id"]: t for t in (await call(session, "list_tasks"))["tasks"]}
        shown = (await call(session, "get_task", task_id=dead))["task"]
        running = (await call(session, "get_task", task_id=live))["task"]
        resource = await session.read_resource(f"shoal://tasks/{dead}")
    assert (listed[dead]["state"], listed[dead]["lease_expired"]) == ("claimed", True)
    assert (listed[live]["state"], listed[live]["lease_expired"]) == ("claimed", False)
    assert (shown["agent"], shown["lease_expired"]) == ("dan", True)
    assert running["lease_expired"] is False
    assert '"lease_expired": true' in resource.contents[0].text  # type: ignore[union-attr]


async def test_every_time_is_iso_8601_utc_and_leases_say_how_long_they_last(url: str) -> None:
    with Fleet.open(url) as fleet:
        fleet.post("timed work", expected_duration="5m")
    async with memory_session(url, "--agent", "ada") as ada:
        claim = await call(ada, "claim_best_task")
        lease, task = claim["lease"], claim["task"]
        shown = await call(ada, "get_task", task_id=task["id"])
        agent = await call(ada, "set_agent_status", status="working")
        state = await call(ada, "read_state")
        beat = await call(ada, "heartbeat")
    assert ISO.match(lease["expires_at"]) and ISO.match(task["created_at"])
    assert 595 <= lease["expires_in_s"] <= 600  # the default lease_ttl, 10 minutes
    expires = datetime.fromisoformat(lease["expires_at"].replace("Z", "+00:00"))
    assert abs(expires.timestamp() - time.time() - 600) < 60
    assert task["finished_at"] is None and ISO.match(task["ready_at"])
    assert all(ISO.match(e["at"]) for e in shown["events"])
    assert ISO.match(agent["last_seen"]) and agent["idle_since"] is None
    (row,) = [a for a in state["status"]["agents"] if a["id"] == "ada"]
    assert ISO.match(row["last_seen"]) and ISO.match(row["registered_at"])
    assert ISO.match(state["status"]["at"])
    assert ISO.match(beat["leases"][0]["expires_at"])


async def test_managers_cancel_and_retry_tasks(url: str) -> None:
    with Fleet.open(url) as fleet:
        doomed = fleet.post("doomed").id
        flaky = fleet.post("flaky", priority=1).id
    async with (
        memory_session(url, "--agent", "boss", "--manager") as boss,
        memory_session(url, "--agent", "ada") as ada,
    ):
        cancelled = await call(boss, "cancel_task", task_id=doomed)
        assert cancelled["task"]["state"] == "cancelled" and cancelled["message"]
        text = await refused(boss, "cancel_task", task_id=doomed)
        assert text.startswith("invalid_transition:") and "already cancelled" in text
        back = await call(boss, "retry_task", task_id=doomed)
        assert back["task"]["state"] == "pending" and back["ready_at"] is None
        claim = await call(ada, "claim_best_task")
        assert claim["task"]["id"] == flaky
        failed = await call(ada, "fail_task", task_id=flaky, error="flaked")
        assert failed["task"]["state"] == "pending" and ISO.match(failed["ready_at"])
        now_ready = await call(boss, "retry_task", task_id=flaky)  # skip the backoff
        assert now_ready["task"]["state"] == "pending" and now_ready["ready_at"] is None
        again = await call(ada, "claim_best_task")
        assert again["task"]["id"] == flaky
        text = await refused(boss, "retry_task", task_id=flaky)
        assert text.startswith("invalid_transition:") and "claimed" in text
        text = await refused(boss, "cancel_task", task_id=999)
        assert text.startswith("unknown_task:")
        await call(boss, "cancel_task", task_id=flaky)  # revokes ada's lease
        text = await refused(ada, "complete_task", task_id=flaky)
        assert text.startswith("stale_lease:") and "cancelled" in text


def test_shoal_and_its_cli_work_without_the_mcp_sdk(url: str) -> None:
    """Without the SDK, `import shoal` and every other command still work, and `shoal mcp`
    says how to get it."""
    script = (
        "import sys; sys.modules['mcp'] = None\n"
        "import shoal, shoal.faces.cli\n"
        "from shoal.faces.cli import main\n"
        f"main(['--store', {url!r}, 'mcp'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert install_hint("mcp") in " ".join(done.stderr.split())  # (as this shoal was installed)
    assert "Traceback" not in done.stderr


def test_agent_options_without_an_agent_are_refused(url: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "shoal.faces.cli", "--store", url, "mcp", "--skill", "python"],
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--agent" in done.stderr


async def test_a_full_fleet_is_a_tool_error_not_a_dead_server(url: str) -> None:
    """A server for an agent the fleet has no room for starts all the same: the handshake
    works, the agent's tools answer fleet_full (with the limit and how to raise it), the
    others work, nothing changes -- and once there is room, the next call joins."""
    with Fleet.open(url) as fleet:
        fleet.configure(max_agents=1)
        fleet.register("ada")
        task = fleet.post("waiting for bob").id
        before = snapshot(fleet)
    async with memory_session(url, "--agent", "bob") as bob:
        text = await refused(bob, "claim_best_task")
        assert text.startswith("fleet_full:") and "1 of 1 seats are taken" in text
        assert "shoal config set max_agents 2" in text and "next call" in text
        text = await refused(bob, "heartbeat")
        assert text.startswith("fleet_full:")
        state = await call(bob, "read_state")
        assert "Agents: 1/1 live" in state["summary"]
        with Fleet.open(url) as fleet:
            assert snapshot(fleet) == before
            fleet.configure(max_agents=2)
        claim = await call(bob, "claim_best_task")
        assert claim["task"]["id"] == task


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
async def test_a_store_that_cannot_be_opened_is_a_tool_error(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """No fleet at the URL yet: the server starts, its tools say store_not_found and how to
    fix it, and once the fleet exists the next call works."""
    if store == "sqlite":
        url = f"sqlite://{tmp_path / 'later.db'}"
    else:
        url = str(request.getfixturevalue("postgres_url"))
    async with memory_session(url, "--agent", "ada") as ada:
        text = await refused(ada, "claim_best_task")
        assert text.startswith("store_not_found:") and "shoal init" in text
        text = await refused(ada, "read_state")
        assert text.startswith("store_not_found:")
        Fleet.init(url).close()
        claim = await call(ada, "claim_best_task")
        assert claim["claimed"] is False and claim["reason"] == "empty"
    with Fleet.open(url) as fleet:
        assert fleet.agent("ada").status.value == "offline"


async def test_settings_are_read_and_changed_and_bad_values_change_nothing(url: str) -> None:
    async with memory_session(url, "--agent", "loom", "--domain", "ci", "--manager") as loom:
        read = await call(loom, "configure_fleet")
        assert read["settings"]["steal_threshold"] == 0 and read["changed"] == []
        assert read["settings"]["order"] == "priority"
        with Fleet.open(url) as fleet:
            before = snapshot(fleet)
        for changes, says in (
            ({"steal_threshold": -1}, "steal_threshold must be at least 0"),
            ({"order": "fastest"}, "order must be one of priority, longest_first"),
            ({"domain_wait": "soon"}, "domain_wait must be a duration"),
            ({"steal_treshold": 1}, "did you mean steal_threshold"),
            ({"locality_wait": "20m", "order": "fastest"}, "order must be one of"),
        ):
            text = await refused(loom, "configure_fleet", changes=changes)
            assert "invalid_setting" in text and says in text, text
        with Fleet.open(url) as fleet:
            assert snapshot(fleet) == before  # all or nothing: locality_wait did not change
        done = await call(loom, "configure_fleet", changes={"locality_wait": "20m"})
        assert done["settings"]["locality_wait"] == 1200 and done["changed"] == ["locality_wait"]
        with Fleet.open(url) as fleet:
            paper = fleet.post("paper", domain="research")
        held = await call(loom, "claim_best_task")
        assert held["claimed"] is False and held["reason"] == "empty"
        retry_at = datetime.fromisoformat(held["retry_at"].replace("Z", "+00:00"))
        assert retry_at.timestamp() == pytest.approx(paper.created_at + 1200, abs=0.001)
        assert "retry_at" in held["next_step"]


async def test_managers_reorder_work_and_pause_an_agent(url: str) -> None:
    """set_task_priority moves a task up the claim order; pause_agent stops an agent's
    claims (reason paused) until resume_agent; bad input changes nothing."""
    with Fleet.open(url) as fleet:
        first = fleet.post("first", priority=5).id
        later = fleet.post("later", priority=8).id
    async with (
        memory_session(url, "--agent", "boss", "--manager") as boss,
        memory_session(url, "--agent", "ada") as ada,
    ):
        raised = await call(boss, "set_task_priority", task_id=later, priority="critical")
        assert raised["task"]["priority"] == 1 and raised["message"]
        text = await refused(boss, "set_task_priority", task_id=later, priority="urgentest")
        assert text.startswith("invalid_priority:")
        text = await refused(boss, "set_task_priority", task_id=999, priority=2)
        assert text.startswith("unknown_task:")
        paused = await call(boss, "pause_agent", agent_id="ada", duration="2h")
        assert paused["status"] == "paused" and ISO.match(paused["paused_until"])
        held = await call(ada, "claim_best_task")
        assert held["claimed"] is False and held["reason"] == "paused"
        text = await refused(boss, "pause_agent", agent_id="ada", duration="forever")
        assert text.startswith("bad_input:")
        await call(boss, "resume_agent", agent_id="ada")
        claim = await call(ada, "claim_best_task")
        assert claim["task"]["id"] == later  # critical now: ahead of "first"
    with Fleet.open(url) as fleet:
        assert fleet.get(first).priority == 5 and fleet.get(later).priority == 1


async def test_a_paused_agent_is_resumed_and_work_posted_for_later_waits(url: str) -> None:
    """The circuit breaker over MCP: five failures in a row pause ada (claims answer paused
    with retry_at); a manager's resume_agent lets her claim again. A task posted with
    not_before waits; set_agent_status idle while holding work needs release."""
    with Fleet.open(url) as fleet:
        fleet.configure(retry_delay=3600)  # failed tasks stay out of the way
        for i in range(6):
            fleet.post(f"t{i}")
    async with (
        memory_session(url, "--agent", "boss", "--manager") as boss,
        memory_session(url, "--agent", "ada") as ada,
    ):
        for _ in range(5):
            claim = await call(ada, "claim_best_task")
            await call(ada, "fail_task", task_id=claim["task"]["id"], error="no tool")
        paused = await call(ada, "claim_best_task")
        assert paused["reason"] == "paused" and ISO.match(paused["retry_at"])
        resumed = await call(boss, "resume_agent", agent_id="ada")
        assert resumed["status"] == "waiting"
        held = await call(ada, "claim_best_task")
        text = await refused(ada, "set_agent_status", status="idle")
        assert text.startswith("invalid_transition:") and str(held["task"]["id"]) in text
        idle = await call(ada, "set_agent_status", status="idle", release=True)
        assert idle["status"] == "idle"
        later = await call(boss, "add_task", title="later", not_before="2099-01-01T00:00Z")
        assert later["ready_at"].startswith("2099-01-01")
        text = await refused(boss, "add_task", title="x", not_before="tomorrow")
        assert text.startswith("bad_input:") and "not_before" in text
