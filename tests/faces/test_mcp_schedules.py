"""Recurring tasks over MCP, through the SDK's own client: a manager's server makes a
schedule, lists it, pauses, resumes and cancels it; every session lists them; bad input is a
``bad_input`` tool error that changes nothing. (Who may: test_who_may_do_what.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mcp")

from shoal import Fleet, TaskState
from tests.faces.mcp_support import call, memory_session, refused
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


async def test_a_manager_makes_and_steers_a_schedule(url: str) -> None:
    async with memory_session(url, "--agent", "boss", "--manager") as boss:
        made = await call(boss, "add_schedule", title="check the sensors", every="30m", priority=2)
        assert (made["every"], made["state"], made["posted"]) == (1800, "active", 1)
        assert made["next_at"].endswith("Z")
        nightly = await call(
            boss, "add_schedule", title="backup", cron="0 3 * * *", tz="Europe/Paris"
        )
        assert (nightly["cron"], nightly["tz"], nightly["posted"]) == (
            "0 3 * * *",
            "Europe/Paris",
            0,
        )
        paused = await call(boss, "set_schedule_state", schedule_id=made["id"], state="paused")
        assert paused["state"] == "paused"
        active = await call(boss, "set_schedule_state", schedule_id=made["id"], state="active")
        assert active["state"] == "active"
        gone = await call(boss, "set_schedule_state", schedule_id=made["id"], state="cancelled")
        assert gone["state"] == "cancelled"
        listed = await call(boss, "list_schedules")
        assert [s["id"] for s in listed["schedules"]] == [made["id"], nightly["id"]]
    with Fleet.open(url) as fleet:
        (task,) = fleet.tasks()
        assert (task.title, task.priority) == ("check the sensors", 2)
        assert task.state is TaskState.PENDING


async def test_bad_schedules_are_refused_and_change_nothing(url: str) -> None:
    with Fleet.open(url) as fleet:
        kept = fleet.schedule("kept", every="1h")
        before = snapshot(fleet)
    async with memory_session(url, "--agent", "boss", "--manager") as boss:
        for arguments, says in (
            ({"every": "0"}, "every must be"),
            ({"every": "abc"}, "not a duration"),
            ({"cron": "0 3 * *"}, "five fields"),
            ({"cron": "0 3 * * *", "tz": "Mars/Olympus"}, "unknown time zone"),
            ({"every": "5m", "cron": "0 3 * * *"}, "not both"),
        ):
            text = await refused(boss, "add_schedule", title="sensor", **arguments)
            assert text.startswith("bad_input:") and says in text, text
        text = await refused(boss, "set_schedule_state", schedule_id=99, state="paused")
        assert "no schedule 99" in text, text
        await call(boss, "set_schedule_state", schedule_id=kept.id, state="cancelled")
        text = await refused(boss, "set_schedule_state", schedule_id=kept.id, state="active")
        assert "cancelled" in text, text
    with Fleet.open(url) as fleet:
        assert snapshot(fleet)["tasks"] == before["tasks"]
        assert [s.state.value for s in fleet.schedules()] == ["cancelled"]


async def test_every_session_reads_the_schedules(url: str) -> None:
    with Fleet.open(url) as fleet:
        fleet.schedule("sensor", every="5m")
    async with memory_session(url, "--agent", "carol") as carol:
        listed = await call(carol, "list_schedules")
        assert [s["title"] for s in listed["schedules"]] == ["sensor"]
