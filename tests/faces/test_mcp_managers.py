"""Only a manager acts on others' work or on the fleet, and only the operator makes one.

An agent reads untrusted text and may be steered by it, so an MCP session's powers end at
its own work. Cancelling, retrying and reprioritising tasks, pausing and resuming agents,
assessing the workload and configuring the fleet belong to a manager's server, which the
operator starts with `shoal mcp --agent ID --manager`. A pinned worker (no `--manager`) and
every session of an unpinned server -- over stdio or HTTP, with or without an agent of its
own -- do not see those tools, and a call to one answers `not_a_manager` (with a hint)
and changes nothing: with `configure_fleet {"lease_ttl": "1s"}` a worker could otherwise
have every running task handed out again and done twice. Nor can a session make itself a
manager with `register_agent(manager=true)`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession

pytest.importorskip("mcp")

from shoal import Fleet, TaskState
from tests.faces.mcp_support import (
    MANAGER_TOOLS,
    WORKER_TOOLS,
    call,
    http_server,
    http_session,
    memory_session,
    refused,
)
from tests.helpers import snapshot

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    Fleet.init(url).close()
    return url


@pytest.fixture
def work(url: str) -> dict[str, int]:
    """Others' work, in each state a manager's tool acts on: a task ada runs, one that died
    in bob's hands, one waiting in the pool."""
    with Fleet.open(url) as fleet:
        fleet.register("ada")
        fleet.register("bob")
        running = fleet.post("running", priority=1).id
        doomed = fleet.post("doomed", priority=2, max_attempts=1).id
        queued = fleet.post("queued", priority=5).id
        assert fleet.claim("ada").tasks[0].id == running
        (lease,) = fleet.claim("bob").leases
        assert fleet.fail(lease, "broke").state is TaskState.DEAD
        sensor = fleet.schedule("sensor", every="1h", start=fleet.clock.now() + 3600).id
    return {"running": running, "doomed": doomed, "queued": queued, "sensor": sensor}


def managers_calls(work: dict[str, int]) -> list[tuple[str, dict[str, Any]]]:
    """A call to each manager's tool, on others' work and on the fleet."""
    return [
        ("configure_fleet", {"changes": {"lease_ttl": "1s"}}),
        ("configure_fleet", {}),
        ("cancel_task", {"task_id": work["running"]}),
        ("retry_task", {"task_id": work["doomed"]}),
        ("set_task_priority", {"task_id": work["queued"], "priority": 1}),
        ("edit_task", {"task_id": work["queued"], "title": "retitled"}),
        ("pause_agent", {"agent_id": "ada", "duration": "2h"}),
        ("resume_agent", {"agent_id": "ada"}),
        ("assess_workload", {}),
        ("set_group_limit", {"group": "deploy", "max": 1}),
        ("add_schedule", {"title": "every minute", "every": "1m"}),
        ("set_schedule_state", {"schedule_id": work["sensor"], "state": "cancelled"}),
    ]


async def all_refused(session: ClientSession, url: str, work: dict[str, int]) -> None:
    """Every manager's call answers not_a_manager, with a hint, and changes nothing."""
    with Fleet.open(url) as fleet:
        before = snapshot(fleet)
    for tool, arguments in managers_calls(work):
        text = await refused(session, tool, **arguments)
        if tool == "edit_task":  # offered to every session, for the tasks it posted
            assert text.startswith("not_yours:") and "\nnext: " in text, text
            continue
        assert text.startswith("not_a_manager:"), text
        assert "\nhint: " in text and "--manager" in text, text
    with Fleet.open(url) as fleet:
        assert snapshot(fleet) == before
        assert fleet.settings().lease_ttl != 1
        assert fleet.get(work["running"]).state is TaskState.CLAIMED


async def listed(session: ClientSession) -> tuple[set[str], int]:
    """The names of the tools a session is offered, and the list's size in characters."""
    tools = await session.list_tools()
    size = len(json.dumps(tools.model_dump(mode="json", by_alias=True, exclude_none=True)))
    return {tool.name for tool in tools.tools}, size


