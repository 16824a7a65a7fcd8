"""Editing tasks and labels over the HTTP API (issue 31, item 3): an admin edits, an agent
token or a viewer may not, a held task keeps its skills and domain, and a refusal changes
nothing."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from shoal import Fleet
from tests.helpers import snapshot


def test_an_admin_edits_a_task_and_others_may_not(
    web_fleet: Fleet, make_client: Callable[..., TestClient]
) -> None:
    admin = make_client(web_fleet.create_token("admin", name="ops")[1])
    ann = make_client(web_fleet.create_token("agent", agent="ann")[1])
    viewer = make_client(web_fleet.create_token("viewer")[1])
    posted = ann.post("/api/v1/tasks", json={"title": "parsr", "labels": ["b", "a"]})
    assert posted.status_code == 201 and posted.json()["labels"] == ["a", "b"]
    task = posted.json()["id"]
    before = snapshot(web_fleet)
    for who, code in ((ann, "forbidden"), (viewer, "forbidden")):
        answer = who.post(f"/api/v1/tasks/{task}/edit", json={"title": "mine now"})
        assert answer.status_code == 403 and answer.json()["error"]["code"] == code
    assert snapshot(web_fleet) == before

    edited = admin.post(
        f"/api/v1/tasks/{task}/edit",
        json={"title": "parser", "labels": ["c"], "domain": "web", "expected_duration": "5m"},
    )
    assert edited.status_code == 200, edited.text
    body = edited.json()
    assert (body["title"], body["labels"], body["domain"]) == ("parser", ["c"], "web")
    assert body["expected_duration"] == 300.0
    cleared = admin.post(f"/api/v1/tasks/{task}/edit", json={"domain": None}).json()
    assert cleared["domain"] is None and cleared["title"] == "parser"
    listed = viewer.get("/api/v1/tasks", params={"label": "c"}).json()
    assert [t["id"] for t in listed] == [task]
    assert viewer.get("/api/v1/tasks", params={"label": "a"}).json() == []


def test_an_edit_the_fleet_refuses_changes_nothing(
    web_fleet: Fleet, make_client: Callable[..., TestClient]
) -> None:
    admin = make_client(web_fleet.create_token("admin", name="ops")[1])
    task = web_fleet.post("held", skills=["py"]).id
    web_fleet.register("ann", skills=["py"])
    web_fleet.claim("ann")
    before = snapshot(web_fleet)
    held = admin.post(f"/api/v1/tasks/{task}/edit", json={"skills": ["go"]})
    assert held.status_code == 409, held.text
    assert held.json()["error"]["code"] == "invalid_transition"
    assert "held by ann" in held.json()["error"]["message"]
    for bad in ({}, {"state": "done"}, {"priority": "soonish"}, {"labels": [""]}):
        answer = admin.post(f"/api/v1/tasks/{task}/edit", json=bad)
        assert answer.status_code in (400, 422), (bad, answer.text)
    assert snapshot(web_fleet) == before
