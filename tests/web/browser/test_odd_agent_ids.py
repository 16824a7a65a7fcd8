"""An agent id an older version took that is a path (issue 28, L5): ``x/../../agents/bob``.
Its lane's Pause form, left unquoted, posted to a URL the browser resolved to bob's; with the
id quoted whole, a real browser posts to that agent and to no other."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.helpers import plant_agent
from tests.web.browser.conftest import Served, act

pytestmark = pytest.mark.slow

ODD = "x/../../agents/bob"


def test_pause_on_an_odd_old_id_pauses_that_agent_and_not_the_one_it_names(
    served: Served, page: Page
) -> None:
    with served.fleet() as fleet:
        fleet.register("bob")
        plant_agent(fleet, ODD)
    page.goto(served.at("/"))
    lane = page.locator(f'section.lane[data-lane="{ODD}"]')
    expect(lane).to_have_count(1)
    form = lane.locator('form:has(button[data-action="pause"])')
    # The form's action as the browser resolved it: the id is one segment, quoted whole.
    resolved = form.evaluate("form => form.action")
    assert resolved == served.at("/agents/x%2F..%2F..%2Fagents%2Fbob/pause"), resolved

    act(page, lane.locator('button[data-action="pause"]'), "pause")
    with served.fleet() as fleet:
        now = fleet.clock.now()
        assert fleet.agent(ODD).paused(now)
        assert not fleet.agent("bob").paused(now)


def test_the_lane_of_an_odd_old_id_links_to_that_agents_page(served: Served, page: Page) -> None:
    with served.fleet() as fleet:
        fleet.register("bob")
        plant_agent(fleet, ODD)
        fleet.pause(ODD, for_="1h")
    page.goto(served.at("/"))
    link = page.locator(f'section.lane[data-lane="{ODD}"] a[data-agent-link]')
    assert link.evaluate("a => a.href") == served.at("/agents/x%2F..%2F..%2Fagents%2Fbob")
    link.click()
    expect(page.locator("h1")).to_contain_text(f"Agent {ODD}")
    expect(page.locator('h1 [data-status="paused"]')).to_have_count(1)
    resume = page.locator('button[data-action="resume"]')
    assert resume.evaluate("b => b.form.action") == served.at(
        "/agents/x%2F..%2F..%2Fagents%2Fbob/resume"
    )
    act(page, resume, "resume")
    with served.fleet() as fleet:
        assert not fleet.agent(ODD).paused(fleet.clock.now())
