"""The dashboard people keep open: charts over a chosen range with axes and units, an
agent's own page, bulk retry and cancel of a filtered selection, pages that follow the
fleet live, durations with units and a paused agent shown as paused -- through a real HTTP
client against the app over a real fleet on every store (the charts' counts are the
store's own aggregate, so each store is checked against the same figures).
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from shoal import Fleet, ManualClock
from shoal.faces.web.bulk import MAX_BULK
from shoal.faces.web.charts import RANGES, SETTLE, CountCache, agent_charts, fleet_charts
from shoal.model import Lease
from shoal.stores._sql import load_queries
from tests.web.dash_support import client_for, csrf_of, page

NASTY = "<script>alert('x')</script> & <b>bold</b>"


@pytest.fixture
def client(fleet: Fleet) -> TestClient:
    return client_for(fleet)


def held(fleet: Fleet, agent: str) -> Lease:
    claim = fleet.claim(agent)
    assert claim, claim
    return claim.leases[0]


def posted(pairs: list[tuple[str, str | None]]) -> dict[str, list[str]]:
    """A form's fields as httpx sends them: a name given many times, with each value."""
    fields: dict[str, list[str]] = {}
    for name, value in pairs:
        fields.setdefault(name, []).append(value or "")
    return fields


def series(charts: list, name: str) -> tuple[float, ...]:  # type: ignore[type-arg]
    return next(c.values for c in charts if c.name == name)


# ---------------------------------------------------------------- charts


def test_the_fleet_charts_count_the_event_log_per_minute(fleet: Fleet, clock: ManualClock) -> None:
    fleet.register("ada", max_concurrent=3)
    fleet.post_many([{"title": f"t{i}"} for i in range(4)])  # minute 0: 4 pending
    clock.advance(60)
    first, second = fleet.claim("ada", 2).leases  # minute 1: 2 claimed
    clock.advance(60)
    fleet.complete(first)  # minute 2: one done, one failed back to pending
    fleet.fail(second, "boom")
    clock.advance(30)
    now = clock.now()
    pending = fleet.status().counts["pending"]
    charts = fleet_charts(fleet, RANGES["1h"], pending, now)
    assert [c.name for c in charts] == ["Queue depth", "Done", "Failed", "Claimed"]
    assert all(len(c.values) == 60 for c in charts)
    assert series(charts, "Queue depth")[-4:] == (0, 4, 2, 3)
    assert series(charts, "Done")[-3:] == (0, 0, 1) and sum(series(charts, "Done")) == 1
    assert series(charts, "Failed")[-3:] == (0, 0, 1)
    assert series(charts, "Claimed")[-3:] == (0, 2, 0)
    # The same three minutes are one quarter hour of the day's range, and one hour of the week's.
    day = fleet_charts(fleet, RANGES["24h"], pending, now)
    assert len(day[0].values) == 96 and series(day, "Claimed")[-1] == 2
    assert series(day, "Queue depth")[-1] == 3 and series(day, "Queue depth")[-2] == 0
    week = fleet_charts(fleet, RANGES["7d"], pending, now)
    assert len(week[0].values) == 168 and series(week, "Done")[-1] == 1
    # An agent's own: only its events.
    fleet.register("bob")
    mine = agent_charts(fleet, "bob", RANGES["1h"], now)
    assert not any(any(c.values) for c in mine)
    ada = agent_charts(fleet, "ada", RANGES["1h"], now)
    assert series(ada, "Done")[-1] == 1 and series(ada, "Failed")[-1] == 1


def test_steals_count_in_for_the_thief_and_out_for_the_victim(
    fleet: Fleet, clock: ManualClock
) -> None:
    fleet.register("ada")
    fleet.register("bob")
    fleet.post_many([{"title": f"queued {i}", "to": "ada"} for i in range(4)])
    held(fleet, "ada")  # at work: a victim
    clock.advance(60)
    assert fleet.claim("bob").sources == ("steal",)
    now = clock.now()
    bob = agent_charts(fleet, "bob", RANGES["1h"], now)
    ada = agent_charts(fleet, "ada", RANGES["1h"], now)
    assert series(bob, "Steals in")[-1] == 1 and sum(series(bob, "Steals out")) == 0
    assert series(ada, "Steals out")[-1] == 1 and sum(series(ada, "Steals in")) == 0
    depth = series(fleet_charts(fleet, RANGES["1h"], 2, now), "Queue depth")
    assert depth[-2:] == (3, 2)  # a claim by steal takes a pending task like any claim


