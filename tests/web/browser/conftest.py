"""The browser tier: a real ``shoal serve`` process on a SQLite fleet in a temporary folder,
driven by real headless Chromium through Playwright.

Chromium is Debian's (``/usr/bin/chromium``, which ``.ci/run`` installs with apt-get):
Playwright drives it through ``executable_path`` and never downloads a browser of its own
(none can be downloaded on these machines). Where no Chromium exists the tests skip and
say so, unless ``SHOAL_REQUIRE_BROWSER=1`` (CI sets it), where that is a failure: a CI run
that skipped every browser test would look green and have checked nothing.

What the pages promise the tests (the DOM contract, kept by the dashboard's templates):
each agent lane is ``section.lane[data-lane=AGENT]`` and the pool ``[data-lane=pool]``;
every task drawn carries ``data-task=ID`` (plus ``data-held`` when held, ``data-stolen``
when stolen) inside its lane; the lanes reload on the ``fleet`` event of ``/live``;
dead-letter rows are ``#dead tr[data-task=ID]`` on /health; actions are
``button[data-action=...]`` in POST forms, confirmed by a JS confirm or a confirm page.

Setup and checks of the fleet's state go through the Fleet API in this process, on the
same file the server serves; the acts under test go through the browser or the real
``shoal`` script, as a person or an agent would.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    Dialog,
    Locator,
    Page,
    Request,
    sync_playwright,
)

from shoal import Fleet
from shoal.local_secrets import read_secret, serve_secret_file

ENV_REQUIRE = "SHOAL_REQUIRE_BROWSER"
#: Flags that keep Debian's Chromium quiet and offline on these machines; Playwright's
#: launch adds a fresh user-data folder of its own.
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
VIEWPORT = {"width": 1280, "height": 800}
SCRIPT = Path(sys.executable).with_name("shoal")
COMMAND = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "shoal.faces.cli"]
#: Seconds a server may take to answer its first request (an import of FastAPI and uvicorn
#: on a loaded two-core machine).
START_DEADLINE = 60.0


def required() -> bool:
    return os.environ.get(ENV_REQUIRE, "") not in ("", "0")


def no_browser(reason: str) -> NoReturn:
    """Skip for want of a browser, or fail where one is required."""
    if required():
        pytest.fail(f"{reason} ({ENV_REQUIRE} is set: CI must run the browser tests)")
    pytest.skip(f"{reason}; install Debian's chromium (apt-get install chromium)")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium per test module. Not per session: Playwright's sync API keeps
    an event loop running in the test's thread while it is open, so every later test of the
    same process that starts its own loop (``asyncio.run``) would fail."""
    chromium = shutil.which("chromium")
    if chromium is None:
        no_browser("no Chromium here (`chromium` is not on the PATH)")
    with sync_playwright() as playwright:
        found = playwright.chromium.launch(
            executable_path=chromium, headless=True, args=LAUNCH_ARGS
        )
        yield found
        found.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    """A fresh browser profile (no cookies) at the screenshots' size. The pages' own
    Content-Security-Policy is bypassed only so that axe can be injected."""
    made = browser.new_context(viewport=VIEWPORT, bypass_csp=True)
    made.set_default_timeout(10_000)
    yield made
    made.close()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cli_env() -> dict[str, str]:
    """This environment without shoal's own variables (the fleet is given by --store), but
    for the test session's folder of private files (``SHOAL_STATE_DIR``)."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("SHOAL_") or k == "SHOAL_STATE_DIR"
    }
    env.update(COLUMNS="200", NO_COLOR="1")
    return env


@dataclass
class Served:
    """A running ``shoal serve``: the fleet it serves (``store``) and where (``base``)."""

    store: str
    base: str
    log: Path

    def fleet(self) -> Fleet:
        """A handle on the served fleet, as another process on this machine would open."""
        return Fleet.open(self.store, create=False)

    def at(self, path: str) -> str:
        return self.base + path

    @property
    def sign_in_url(self) -> str:
        """The link ``shoal serve`` prints to its owner's terminal while the fleet is open:
        the sign-in secret, read from the file only the owner can read."""
        secret = read_secret(serve_secret_file(self.store), "the sign-in secret")
        assert secret is not None, "shoal serve made no sign-in secret"
        return f"{self.base}/login?token={secret}"

    def shoal(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run the real ``shoal`` script on the served fleet; fails the test if it fails."""
        done = subprocess.run(
            [*COMMAND, "--store", self.store, *args],
            env=cli_env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, f"shoal {' '.join(args)}: {done.stdout}{done.stderr}"
        return done

    def shoal_json(self, *args: str) -> Any:
        """The same with ``--json``: what it printed, parsed."""
        return json.loads(self.shoal(*args, "--json").stdout)


def _answers(base: str) -> bool:
    """Whether the server answers HTTP at all (asking for no page: any status will do)."""
    try:
        with urllib.request.urlopen(base + "/no-such-page", timeout=5):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


@contextlib.contextmanager
def serving(folder: Path) -> Iterator[Served]:
    """``shoal serve`` on the SQLite fleet in ``folder`` (made if new) on a free port,
    yielded once it answers; stopped afterwards. A port taken between the probe and the
    bind (another test's server) is retried on another."""
    store = f"sqlite://{folder / 'fleet.db'}"
    Fleet.open(store).close()
    for attempt in range(3):
        port = free_port()
        log = folder / f"serve-{port}.log"
        with log.open("w") as sink:
            proc = subprocess.Popen(
                [*COMMAND, "--store", store, "serve", "--port", str(port)],
                env=cli_env(),
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + START_DEADLINE
            while proc.poll() is None and not _answers(base):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"shoal serve did not answer: {log.read_text()}")
                time.sleep(0.05)
            if proc.poll() is None:
                yield Served(store, base, log)
                return
            if attempt == 2:
                raise RuntimeError(f"shoal serve exited {proc.returncode}: {log.read_text()}")
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """A new, open fleet (no token) served on loopback."""
    with serving(tmp_path) as found:
        yield found


@pytest.fixture(autouse=True)
def owner_signed_in(request: pytest.FixtureRequest) -> None:
    """A test of an open fleet (``served``) sees it as its owner does: the browser has
    followed the sign-in link ``shoal serve`` printed, which set the session cookie."""
    if "served" in request.fixturenames and "page" in request.fixturenames:
        served: Served = request.getfixturevalue("served")
        page: Page = request.getfixturevalue("page")
        page.goto(served.sign_in_url)
        assert urlsplit(page.url).path == "/", f"the sign-in link led to {page.url}"


def open_live(page: Page, url: str) -> None:
    """Load a page and wait until its live stream (``/live``) is connected, so an event
    that follows cannot fall between the page's render and the stream's start."""
    with page.expect_response(lambda r: "/live" in r.url, timeout=5_000) as answer:
        page.goto(url)
    assert answer.value.status == 200, f"/live answered {answer.value.status}"


def mark_page(page: Page) -> None:
    """Leave a mark on the loaded document: a reload (or a navigation) wipes it."""
    page.evaluate("() => { window.__shoalMark = 'still here'; }")


def assert_not_reloaded(page: Page) -> None:
    mark: Any = page.evaluate("() => window.__shoalMark")
    assert mark == "still here", "the page was reloaded (or navigated): not a live update"


def act(page: Page, button: Locator, action: str) -> list[str]:
    """Press an action button and confirm it as a person would: accept the browser's
    confirm dialog (``hx-confirm``), or, where the button leads to a confirm page, press
    that page's button for the same action. Returns once the action's POST has been
    answered (so the fleet has changed, or refused), with the dialogs' messages (none for
    a confirm page). The page may still be following the 303 back: wait on what it shows."""
    asked: list[str] = []
    posted: list[Request] = []

    def accept(dialog: Dialog) -> None:
        asked.append(dialog.message)
        dialog.accept()

    def answered(request: Request) -> None:
        if request.method == "POST":
            posted.append(request)

    page.on("dialog", accept)
    page.on("requestfinished", answered)
    try:
        before = page.url
        button.click()
        deadline = time.monotonic() + 10
        while not posted:
            assert time.monotonic() < deadline, f"pressing {action!r} posted nothing"
            if not asked and page.url != before:  # a confirm page: press its button
                page.wait_for_load_state()
                confirm = page.locator(f'form[method="post" i] button[data-action="{action}"]')
                if confirm.count() == 0:
                    confirm = page.locator('form[method="post" i] button[type="submit"]')
                before = page.url
                confirm.first.click()
            page.wait_for_timeout(20)
    finally:
        page.remove_listener("dialog", accept)
        page.remove_listener("requestfinished", answered)
    return asked


def sign_in(page: Page, base: str, secret: str) -> None:
    """Sign in through the sign-in page: paste the token into its (labelled) field."""
    page.goto(base + "/login")
    field = page.get_by_label(re.compile("token", re.IGNORECASE))
    field.fill(secret)
    field.press("Enter")
    page.wait_for_url(lambda url: urlsplit(url).path != "/login")


def lane_task(agent: str, task_id: int, *marks: str) -> str:
    """The selector of task ``task_id`` drawn in ``agent``'s lane (or the pool's)."""
    return f'section.lane[data-lane="{agent}"] [data-task="{task_id}"]' + "".join(
        f"[{mark}]" for mark in marks
    )
