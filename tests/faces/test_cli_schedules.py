# ruff: noqa: F811 -- the tests take the CLI fixtures as parameters
"""Recurring tasks from the command line: ``shoal add TITLE --every/--cron``, and ``shoal
schedule list|pause|resume|cancel``, through the real script; bad input exits 2 and changes
nothing.

See cli_support.py for how these tests run the CLI."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from shoal import Fleet, ManualClock, TaskState
from tests.faces.cli_support import Shoal, fleet, shoal, url  # noqa: F401 (fixtures)
from tests.helpers import snapshot


def test_add_every_makes_a_schedule_and_posts_its_first_task(shoal: Shoal, fleet: Fleet) -> None:
    made = shoal("add", "check the sensors", "--every", "30m", "-p", "high", "-s", "probe")
    assert made.code == 0, made
    assert "schedule 1: check the sensors, every 30m; posted task 1; next in 30m" in made.text
    task = fleet.get(1)
    assert (task.title, task.priority, task.skills) == ("check the sensors", 2, ("probe",))
    listed = shoal("schedule", "list", "--json")
    assert listed.code == 0, listed
    (entry,) = listed.data
    assert entry["every"] == 1800 and entry["state"] == "active" and entry["last_task"] == 1
    assert entry["task"]["skills"] == ["probe"]
    table = shoal("schedule", "list")
    assert "every 30m" in table.text and "check the sensors" in table.text


def test_every_occurrence_carries_the_labels_and_group_given(shoal: Shoal, fleet: Fleet) -> None:
    made = shoal("add", "sweep", "--every", "1h", "--label", "ops", "--group", "sweeps")
    assert made.code == 0, made
    task = fleet.get(1)
    assert (task.labels, task.group) == (("ops",), "sweeps")


def test_add_cron_reads_its_time_zone(shoal: Shoal, fleet: Fleet) -> None:
    made = shoal("add", "backup", "--cron", "0 3 * * *", "--tz", "Europe/Paris", "--json")
    assert made.code == 0, made
    assert (made.data["cron"], made.data["tz"], made.data["posted"]) == (
        "0 3 * * *",
        "Europe/Paris",
        0,
    )
    next_at = datetime.fromisoformat(made.data["next_at"])
    assert next_at.astimezone(datetime.now().astimezone().tzinfo) > datetime.now(UTC)
    paris = next_at.astimezone(__import__("zoneinfo").ZoneInfo("Europe/Paris"))
    assert (paris.hour, paris.minute) == (3, 0)
    assert fleet.tasks() == []  # the first tick is still to come
    utc = shoal("add", "report", "--cron", "30 6 * * *", "--json")
    assert utc.data["tz"] == "UTC"


def test_a_claim_posts_the_occurrence_that_fell_due(shoal: Shoal, url: str) -> None:
    """No daemon: the `shoal claim` process itself posts what is due, then claims it."""
    with Fleet.open(url, clock=ManualClock(time.time() - 3600)) as past:
        past.register("ada")
        sensor = past.schedule("sensor", every="10m")
        past.cancel(sensor.last_task or 0)
    claimed = shoal("claim", "--agent", "ada", "--json")
    assert claimed.code == 0, claimed
    assert claimed.data["task"]["title"] == "sensor"
    again = shoal("schedule", "list", "--json").data[0]
    assert again["posted"] == 2 and again["last_task"] == claimed.data["task"]["id"]


def test_pause_resume_and_cancel(shoal: Shoal, fleet: Fleet) -> None:
    shoal("add", "sensor", "--every", "5m")
    paused = shoal("schedule", "pause", "1", "--json")
    assert paused.code == 0 and paused.data["state"] == "paused", paused
    resumed = shoal("schedule", "resume", "1")
    assert resumed.code == 0 and "schedule 1 resumed: sensor" in resumed.text
    cancelled = shoal("schedule", "cancel", "1", "--json")
    assert cancelled.code == 0 and cancelled.data["state"] == "cancelled"
    assert fleet.get(1).state is TaskState.PENDING  # what it posted stays
    before = snapshot(fleet), fleet.schedules()
    refused = shoal("schedule", "resume", "1")
    assert refused.code == 3 and "cancelled" in refused.text
    unknown = shoal("schedule", "pause", "7", "--json")
    assert unknown.code == 2 and unknown.data["error"]["code"] == "unknown_schedule"
    assert (snapshot(fleet), fleet.schedules()) == before


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--every", "0"], "--every must be from 1s"),
        (["--every", "abc"], "is not a duration"),
        (["--cron", "0 3 * *"], "not five fields"),
        (["--cron", "0 25 * * *"], "not valid"),
        (["--cron", "0 3 * * *", "--tz", "Mars/Olympus"], "unknown time zone"),
        (["--every", "5m", "--cron", "0 3 * * *"], "not both"),
        (["--tz", "UTC"], "give one of"),
        (["--every", "5m", "--tz", "UTC"], "tz goes with cron only"),
        (["--every", "5m", "--key", "k"], "takes no --key"),
        (["--every", "5m", "--after", "1"], "takes no --after"),
        (["--every", "5m", "--in", "1h", "--at", "2030-01-01T00:00Z"], "not both"),
        (["--every", "5m", "-p", "urgent"], "priority"),
    ],
)
def test_bad_schedules_exit_2_and_change_nothing(
    shoal: Shoal, fleet: Fleet, args: list[str], says: str
) -> None:
    fleet.post("kept")
    before = snapshot(fleet), fleet.schedules()
    result = shoal("add", "sensor", *args)
    assert result.code == 2, result
    assert says.lower() in result.text and "hint:" in result.text, result
    assert (snapshot(fleet), fleet.schedules()) == before


def test_a_title_is_shown_as_written_never_as_markup(shoal: Shoal) -> None:
    made = shoal("add", "[bold red]alert[/]", "--every", "1h")
    assert made.code == 0, made
    assert "[bold red]alert[/]" in made.out
    listed = shoal("schedule", "list")
    assert "[bold red]alert[/]" in listed.out
    assert shoal("schedule", "list", "--json").data[0]["title"] == "[bold red]alert[/]"


def test_the_monitor_posts_what_fell_due_and_says_so(shoal: Shoal, url: str) -> None:
    """`monitor` (and `supervise`, and `serve`'s reaper: the hub's reap) posts too."""
    with Fleet.open(url, clock=ManualClock(time.time() - 3600)) as past:
        sensor = past.schedule("sensor", every="10m")
        past.cancel(sensor.last_task or 0)
    result = shoal("monitor", "--once")
    assert result.code == 0, result
    assert "recurring tasks fell due: #2 posted" in result.text
    reaped = shoal("reap", "--json")
    assert reaped.code == 0 and reaped.data["posted"] == [], reaped  # one pending at most