def test_the_health_page_draws_charts_with_axes_and_a_range(
    client: TestClient, fleet: Fleet
) -> None:
    fleet.post("one")
    for name, r in RANGES.items():
        response = client.get("/health", params={"range": name})
        assert response.status_code == 200
        doc = page(response.text)
        charts = doc.find("section", id="charts")
        picked = charts.find("a", data_range=name)
        assert picked.attrs.get("aria-current") == "true"
        assert {a.attrs["data-range"] for a in charts.find_all("a", data_range=True)} == set(RANGES)
        figures = charts.find_all("figure")
        assert len(figures) == 4
        svg = figures[1].find("svg", role="img")
        ticks = [t.text for t in svg.find_all("text", class_="tick")]
        assert "UTC" in ticks and "0" in ticks  # a time axis, and a value axis from 0
        unit = svg.find("text", class_="unit").text
        assert unit == f"tasks {r.per}"
        assert r.label in figures[1].find("figcaption").text
        assert len(svg.find_all("line", class_="axis")) >= 3
    assert "now 1 tasks pending" in page(client.get("/health").text).find(id="charts").text
    bad = client.get("/health", params={"range": "1y"})
    assert bad.status_code == 400 and "range" in bad.text


def test_the_chart_window_is_bounded(fleet: Fleet) -> None:
    from shoal.errors import BadInput

    now = fleet.clock.now()
    with pytest.raises(BadInput, match="buckets"):
        fleet.event_counts(now - 86400 * 365, 60.0)
    with pytest.raises(BadInput):
        fleet.event_counts(now, 0.0)


def test_a_page_reloading_itself_recounts_only_the_newest_buckets(
    fleet: Fleet, clock: ManualClock
) -> None:
    cache, span = CountCache(), RANGES["1h"]
    fleet.post_many([{"title": f"t{i}"} for i in range(3)])
    clock.advance(600)
    now = clock.now()
    first = fleet_charts(fleet, span, 3, now, cache)
    assert cache.counted_from == span.start(now)  # the first time: the whole window
    assert first == fleet_charts(fleet, span, 3, now)
    fleet.post("one more")
    clock.advance(30)
    now = clock.now()
    again = fleet_charts(fleet, span, 4, now, cache)
    assert cache.counted_from is not None and cache.counted_from >= now - SETTLE - span.width
    assert again == fleet_charts(fleet, span, 4, now)
    assert series(again, "Queue depth")[-1] == 4


def test_the_counts_read_only_the_window_of_the_log(tmp_path: Path) -> None:
    """SQLite's plans: the window's events by the primary key, steals by their index on
    time -- never a scan of the whole log."""
    path = tmp_path / "fleet.db"
    with Fleet.open(f"sqlite://{path}") as fleet:
        fleet.post("one")
    queries = load_queries("sqlite")
    params = {"first": 1, "start": 0.0, "width": 60.0, "agent": None, "id": 1}
    with contextlib.closing(sqlite3.connect(path)) as conn:
        plans = {
            name: " ".join(
                str(row[3]) for row in conn.execute(f"EXPLAIN QUERY PLAN {queries[name]}", params)
            )
            for name in ("event_bounds", "event_at_or_after", "event_counts", "steals_from")
        }
    assert "INTEGER PRIMARY KEY (rowid>?)" in plans["event_counts"], plans
    assert "INTEGER PRIMARY KEY (rowid>?)" in plans["event_at_or_after"], plans
    assert "USING INDEX events_steals" in plans["steals_from"], plans
    assert "SCAN events" not in plans["event_bounds"], plans


# ---------------------------------------------------------------- the agent page


