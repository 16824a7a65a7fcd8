"""The fleet page in a real browser: a lane per agent, and work that moves between lanes
live -- a claim or a steal made by an agent elsewhere shows within two seconds, through the
``/live`` stream, with no reload.

"Without reload" is checked, not assumed: a mark left on the loaded document must survive
the update (a reload or a navigation would wipe it).
"""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page, expect

from tests.web.browser.conftest import (
    Served,
    assert_not_reloaded,
    lane_task,
    mark_page,
    open_live,
)

pytestmark = pytest.mark.slow

#: How soon a change made elsewhere must show on an open page (issue 15).
LIVE_WITHIN_MS = 2_000


def test_the_fleet_page_shows_a_lane_for_each_registered_agent(served: Served, page: Page) -> None:
    agents = ["ada", "bob", "cy-reviewer"]
    with served.fleet() as fleet:
        for agent in agents:
            fleet.register(agent, domains=["code"])
        waiting = fleet.post("in the pool").id
        queued = fleet.post("for bob", to="bob").id
    page.goto(served.at("/"))
    assert urlsplit(page.url).path == "/", "the owner's sign-in link opens an open fleet"
    lanes = page.locator("#lanes section.lane")
    expect(lanes.first).to_be_visible()
    drawn = lanes.evaluate_all("(found) => found.map((lane) => lane.dataset.lane)")
    assert sorted(a for a in drawn if a != "pool") == agents
    assert "pool" in drawn, "the shared pool has a lane of its own"
    expect(page.locator(lane_task("pool", waiting))).to_have_count(1)
    expect(page.locator(lane_task("bob", queued))).to_have_count(1)
    expect(page.locator(lane_task("pool", queued))).to_have_count(0)


def test_a_claim_from_the_cli_appears_in_its_lane_without_reload(
    served: Served, page: Page
) -> None:
    with served.fleet() as fleet:
        fleet.register("ada")
        task = fleet.post("fix the parser").id
    open_live(page, served.at("/"))
    expect(page.locator(lane_task("pool", task))).to_have_count(1)
    expect(page.locator(lane_task("ada", task))).to_have_count(0)
    mark_page(page)

    claimed = served.shoal_json("claim", "--agent", "ada")
    began = time.monotonic()
    assert claimed["task"]["id"] == task
    page.wait_for_selector(lane_task("ada", task, "data-held"), timeout=LIVE_WITHIN_MS)
    shown_in = time.monotonic() - began
    expect(page.locator(lane_task("pool", task))).to_have_count(0, timeout=500)
    assert_not_reloaded(page)
    print(f"claim shown in ada's lane {shown_in * 1000:.0f} ms after `shoal claim` returned")


def test_a_steal_moves_the_task_from_the_victims_lane_to_the_thiefs(
    served: Served, page: Page
) -> None:
    """ada is at work with two more tasks queued behind her; bob, with nothing of his own
    and an empty pool, steals from the tail of her queue -- the task she would reach last
    (steal_threshold 0, the default: any queue of a working agent may be stolen from)."""
    with served.fleet() as fleet:
        fleet.register("ada")
        fleet.register("bob")
        fleet.post("ada's first", to="ada")
        (running,) = fleet.claim("ada").tasks
        first = fleet.post("ada's next", to="ada").id
        second = fleet.post("ada's last", to="ada").id
    open_live(page, served.at("/"))
    expect(page.locator(lane_task("ada", running.id, "data-held"))).to_have_count(1)
    expect(page.locator(lane_task("ada", second))).to_have_count(1)
    mark_page(page)

    stolen = served.shoal_json("claim", "--agent", "bob")
    began = time.monotonic()
    assert (stolen["task"]["id"], stolen["source"]) == (second, "steal")
    page.wait_for_selector(
        lane_task("bob", second, "data-held", "data-stolen"), timeout=LIVE_WITHIN_MS
    )
    shown_in = time.monotonic() - began
    expect(page.locator(lane_task("ada", second))).to_have_count(0, timeout=500)
    expect(page.locator(lane_task("ada", first))).to_have_count(1)
    expect(page.locator(lane_task("ada", running.id, "data-held"))).to_have_count(1)
    assert_not_reloaded(page)
    print(f"steal shown in bob's lane {shown_in * 1000:.0f} ms after `shoal claim` returned")
