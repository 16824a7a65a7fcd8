"""Recurring tasks over HTTP: ``/api/v1/schedules`` through a real HTTP client on SQLite and
PostgreSQL, and ``RemoteFleet``'s schedule verbs against the app under uvicorn -- the same
values, errors and roles as the local fleet. (Every role on every face:
tests/faces/test_who_may_do_what.py.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from shoal import Fleet, InvalidTransition, ManualClock, UnknownSchedule
from shoal.remote.fleet import RemoteFleet
from tests.helpers import snapshot
from tests.web.remote_support import hub_thread, make_tokens


def _error(answer: Any, status: int, code: str) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    error: dict[str, Any] = answer.json()["error"]
    assert error["code"] == code and error["message"] and error["hint"], error
    return error


def test_an_admin_makes_lists_and_steers_schedules(
    client: TestClient, web_fleet: Fleet, clock: ManualClock
) -> None:
    made = client.post(
        "/api/v1/schedules", json={"title": "sensor", "every": "30m", "skills": ["probe"]}
    )
    assert made.status_code == 201, made.text
    sensor = made.json()
    assert (sensor["every"], sensor["posted"], sensor["task"]["skills"]) == (1800, 1, ["probe"])
    nightly = client.post(
        "/api/v1/schedules", json={"title": "backup", "cron": "0 3 * * *", "tz": "Asia/Tokyo"}
    ).json()
    assert (nightly["tz"], nightly["posted"]) == ("Asia/Tokyo", 0)
    listed = client.get("/api/v1/schedules").json()
    assert [s["id"] for s in listed] == [sensor["id"], nightly["id"]]
    assert client.get(f"/api/v1/schedules/{sensor['id']}").json() == listed[0]
    for verb, state in (("pause", "paused"), ("resume", "active"), ("cancel", "cancelled")):
        answer = client.post(f"/api/v1/schedules/{sensor['id']}/{verb}")
        assert answer.status_code == 200 and answer.json()["state"] == state, answer.text
    _error(client.post(f"/api/v1/schedules/{sensor['id']}/resume"), 409, "invalid_transition")
    _error(client.get("/api/v1/schedules/99"), 404, "unknown_schedule")
    _error(client.post("/api/v1/schedules/99/pause"), 404, "unknown_schedule")


def test_a_schedule_s_occurrences_carry_the_labels_and_group_given(
    client: TestClient, web_fleet: Fleet
) -> None:
    made = client.post(
        "/api/v1/schedules",
        json={"title": "sweep", "every": "1h", "labels": ["ops", "nightly"], "group": "sweeps"},
    )
    assert made.status_code == 201, made.text
    template = made.json()["task"]
    assert (sorted(template["labels"]), template["group"]) == (["nightly", "ops"], "sweeps")
    (task,) = web_fleet.tasks()
    assert (sorted(task.labels), task.group) == (["nightly", "ops"], "sweeps")


@pytest.mark.parametrize(
    "body",
    [
        {"title": "x", "every": 0},
        {"title": "x", "every": "abc"},
        {"title": "x", "cron": "0 3 * *"},
        {"title": "x", "cron": "0 3 * * *", "tz": "Nowhere/Land"},
        {"title": "x", "every": "5m", "cron": "0 3 * * *"},
        {"title": "x"},
        {"title": "x", "every": "5m", "key": "k"},
    ],
)
def test_bad_schedules_are_400_and_change_nothing(
    client: TestClient, web_fleet: Fleet, body: dict[str, Any]
) -> None:
    before = snapshot(web_fleet), web_fleet.schedules()
    answer = client.post("/api/v1/schedules", json=body)
    assert answer.status_code == 400, answer.text
    assert (snapshot(web_fleet), web_fleet.schedules()) == before


def test_only_an_admin_makes_or_steers_one(
    make_client: Callable[..., TestClient], web_fleet: Fleet
) -> None:
    sensor = web_fleet.schedule("sensor", every="1h")
    viewer = make_client(web_fleet.create_token("viewer")[1])
    agent = make_client(web_fleet.create_token("agent", agent="ada")[1])
    before = snapshot(web_fleet), web_fleet.schedules()
    for who in (viewer, agent):
        _error(who.post("/api/v1/schedules", json={"title": "x", "every": "1m"}), 403, "forbidden")
        _error(who.post(f"/api/v1/schedules/{sensor.id}/cancel"), 403, "forbidden")
        assert who.get("/api/v1/schedules").status_code == 200
    assert (snapshot(web_fleet), web_fleet.schedules()) == before


def test_a_remote_fleet_has_the_schedule_verbs(store_url: str) -> None:
    with Fleet.open(store_url) as local:
        tokens, _ = make_tokens(local)
        with hub_thread(local) as url, RemoteFleet.open(url, token=tokens.admin) as remote:
            made = remote.schedule(
                "sensor",
                every="10m",
                skills=("probe",),
                priority="high",
                labels=("ops",),
                group="g",
            )
            assert made.to_dict() == local.get_schedule(made.id).to_dict()  # to the ms
            assert (made.task["labels"], made.task["group"]) == (["ops"], "g")
            assert [s.to_dict() for s in remote.schedules()] == [
                s.to_dict() for s in local.schedules()
            ]
            assert remote.pause_schedule(made.id).state.value == "paused"
            assert remote.resume_schedule(made.id).state.value == "active"
            assert remote.cancel_schedule(made.id).state.value == "cancelled"
            with pytest.raises(InvalidTransition):
                remote.resume_schedule(made.id)
            with pytest.raises(UnknownSchedule):
                remote.get_schedule(99)
            assert remote.reap().posted == ()
