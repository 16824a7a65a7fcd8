"""Who may use the API: tokens by role, an agent token only as its agent, Host and Origin,
throttled failures, and no lease token in any listing."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from shoal import Fleet
from shoal.faces.exposure import Exposure, allowed_hosts
from shoal.faces.web import guard
from tests.helpers import snapshot


def _tokens(fleet: Fleet) -> dict[str, str]:
    return {
        "viewer": fleet.create_token("viewer")[1],
        "ann": fleet.create_token("agent", agent="ann")[1],
        "bob": fleet.create_token("agent", agent="bob")[1],
        "admin": fleet.create_token("admin", name="ops")[1],
    }


def test_a_fleet_with_tokens_needs_one_on_every_route(
    web_fleet: Fleet, make_client: Callable[..., TestClient]
) -> None:
    _tokens(web_fleet)
    anyone = make_client("")
    for path in ("/api/v1/status", "/api/v1/tasks", "/api/v1/agents", "/api/v1/events"):
        answer = anyone.get(path)
        assert answer.status_code == 401, path
        assert answer.json()["error"]["code"] == "unauthorized"
        assert answer.headers["www-authenticate"] == "Bearer"
    assert anyone.post("/api/v1/tasks", json={"title": "x"}).status_code == 401
    assert web_fleet.tasks() == []
    assert anyone.get("/api/v1/health").status_code == 200  # liveness needs no token


def test_each_role_does_what_it_may_and_nothing_more(
    web_fleet: Fleet, make_client: Callable[..., TestClient]
) -> None:
    tokens = _tokens(web_fleet)
    viewer, ann, admin = (make_client(tokens[k]) for k in ("viewer", "ann", "admin"))
    web_fleet.post("first")

    assert viewer.get("/api/v1/status").status_code == 200
    for path, body in [
        ("/api/v1/tasks", {"title": "x"}),
        ("/api/v1/agents", {"id": "ann"}),
        ("/api/v1/tasks/1/cancel", None),
        ("/api/v1/settings", {"max_agents": 2}),
    ]:
        answer = viewer.post(path, json=body)
        assert answer.status_code == 403, path
        assert answer.json()["error"]["code"] == "forbidden"

    # An agent token registers and drives its own agent only.
    assert ann.post("/api/v1/agents", json={"id": "ann"}).status_code == 200
    foreign = ann.post("/api/v1/agents", json={"id": "bob"})
    assert foreign.status_code == 403 and foreign.json()["error"]["code"] == "foreign_agent"
    assert ann.post("/api/v1/agents/bob/claim").status_code == 403
    assert ann.post("/api/v1/tasks", json={"title": "a subtask"}).status_code == 201
    for path in ("/api/v1/tasks/1/cancel", "/api/v1/tasks/1/retry", "/api/v1/reap"):
        assert ann.post(path).status_code == 403, path
    assert ann.post("/api/v1/settings", json={"max_agents": 2}).status_code == 403
    assert web_fleet.settings().max_agents == 4

    grant = ann.post("/api/v1/agents/ann/claim").json()["claimed"][0]
    task_id, token = grant["task"]["id"], grant["lease"]["token"]
    # bob's token, even knowing ann's lease token, cannot settle ann's lease.
    bob = make_client(tokens["bob"])
    refused = bob.post(f"/api/v1/tasks/{task_id}/complete", json={"token": token})
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "lease_lost"
    assert bob.get("/api/v1/agents/ann/leases").status_code == 403
    assert web_fleet.get(task_id).state == "claimed"
    assert [lease["token"] for lease in ann.get("/api/v1/agents/ann/leases").json()] == [token]
    assert ann.post(f"/api/v1/tasks/{task_id}/complete", json={"token": token}).is_success

    # An admin acts as anyone, and does the people's actions.
    assert admin.post("/api/v1/agents", json={"id": "bob"}).status_code == 200
    assert admin.post("/api/v1/settings", json={"max_agents": 6}).json()["max_agents"] == 6
    assert admin.post("/api/v1/tasks/2/cancel").json()["state"] == "cancelled"


def test_no_listing_shows_a_lease_token(client: TestClient, web_fleet: Fleet) -> None:
    web_fleet.post("secret work")
    client.post("/api/v1/agents", json={"id": "ann"})
    token = client.post("/api/v1/agents/ann/claim").json()["claimed"][0]["lease"]["token"]
    for path in (
        "/api/v1/status",
        "/api/v1/tasks",
        "/api/v1/tasks/1",
        "/api/v1/agents",
        "/api/v1/agents/ann",
        "/api/v1/events",
        "/api/v1/ready",
    ):
        assert token not in client.get(path).text, path
    assert token not in client.post("/api/v1/agents/ann/heartbeat").text


def test_a_wrong_token_is_slowed_then_throttled(
    web_fleet: Fleet, make_client: Callable[..., TestClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    _tokens(web_fleet)
    monkeypatch.setattr(guard, "WRONG_TOKEN_DELAY", 0.0)
    wrong = make_client("shoal_00000000_" + "x" * 32)
    for _ in range(guard.MAX_FAILURES):
        assert wrong.get("/api/v1/status").status_code == 401
    throttled = wrong.get("/api/v1/status")
    assert throttled.status_code == 429
    assert throttled.json()["error"]["code"] == "too_many_failures"
    assert int(throttled.headers["retry-after"]) > 0
    assert "x" * 32 not in throttled.text


def test_a_revoked_token_stops_opening_the_fleet(
    web_fleet: Fleet, make_client: Callable[..., TestClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(guard, "CACHE_SECONDS", 0.0)
    credential, secret = web_fleet.create_token("viewer")
    reader = make_client(secret)
    assert reader.get("/api/v1/status").status_code == 200
    web_fleet.revoke_token(credential.id)
    assert reader.get("/api/v1/status").status_code == 401


def test_the_first_token_closes_an_open_fleet(
    web_fleet: Fleet, make_client: Callable[..., TestClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(guard, "CACHE_SECONDS", 0.0)
    anyone = make_client()
    assert anyone.get("/api/v1/status").status_code == 200
    web_fleet.create_token("admin")
    assert anyone.get("/api/v1/status").status_code == 401


def test_off_loopback_even_a_fleet_with_no_token_is_closed(
    web_fleet: Fleet, make_client: Callable[..., TestClient]
) -> None:
    lan = Exposure("0.0.0.0", 8765, None, allowed_hosts("0.0.0.0", ("fleet.lan",)))
    client = make_client(exposure=lan)
    client.base_url = "http://fleet.lan:8765"  # type: ignore[assignment]
    assert client.get("/api/v1/status").status_code == 401


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Host": "evil.example.com"}, 421),
        ({"Host": "127.0.0.1.evil.example.com:8765"}, 421),
        ({"Origin": "http://evil.example.com"}, 403),
        ({"Origin": "http://localhost:8765"}, 200),
        ({"Origin": "http://localhost:9999"}, 403),  # another port: another site
        ({"Host": "localhost:8765"}, 200),
    ],
)
def test_host_and_origin_are_checked(
    client: TestClient, headers: dict[str, str], status: int
) -> None:
    assert client.get("/api/v1/status", headers=headers).status_code == status
    answer = client.post("/api/v1/tasks", json={"title": "x"}, headers=headers)
    assert answer.status_code == (201 if status == 200 else status)


def test_a_token_made_by_the_fleet_is_never_stored_in_the_clear(web_fleet: Fleet) -> None:
    credential, secret = web_fleet.create_token("admin", name="ops")
    assert secret.startswith(f"shoal_{credential.id}_")
    assert web_fleet.authenticate(secret) == credential
    assert web_fleet.authenticate(secret[:-1] + ("A" if secret[-1] != "A" else "B")) is None
    listed = web_fleet.tokens()
    assert listed == [credential] and secret not in repr(listed)


def test_the_pages_cookie_reads_the_api_but_never_changes_the_fleet(
    web_fleet: Fleet, make_client: Callable[..., TestClient]
) -> None:
    _, admin = web_fleet.create_token("admin")
    browser = make_client("")
    browser.cookies.set(guard.COOKIE, admin)
    assert browser.get("/api/v1/status").status_code == 200
    web_fleet.post("keep me")
    refused = browser.post("/api/v1/tasks/1/cancel")
    assert refused.status_code == 401
    assert web_fleet.get(1).state == "pending"


def test_an_agent_token_cannot_make_its_agent_a_manager(
    web_fleet: Fleet, make_client: Callable[..., TestClient]
) -> None:
    """A manager is an admin's grant: an agent token asking for it (a manager is let in
    past max_agents) is refused, changes nothing, and may only repeat a grant made."""
    web_fleet.configure(max_agents=2)
    web_fleet.register("ann")
    web_fleet.register("bob")
    carl = make_client(web_fleet.create_token("agent", agent="carl")[1])
    admin = make_client(web_fleet.create_token("admin")[1])
    before = snapshot(web_fleet)
    refused = carl.post("/api/v1/agents", json={"id": "carl", "manager": True})
    assert refused.status_code == 403, refused.text
    error = refused.json()["error"]
    assert error["code"] == "forbidden" and "cannot make agent carl a manager" in error["message"]
    assert "admin" in error["hint"]
    assert snapshot(web_fleet) == before
    full = carl.post("/api/v1/agents", json={"id": "carl"})  # as a worker: the cap holds
    assert full.status_code == 409 and full.json()["error"]["code"] == "fleet_full"
    assert admin.post("/api/v1/agents", json={"id": "carl", "manager": True}).status_code == 200
    again = carl.post("/api/v1/agents", json={"id": "carl", "manager": True})
    assert again.status_code == 200 and again.json()["agent"]["manager"] is True
