"""Every page of the dashboard passes axe-core's scan with no serious or critical violation.

axe-core (vendored in ``vendor/``, see its README) runs inside the real page in Chromium,
after the page has drawn a small but busy fleet: lanes with held, queued and stolen work,
the pool, a dead task with its action buttons, and the sign-in page of a closed fleet. The
fleet has an admin token, so the pages are the ones an operator signed in sees.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page

from shoal import Fleet
from tests.web.browser.conftest import VIEWPORT, serving, sign_in

pytestmark = pytest.mark.slow

AXE = Path(__file__).parent / "vendor" / "axe.min.js"
AXE_VERSION = "4.14.1"  # vendor/README.md
#: The pages scanned signed in (and again in dark mode), besides a task's own.
PAGES = (
    "/",
    "/tasks",
    "/tasks?state=dead",
    "/health",
    "/health?range=7d",
    "/agents/ada",
    "/bulk?action=retry&state=dead",
)
#: The impacts that fail the scan; "moderate" and "minor" ones are printed, not failed.
BLOCKING = ("serious", "critical")


def busy_fleet(store: str) -> tuple[str, int]:
    """A fleet with some of everything a page can draw and an admin token: (the token, the
    id of its dead task)."""
    with Fleet.init(store) as fleet:
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
        _, secret = fleet.create_token("admin", name="axe")
    return secret, claim.tasks[0].id


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


def blocking(path: str, violations: list[dict[str, Any]]) -> list[str]:
    """The serious and critical violations, one line each; the others are printed."""
    for found in violations:
        print(f"{path}: {found['impact']}: {found['id']}: {found['help']}")
    return [
        f"{path}: {v['impact']} {v['id']}: {v['help']} ({v['helpUrl']}) at "
        + "; ".join(" ".join(node["target"]) for node in v["nodes"][:5])
        for v in violations
        if v["impact"] in BLOCKING
    ]


def test_every_page_has_no_serious_accessibility_violation(
    tmp_path: Path, browser: Browser, page: Page
) -> None:
    """One server for every page (each page is scanned, and every violation of every page
    is reported together). The sign-in page is scanned from a fresh profile, the others
    signed in as admin, so the action buttons are drawn, in light mode and in dark."""
    secret, dead = busy_fleet(f"sqlite://{tmp_path / 'fleet.db'}")
    found: list[str] = []
    with serving(tmp_path) as served:
        answer = page.goto(served.at("/login"))
        assert answer is not None and answer.status == 200
        found += blocking("/login", scan(page))
        admin = browser.new_context(viewport=VIEWPORT, bypass_csp=True)
        try:
            admin.set_default_timeout(10_000)
            signed_in = admin.new_page()
            sign_in(signed_in, served.base, secret)
            for path in (*PAGES, f"/tasks/{dead}"):
                answer = signed_in.goto(served.at(path))
                assert answer is not None and answer.status == 200, f"{path}: {answer}"
                found += blocking(path, scan(signed_in))
            signed_in.emulate_media(color_scheme="dark")  # the same contrast rules hold
            for path in PAGES:
                signed_in.goto(served.at(path))
                found += blocking(f"{path} (dark)", scan(signed_in))
        finally:
            admin.close()
    assert not found, "\n".join(found)
