"""Editing tasks and labels over the HTTP API (issue 31, item 3): an admin edits any task,
an agent token only those its agent posted, a viewer none; a held task keeps its skills and
domain, and a refusal changes nothing."""

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
    posted = admin.post("/api/v1/tasks", json={"title": "parsr", "labels": ["b", "a"]})
    assert posted.status_code == 201 and posted.json()["labels"] == ["a", "b"]
    assert posted.json()["posted_by"] is None  # an admin's post is a person's
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


def test_an_agent_token_edits_what_its_agent_posted_and_nothing_else(
    web_fleet: Fleet, make_client: Callable[..., TestClient]
) -> None:
    ann = make_client(web_fleet.create_token("agent", agent="ann")[1])
    bob = make_client(web_fleet.create_token("agent", agent="bob")[1])
    # The body cannot name a poster: the token's agent is recorded, and no other.
    named = ann.post("/api/v1/tasks", json={"title": "x", "posted_by": "bob"})
    assert named.status_code == 400 and "posted_by" in named.text
    posted = ann.post("/api/v1/tasks", json={"title": "parsr"})
    assert posted.status_code == 201 and posted.json()["posted_by"] == "ann"
    task = posted.json()["id"]
    assert web_fleet.get(task).posted_by == "ann"
    before = snapshot(web_fleet)
    for attempt in ({"title": "bob's now"}, {"priority": 1}, {"labels": ["taken"]}):
        refused = bob.post(f"/api/v1/tasks/{task}/edit", json=attempt)
        assert refused.status_code == 403, refused.text
        error = refused.json()["error"]
        assert error["code"] == "forbidden" and "not posted by agent bob" in error["message"]
        assert "posted" in error["hint"]
    assert bob.post("/api/v1/tasks/999/edit", json={"title": "x"}).status_code == 404
    assert snapshot(web_fleet) == before
    edited = ann.post(f"/api/v1/tasks/{task}/edit", json={"title": "parser", "labels": ["a"]})
    assert edited.status_code == 200, edited.text
    assert (edited.json()["title"], edited.json()["posted_by"]) == ("parser", "ann")
    assert bob.get(f"/api/v1/tasks/{task}").json()["posted_by"] == "ann"
