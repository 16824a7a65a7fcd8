"""Least privilege over HTTP (issue 28): a payload or body past the fleet's caps is answered
413 and adds nothing, listings (``/api/v1/tasks``, ``/ready``, the ``/tasks`` page) never
load payloads (M5); a new agent's id is one of the safe set, and an odd id an older version
took goes into a page's URLs quoted whole (L5)."""

from __future__ import annotations

import re
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from urllib.parse import urljoin

from fastapi.testclient import TestClient

from shoal import Fleet
from tests.helpers import plant_agent, snapshot

MIB = 1024 * 1024
ORIGIN = "http://127.0.0.1:8765"  # the test clients' own base URL (conftest)


def test_a_payload_or_body_past_the_cap_is_answered_413_and_adds_nothing(
    client: TestClient, web_fleet: Fleet
) -> None:
    before = snapshot(web_fleet)
    big = client.post("/api/v1/tasks", json={"title": "huge", "payload": {"b": "x" * 2 * MIB}})
    assert big.status_code == 413, big.text
    error = big.json()["error"]
    assert error["code"] == "too_large"
    assert "payload is 2,097,160 bytes as JSON" in error["message"]
    assert "max_payload_bytes" in error["message"]
    long = client.post("/api/v1/tasks", json={"title": "long", "body": "y" * (MIB + 1)})
    assert long.status_code == 413 and "body is 1,048,577 bytes" in long.json()["error"]["message"]
    assert snapshot(web_fleet) == before
    fits = client.post("/api/v1/tasks", json={"title": "fits", "payload": {"b": "x" * 1000}})
    assert fits.status_code == 201


@contextmanager
def _peak_traced() -> Iterator[list[int]]:
    """The most memory Python held at once inside the block (every thread), in bytes."""
    found: list[int] = []
    tracemalloc.start()
    try:
        yield found
        found.append(tracemalloc.get_traced_memory()[1])
    finally:
        tracemalloc.stop()


def test_listings_never_load_payloads_and_the_one_task_views_do(
    client: TestClient, web_fleet: Fleet
) -> None:
    """The issue's attack: 13 tasks with 7 MB payloads made ``GET /api/v1/tasks`` answer
    80 MB and the ``/tasks`` page take the server to 921 MB."""
    web_fleet.configure(max_payload_bytes="8MiB")
    blob = {"blob": "x" * (7 * 1000 * 1000)}
    posted = [web_fleet.post(f"big {i}", payload=blob).id for i in range(13)]

    with _peak_traced() as peak:
        listed = client.get("/api/v1/tasks")
        ready = client.get("/api/v1/ready", params={"limit": 100})
        page = client.get("/tasks")
    assert listed.status_code == ready.status_code == page.status_code == 200
    assert peak[0] < 20 * MIB, f"listing held {peak[0] // MIB} MiB"
    assert len(listed.content) < 20_000 and len(ready.content) < 20_000
    for task in [*listed.json(), *ready.json()]:
        assert "payload" not in task and task["has_payload"] is True
    assert all(f'data-task="{i}"' in page.text for i in posted)

    shown = client.get(f"/api/v1/tasks/{posted[0]}")
    assert shown.status_code == 200 and shown.json()["payload"] == blob


def test_register_refuses_a_new_agent_outside_the_safe_set(
    client: TestClient, web_fleet: Fleet
) -> None:
    before = snapshot(web_fleet)
    for agent_id in ("x/../../agents/bob", "a" * 65):
        refused = client.post("/api/v1/agents", json={"id": agent_id})
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == "bad_input"
        assert "not valid for a new agent" in refused.json()["error"]["message"]
    assert snapshot(web_fleet) == before


def test_a_pause_form_for_an_odd_old_id_posts_to_that_agent_not_the_one_it_names(
    client: TestClient, web_fleet: Fleet
) -> None:
    """``x/../../agents/bob`` in a form's action unquoted is ``/agents/bob/pause`` once the
    browser resolves it: pressing Pause on that lane paused bob."""
    web_fleet.register("bob")
    odd = plant_agent(web_fleet, "x/../../agents/bob").id
    fleet_page = client.get("/").text
    actions = re.findall(r'action="(/agents/[^"]*/pause)"', fleet_page)
    quoted = "/agents/x%2F..%2F..%2Fagents%2Fbob/pause"
    assert quoted in actions and "/agents/bob/pause" in actions, actions
    assert urljoin(ORIGIN + "/", quoted) == ORIGIN + quoted  # the browser keeps it whole
    csrf = re.search(r'name="csrf" value="([^"]+)"', fleet_page)
    assert csrf is not None
    form = {"csrf": csrf.group(1), "back": "/"}
    assert client.post(quoted, data=form, follow_redirects=False).status_code == 303
    now = web_fleet.clock.now()
    assert web_fleet.agent(odd).paused(now)
    assert not web_fleet.agent("bob").paused(now)
    resumed = client.post(quoted.replace("/pause", "/resume"), data=form, follow_redirects=False)
    assert resumed.status_code == 303 and web_fleet.agent(odd).paused_until is None


def test_an_agent_token_cannot_lift_its_own_pause_by_leaving_and_joining_again(
    web_fleet: Fleet, make_client: Callable[..., TestClient]
) -> None:
    """A person paused ada; ada's token may not resume her (403), nor set her idle (409)
    -- and leaving (terminated) then registering again must not free her either."""
    web_fleet.register("ada")
    ada = make_client(web_fleet.create_token("agent", agent="ada")[1])
    web_fleet.pause("ada", for_="1h")
    assert ada.post("/api/v1/agents/ada/resume").status_code == 403
    assert ada.post("/api/v1/agents/ada/status", json={"status": "idle"}).status_code == 409
    assert ada.post("/api/v1/agents/ada/status", json={"status": "terminated"}).is_success
    ada.post("/api/v1/agents", json={"id": "ada"})
    web_fleet.post("work")
    claim = ada.post("/api/v1/agents/ada/claim")
    assert claim.json()["claimed"] == [], "ada's pause was lifted by her own token"
