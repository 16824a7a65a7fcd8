"""`shoal mcp --transport http`: one server process, many clients over streamable HTTP.

The clients share the server's one Fleet from the SDK's worker threads, so this is where
the server's threading shows: two agents racing through one server must still never get
the same task, each HTTP session keeps the agent it registered, and a waiting client is
woken by another client's new task.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from shoal import Fleet, TaskState
from tests.faces.mcp_support import call, http_server, http_session

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite://{tmp_path_factory.mktemp('mcp-http') / 'fleet.db'}"
    Fleet.init(url).close()
    return url


@pytest.fixture(scope="module")
def endpoint(url: str) -> Iterator[str]:
    with http_server(url) as found:
        yield found


async def test_tools_over_http(endpoint: str) -> None:
    async with http_session(endpoint) as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
    assert {"register_agent", "claim_best_task", "wait_for_task", "read_state"} <= names


async def test_two_sessions_race_through_one_server(url: str, endpoint: str) -> None:
    with Fleet.open(url) as fleet:
        posted = set(fleet.post_many({"title": f"http task {i}"} for i in range(100)))
    taken: dict[str, list[int]] = {}

    async def drain(agent: str) -> None:
        mine = taken.setdefault(agent, [])
        async with http_session(endpoint) as session:
            await call(session, "register_agent", agent=agent)
            claim = await call(session, "claim_best_task")  # the session's own agent
            while claim["claimed"]:
                assert claim["task"]["agent"] == agent
                mine.append(claim["task"]["id"])
                done = await call(
                    session, "complete_task", task_id=claim["task"]["id"], claim_next=True
                )
                claim = done["next"]
            assert claim["reason"] == "empty"

    async with anyio.create_task_group() as group:
        group.start_soon(drain, "h-ada")
        group.start_soon(drain, "h-bob")

    everything = taken["h-ada"] + taken["h-bob"]
    assert len(everything) == len(set(everything)), "a task was handed out twice"
    assert set(everything) == posted, "a task was left behind"
    print(f"http race: h-ada took {len(taken['h-ada'])}, h-bob took {len(taken['h-bob'])}")
    with Fleet.open(url) as fleet:
        for agent, ids in taken.items():
            for task in fleet.tasks(agent=agent, state=TaskState.DONE, limit=1000):
                assert task.id in ids


async def test_a_waiting_session_is_woken_by_another_sessions_task(url: str, endpoint: str) -> None:
    outcome: dict[str, Any] = {}
    async with http_session(endpoint) as waiter, http_session(endpoint) as poster:
        await call(waiter, "register_agent", agent="h-waiter", skills=["rare"])

        async def wait() -> None:
            outcome["claim"] = await call(waiter, "wait_for_task", timeout_seconds=30)
            outcome["returned"] = time.perf_counter()

        async with anyio.create_task_group() as group:
            group.start_soon(wait)
            with Fleet.open(url) as fleet:
                deadline = time.monotonic() + 20
                while fleet.agent("h-waiter").status.value != "idle":
                    assert time.monotonic() < deadline, "wait_for_task never looked for work"
                    await anyio.sleep(0.01)
            sent = time.perf_counter()
            added = await call(poster, "add_task", title="needs rare skill", skills=["rare"])
    latency = outcome["returned"] - sent
    assert outcome["claim"]["claimed"]
    assert outcome["claim"]["task"]["id"] == added["task"]["id"]
    print(f"http wait_for_task returned {latency * 1000:.0f} ms after add_task was sent")
    assert latency < 10, "the waiter was not woken by the new task (it timed out instead)"


async def test_a_wait_with_nothing_to_do_ends_at_its_timeout(endpoint: str) -> None:
    async with http_session(endpoint) as session:
        await call(session, "register_agent", agent="h-patient", skills=["nothing-needs-this"])
        began = time.perf_counter()
        claim = await call(session, "wait_for_task", timeout_seconds=2.5)
        took = time.perf_counter() - began
    assert not claim["claimed"] and claim["reason"] == "empty"
    assert claim["waited_seconds"] >= 2.5
    assert took < 10