def test_an_agents_page_shows_what_it_holds_its_queue_charts_and_events(
    client: TestClient, fleet: Fleet, clock: ManualClock
) -> None:
    fleet.register("ada", role=NASTY, domains=["web"])
    running = fleet.post(NASTY, to="ada").id
    lease = held(fleet, "ada")
    assert lease.task_id == running
    queued = fleet.post_many([{"title": f"next {i}", "to": "ada"} for i in range(3)])
    other = fleet.post("in the pool").id
    fleet.complete(lease)
    again = held(fleet, "ada")
    clock.advance(5)
    lanes = page(client.get("/").text)
    link = lanes.find("section", data_lane="ada").find("a", data_agent_link=True)
    assert link.attrs["href"] == "/agents/ada"
    response = client.get(link.attrs["href"])
    assert response.status_code == 200
    assert NASTY not in response.text and "&lt;script&gt;" in response.text
    doc = page(response.text)
    assert doc.find("h1").find("span", data_status="working")
    holds = doc.find(id="h-held").text and doc.find_all("li", data_held=True)
    assert [li.attrs["data-task"] for li in holds] == [str(again.task_id)]
    shown = [li.attrs["data-task"] for li in doc.find_all("li", data_task=True)]
    assert set(shown) == {str(i) for i in queued}  # held + the rest of its queue
    assert str(other) not in shown
    events = list(doc.find("table", class_="events").find_all("tr", data_event=True))
    kinds = [tr.find_all("td")[2].text for tr in events]
    assert kinds[:3] == ["claimed", "completed", "posted"]  # newest first (posted to it)
    assert kinds[-2:] == ["posted", "agent.registered"]
    charts = doc.find("section", id="charts")
    assert len(charts.find_all("figure")) == 4
    assert charts.find("a", data_range="7d").attrs["href"] == "/agents/ada?range=7d"
    assert client.get("/agents/ada", params={"range": "7d"}).status_code == 200
    missing = client.get("/agents/nobody")
    assert missing.status_code == 404 and "nobody" in missing.text


