"""Recurring tasks on every store: a schedule posts its task at each tick, at most one
pending at a time, without back-filling; any claim or reap posts what is due, no daemon;
pause, resume and cancel; bad input changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from shoal import (
    BadInput,
    Fleet,
    InvalidTransition,
    ManualClock,
    ScheduleState,
    TaskState,
    UnknownSchedule,
)
from shoal.fleet._scheduleverbs import SCHEDULE_LOOK
from tests.helpers import kinds, one, snapshot

NOON = datetime(2026, 11, 27, 12, 0, tzinfo=UTC).timestamp()


@pytest.fixture
def noon(clock: ManualClock) -> ManualClock:
    clock.set(NOON)
    return clock


def posted_by(fleet: Fleet, schedule_id: int) -> list[int]:
    """The tasks a schedule posted, from the log."""
    return [
        e.task_id
        for e in fleet.events(limit=10_000)
        if e.kind == "posted" and e.data.get("schedule") == schedule_id and e.task_id
    ]


def test_every_posts_now_then_at_each_tick_when_the_last_is_done(
    fleet: Fleet, noon: ManualClock
) -> None:
    fleet.register("ada")
    sensor = fleet.schedule("sensor", every="30m", priority="high", skills=["probe"])
    assert sensor.state is ScheduleState.ACTIVE and sensor.every == 1800
    assert sensor.posted == 1 and sensor.next_at == NOON + 1800
    first = fleet.get(sensor.last_task or 0)
    assert (first.title, first.priority, first.skills) == ("sensor", 2, ("probe",))
    assert sensor.task == {"title": "sensor", "priority": 2, "skills": ["probe"]}
    fleet.register("bob", skills=["probe"])
    task, lease = one(fleet.claim("bob"))
    fleet.complete(lease)
    noon.advance(1800)
    task, lease = one(fleet.claim("bob"))  # the claim posted the tick's occurrence
    assert task.id != first.id and task.title == "sensor"
    assert posted_by(fleet, sensor.id) == [first.id, task.id]
    assert fleet.get_schedule(sensor.id).next_at == NOON + 3600


def test_one_occurrence_pending_at_most_and_no_back_fill(fleet: Fleet, noon: ManualClock) -> None:
    fleet.register("ada")
    sensor = fleet.schedule("sensor", every="5m")
    noon.advance(3 * 3600 + 60)  # nobody worked for three hours: 36 ticks passed
    assert fleet.post_due() == []
    now = fleet.get_schedule(sensor.id)
    assert now.posted == 1 and now.skipped == 1  # one look saw them all, posted none
    assert now.next_at == NOON + 3 * 3600 + 300  # the next one to come, in phase
    assert len(fleet.tasks(state="pending")) == 1
    _, lease = one(fleet.claim("ada"))
    fleet.complete(lease)
    noon.advance(300)
    assert len(fleet.post_due()) == 1
    assert fleet.get_schedule(sensor.id).posted == 2


def test_a_finished_occurrence_of_any_kind_lets_the_next_one_come(
    fleet: Fleet, noon: ManualClock
) -> None:
    sensor = fleet.schedule("sensor", every="1m", max_attempts=1)
    fleet.cancel(sensor.last_task or 0)
    noon.advance(60)
    assert len(fleet.post_due()) == 1


def test_cron_ticks_in_its_time_zone(fleet: Fleet, noon: ManualClock) -> None:
    nightly = fleet.schedule("backup", cron="0  3 * * *", tz="Europe/Paris")
    assert (nightly.cron, nightly.tz, nightly.posted) == ("0 3 * * *", "Europe/Paris", 0)
    paris_3am = datetime(2026, 11, 28, 2, 0, tzinfo=UTC).timestamp()  # CET is UTC+1
    assert nightly.next_at == paris_3am
    utc = fleet.schedule("report", cron="30 6 * * MON")
    assert utc.tz == "UTC"
    assert utc.next_at == datetime(2026, 11, 30, 6, 30, tzinfo=UTC).timestamp()
    noon.set(paris_3am - 1)
    assert fleet.post_due() == []
    noon.set(paris_3am)
    (posted,) = fleet.post_due()
    assert fleet.get(posted).title == "backup"
    assert fleet.get_schedule(nightly.id).next_at == paris_3am + 86400


def test_a_start_sets_the_first_tick(fleet: Fleet, noon: ManualClock) -> None:
    later = fleet.schedule("sweep", every="1h", start="2026-11-27T15:00Z")
    assert later.posted == 0 and later.next_at == NOON + 3 * 3600
    cron = fleet.schedule("standup", cron="0 9 * * *", start=NOON + 86400)
    assert cron.next_at == datetime(2026, 11, 29, 9, 0, tzinfo=UTC).timestamp()


def test_a_claim_anywhere_posts_what_fell_due_and_so_does_the_reap(
    open_fleet: Callable[..., Fleet], noon: ManualClock
) -> None:
    here, there = open_fleet(), open_fleet(1)
    there.register("ada")
    assert there.claim("ada").reason == "empty"  # it has looked: no schedule yet
    sensor = here.schedule("sensor", every="10m", start=NOON + 600)
    noon.advance(600)
    # Another handle sees the new schedule within SCHEDULE_LOOK of its clock.
    assert SCHEDULE_LOOK <= 600
    task, _ = one(there.claim("ada"))
    assert task.title == "sensor"
    here.cancel(task.id)
    noon.advance(600)
    report = here.reap()
    assert len(report.posted) == 1 and report.to_dict()["posted"] == list(report.posted)
    assert fleet_posted(here, sensor.id) == 2


def fleet_posted(fleet: Fleet, schedule_id: int) -> int:
    return fleet.get_schedule(schedule_id).posted


def test_pause_resume_and_cancel(fleet: Fleet, noon: ManualClock) -> None:
    sensor = fleet.schedule("sensor", every="10m")
    fleet.cancel(sensor.last_task or 0)
    paused = fleet.pause_schedule(sensor.id)
    assert paused.state is ScheduleState.PAUSED
    assert fleet.pause_schedule(sensor.id) == paused  # already so: nothing changes
    noon.advance(3600 + 60)
    assert fleet.post_due() == [] and fleet_posted(fleet, sensor.id) == 1
    resumed = fleet.resume_schedule(sensor.id)
    assert resumed.state is ScheduleState.ACTIVE
    assert resumed.next_at == NOON + 3600 + 600  # the next tick still to come
    cancelled = fleet.cancel_schedule(sensor.id)
    assert cancelled.state is ScheduleState.CANCELLED
    noon.advance(3600)
    assert fleet.post_due() == []
    with pytest.raises(InvalidTransition, match="cancelled"):
        fleet.resume_schedule(sensor.id)
    assert [s.id for s in fleet.schedules()] == [sensor.id]
    assert kinds(fleet)[-3:] == ["schedule.paused", "schedule.resumed", "schedule.cancelled"]
    with pytest.raises(UnknownSchedule):
        fleet.pause_schedule(99)
    with pytest.raises(UnknownSchedule):
        fleet.get_schedule(99)


def test_an_occurrence_that_cannot_be_posted_is_missed_and_claims_go_on(
    fleet: Fleet, noon: ManualClock
) -> None:
    fleet.register("ada")
    fleet.register("bob")
    routed = fleet.schedule("for bob", every="1m", to="bob")
    fleet.cancel(routed.last_task or 0)
    fleet.set_status("bob", "terminated")
    noon.advance(60)
    assert fleet.claim("ada").reason == "empty"
    missed = [e for e in fleet.events() if e.kind == "schedule.missed"]
    assert len(missed) == 1 and missed[0].data["schedule"] == routed.id
    assert fleet.get_schedule(routed.id).next_at == NOON + 120


BAD: list[tuple[dict[str, Any], str]] = [
    ({"every": 0}, "every must be from 1s"),
    ({"every": "abc"}, "not a duration"),
    ({"every": "-5m"}, "every"),
    ({"cron": "0 3 * *"}, "five fields"),
    ({"cron": "61 3 * * *"}, "not valid"),
    ({"cron": "0 0 30 2 *"}, "cron"),
    ({"cron": "0 3 * * *", "tz": "Mars/Olympus"}, "unknown time zone"),
    ({"cron": "0 3 * * *", "tz": "localtime"}, "unknown time zone"),  # the host's: not one
    ({"cron": "0 3 * * *", "tz": "x" * 300}, "unknown time zone"),
    ({"cron": "0 3 * * *", "tz": "../../etc/passwd"}, "unknown time zone"),
    ({"every": "5m", "cron": "0 3 * * *"}, "not both"),
    ({}, "give one of every and cron"),
    ({"every": "5m", "tz": "UTC"}, "tz goes with cron only"),
    ({"every": "5m", "key": "k"}, "takes no key"),
    ({"every": "5m", "after": [1]}, "takes no after"),
    ({"every": "5m", "priority": "urgent"}, "priority"),
    ({"every": "5m", "start": "tomorrow"}, "start"),
]


@pytest.mark.parametrize(("given", "says"), BAD, ids=[b[1] for b in BAD])
def test_bad_schedules_are_refused_and_change_nothing(
    fleet: Fleet, given: dict[str, Any], says: str
) -> None:
    fleet.schedule("kept", every="1h")
    before = snapshot(fleet), fleet.schedules()
    with pytest.raises(BadInput, match=says):
        fleet.schedule("sensor", **given)
    with pytest.raises(BadInput):
        fleet.schedule("", every="5m")
    assert (snapshot(fleet), fleet.schedules()) == before


def test_an_occurrence_is_a_task_like_any_other(fleet: Fleet, noon: ManualClock) -> None:
    sensor = fleet.schedule("sensor", every="1h", body="look", payload={"n": 1})
    task = fleet.get(sensor.last_task or 0)
    assert (task.body, task.payload, task.state) == ("look", {"n": 1}, TaskState.PENDING)
    assert fleet.cancel_schedule(sensor.id).state is ScheduleState.CANCELLED
    assert fleet.get(task.id).state is TaskState.PENDING  # what was posted stays


def test_a_claim_waiting_for_work_takes_the_occurrence_when_it_falls_due(
    fleet: Fleet, noon: ManualClock
) -> None:
    fleet.register("ada")
    fleet.schedule("sensor", every="10m", start=NOON + 60)
    claim = fleet.claim("ada", wait=120)
    task, _ = one(claim)
    assert task.title == "sensor" and noon.now() == NOON + 60
