"""The pages people keep open, in a real browser: the task list and the health page follow
the fleet live (no reload: a mark left on the document survives), the agent page opens
from its lane, a bulk retry goes through its confirmation step, and the pages follow the
system's dark mode.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page, expect

from shoal import Fleet, TaskState
from tests.web.browser.conftest import Served, assert_not_reloaded, mark_page, open_live

pytestmark = pytest.mark.slow

#: How soon a change made elsewhere shows on an open page (the feed's push, then the
#: page's reload of its region, which waits at most its throttle).
LIVE_WITHIN_MS = 8_000


def make_dead(fleet: Fleet, title: str, agent: str = "ada") -> int:
    task = fleet.post(title, max_attempts=1, priority=1).id
    claim = fleet.claim(agent)
    assert claim.tasks[0].id == task
    fleet.fail(claim.leases[0], "it broke", retry=False)
    return task


def test_the_task_list_follows_the_fleet_without_reload(served: Served, page: Page) -> None:
    with served.fleet() as fleet:
        fleet.register("ada")
        first = fleet.post("already there").id
    open_live(page, served.at("/tasks?state=pending"))
    expect(page.locator(f'#task-list tr[data-task="{first}"]')).to_have_count(1)
    mark_page(page)
    served.shoal("add", "posted from the CLI <b>not bold</b>")
    with served.fleet() as fleet:
        (new,) = (t.id for t in fleet.tasks(state="pending") if t.id != first)
    row = page.locator(f'#task-list tr[data-task="{new}"]')
    expect(row).to_have_count(1, timeout=LIVE_WITHIN_MS)
    expect(row.locator("td.title")).to_contain_text("<b>not bold</b>")  # shown as text
    assert_not_reloaded(page)
    served.shoal("claim", "--agent", "ada")  # takes one: it leaves the pending list
    expect(page.locator("#task-list tr[data-task]")).to_have_count(1, timeout=LIVE_WITHIN_MS)
    assert_not_reloaded(page)


def test_the_health_page_follows_the_fleet_without_reload(served: Served, page: Page) -> None:
    with served.fleet() as fleet:
        fleet.register("ada")
    open_live(page, served.at("/health?range=24h"))
    expect(page.locator("#charts figure")).to_have_count(4)
    expect(page.locator('#charts a[data-range="24h"]')).to_have_attribute("aria-current", "true")
    mark_page(page)
    with served.fleet() as fleet:
        dead = make_dead(fleet, "flaky deploy")
    row = page.locator(f'section#dead tr[data-task="{dead}"]')
    expect(row).to_have_count(1, timeout=LIVE_WITHIN_MS)
    expect(page.locator('#charts figure[data-chart="Failed"] figcaption')).to_contain_text(
        "1 tasks in the last 24 hours", timeout=LIVE_WITHIN_MS
    )
    assert_not_reloaded(page)
    page.locator('#charts a[data-range="7d"]').click()
    page.wait_for_url(re.compile(r"/health\?range=7d$"))
    expect(page.locator('#charts figure[data-chart="Done"] svg text.unit')).to_have_text(
        "tasks per hour"
    )


def test_an_agents_page_opens_from_its_lane(served: Served, page: Page) -> None:
    with served.fleet() as fleet:
        fleet.register("ada")
        running = fleet.post("running now", to="ada").id
        fleet.claim("ada")
        queued = fleet.post("next up", to="ada").id
    page.goto(served.at("/"))
    page.locator('section.lane[data-lane="ada"] a[data-agent-link]').click()
    page.wait_for_url(lambda url: urlsplit(url).path == "/agents/ada")
    expect(page.locator(f'li[data-task="{running}"][data-held]')).to_have_count(1)
    expect(page.locator(f'li[data-task="{queued}"]')).to_have_count(1)
    expect(page.locator("#charts figure")).to_have_count(4)
    claimed = page.locator("table.events tr[data-event]", has_text="claimed")
    expect(claimed).to_have_count(1)


def test_bulk_retry_asks_first_then_retries_every_matching_task(served: Served, page: Page) -> None:
    with served.fleet() as fleet:
        fleet.register("ada")
        doomed = [make_dead(fleet, f"nightly job {i}") for i in range(3)]
        other = make_dead(fleet, "unrelated")
    page.goto(served.at("/tasks?state=dead&q=nightly"))
    page.locator('button[data-action="bulk-retry"]').click()
    page.wait_for_url(lambda url: urlsplit(url).path == "/bulk")
    expect(page.locator("h1")).to_have_text("Retry 3 tasks?")
    with served.fleet() as fleet:  # asking changed nothing
        assert all(fleet.get(t).state is TaskState.DEAD for t in doomed)
    page.locator('button[data-action="retry-all"]').click()
    expect(page.locator("h1")).to_have_text("Retried 3 of 3")
    with served.fleet() as fleet:
        assert all(fleet.get(t).state is TaskState.PENDING for t in doomed)
        assert fleet.get(other).state is TaskState.DEAD


def test_the_pages_follow_the_systems_dark_mode(served: Served, page: Page) -> None:
    with served.fleet() as fleet:
        fleet.register("ada")
        fleet.post("one")
    colours = {}
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.goto(served.at("/health"))
        colours[scheme] = page.evaluate(
            "() => [getComputedStyle(document.body).backgroundColor,"
            " getComputedStyle(document.body).color,"
            " getComputedStyle(document.querySelector('svg.chart .line')).stroke]"
        )
    assert colours["light"][0] == "rgb(255, 255, 255)"
    assert colours["dark"][0] == "rgb(18, 20, 22)"
    assert colours["dark"][1] != colours["light"][1]
    assert colours["dark"][2] != colours["light"][2]  # the charts too
