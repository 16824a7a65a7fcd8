"""Seats over MCP: an agent that went offline holds no seat under max_agents, so on a fleet
of four, six MCP servers in a row -- each pinned to an agent of its own, each ended cleanly
(its agent goes offline, keeping its identity) -- all join; and an offline agent whose seat
was taken meanwhile is refused ``fleet_full`` when it comes back, by the words it counts.
The servers are `shoal mcp`'s, served in this process and ended as stdio ends them
(``memory_session``)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mcp")

from shoal import AgentStatus, Fleet
from tests.faces.mcp_support import call, memory_session, refused

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
async def test_six_pinned_agents_in_a_row_all_find_a_seat(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    if store == "postgres":
        url = str(request.getfixturevalue("postgres_url"))
    with Fleet.init(url) as fleet:
        fleet.configure(max_agents=4)
        fleet.post_many([{"title": f"task {i}"} for i in range(6)])
    for i in range(1, 7):
        async with memory_session(url, "--agent", f"dev-{i}", "--skill", "python") as session:
            claim = await call(session, "claim_best_task")
            assert claim["claimed"], (i, claim)
            await call(session, "complete_task", task_id=claim["task"]["id"], result="ok")
    with Fleet.open(url) as fleet:
        agents = {a.id: a for a in fleet.agents()}
        assert {a.status for a in agents.values()} == {AgentStatus.OFFLINE}
        assert all(a.skills == ("python",) for a in agents.values())  # identities kept
        assert fleet.status().live == 0
        assert fleet.status().counts["done"] == 6


async def test_an_offline_agent_whose_seat_was_taken_is_told_so(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    with Fleet.init(url) as fleet:
        fleet.configure(max_agents=1)
    async with memory_session(url, "--agent", "ann") as ann:
        await call(ann, "heartbeat")
    with Fleet.open(url) as fleet:
        assert fleet.agent("ann").status is AgentStatus.OFFLINE
        fleet.register("bob")  # takes the seat ann left
    async with memory_session(url, "--agent", "ann") as ann:
        text = await refused(ann, "claim_best_task")
        assert text.startswith("fleet_full:") and "1 of 1 seats are taken" in text
        assert "agent 'ann' stays offline" in text
