"""The JSON API (/api/v1) through a real HTTP client, on SQLite and PostgreSQL: every verb,
the error codes and their statuses, and who may call what."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from shoal import Fleet, ManualClock

JSON = {"content-type": "application/json"}


def _claim(client: TestClient, agent: str, **body: Any) -> dict[str, Any]:
    answer = client.post(f"/api/v1/agents/{agent}/claim", json=body or None)
    assert answer.status_code == 200, answer.text
    data: dict[str, Any] = answer.json()
    return data


def _error(answer: Any, status: int, code: str) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    error: dict[str, Any] = answer.json()["error"]
    assert error["code"] == code, error
    assert error["message"]
    return error


def test_a_task_goes_from_post_to_done_through_the_api(client: TestClient) -> None:
    posted = client.post("/api/v1/tasks", json={"title": "parse logs", "priority": "high"})
    assert posted.status_code == 201, posted.text
    task_id = posted.json()["id"]
    assert posted.json()["priority"] == 2
    reg = client.post("/api/v1/agents", json={"id": "ann", "skills": ["py"]})
    assert reg.status_code == 200, reg.text
    assert reg.json()["agent"]["id"] == "ann"

    claimed = _claim(client, "ann")
    (grant,) = claimed["claimed"]
    assert grant["task"]["id"] == task_id
    assert grant["source"] == "pool"
    token = grant["lease"]["token"]

    beat = client.post("/api/v1/agents/ann/heartbeat")
    assert beat.status_code == 200
    assert [r["task_id"] for r in beat.json()["renewed"]] == [task_id]

    done = client.post(f"/api/v1/tasks/{task_id}/complete", json={"token": token, "result": 42})
    assert done.status_code == 200, done.text
    assert done.json()["task"]["state"] == "done"
    shown = client.get(f"/api/v1/tasks/{task_id}").json()
    assert shown["result"] == 42
    kinds = [e["kind"] for e in shown["events"]]
    assert kinds[0] == "posted" and "claimed" in kinds and kinds[-1] == "completed"


def test_an_empty_claim_says_why(client: TestClient) -> None:
    client.post("/api/v1/agents", json={"id": "ann"})
    claimed = _claim(client, "ann")
    assert claimed["claimed"] == [] and claimed["reason"] == "empty"


def test_fail_release_retry_and_cancel(client: TestClient) -> None:
    client.post("/api/v1/agents", json={"id": "ann"})
    first = client.post("/api/v1/tasks", json={"title": "flaky", "max_attempts": 1}).json()["id"]
    token = _claim(client, "ann")["claimed"][0]["lease"]["token"]
    failed = client.post(f"/api/v1/tasks/{first}/fail", json={"token": token, "error": "boom"})
    assert failed.json()["state"] == "dead" and failed.json()["error"] == "boom"
    assert client.post(f"/api/v1/tasks/{first}/retry").json()["state"] == "pending"

    token = _claim(client, "ann")["claimed"][0]["lease"]["token"]
    released = client.post(f"/api/v1/tasks/{first}/release", json={"token": token})
    assert released.json()["state"] == "pending"
    raised = client.post(f"/api/v1/tasks/{first}/priority", json={"priority": "high"})
    assert raised.status_code == 200 and raised.json()["priority"] == 2
    _error(
        client.post(f"/api/v1/tasks/{first}/priority", json={"priority": 0}),
        400,
        "invalid_priority",
    )
    assert client.post(f"/api/v1/tasks/{first}/cancel").json()["state"] == "cancelled"
    # Cancelling twice: the fleet's state forbids it.
    _error(client.post(f"/api/v1/tasks/{first}/cancel"), 409, "invalid_transition")


def test_listings_filters_and_the_event_cursor(client: TestClient) -> None:
    for n in range(3):
        client.post("/api/v1/tasks", json={"title": f"t{n}"})
    client.post("/api/v1/agents", json={"id": "ann"})
    _claim(client, "ann")
    assert [t["title"] for t in client.get("/api/v1/tasks").json()] == ["t2", "t1", "t0"]
    assert len(client.get("/api/v1/tasks", params={"state": "claimed"}).json()) == 1
    assert len(client.get("/api/v1/tasks", params={"limit": 2}).json()) == 2
    assert [t["title"] for t in client.get("/api/v1/ready").json()] == ["t1", "t2"]
    assert [a["id"] for a in client.get("/api/v1/agents").json()] == ["ann"]
    assert client.get("/api/v1/agents/ann").json()["status"] == "working"
    status = client.get("/api/v1/status").json()
    assert status["counts"]["pending"] == 2 and status["counts"]["claimed"] == 1

    page = client.get("/api/v1/events", params={"limit": 2}).json()
    assert len(page["events"]) == 2 and page["cursor"] == page["events"][-1]["id"]
    rest = client.get("/api/v1/events", params={"since": page["cursor"]}).json()
    assert rest["events"][0]["id"] == page["cursor"] + 1
    again = client.get("/api/v1/events", params={"since": rest["cursor"]}).json()
    assert again == {"events": [], "cursor": rest["cursor"]}
    one = client.get("/api/v1/events", params={"task": 1}).json()["events"]
    assert {e["task_id"] for e in one} == {1}


def test_settings_assess_rebalance_reap_and_health(client: TestClient) -> None:
    assert client.get("/api/v1/settings").json()["max_agents"] == 4
    changed = client.post("/api/v1/settings", json={"max_agents": 9})
    assert changed.status_code == 200 and changed.json()["max_agents"] == 9
    assert client.get("/api/v1/settings").json()["max_agents"] == 9
    _error(client.post("/api/v1/settings", json={"max_agents": "many"}), 400, "invalid_setting")
    _error(client.post("/api/v1/settings", json={"no_such": 1}), 400, "invalid_setting")
    assert client.get("/api/v1/settings").json()["max_agents"] == 9
    assert "recommendation" in client.post("/api/v1/assess").json()
    assert client.post("/api/v1/rebalance", json={"dry_run": True}).json() == {"moves": []}
    assert client.post("/api/v1/reap").status_code == 200
    assert client.get("/api/v1/health").json()["ok"] is True


def test_an_idempotency_key_posts_once(client: TestClient) -> None:
    first = client.post("/api/v1/tasks", json={"title": "once"}, headers={"Idempotency-Key": "k1"})
    again = client.post("/api/v1/tasks", json={"title": "once"}, headers={"Idempotency-Key": "k1"})
    assert first.status_code == 201 and again.status_code == 200
    assert first.json()["id"] == again.json()["id"]
    by_field = client.post("/api/v1/tasks", json={"title": "once", "key": "k1"})
    assert by_field.status_code == 200 and by_field.json()["id"] == first.json()["id"]
    assert len(client.get("/api/v1/tasks").json()) == 1


def test_errors_have_the_clis_codes_and_statuses(client: TestClient) -> None:
    _error(client.get("/api/v1/tasks/999"), 404, "unknown_task")
    _error(client.get("/api/v1/agents/nobody"), 404, "unknown_agent")
    _error(
        client.post("/api/v1/tasks", json={"title": "x", "priority": "soon"}),
        400,
        "invalid_priority",
    )
    error = _error(client.post("/api/v1/tasks", json={"title": "a\x00b"}), 400, "bad_input")
    assert "NUL" in error["message"]
    _error(client.post("/api/v1/tasks", json={"title": "x", "colour": 1}), 400, "bad_input")
    _error(client.post("/api/v1/tasks", content=b"{not json", headers=JSON), 400, "bad_input")
    _error(client.get("/api/v1/tasks", params={"state": "sleeping"}), 400, "bad_input")
    _error(client.get("/api/v1/tasks/0"), 400, "bad_input")
    _error(client.post("/api/v1/agents", json={"id": "no spaces"}), 400, "bad_input")

    client.post("/api/v1/agents", json={"id": "ann"})
    task_id = client.post("/api/v1/tasks", json={"title": "x"}).json()["id"]
    token = _claim(client, "ann")["claimed"][0]["lease"]["token"]
    stale = client.post(f"/api/v1/tasks/{task_id}/complete", json={"token": "0" * 16})
    _error(stale, 409, "lease_lost")
    assert client.get(f"/api/v1/tasks/{task_id}").json()["state"] == "claimed"
    assert client.post(f"/api/v1/tasks/{task_id}/complete", json={"token": token}).is_success

    client.post("/api/v1/settings", json={"max_agents": 1})
    _error(client.post("/api/v1/agents", json={"id": "bob"}), 409, "fleet_full")


def test_a_long_poll_claim_returns_when_work_arrives(
    make_client: Callable[..., TestClient], web_fleet: Fleet, clock: ManualClock
) -> None:
    import threading

    client = make_client()
    client.post("/api/v1/agents", json={"id": "ann"})
    answers: list[dict[str, Any]] = []
    waiting = threading.Thread(
        target=lambda: answers.append(_claim(client, "ann", wait=30)), daemon=True
    )
    waiting.start()
    web_fleet.post("arrives later")
    waiting.join(timeout=20)
    assert not waiting.is_alive(), "the long poll did not return when work came"
    assert answers[0]["claimed"][0]["task"]["title"] == "arrives later"


def test_a_hostile_body_is_refused_in_the_error_shape(client: TestClient) -> None:
    deep = '{"title": "x", "payload": ' + "[" * 100_000 + "]" * 100_000 + "}"
    _error(client.post("/api/v1/tasks", content=deep, headers=JSON), 400, "bad_input")
    nested = '{"title": "x", "payload": ' + "[" * 900 + "]" * 900 + "}"
    _error(client.post("/api/v1/tasks", content=nested, headers=JSON), 400, "bad_input")
    huge = client.post("/api/v1/tasks", json={"title": "x", "payload": "a" * 9_000_000})
    _error(huge, 413, "too_large")
    _error(client.get("/api/v1/no-such-route"), 404, "not_found")
    _error(client.delete("/api/v1/tasks"), 405, "method_not_allowed")
    assert client.get("/api/v1/tasks").json() == []


def test_an_admin_pauses_and_resumes_an_agent(client: TestClient) -> None:
    client.post("/api/v1/agents", json={"id": "ann"})
    paused = client.post("/api/v1/agents/ann/pause", json={"for": "2h"})
    assert paused.status_code == 200 and paused.json()["paused_until"]
    client.post("/api/v1/tasks", json={"title": "x"})
    assert _claim(client, "ann")["reason"] == "paused"
    _error(client.post("/api/v1/agents/ann/pause", json={"for": "soon"}), 400, "bad_input")
    assert client.post("/api/v1/agents/ann/resume").json()["paused_until"] is None
    assert _claim(client, "ann")["claimed"][0]["task"]["title"] == "x"
