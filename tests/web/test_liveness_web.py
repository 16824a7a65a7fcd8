"""Liveness on the dashboard, the API and /metrics, with no monitor and before any reaper
ran: dead agents offline, their leases expired rather than running, a pause over at its
end; and a pause an agent cannot shed by leaving and joining again (docs/ARCHITECTURE.md,
"Liveness and seats"). Through a real HTTP client, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from shoal import Fleet, ManualClock
from tests.helpers import post_many, snapshot
from tests.web.dash_support import page


def died(fleet: Fleet, clock: ManualClock) -> set[int]:
    """ann and bob claim a task each, then die; 14 minutes pass (10-minute leases)."""
    fleet.register("ann")
    fleet.register("bob")
    post_many(fleet, 3)
    held = {fleet.claim(name).tasks[0].id for name in ("ann", "bob")}
    clock.advance(14 * 60)
    return held


def test_the_fleet_page_shows_the_dead_offline_and_their_leases_expired(
    web_fleet: Fleet, clock: ManualClock, client: TestClient
) -> None:
    held = died(web_fleet, clock)
    before = snapshot(web_fleet)
    doc = page(client.get("/lanes").text)
    lanes = {s.attrs["data-lane"]: s for s in doc.find_all("section", class_="lane")}
    for name in ("ann", "bob"):
        assert lanes[name].find("span", class_="status").text.strip() == "offline"
        assert not lanes[name].find_all(data_held=True)  # nothing running
        (expired,) = lanes[name].find_all(data_expired=True)
        assert int(expired.attrs["data-task"]) in held
        assert "lease expired 4m ago" in expired.text
    health = page(client.get("/health").text)
    assert {int(li.attrs["data-task"]) for li in health.find_all("li", data_task=True)} >= held
    status = client.get("/api/v1/status").json()
    assert {a["status"] for a in status["agents"]} == {"offline"}
    assert {e["id"] for e in status["expired"]} == held
    assert status["counts"].get("claimed", 0) == 0
    agents = client.get("/api/v1/agents").json()
    assert {a["status"] for a in agents} == {"offline"}
    metrics = client.get("/metrics").text
    assert 'shoal_agents{status="offline"} 2.0' in metrics
    assert 'shoal_tasks{state="claimed"} 0.0' in metrics
    assert "shoal_leases 0.0" in metrics and "shoal_tasks_lease_expired 2.0" in metrics
    assert "shoal_agents_live 0.0" in metrics
    assert snapshot(web_fleet) == before  # reads write nothing


def test_a_pause_is_its_own_status_and_over_at_its_end_on_every_page(
    web_fleet: Fleet, clock: ManualClock, client: TestClient
) -> None:
    web_fleet.configure(heartbeat_timeout=3600)  # bob is alive throughout
    web_fleet.register("bob")
    web_fleet.pause("bob", for_="10m")
    lane = page(client.get("/lanes").text).find("section", data_lane="bob")
    assert lane.find("span", class_="status").text.strip() == "paused"
    assert lane.find("button", data_action="resume")
    assert 'shoal_agents{status="paused"} 1.0' in client.get("/metrics").text
    assert "bob" in client.get("/health").text
    clock.advance(600)  # the pause ends now; nobody reaps
    lane = page(client.get("/lanes").text).find("section", data_lane="bob")
    assert lane.find("span", class_="status").text.strip() == "waiting"
    assert lane.find("button", data_action="pause")  # offered again, not resume
    metrics = client.get("/metrics").text
    assert 'shoal_agents{status="paused"} 0.0' in metrics
    health = page(client.get("/health").text)
    assert not health.find_all("li", data_agent="bob")
    assert client.get("/api/v1/agents/bob").json()["paused_until"] is None


def test_an_agent_token_cannot_shed_its_pause_by_terminating_and_registering(
    web_fleet: Fleet, make_client: Callable[..., TestClient]
) -> None:
    admin = make_client(web_fleet.create_token("admin")[1])
    ann = make_client(web_fleet.create_token("agent", agent="ann")[1])
    assert ann.post("/api/v1/agents", json={"id": "ann"}).status_code == 200
    web_fleet.post("work")
    paused = admin.post("/api/v1/agents/ann/pause", json={"for": "2h"}).json()
    until = paused["paused_until"]
    assert until is not None and paused["status"] == "paused"
    gone = ann.post("/api/v1/agents/ann/status", json={"status": "terminated"})
    assert gone.status_code == 200 and gone.json()["status"] == "terminated"
    again = ann.post("/api/v1/agents", json={"id": "ann"})
    assert again.status_code == 200
    agent = again.json()["agent"]
    assert (agent["status"], agent["paused_until"]) == ("paused", until)
    claim = ann.post("/api/v1/agents/ann/claim", json={"n": 1}).json()
    assert claim["claimed"] == [] and claim["reason"] == "paused"
    assert admin.post("/api/v1/agents/ann/resume").status_code == 200
    assert ann.post("/api/v1/agents/ann/claim", json={"n": 1}).json()["claimed"]
