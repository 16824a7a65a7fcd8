"""A person acting on the fleet in a real browser: retrying a dead task from the dead-letter
view, and signing in -- where a viewer sees the fleet but cannot change it.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page, expect

from shoal import Fleet, TaskState
from tests.web.browser.conftest import Served, act, lane_task, serving, sign_in

pytestmark = pytest.mark.slow


def make_dead(fleet: Fleet, agent: str = "ada") -> int:
    """A task that failed on its one attempt: dead, waiting in the dead-letter view."""
    fleet.register(agent)
    task = fleet.post("flaky deploy", max_attempts=1).id
    claim = fleet.claim(agent)
    assert claim.tasks[0].id == task
    fleet.fail(claim.leases[0], "the deploy timed out", retry=False)
    assert fleet.get(task).state is TaskState.DEAD
    return task


def test_retry_from_the_dead_letter_view_brings_the_task_back(served: Served, page: Page) -> None:
    with served.fleet() as fleet:
        dead = make_dead(fleet)
        alive = fleet.post("unrelated work").id
    page.goto(served.at("/tasks?state=dead"))
    expect(page.locator(f'tr[data-task="{dead}"]')).to_have_count(1)
    expect(page.locator(f'tr[data-task="{alive}"]')).to_have_count(0)
    page.locator(f'tr[data-task="{dead}"] a[href$="/tasks/{dead}"]').first.click()
    page.wait_for_url(re.compile(rf"/tasks/{dead}$"))
    expect(page.locator("body")).to_contain_text("the deploy timed out")

    page.goto(served.at("/health"))
    row = page.locator(f'section#dead tr[data-task="{dead}"]')
    expect(row).to_have_count(1)
    expect(page.locator(f'section#dead tr[data-task="{alive}"]')).to_have_count(0)
    act(page, row.locator('button[data-action="retry"]'), "retry")

    with served.fleet() as fleet:
        assert fleet.get(dead).state is TaskState.PENDING
        assert fleet.get(alive).state is TaskState.PENDING
    page.wait_for_url(lambda url: urlsplit(url).path == "/health")  # sent back (303)
    expect(page.locator("section#dead")).to_have_count(1)
    expect(page.locator(f'section#dead tr[data-task="{dead}"]')).to_have_count(0)
    page.goto(served.at(f"/tasks/{dead}"))
    expect(page.locator("body")).to_contain_text(re.compile(r"\bpending\b", re.IGNORECASE))
    page.goto(served.at("/tasks?state=dead"))
    expect(page.locator(f'tr[data-task="{dead}"]')).to_have_count(0)


def test_signing_in_with_a_viewer_token_shows_the_fleet_but_no_way_to_change_it(
    tmp_path: Path, page: Page
) -> None:
    store = f"sqlite://{tmp_path / 'fleet.db'}"
    with Fleet.init(store) as fleet:
        dead = make_dead(fleet)
        queued = fleet.post("for ada", to="ada").id
        _, secret = fleet.create_token("viewer", name="browser test")
        ada = fleet.agent("ada")
    with serving(tmp_path) as served:
        page.goto(served.at("/"))
        assert urlsplit(page.url).path == "/login", f"a closed fleet sent / to {page.url}"
        expect(page.locator("section.lane")).to_have_count(0)

        field = page.get_by_label(re.compile("token", re.IGNORECASE))
        field.fill("shoal_" + "x" * 40)
        field.press("Enter")
        page.wait_for_load_state()
        assert urlsplit(page.url).path == "/login", "a wrong token must not sign in"
        expect(page.locator("section.lane")).to_have_count(0)

        sign_in(page, served.base, secret)
        page.goto(served.at("/"))
        expect(page.locator(lane_task("ada", queued))).to_have_count(1)

        for path in ("/", "/health", f"/tasks/{dead}", "/tasks?state=dead"):
            page.goto(served.at(path))
            assert urlsplit(page.url).path == urlsplit(path).path
            buttons = page.locator("button[data-action]")
            if buttons.count():  # drawn: then pressing one must change nothing
                act(page, buttons.first, buttons.first.get_attribute("data-action") or "")
        with served.fleet() as fleet:
            assert fleet.get(dead).state is TaskState.DEAD, "a viewer's action went through"
            assert fleet.get(queued).state is TaskState.PENDING
            now = fleet.agent("ada")
            assert (now.status, now.paused_until) == (ada.status, ada.paused_until)
