"""The MCP tool ``explain`` through the SDK's client against the server ``shoal mcp`` sets
up, served in this process (``memory_session``): every reason of ``tests.why_cases``, a
pinned agent explaining itself, refusals."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from shoal import Fleet, ManualClock
from tests.faces.mcp_support import call, memory_session, refused
from tests.helpers import snapshot
from tests.why_cases import HOSTILE, build, build_group

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_explain_says_why_on_every_case(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    with Fleet.open(url, create=True, clock=ManualClock(time.time())) as fleet:
        cases = build(fleet, fleet.clock)  # type: ignore[arg-type]
    async with memory_session(url) as session:
        for name, task_id in cases.tasks.items():
            got = await call(session, "explain", task_id=task_id)
            assert [r["code"] for r in got["why"]["reasons"]] == cases.task_codes[name], name
        go = await call(session, "explain", task_id=cases.tasks["go"])
        assert HOSTILE in go["summary"] and go["why"]["title"] == HOSTILE
        for agent, expected in cases.agent_codes.items():
            got = await call(session, "explain", agent_id=agent)
            assert [r["code"] for r in got["why"]["reasons"]] == expected, agent
        iris = await call(session, "explain", agent_id="iris")
        assert (iris["why"]["next"], iris["why"]["step"]) == (cases.tasks["paper"], "pool")
        with Fleet.open(url) as fleet:
            before = snapshot(fleet)
            assert "unknown_task" in await refused(session, "explain", task_id=999)
            assert "unknown_agent" in await refused(session, "explain", agent_id="nobody")
            assert "bad_input" in await refused(session, "explain")  # no agent of its own
            assert snapshot(fleet) == before


async def test_a_pinned_agent_explains_itself(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    with Fleet.open(url, create=True, clock=ManualClock(time.time())) as fleet:
        build(fleet, fleet.clock)  # type: ignore[arg-type]
    async with memory_session(url, "--agent", "loom") as session:
        got = await call(session, "explain")  # the server registered loom anew, no skills
        assert got["why"]["agent"] == "loom" and "need research" in got["summary"]
        other = await call(session, "explain", agent_id="ada")  # a read: any agent
        assert [r["code"] for r in other["why"]["reasons"]] == ["capacity"]


async def test_explain_a_full_group(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    with Fleet.open(url, create=True, clock=ManualClock(time.time())) as fleet:
        case = build_group(fleet, fleet.clock)  # type: ignore[arg-type]
    async with memory_session(url) as session:
        got = await call(session, "explain", task_id=case.waiting)
        (reason,) = got["why"]["reasons"]
        assert reason["code"] == "group_full" and reason["tasks"] == [case.holder]
        assert reason["agents"] == [case.agent] and "group prod is full" in got["summary"]
        agent = await call(session, "explain", agent_id=case.agent)
        assert [r["code"] for r in agent["why"]["reasons"]] == ["group_full"]
