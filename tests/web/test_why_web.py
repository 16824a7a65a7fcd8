"""``why`` over HTTP: ``GET /api/v1/tasks/{id}/why`` and ``/agents/{id}/why`` for every
reason of ``tests.why_cases`` (SQLite and PostgreSQL), and the dashboard's "why waiting"
section, with untrusted text escaped."""

from __future__ import annotations

import html
from collections.abc import Callable

from fastapi.testclient import TestClient

from shoal import Fleet, ManualClock
from shoal.policy_why import AgentWhy, TaskWhy
from tests.why_cases import HOSTILE, build, build_group


def test_the_api_says_why_for_every_case(
    web_fleet: Fleet, clock: ManualClock, make_client: Callable[..., TestClient]
) -> None:
    cases = build(web_fleet, clock)
    client = make_client()
    for name, task_id in cases.tasks.items():
        answer = client.get(f"/api/v1/tasks/{task_id}/why")
        assert answer.status_code == 200, answer.text
        assert [r["code"] for r in answer.json()["reasons"]] == cases.task_codes[name], name
        # what a RemoteFleet decodes is what the fleet said
        assert TaskWhy.from_dict(answer.json()) == web_fleet.why_task(task_id)
    for agent, expected in cases.agent_codes.items():
        answer = client.get(f"/api/v1/agents/{agent}/why")
        assert answer.status_code == 200, answer.text
        assert [r["code"] for r in answer.json()["reasons"]] == expected, agent
        assert AgentWhy.from_dict(answer.json()).to_dict() == answer.json()
    paper = client.get(f"/api/v1/tasks/{cases.tasks['paper']}/why").json()
    assert paper["takers"] == [{"agent": "iris", "step": "pool", "status": "idle"}]
    assert paper["reasons"][0]["until"] == "2026-01-01T00:02:00.000Z"  # posted at 0, 2m wait
    assert client.get("/api/v1/tasks/999/why").json()["error"]["code"] == "unknown_task"
    assert client.get("/api/v1/tasks/999/why").status_code == 404
    assert client.get("/api/v1/agents/nobody/why").status_code == 404


def test_the_task_page_says_why_it_waits_escaped(
    web_fleet: Fleet, clock: ManualClock, make_client: Callable[..., TestClient]
) -> None:
    cases = build(web_fleet, clock)
    client = make_client()
    go = client.get(f"/tasks/{cases.tasks['go']}")
    assert go.status_code == 200
    assert "Why waiting" in go.text and 'data-code="missing_skills"' in go.text
    assert "<b>go</b>" not in go.text and html.escape(HOSTILE, quote=False) in go.text
    paper = client.get(f"/tasks/{cases.tasks['paper']}").text
    assert 'data-code="domain_wait"' in paper and "could take it from the pool" in paper
    running = client.get(f"/tasks/{cases.tasks['run']}").text
    assert "Why running" in running and 'data-code="running"' in running


def test_the_api_says_a_group_is_full(
    web_fleet: Fleet, clock: ManualClock, make_client: Callable[..., TestClient]
) -> None:
    case = build_group(web_fleet, clock)
    client = make_client()
    answer = client.get(f"/api/v1/tasks/{case.waiting}/why").json()
    (reason,) = answer["reasons"]
    assert reason["code"] == "group_full" and answer["takers"] == []
    assert (reason["agents"], reason["tasks"]) == ([case.agent], [case.holder])
    assert TaskWhy.from_dict(answer) == web_fleet.why_task(case.waiting)
    agent = client.get(f"/api/v1/agents/{case.agent}/why").json()
    assert [r["code"] for r in agent["reasons"]] == ["group_full"] and agent["next"] is None
    page = client.get(f"/tasks/{case.waiting}").text
    assert 'data-code="group_full"' in page and "group prod is full" in page
