"""The anti-idle scenarios, played by agents through `shoal mcp` tools: scale up when work
piles up, scale down when it runs out, and refuse a fifth agent when four are live.

The manager "boss" is a server the operator started for it (`--agent boss --manager`: no
session can make itself a manager); one other session plays the developers that come and
go, naming in each call the agent it acts for, as a spawner would (one session for all of
them keeps the suite quick; sessions fixed to one agent are tested in test_mcp). Both
servers are served in this process (``memory_session``): the subject is the tools. The
grace periods of the protocol are the agents' own waits, so they are not waited out here:
each step happens when the tools say it should.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp import ClientSession

from shoal import Fleet
from tests.faces.mcp_support import call, memory_session, refused

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    Fleet.init(url).close()
    return url


def manager(url: str) -> AbstractAsyncContextManager[ClientSession]:
    """The manager's own server, as the operator starts it."""
    return memory_session(url, "--agent", "boss", "--role", "manager", "--manager")


async def test_scaling_up_spawns_developers_until_the_work_is_covered(url: str) -> None:
    """1 manager and 10 tasks: overloaded, spawn; each new developer claims 3 tasks; the
    manager reassesses after each, until the fleet is balanced and says maintain."""
    with Fleet.open(url) as fleet:
        fleet.post_many({"title": f"implement part {i}"} for i in range(10))
    async with manager(url) as boss, memory_session(url) as spawner:
        verdicts = []
        developers = 0
        while True:
            verdict = await call(boss, "assess_workload")
            verdicts.append((verdict["workload"], verdict["recommendation"]))
            if verdict["recommendation"] != "spawn":
                break
            developers += 1
            dev = f"developer-{developers}"
            reg = await call(
                spawner, "register_agent", agent=dev, role="developer", max_concurrent=3
            )
            assert reg["message"].endswith(f"Active agents: {developers}/4")
            for _ in range(3):
                claim = await call(spawner, "claim_best_task", agent=dev)
                assert claim["claimed"], claim
        state = await call(boss, "read_state")
    assert verdicts[0] == ("overloaded", "spawn")
    assert verdicts[-1] == ("balanced", "maintain")
    assert developers == 3  # 10 tasks, 3 each: one left pending, below the spawn threshold
    assert state["status"]["counts"]["claimed"] == 9
    assert "BALANCED, recommendation maintain" in state["summary"]


async def test_scaling_down_developers_retire_when_their_work_runs_out(url: str) -> None:
    """1 manager and 3 developers, 2 tasks left: two developers finish, find nothing, go
    idle and terminate; one developer is left finishing the last task. The developers are
    the session's own (it registers them): a session may not drive agents someone else
    registered while the fleet hears from them."""
    with Fleet.open(url) as fleet:
        fleet.register("boss", role="manager", manager=True)
    async with manager(url) as boss, memory_session(url) as devs:
        for i in (1, 2, 3):
            await call(devs, "register_agent", agent=f"developer-{i}", role="developer")
        with Fleet.open(url) as fleet:
            last = fleet.post("last task", priority=9).id
            for i in (1, 2):
                fleet.post(f"task of developer-{i}", to=f"developer-{i}", priority=1)
        for i in (1, 2):
            mine = await call(devs, "claim_best_task", agent=f"developer-{i}")
            assert mine["source"] == "queue"
        third = await call(devs, "claim_best_task", agent="developer-3")
        assert third["task"]["id"] == last
        for i in (1, 2):
            dev = f"developer-{i}"
            (held,) = (await call(devs, "list_tasks", state="claimed", agent=dev))["tasks"]
            await call(devs, "complete_task", task_id=held["id"], agent=dev, result="done")
            empty = await call(devs, "claim_best_task", agent=dev)
            assert not empty["claimed"] and empty["reason"] == "empty"
            idle = await call(devs, "set_agent_status", status="idle", agent=dev)
            assert idle["status"] == "idle" and idle["idle_since"] is not None
            verdict = await call(boss, "assess_workload")  # no work waiting, someone idle
            assert (verdict["workload"], verdict["recommendation"]) == (
                "underutilized",
                "terminate_idle",
            )
            gone = await call(devs, "set_agent_status", status="terminated", agent=dev)
            assert gone["status"] == "terminated"
        state = await call(boss, "read_state")
        # The terminated developers cannot work any more.
        text = await refused(devs, "claim_best_task", agent="developer-1")
        assert "terminated" in text
    assert state["status"]["capacity"] == {"live": 1, "max_agents": 4}
    working = {a["id"]: a["status"] for a in state["status"]["agents"]}
    assert working["developer-3"] == "working" and working["boss"] != "terminated"
    assert "Agents: 1/4 live" in state["summary"]


async def test_a_fifth_agent_is_refused_until_one_terminates(url: str) -> None:
    """4 live developers (the manager does not count): a fifth registration is refused and
    changes nothing; once one developer terminates, the fifth gets its place: 4/4."""
    async with manager(url) as boss, memory_session(url) as spawner:
        for i in (1, 2, 3, 4):
            reg = await call(spawner, "register_agent", agent=f"developer-{i}", role="developer")
            assert reg["message"].endswith(f"Active agents: {i}/4")
        with Fleet.open(url) as fleet:
            before = [a.to_dict() for a in fleet.agents()]
        text = await refused(spawner, "register_agent", agent="developer-5", role="developer")
        assert "fleet_full" in text and "4 of 4" in text and "read_state" in text
        with Fleet.open(url) as fleet:
            assert [a.to_dict() for a in fleet.agents()] == before
        await call(spawner, "set_agent_status", status="terminated", agent="developer-1")
        reg = await call(spawner, "register_agent", agent="developer-5", role="developer")
        assert reg["created"]
        assert reg["message"] == "agent developer-5 registered as developer. Active agents: 4/4"
        verdict = await call(boss, "assess_workload")
        assert verdict["live_agents"] == 4 and verdict["max_agents"] == 4
