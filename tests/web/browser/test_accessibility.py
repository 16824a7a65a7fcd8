"""Every page of the dashboard passes axe-core's scan with no serious or critical violation.

axe-core (vendored in ``vendor/``, see its README) runs inside the real page in Chromium,
after the page has drawn a small but busy fleet: lanes with held, queued and stolen work,
the pool, a dead task with its action buttons, and the sign-in page of a closed fleet. The
fleet has an admin token, so the pages are the ones an operator signed in sees.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page

from shoal import Fleet
from tests.web.browser.conftest import VIEWPORT, Served, serving, sign_in

pytestmark = pytest.mark.slow

AXE = Path(__file__).parent / "vendor" / "axe.min.js"
AXE_VERSION = "4.14.1"  # vendor/README.md
#: The impacts that fail the scan; "moderate" and "minor" ones are printed, not failed.
BLOCKING = ("serious", "critical")


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, str, int]]:
    """A served fleet with some of everything a page can draw, an admin token, and the id
    of its dead task: (the server, the token, the task)."""
    folder = tmp_path_factory.mktemp("axe")
    with Fleet.init(f"sqlite://{folder / 'fleet.db'}") as fleet:
        for agent in ("ada", "bob", "cy"):
            fleet.register(agent, domains=["code"], skills=["python"], max_concurrent=2)
        fleet.post("ada's running task", to="ada", priority="high")
        fleet.claim("ada")
        fleet.post_many([{"title": f"queued for ada {i}", "to": "ada"} for i in range(3)])
        assert fleet.claim("bob").sources == ("steal",)  # the pool is empty: bob steals
        fleet.post_many([{"title": f"pool task {i}", "skills": ["python"]} for i in range(4)])
        fleet.post("<script>alert('task text is untrusted')</script>", domain="code")
        fleet.post("flaky", max_attempts=1, to="cy")
        claim = fleet.claim("cy")
        fleet.fail(claim.leases[0], "it broke", retry=False)
        dead = claim.tasks[0].id
        _, secret = fleet.create_token("admin", name="axe")
    with serving(folder) as served:
        yield served, secret, dead


@pytest.fixture(scope="module")
def admin(browser: Browser, busy: tuple[Served, str, int]) -> Iterator[BrowserContext]:
    """A browser profile signed in as admin (so the action buttons are drawn)."""
    served, secret, _ = busy
    context = browser.new_context(viewport=VIEWPORT, bypass_csp=True)
    context.set_default_timeout(10_000)
    sign_in(context.new_page(), served.base, secret)
    yield context
    context.close()


def scan(page: Page) -> list[dict[str, Any]]:
    """Run axe on the loaded page; its violations. A scan that checked nothing (axe not
    loaded, or no rule applied) fails rather than passing empty."""
    page.add_script_tag(path=str(AXE))
    result: dict[str, Any] = page.evaluate(
        "async () => await axe.run(document, { resultTypes: ['violations'] })"
    )
    assert result["testEngine"]["version"] == AXE_VERSION
    assert len(result["passes"]) > 10, "axe checked (almost) nothing on the page"
    return list(result["violations"])


def verdict(path: str, violations: list[dict[str, Any]]) -> None:
    for found in violations:
        print(f"{path}: {found['impact']}: {found['id']}: {found['help']}")
    blocking = [v for v in violations if v["impact"] in BLOCKING]
    assert not blocking, "\n".join(
        f"{path}: {v['impact']} {v['id']}: {v['help']} ({v['helpUrl']}) at "
        + "; ".join(" ".join(node["target"]) for node in v["nodes"][:5])
        for v in blocking
    )


@pytest.mark.parametrize("path", ["/", "/tasks", "/tasks?state=dead", "/tasks/{dead}", "/health"])
def test_a_signed_in_page_has_no_serious_accessibility_violation(
    busy: tuple[Served, str, int], admin: BrowserContext, path: str
) -> None:
    served, _, dead = busy
    path = path.format(dead=dead)
    page = admin.new_page()
    try:
        answer = page.goto(served.at(path))
        assert answer is not None and answer.status == 200, f"{path}: {answer}"
        verdict(path, scan(page))
    finally:
        page.close()


def test_the_sign_in_page_has_no_serious_accessibility_violation(
    busy: tuple[Served, str, int], page: Page
) -> None:
    served, _, _ = busy
    answer = page.goto(served.at("/login"))
    assert answer is not None and answer.status == 200
    verdict("/login", scan(page))