def test_a_paused_agent_is_shown_as_paused_everywhere(client: TestClient, fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.pause("ada", for_="1h")
    lane = page(client.get("/").text).find("section", data_lane="ada")
    assert lane.find("span", data_status="paused").text == "paused"
    assert lane.find("span", class_="until").text.startswith("until 20")
    agent = page(client.get("/agents/ada").text)
    assert agent.find("h1").find("span", data_status="paused")
    assert agent.find("button", data_action="resume")
    health = page(client.get("/health").text).find("section", id="agents")
    assert "paused" in health.find("li", data_agent="ada").text


def test_settings_and_durations_are_shown_with_their_units(
    client: TestClient, fleet: Fleet
) -> None:
    fleet.configure(lease_ttl="2m", retry_delay="90s")
    task = fleet.post("sized", expected_duration="1h30m", lease_ttl="45s").id
    doc = page(client.get("/health").text)
    rows = {
        tr.attrs["data-setting"]: tr.find_all("td")[1].text
        for tr in doc.find_all("tr", data_setting=True)
    }
    assert rows["lease_ttl"] == "2m" and rows["retry_delay"] == "1m30s"
    assert not any(re.fullmatch(r"\d+\.\d+", value) for value in rows.values()), rows
    detail = page(client.get(f"/tasks/{task}").text).text
    assert "1h30m" in detail and "5400" not in detail


# ---------------------------------------------------------------- bulk actions


def dead(fleet: Fleet, title: str) -> int:
    task = fleet.post(title, max_attempts=1, priority=1).id
    lease = held(fleet, "ada")
    assert lease.task_id == task
    fleet.fail(lease, "boom")
    return task


def test_bulk_retry_acts_on_what_the_filter_matches_after_a_confirmation(
    client: TestClient, fleet: Fleet
) -> None:
    fleet.register("ada")
    doomed = [dead(fleet, f"deploy {i} {NASTY}") for i in range(3)]
    other = dead(fleet, "unrelated")
    pending = fleet.post("deploy but alive").id
    listing = page(client.get("/tasks", params={"state": "dead", "q": "deploy"}).text)
    form = listing.find("form", action="/bulk")
    fields = {i.attrs["name"]: i.attrs["value"] for i in form.find_all("input")}
    assert fields == {"state": "dead", "q": "deploy"}
    asked = client.get("/bulk", params={**fields, "action": "retry"})
    assert asked.status_code == 200
    assert NASTY not in asked.text
    confirm = page(asked.text)
    assert {tr.attrs["data-task"] for tr in confirm.find_all("tr", data_task=True)} == {
        str(t) for t in doomed
    }
    assert all(fleet.get(t).state == "dead" for t in doomed)  # asking changed nothing
    post = confirm.find("form", action="/bulk")
    data = [(i.attrs["name"], i.attrs["value"]) for i in post.find_all("input")]
    assert ("task", str(pending)) not in data and ("task", str(other)) not in data
    # Without the session's CSRF token: refused, nothing changes.
    forged = [(k, v) for k, v in data if k != "csrf"] + [("csrf", "0" * 64)]
    assert client.post("/bulk", data=posted(forged)).status_code == 403
    assert all(fleet.get(t).state == "dead" for t in doomed)
    done = client.post("/bulk", data=posted(data))
    assert done.status_code == 200
    assert page(done.text).find("p", data_done="3")
    assert all(fleet.get(t).state == "pending" for t in doomed)
    assert fleet.get(other).state == "dead"
    # The same ids again: each refused by the fleet, said task by task.
    again = page(client.post("/bulk", data=posted(data)).text)
    assert {li.attrs["data-refused"] for li in again.find_all("li", data_refused=True)} == {
        str(t) for t in doomed
    }


def test_bulk_cancel_and_its_refusals(client: TestClient, fleet: Fleet) -> None:
    fleet.register("ada")
    live = list(fleet.post_many([{"title": f"batch {i}", "domain": "ops"} for i in range(4)]))
    kept = fleet.post("batch elsewhere", domain="web").id
    lease = held(fleet, "ada")
    confirm = page(client.get("/bulk", params={"action": "cancel", "domain": "ops"}).text)
    listed = {tr.attrs["data-task"] for tr in confirm.find_all("tr", data_task=True)}
    assert listed == {str(t) for t in live}  # the claimed one too: a holder loses its lease
    data = [
        (i.attrs["name"], i.attrs["value"])
        for i in confirm.find("form", action="/bulk").find_all("input")
    ]
    assert client.post("/bulk", data=posted(data)).status_code == 200
    assert all(fleet.get(t).state == "cancelled" for t in live)
    assert fleet.get(kept).state == "pending"
    assert fleet.get(lease.task_id).state == "cancelled"
    csrf = csrf_of(client.get("/health").text)
    bad = [("csrf", csrf), ("action", "delete"), ("task", str(kept))]
    assert client.post("/bulk", data=posted(bad)).status_code == 400
    assert client.get("/bulk", params={"action": "delete"}).status_code == 400
    many = [("csrf", csrf), ("action", "cancel")] + [("task", str(kept))] * (MAX_BULK + 1)
    assert client.post("/bulk", data=posted(many)).status_code == 400
    assert fleet.get(kept).state == "pending"


def test_a_viewer_can_neither_see_nor_use_the_bulk_actions(fleet: Fleet) -> None:
    fleet.register("ada")
    task = dead(fleet, "flaky")
    _, viewer = fleet.create_token("viewer", name="watcher")
    _, admin = fleet.create_token("admin", name="boss")
    client = client_for(fleet, owner=False)
    response = client.post("/login", data={"token": viewer, "next": "/tasks"})
    assert response.status_code == 303
    listing = page(client.get("/tasks", params={"state": "dead"}).text)
    assert not listing.find_all("form", action="/bulk")
    assert client.get("/bulk", params={"action": "retry", "state": "dead"}).status_code == 403
    boss = client_for(fleet, owner=False)
    boss.post("/login", data={"token": admin, "next": "/tasks"})
    confirm = page(boss.get("/bulk", params={"action": "retry", "state": "dead"}).text)
    data = [
        (i.attrs["name"], i.attrs["value"])
        for i in confirm.find("form", action="/bulk").find_all("input")
    ]
    assert (
        client.post("/bulk", data=posted(data)).status_code == 403
    )  # the viewer, the admin's form
    assert fleet.get(task).state == "dead"
    assert boss.post("/bulk", data=posted(data)).status_code == 200
    assert fleet.get(task).state == "pending"


# ---------------------------------------------------------------- live pages


@pytest.mark.parametrize("path", ["/tasks?state=pending", "/health?range=24h", "/agents/ada"])
def test_the_tasks_health_and_agent_pages_reload_themselves_on_the_live_stream(
    client: TestClient, fleet: Fleet, path: str
) -> None:
    fleet.register("ada")
    doc = page(client.get(path).text)
    stream = doc.find(sse_connect="/live")
    region = stream.find(hx_trigger=True)
    assert region.attrs["hx-trigger"].startswith("sse:fleet")
    assert region.attrs["hx-get"] == path
    assert region.attrs["hx-select"] == f"#{region.attrs['id']} > *"
