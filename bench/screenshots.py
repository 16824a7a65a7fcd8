"""The dashboard's screenshots in docs/screenshots/ (README's "Dashboard" section), taken
by headless Chromium from a real ``shoal serve`` on a small fleet at work.

Why a script
------------
Pictures of a page go stale with the page. This makes them again from scratch, the same
way every time: ``make screenshots`` after a change to the dashboard. It is not part of
the test run (the browser tests check the pages; this only draws them).

The fleet: six agents with roles, domains and skills; an hour of finished work behind
them (about a hundred tasks posted in bursts and done under a manual clock set an hour
back, so the health charts have a history); and 25 tasks live now -- six held, queues of
different depths, the pool, one task stolen from a busy agent's queue and one dead after
its one attempt (and two more deploys after it), and one agent paused by a person. An admin
token is
made and the pages are taken signed in, as an operator sees them (the action buttons
drawn); the sign-in page is taken from a fresh browser.

Needs Debian's ``chromium`` (``apt-get install chromium``): Playwright drives it through
``executable_path`` and never downloads a browser.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from playwright.sync_api import Page, ViewportSize, sync_playwright

from _served import serving
from shoal import Fleet, ManualClock
from shoal.model import Lease

VIEWPORT: ViewportSize = {"width": 1280, "height": 800}
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
AGENTS = [
    # id, role, domains, skills, max_concurrent
    ("ada", "coder", ["api"], ["python", "sql"], 2),
    ("bob", "reviewer", ["api", "web"], ["review"], 1),
    ("cy", "coder", ["web"], ["typescript", "css"], 2),
    ("dee", "researcher", ["docs"], ["search"], 1),
    ("eli", "tester", ["api", "web"], ["python", "playwright"], 2),
    ("fay", "ops", ["infra"], ["shell", "terraform"], 1),
]
HISTORY = [
    ("Add pagination to /v2/orders", "api"),
    ("Index orders.created_at", "api"),
    ("Fix the date picker's keyboard focus", "web"),
    ("Dark mode for the settings page", "web"),
    ("Review: retry budget for webhooks", "api"),
    ("Review: signup form validation", "web"),
    ("Survey rate-limit libraries", "docs"),
    ("Regression test for refund rounding", "api"),
    ("E2E: checkout with a saved card", "web"),
    ("Flaky test: session expiry", "web"),
    ("Rotate the staging TLS certificate", "infra"),
    ("Terraform: move logs bucket to eu-west", "infra"),
    ("Remove the legacy CSV export", "api"),
    ("Lazy-load product images", "web"),
]
QUEUED = [
    ("ada", "Webhook signatures with rotating keys", "api", 3),
    ("ada", "Backfill orders.currency", "api", 5),
    ("ada", "Cap export size at 50k rows", "api", 6),
    ("ada", "Deprecate /v1/customers", "api", 7),
    ("ada", "Tidy the error codes table", "api", 8),
    ("cy", "Empty state for the search page", "web", 5),
    ("cy", "Toast messages announce to screen readers", "web", 4),
    ("eli", "Load test: 200 concurrent checkouts", "api", 6),
    ("fay", "Alert on disk above 85% on db-2", "infra", 3),
    ("fay", "Runbook for a full WAL disk", "infra", 6),
    ("eli", "Fuzz the address parser", "api", 7),
    ("dee", "Compare vector stores for the help search", "docs", 5),
    ("cy", "Replace moment.js with date-fns", "web", 7),
]
POOL: list[tuple[str, str | None, int]] = [
    ("Write the migration guide for v3", "docs", 4),
    ("Investigate slow cold starts", "infra", 5),
    ("Triage: 'invoice PDF is blank' report", None, 2),
    ("Benchmark JSON encoders", "api", 6),
    ("Audit third-party scripts on checkout", "web", 5),
    ("Summarise last week's incidents", "docs", 7),
    ("Upgrade the ORM to 2.x", "api", 5),
    ("Translate the onboarding emails (de, fr)", "docs", 6),
    ("Check the Dockerfile for root user", "infra", 4),
    ("Reproduce: cart total off by one cent", "api", 3),
]


def work_an_hour(fleet: Fleet) -> None:
    """An hour of work, in steps of 30 s under the fleet's manual clock: bursts of tasks
    posted to the pool, each agent claiming while it has room and finishing each task a
    few minutes later. Everything is done by the end (no lease outlives the past)."""
    clock = fleet.clock
    assert isinstance(clock, ManualClock)
    rng = random.Random(7)
    held: dict[str, list[tuple[Lease, float]]] = {agent: [] for agent, *_ in AGENTS}
    posted = 0
    for step in range(150):
        if step % 12 == 0 and step <= 84:
            burst = rng.randint(10, 18)
            for _ in range(burst):
                title, domain = HISTORY[posted % len(HISTORY)]
                fleet.post(title, domain=domain, priority=rng.randint(3, 7))
                posted += 1
        for agent, *_, most in AGENTS:
            still = []
            for lease, due in held[agent]:
                if due <= clock.now():
                    fleet.complete(lease, {"ok": True})
                else:
                    still.append((lease, due))
            held[agent] = still
            while len(held[agent]) < most and (claim := fleet.claim(agent)):
                held[agent].append((claim.leases[0], clock.now() + rng.uniform(60, 420)))
        clock.advance(30)
    for leases in held.values():
        for lease, _ in leases:
            fleet.complete(lease, {"ok": True})
    assert not fleet.tasks(state="pending"), "the hour's work was not all done"


def build(store: str) -> tuple[int, int, str]:
    """Make the fleet; return (the stolen task, the dead task, an admin token)."""
    with Fleet.open(store, clock=ManualClock(time.time() - 3600)) as past:
        past.configure(max_agents=10)
        for agent, role, domains, skills, most in AGENTS:
            past.register(agent, role=role, domains=domains, skills=skills, max_concurrent=most)
        work_an_hour(past)
    with Fleet.open(store) as now:
        for agent, *_ in AGENTS:
            now.heartbeat(agent)
        doomed = now.post("Deploy the search service", domain="infra", max_attempts=1, to="fay")
        failed = now.claim("fay")
        now.fail(failed.leases[0], "helm: timed out waiting for the rollout", retry=False)
        for title in ("Deploy the billing worker", "Deploy the image resizer"):
            now.post(title, domain="infra", max_attempts=1, to="fay")
            lease = now.claim("fay").leases[0]
            now.fail(lease, "helm: timed out waiting for the rollout", retry=False)
        for agent, title, domain, priority in QUEUED:
            now.post(title, domain=domain, to=agent, priority=priority)
        for agent in ("ada", "ada", "cy", "eli", "fay"):
            now.claim(agent)
        stolen = now.claim("bob")  # the pool is empty: bob takes from the tail of a queue
        assert stolen.sources == ("steal",), stolen
        for title, area, rank in POOL:
            now.post(title, domain=area, priority=rank)
        now.post("Reply to the security questionnaire", priority=4)
        now.pause("dee", for_="30m")  # held by a person: its queue went back to the pool
        _, secret = now.create_token("admin", name="screenshots")
    return stolen.tasks[0].id, doomed.id, secret


def shoot(page: Page, url: str, path: Path) -> None:
    page.goto(url)
    page.wait_for_load_state("load")
    page.screenshot(path=str(path))
    print(f"  {path}  ({url})")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Screenshots of each dashboard page.")
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    args = parser.parse_args(argv)
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("no chromium on the PATH: apt-get install chromium")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        store = f"sqlite://{Path(folder) / 'fleet.db'}"
        Fleet.init(store).close()
        stolen, dead, secret = build(store)
        with serving(store, Path(folder) / "serve.log") as served, sync_playwright() as pw:
            base = served.base
            browser = pw.chromium.launch(executable_path=chromium, args=LAUNCH_ARGS)
            fresh = browser.new_context(viewport=VIEWPORT)
            shoot(fresh.new_page(), f"{base}/login", args.out / "login.png")
            context = browser.new_context(viewport=VIEWPORT)
            page = context.new_page()
            page.goto(f"{base}/login")
            page.get_by_label("token", exact=False).fill(secret)
            page.get_by_label("token", exact=False).press("Enter")
            page.wait_for_url(f"{base}/")
            shoot(page, f"{base}/", args.out / "fleet.png")
            shoot(page, f"{base}/tasks", args.out / "tasks.png")
            shoot(page, f"{base}/tasks/{stolen}", args.out / "task.png")
            shoot(page, f"{base}/tasks/{dead}", args.out / "task-dead.png")
            shoot(page, f"{base}/health", args.out / "health.png")
            charts = page.get_by_role("heading", name="Over time")
            charts.evaluate("(heading) => heading.scrollIntoView({block: 'start'})")
            page.screenshot(path=str(args.out / "health-charts.png"))
            print(f"  {args.out / 'health-charts.png'}  ({base}/health, its charts)")
            shoot(page, f"{base}/agents/ada", args.out / "agent.png")
            shoot(page, f"{base}/bulk?action=retry&state=dead", args.out / "bulk.png")
            dark = browser.new_context(viewport=VIEWPORT, color_scheme="dark")
            night = dark.new_page()
            night.goto(f"{base}/login")
            night.get_by_label("token", exact=False).fill(secret)
            night.get_by_label("token", exact=False).press("Enter")
            night.wait_for_url(f"{base}/")
            shoot(night, f"{base}/health", args.out / "health-dark.png")
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