async def test_a_pinned_worker_is_not_offered_a_managers_tools_nor_can_call_them(
    url: str, work: dict[str, int]
) -> None:
    async with memory_session(url, "--agent", "boss", "--manager") as boss:
        names, manager_size = await listed(boss)
    assert names == WORKER_TOOLS - {"register_agent"} | MANAGER_TOOLS
    async with memory_session(url, "--agent", "carol") as carol:
        names, worker_size = await listed(carol)
        await all_refused(carol, url, work)
        claim = await call(carol, "claim_best_task")  # its own work goes on
        assert claim["task"]["id"] == work["queued"]
    print(f"a worker's tool list is {manager_size - worker_size} characters shorter")
    assert names == WORKER_TOOLS - {"register_agent"}
    assert manager_size - worker_size > 2500


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_no_session_of_an_unpinned_server_is_a_manager(
    transport: str, url: str, work: dict[str, int]
) -> None:
    """With no agent, and with one it registered: no manager's tool, and register_agent
    cannot make the session's agent a manager (nor take a manager's id)."""
    with Fleet.open(url) as fleet:
        fleet.register("lead", manager=True)
    if transport == "http":
        with http_server(url) as endpoint:
            async with http_session(endpoint) as session:
                await unpinned_session_is_no_manager(session, url, work)
    else:
        async with memory_session(url) as session:
            await unpinned_session_is_no_manager(session, url, work)


async def unpinned_session_is_no_manager(
    session: ClientSession, url: str, work: dict[str, int]
) -> None:
    names, _ = await listed(session)
    assert names == WORKER_TOOLS
    await all_refused(session, url, work)
    with Fleet.open(url) as fleet:
        before = snapshot(fleet)
    text = await refused(session, "register_agent", agent="mallory", manager=True)
    assert text.startswith("not_a_manager:") and "\nhint: " in text, text
    text = await refused(session, "register_agent", agent="lead")
    assert text.startswith("not_a_manager:") and "lead" in text, text
    with Fleet.open(url) as fleet:
        assert snapshot(fleet) == before
    reg = await call(session, "register_agent", agent="mallory", manager=False)
    assert reg["agent"]["manager"] is False
    await all_refused(session, url, work)
    with Fleet.open(url) as fleet:
        assert fleet.agent("lead").manager and not fleet.agent("mallory").manager


async def test_a_manager_limits_a_group_and_workers_post_into_it(url: str) -> None:
    """A worker posts grouped work (add_task's group); the manager's set_group_limit caps
    it; a bad limit is a tool error that changes nothing; null lifts the limit."""
    async with memory_session(url, "--agent", "carol") as carol:
        for title in ("deploy web", "deploy api"):
            posted = await call(carol, "add_task", title=title, group="deploy", priority=1)
            with Fleet.open(url) as fleet:
                assert fleet.get(posted["task"]["id"]).group == "deploy"
        await call(carol, "add_task", title="lint", priority=9)
        async with memory_session(url, "--agent", "boss", "--manager") as boss:
            made = await call(boss, "set_group_limit", group="deploy", max=1)
            assert made["max"] == 1 and made["held"] == 0 and "at most 1" in made["message"]
            first = await call(carol, "claim_best_task")
            assert first["task"]["title"] == "deploy web"
            with Fleet.open(url) as fleet:
                before = snapshot(fleet)
            for bad in (0, -1):
                text = await refused(boss, "set_group_limit", group="deploy", max=bad)
                assert text.startswith("bad_input:") and "whole number" in text, text
            text = await refused(boss, "set_group_limit", group="de ploy", max=1)
            assert text.startswith("bad_input:") and "group name" in text, text
            with Fleet.open(url) as fleet:
                assert snapshot(fleet) == before
                fleet.register("dan")
                assert fleet.claim("dan").tasks[0].title == "lint"  # the deploy waits
            lifted = await call(boss, "set_group_limit", group="deploy", max=None)
            assert lifted["max"] is None and lifted["held"] == 1
