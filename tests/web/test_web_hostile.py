"""``shoal serve`` under attack and careless use: each test is a hole found by trying to break
the server (issue 15), kept so it stays shut."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from shoal import Fleet
from shoal.faces.web import guard
from tests.helpers import plant_agent

ORIGIN = "http://127.0.0.1:8765"  # the test clients' own origin (conftest's base_url)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_wrong_tokens_from_one_address_do_not_lock_out_its_working_agents(
    web_fleet: Fleet, make_client: Callable[..., TestClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every agent of a hub on one machine (or behind one proxy) comes from one address:
    one of them retrying a revoked token, or anyone local guessing, must not stop the
    others -- not even a valid token this server has never seen (a hub just restarted)."""
    monkeypatch.setattr(guard, "WRONG_TOKEN_DELAY", 0.0)
    ann = web_fleet.create_token("agent", agent="ann")[1]
    admin = web_fleet.create_token("admin")[1]
    working = make_client(ann)
    assert working.post("/api/v1/agents", json={"id": "ann"}).status_code == 200
    stranger = make_client("shoal_not-a-token")
    for _ in range(guard.MAX_FAILURES):
        assert stranger.get("/api/v1/status").status_code == 401
    assert stranger.get("/api/v1/status").status_code == 429  # the guesser is throttled
    assert working.post("/api/v1/agents/ann/claim").status_code == 200  # ann is not
    assert working.post("/api/v1/agents/ann/heartbeat").status_code == 200
    # A valid token this server has not seen before is not held back either.
    assert make_client(admin).get("/api/v1/status").status_code == 200
    for token in (ann, admin):  # nor is signing in on the dashboard with one
        signed = make_client("").post("/login", data={"token": token}, follow_redirects=False)
        assert signed.status_code == 303
    assert stranger.get("/api/v1/status").status_code == 429  # the guesser still is
    # Once revoked, ann's token is a wrong one like any other: throttled with its address.
    monkeypatch.setattr(guard, "CACHE_SECONDS", 0.0)
    web_fleet.revoke_token(next(t.id for t in web_fleet.tokens() if t.agent == "ann"))
    assert working.post("/api/v1/agents/ann/heartbeat").status_code == 429


def test_a_page_on_another_port_of_this_machine_cannot_drive_an_open_fleet(
    client: TestClient, web_fleet: Fleet
) -> None:
    """A port is part of an origin: a dev server or notebook page on 127.0.0.1:3000 is
    another site (cookies and a Host check by name alone would take it for this one), and
    on an open fleet a bodiless POST needs no preflight and no token."""
    task = web_fleet.post("keep me")
    for origin in ("http://127.0.0.1:3000", "http://localhost:1", "http://127.0.0.1"):
        refused = client.post(f"/api/v1/tasks/{task.id}/cancel", headers={"Origin": origin})
        assert refused.status_code == 403, origin
        assert client.get("/api/v1/status", headers={"Origin": origin}).status_code == 403
    assert web_fleet.get(task.id).state == "pending"
    ours = client.post(f"/api/v1/tasks/{task.id}/cancel", headers={"Origin": ORIGIN})
    assert ours.status_code == 200
    assert web_fleet.get(task.id).state == "cancelled"


def test_a_host_check_cannot_be_split_across_repeated_headers(
    client: TestClient, web_fleet: Fleet
) -> None:
    """Two Host or Origin headers: the check must not read one while the app reads the
    other (no browser sends two; a crafted request or a confused proxy does)."""
    task = web_fleet.post("keep me")
    two_hosts = [("host", "evil.example"), ("host", "127.0.0.1:8765")]
    assert client.get("/api/v1/status", headers=two_hosts).status_code == 421
    two_origins = [("origin", "http://evil.example"), ("origin", ORIGIN)]
    answer = client.post(f"/api/v1/tasks/{task.id}/cancel", headers=two_origins)
    assert answer.status_code == 403
    assert web_fleet.get(task.id).state == "pending"


def test_the_dashboard_pauses_and_resumes_an_agent_whose_id_has_a_slash(
    client: TestClient, web_fleet: Fleet
) -> None:
    """An older version took agent ids with "/" (``team/alice``): the lane's Pause and
    Resume buttons post to ``/agents/team%2Falice/pause``, which must reach that agent, not
    a 404."""
    plant_agent(web_fleet, "team/alice")
    fleet_page = client.get("/").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', fleet_page)
    assert csrf is not None
    assert 'action="/agents/team%2Falice/pause"' in fleet_page
    form = {"csrf": csrf.group(1), "back": "/"}
    paused = client.post("/agents/team%2Falice/pause", data=form, follow_redirects=False)
    assert paused.status_code == 303
    assert web_fleet.agent("team/alice").paused(web_fleet.clock.now())
    resumed = client.post("/agents/team%2Falice/resume", data=form, follow_redirects=False)
    assert resumed.status_code == 303
    assert web_fleet.agent("team/alice").paused_until is None


def test_a_setting_named_like_a_parameter_is_an_unknown_setting_not_a_crash(
    client: TestClient,
) -> None:
    """The settings body is a free mapping handed to ``Fleet.configure(**changes)``: a key
    ``self`` must be refused as the unknown setting it is (400), not a 500."""
    answer = client.post("/api/v1/settings", json={"self": 1})
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "invalid_setting"
    csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/health").text)
    assert csrf is not None
    form = {"name": "self", "value": "1", "csrf": csrf.group(1)}
    assert client.post("/settings", data=form).status_code == 400


def test_a_filter_echoed_on_the_fleet_page_cannot_reverse_its_text(client: TestClient) -> None:
    """A link to ``/?agent=...`` is anyone's to craft: the "no agents match" line echoes
    it, so a direction override in it must be written out, not obeyed."""
    answer = client.get("/", params={"agent": "\u202eevil\u2066"})
    line = next(x for x in answer.text.splitlines() if "No agents match" in x)
    assert "\u202e" not in line and "\u2066" not in line
    assert "evil" in line


def test_the_api_docs_load_no_script_from_another_site(client: TestClient) -> None:
    """The docs page shares the dashboard's origin: a script from a CDN there could read
    the pages (and their CSRF tokens) with a signed-in admin's cookie. Its Swagger UI is
    vendored, and the page may not be framed."""
    docs = client.get("/api/v1/docs")
    assert docs.status_code == 200
    sources = re.findall(r'(?:src|href)=["\']([^"\']+)', docs.text)
    assert sources, docs.text[:300]
    assert all(s.startswith(("/", "data:")) for s in sources), sources
    for source in sources:
        if source.startswith("/"):
            assert client.get(source).status_code == 200, source
    assert docs.headers["x-frame-options"] == "DENY"
