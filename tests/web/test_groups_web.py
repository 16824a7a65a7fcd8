"""Concurrency groups over HTTP, on SQLite and PostgreSQL: the API's /groups routes (an
admin's to change, a viewer's to read), a RemoteFleet through a real hub, and the
/metrics gauges of each group's held tasks and limit."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient

from shoal import BadInput, Fleet
from shoal.remote.fleet import RemoteFleet
from tests.web.dash_support import client_for, page
from tests.web.remote_support import hub_thread, make_tokens
from tests.web.test_metrics import client_of, scrape, value


def test_groups_through_the_api(client: TestClient, web_fleet: Fleet) -> None:
    for title in ("deploy web", "deploy api"):
        posted = client.post("/api/v1/tasks", json={"title": title, "group": "deploy"})
        assert posted.status_code == 201 and posted.json()["group"] == "deploy"
    made = client.post("/api/v1/groups/deploy", json={"max": 1})
    assert made.status_code == 200, made.text
    assert made.json() == {"name": "deploy", "max": 1, "held": 0, "full": False}
    client.post("/api/v1/agents", json={"id": "ann", "max_concurrent": 5})
    claimed = client.post("/api/v1/agents/ann/claim", json={"n": 5}).json()["claimed"]
    assert [g["task"]["title"] for g in claimed] == ["deploy web"]
    listed = client.get("/api/v1/groups").json()["groups"]
    assert listed == [{"name": "deploy", "max": 1, "held": 1, "full": True}]
    assert client.get("/api/v1/status").json()["groups"] == listed
    cleared = client.post("/api/v1/groups/deploy/clear")
    assert cleared.json() == {"name": "deploy", "max": None, "held": 1, "full": False}


@pytest.mark.parametrize("body", [{"max": 0}, {"max": -2}, {"max": "x"}, {"max": 1.5}])
def test_a_bad_limit_over_the_api_is_refused_and_changes_nothing(
    client: TestClient, web_fleet: Fleet, body: dict[str, object]
) -> None:
    answer = client.post("/api/v1/groups/deploy", json=body)
    assert answer.status_code in (400, 422), answer.text
    assert web_fleet.groups() == []


def test_a_bad_group_name_over_the_api_is_refused(client: TestClient, web_fleet: Fleet) -> None:
    answer = client.post("/api/v1/groups/de%1Bploy", json={"max": 1})
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "bad_input"
    assert client.post("/api/v1/groups/nope/clear").json()["error"]["code"] == "bad_input"
    assert web_fleet.groups() == []


@pytest.fixture
def hub(store_url: str) -> Iterator[tuple[Fleet, str, Callable[[str], RemoteFleet]]]:
    with Fleet.open(store_url) as local:
        tokens, _ = make_tokens(local)
        with hub_thread(local) as url:
            opened: list[RemoteFleet] = []

            def remote(token: str) -> RemoteFleet:
                opened.append(RemoteFleet.open(url, token=token))
                return opened[-1]

            yield local, tokens.admin, remote
            for fleet in opened:
                fleet.close()


def test_a_remote_fleet_sets_lists_and_clears_groups(
    hub: tuple[Fleet, str, Callable[[str], RemoteFleet]],
) -> None:
    local, admin_token, remote = hub
    admin = remote(admin_token)
    task = admin.post("deploy", group="deploy")
    assert task.group == "deploy" and local.get(task.id).group == "deploy"
    assert admin.set_group("deploy", 2).max == 2
    assert [g.to_dict() for g in admin.groups()] == [g.to_dict() for g in local.groups()]
    assert admin.status().groups == local.status().groups
    with pytest.raises(BadInput, match="max must be"):
        admin.set_group("deploy", 0)
    assert admin.clear_group("deploy").max is None and local.groups() == []


def test_metrics_show_each_limited_groups_held_tasks_and_limit(web_fleet: Fleet) -> None:
    fleet = web_fleet
    fleet.register("ada", max_concurrent=5)
    for i in range(3):
        fleet.post(f"d {i}", group="deploy")
    fleet.post("free", group="anything-an-agent-wrote")
    fleet.set_group("deploy", 2)
    fleet.claim("ada", 5)
    samples = scrape(client_of(fleet))
    assert value(samples, "shoal_group_held", group="deploy") == 2
    assert value(samples, "shoal_group_max", group="deploy") == 2
    assert not any(
        labels and ("group", "anything-an-agent-wrote") in labels for _, labels in samples
    )


def test_the_health_page_shows_each_group_held_of_its_limit(web_fleet: Fleet) -> None:
    web_fleet.register("ada")
    web_fleet.post("d", group="deploy")
    web_fleet.set_group("deploy", 1)
    web_fleet.claim("ada")
    shown = client_for(web_fleet).get("/health")
    assert shown.status_code == 200
    group = page(shown.text).find("span", data_group="deploy")
    assert group is not None and " ".join(group.text.split()) == "group deploy 1/1 full"
