"""The API's lists never drop rows silently: /tasks, /agents and /events keep their shapes
and say where the next page is (``Link: <...>; rel="next"``), so
following the links reads every row once -- through a real HTTP client, on SQLite and
PostgreSQL. Bad paging is refused and changes nothing."""

from __future__ import annotations

import re
from typing import Any

from fastapi.testclient import TestClient

from shoal import Fleet
from tests.helpers import snapshot

NEXT = re.compile(r'^<(?P<url>[^>]+)>; rel="next"$')


def _follow(client: TestClient, url: str) -> tuple[list[Any], int]:
    """Every row of a list, following its next links; and how many pages it took."""
    rows: list[Any] = []
    pages = 0
    next_url: str | None = url
    while next_url is not None:
        answer = client.get(next_url)
        assert answer.status_code == 200, answer.text
        pages += 1
        data = answer.json()
        rows += data["events"] if isinstance(data, dict) else data
        link = answer.headers.get("link")
        next_url = NEXT.match(link)["url"] if link else None  # type: ignore[index]
    return rows, pages


def test_following_next_links_reads_every_task_once(web_fleet: Fleet, client: TestClient) -> None:
    web_fleet.post_many([{"title": f"task {i}"} for i in range(1, 62)])
    rows, pages = _follow(client, "/api/v1/tasks?limit=25&state=pending")
    assert [t["id"] for t in rows] == list(range(61, 0, -1)) and pages == 3
    whole = client.get("/api/v1/tasks?limit=61")
    assert len(whole.json()) == 61 and "link" not in whole.headers  # no page after the last


def test_agents_page_by_id_and_stay_whole_by_default(web_fleet: Fleet, client: TestClient) -> None:
    for name in ("cy", "ada", "bob"):
        web_fleet.register(name)
    everyone = client.get("/api/v1/agents")
    assert [a["id"] for a in everyone.json()] == ["ada", "bob", "cy"]
    assert "link" not in everyone.headers
    rows, pages = _follow(client, "/api/v1/agents?limit=2")
    assert [a["id"] for a in rows] == ["ada", "bob", "cy"] and pages == 2


def test_events_say_when_there_is_more_and_where(web_fleet: Fleet, client: TestClient) -> None:
    web_fleet.post_many([{"title": f"task {i}"} for i in range(1, 12)])
    ids = [e.id for e in web_fleet.events(limit=1000)]
    rows, pages = _follow(client, "/api/v1/events?limit=5")
    assert [e["id"] for e in rows] == ids and pages == 3
    tail = client.get("/api/v1/events?limit=3&newest=true").json()
    assert [e["id"] for e in tail["events"]] == ids[-3:] and tail["cursor"] == ids[-1]


def test_bad_paging_is_refused_and_changes_nothing(web_fleet: Fleet, client: TestClient) -> None:
    web_fleet.post("one")
    before = snapshot(web_fleet)
    for url in (
        "/api/v1/tasks?limit=0",
        "/api/v1/tasks?limit=-1",
        "/api/v1/tasks?before=x",
        "/api/v1/agents?limit=0",
        "/api/v1/agents?after=not%20an%20id!",
        "/api/v1/events?since=-1",
        "/api/v1/events?limit=abc",
    ):
        answer = client.get(url)
        assert answer.status_code in (400, 422), (url, answer.text)
        assert answer.json()["error"]["message"], url
    assert snapshot(web_fleet) == before
