"""`shoal mcp` over stdio, driven by the MCP SDK's real client against real server processes.

What an agent's host relies on: the tools are there, described and typed; two agents racing
through the server never get the same task and leave none behind; wait_for_task wakes when
work arrives; and a bad call is a tool error that says what to do and changes nothing.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from shoal import Fleet, ManualClock, TaskState
from tests.helpers import snapshot
from tests.mcp_support import call, refused, server_env, stdio_session

pytestmark = pytest.mark.anyio

TOOLS = {
    "register_agent",
    "register_node",
    "claim_best_task",
    "wait_for_task",
    "complete_task",
    "fail_task",
    "release_task",
    "heartbeat",
    "add_task",
    "set_agent_status",
    "assess_workload",
    "configure_fleet",
    "read_state",
    "list_tasks",
    "get_task",
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    Fleet.init(url).close()
    return url


async def test_every_tool_is_described_and_typed(url: str) -> None:
    async with stdio_session(url) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        resources = [str(r.uri) for r in (await session.list_resources()).resources]
        templates = (await session.list_resource_templates()).resource_templates
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert len(tool.description or "") > 40, f"{tool.name} has no real description"
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None, f"{tool.name} has no structured output"
        for name, prop in tool.input_schema.get("properties", {}).items():
            assert prop.get("description"), f"{tool.name}.{name} is not described"
    claim = tools["claim_best_task"].output_schema
    assert claim is not None
    assert {"claimed", "task", "lease", "reason"} <= set(claim["properties"])
    assert set(tools["add_task"].input_schema["required"]) == {"title"}
    assert "shoal://status" in resources
    assert [t.uri_template for t in templates] == ["shoal://tasks/{task_id}"]


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
        done = fleet.tasks(state=TaskState.DONE, limit=1000)
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
    assert claim["lease"]["agent"] == "ada"
    print(f"wait_for_task returned {latency * 1000:.0f} ms after add_task was sent")
    assert latency < 10, "the waiter was not woken by the new task (it timed out instead)"


async def test_bad_calls_are_tool_errors_that_change_nothing(url: str) -> None:
    with Fleet.open(url) as fleet:
        fleet.register("bob")
        first, second = fleet.post("first").id, fleet.post("second").id
    async with (
        stdio_session(url, "--agent", "ada") as ada,
        stdio_session(url) as anyone,
    ):
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
        text = await refused(anyone, "claim_best_task")
        assert "no_agent" in text and "register_agent" in text
        text = await refused(ada, "complete_task", task_id=mine["task"]["id"], token="0" * 16)
        assert "lease_lost" in text and "claim_best_task" in text
        text = await refused(ada, "claim_best_task", agent="bob")
        assert "foreign_agent" in text and "'ada'" in text
        text = await refused(ada, "set_agent_status", status="terminated", agent="bob")
        assert "foreign_agent" in text
        text = await refused(ada, "register_agent", agent="bob")
        assert "foreign_agent" in text
        token = bobs["lease"]["token"]
        text = await refused(ada, "complete_task", task_id=bobs["task"]["id"], token=token)
        assert "held by agent 'bob'" in text
        text = await refused(ada, "release_task", task_id=bobs["task"]["id"])
        assert "no_token" in text
        text = await refused(ada, "complete_task", task_id=999)
        assert "no_token" in text
        text = await refused(ada, "complete_task", task_id=999, token=token)
        assert "unknown_task" in text and "list_tasks" in text
        text = await refused(anyone, "get_task", task_id=999)
        assert "unknown_task" in text
        text = await refused(anyone, "add_task", title="x", after=[999])
        assert "unknown_task" in text
        text = await refused(anyone, "set_agent_status", status="asleep", agent="bob")
        assert "status" in text

        with Fleet.open(url) as fleet:
            assert snapshot(fleet) == before
        # The real lease still works after all that: nothing was disturbed.
        done = await call(ada, "complete_task", task_id=mine["task"]["id"], result="ok")
        assert done["task"]["state"] == "done"


async def test_a_lost_lease_says_so_and_the_remembered_token_is_still_fenced(url: str) -> None:
    with Fleet.open(url) as fleet:
        task = fleet.post("slow work").id
    async with stdio_session(url, "--agent", "ada") as ada:
        claim = await call(ada, "claim_best_task")
        assert claim["task"]["id"] == task
        # An hour on, ada's lease is long gone: another agent's claim takes the task back.
        with Fleet.open(url, clock=ManualClock(time.time() + 3600)) as later:
            later.register("bob")
            assert later.claim("bob").tasks[0].id == task
            before = snapshot(later)
        text = await refused(ada, "complete_task", task_id=task, result="late")
        assert "lease_lost" in text and "'bob'" in text and "claim_best_task" in text
        with Fleet.open(url) as fleet:
            assert snapshot(fleet) == before
            assert fleet.get(task).agent == "bob"


async def test_claim_then_complete_without_a_token_and_claim_the_next(url: str) -> None:
    async with stdio_session(url) as session:
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
        assert done["task"]["result"] == {"ok": 1}
        assert done["next"]["claimed"] and done["next"]["task"]["title"] == "lint"
        failed = await call(session, "fail_task", task_id=done["next"]["task"]["id"], error="x")
        assert failed["task"]["state"] == "pending" and failed["task"]["error"] == "x"
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
    assert "pip install 'shoal[mcp]'" in done.stderr
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


def test_a_server_for_an_agent_the_fleet_has_no_room_for_does_not_start(url: str) -> None:
    with Fleet.open(url) as fleet:
        fleet.configure(max_agents=1)
        fleet.register("ada")
        before = snapshot(fleet)
    done = subprocess.run(
        [sys.executable, "-m", "shoal.faces.cli", "--store", url, "mcp", "--agent", "bob"],
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 3
    assert "fleet is full" in done.stderr and "'bob' was not registered" in done.stderr
    with Fleet.open(url) as fleet:
        assert snapshot(fleet) == before


async def test_settings_are_read_and_changed_and_bad_values_change_nothing(url: str) -> None:
    async with stdio_session(url, "--agent", "loom", "--domain", "ci") as loom:
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
        assert held["retry_at"] == pytest.approx(paper.created_at + 1200)
        assert "retry_at" in held["next_step"]
