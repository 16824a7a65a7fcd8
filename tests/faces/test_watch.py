"""``shoal status --watch``: the frame (``live.fleet_view``) against a real SQLite fleet in
this process, the loop (``cli_watch.watch_status``) on a console that claims a terminal, and
the real command: refused with a hint when piped, redrawn in a pseudo-terminal until Ctrl-C.
"""

from __future__ import annotations

import io
import os
import select
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from shoal import Fleet, ManualClock
from shoal.errors import BadInput
from shoal.faces.cli.live import fleet_view, queue_bar, safe_text
from shoal.faces.cli.watch import StealFollower, watch_status
from tests.helpers import one, wait_until

#: A title an agent could post to break a terminal view: markup (one tag unbalanced, which
#: rich would refuse if it read it as markup), a colour escape, an OSC title change ending in
#: BEL, and a newline.
HOSTILE = "[bold red]pwn[/] [/x] \x1b[31mred\x1b]0;owned\x07 tail\nnext"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def fleet(tmp_path: Path, clock: ManualClock) -> Iterator[Fleet]:
    with Fleet.open(f"sqlite://{tmp_path}/fleet.db", clock=clock) as opened:
        yield opened


@pytest.fixture
def busy(fleet: Fleet, clock: ManualClock) -> Fleet:
    """ada holds a stalled task with five queued behind it, bob holds one he stole from her,
    cy is paused by the breaker after her task died, dee holds the hostile title; one task
    waits out a not_before, one sits in the pool; there is an assessment."""
    for agent, room in (("ada", 2), ("bob", 2), ("cy", 1), ("dee", 1)):
        fleet.register(agent, max_concurrent=room)
    fleet.post("slow job", expected_duration=10, to="ada")
    one(fleet.claim("ada"))
    for i in range(6):
        fleet.post(f"queued {i}", to="ada", priority=9)
    stolen, _ = one(fleet.claim("bob"))
    assert stolen.stolen
    fleet.configure(failure_streak=1)
    fleet.post("doomed", max_attempts=1, to="cy")
    _, lease = one(fleet.claim("cy"))
    fleet.fail(lease, "boom")
    assert fleet.claim("cy").reason == "paused"
    hostile = fleet.post("placeholder", to="dee")  # HOSTILE is refused at input now;
    with sqlite3.connect(fleet.url.removeprefix("sqlite://")) as db:  # as an older shoal kept it
        db.execute("UPDATE tasks SET title = ? WHERE id = ?", (HOSTILE, hostile.id))
    db.close()
    one(fleet.claim("dee"))
    fleet.post("later", not_before=clock.now() + 300)
    fleet.post("in the pool", skills=["rust"])
    clock.advance(100)
    for agent in ("ada", "bob", "cy", "dee"):
        fleet.heartbeat(agent)
    assert fleet.reap().stalled == (1,)
    fleet.assess()
    return fleet


def frame_text(fleet: Fleet, *, terminal: bool = False) -> str:
    status = fleet.status()
    console = Console(
        record=True, width=120, file=io.StringIO(), force_terminal=terminal, color_system="standard"
    )
    console.print(fleet_view(status, StealFollower(fleet).follow(), status.at))
    return console.export_text(styles=terminal)


def lane(text: str, agent: str) -> str:
    (row,) = [line for line in text.splitlines() if line.startswith(agent + " ")]
    return " ".join(row.split())


def test_the_frame_shows_lanes_pool_counts_steals_and_the_assessment(busy: Fleet) -> None:
    text = frame_text(busy)
    flat = " ".join(text.split())
    assert "agents 4/4 live" in flat
    assert "pending 7" in flat and "claimed 3" in flat and "dead 1" in flat
    assert "stalled 1" in flat and "waiting 1" in flat and "paused 1" in flat
    # lanes: status, load, queue bar and depth, what each holds (stalled / stolen marked)
    assert lane(text, "ada") == "ada working 1/2 █████ 5 #1 slow job stalled"
    assert lane(text, "bob") == "bob working 1/2 ····· 0 #7 queued 5 stolen"  # ada's last
    assert lane(text, "cy").startswith("cy paused for ")  # then how long (render's words)
    assert lane(text, "cy").endswith(" 0/1 ····· 0 -")
    assert lane(text, "dee").startswith("dee working 1/1 ····· 0 #9 ")
    assert "pool 2 queued 5 waiting 1 (the first ready in " in flat
    assert "paused: cy (" in flat and " more, after 1 failures)" in flat
    assert "stalled: #1 slow job (ada)" in flat
    assert "recent steals: #7 ada->bob " in flat
    assert "assessment: overloaded -> maintain:" in flat
    assert "(skills wanted: rust)" in flat


def test_an_empty_fleet_says_so(fleet: Fleet) -> None:
    flat = " ".join(frame_text(fleet).split())
    assert "agents 0/" in flat and "no agents yet" in flat and "pool 0" in flat
    assert "recent steals: none" in flat and "assessment: none yet" in flat


def test_a_hostile_title_is_drawn_literally_and_cannot_reach_the_terminal(busy: Fleet) -> None:
    plain = lane(frame_text(busy), "dee")
    assert "#9 [bold red]pwn[/] [/x] [31mred]0;owned t" in plain  # then cut at 40 characters
    assert safe_text(HOSTILE) == "[bold red]pwn[/] [/x] [31mred]0;owned tail next"
    ansi = frame_text(busy, terminal=True)
    assert "\x07" not in ansi and "\x1b]" not in ansi and "\x1b[31mred" not in ansi
    assert "\n" not in safe_text(HOSTILE) and "\x1b" not in safe_text(HOSTILE)
    assert safe_text("x" * 50, 10) == "x" * 9 + "…"
    assert safe_text("a\u202eb\u200dc") == "abc"  # bidi override, zero-width joiner
    assert safe_text("a\u2028b\tc\x00d") == "a b cd"


def test_queue_bars_count_tasks_then_scale_to_the_deepest_queue() -> None:
    assert queue_bar(3, 5).plain == "███·· 3"
    assert queue_bar(0, 0).plain == "· 0"
    assert queue_bar(120, 120).plain == "█" * 12 + " 120"
    assert queue_bar(30, 120).plain == "███" + "·" * 9 + " 30"
    assert queue_bar(1, 1000).plain == "█" + "·" * 11 + " 1"  # a queue is never drawn empty


def test_watch_refuses_a_console_that_is_not_a_terminal(fleet: Fleet) -> None:
    with pytest.raises(BadInput) as refused:
        watch_status(fleet, Console(file=io.StringIO()), 1.0)
    assert refused.value.message == "--watch needs a terminal"
    assert "shoal status --json" in (refused.value.hint or "")


def test_watch_redraws_when_the_fleet_changes_and_stops_when_told(
    fleet: Fleet, tmp_path: Path
) -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120, color_system=None)
    stop = threading.Event()
    watcher = threading.Thread(target=watch_status, args=(fleet, console, 30.0, stop))
    watcher.start()
    try:
        wait_until(lambda: "no agents yet" in out.getvalue(), "the first frame")
        with Fleet.open(f"sqlite://{tmp_path}/fleet.db") as other:  # another connection
            other.register("ada")
            other.post("fresh work", to="ada")
        # interval is 30s: only the change can have woken it this soon
        wait_until(lambda: "ada" in out.getvalue(), "a frame with ada", timeout=10)
    finally:
        stop.set()
    watcher.join(timeout=40)
    assert not watcher.is_alive()


# ---------------------------------------------------------------------- the real command

CTRL_C_ON = (
    "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from shoal.faces.cli import main; main()"
)


def watch_wired() -> bool:
    from shoal.faces.cli import cli

    status = cli.load_all()["status"]
    return any("--watch" in param.opts for param in status.params)


needs_wiring = pytest.mark.skipif(not watch_wired(), reason="`shoal status --watch` not wired")


def shoal_env(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    env.update(SHOAL_STORE=url, COLUMNS="120", LINES="40", TERM="xterm-256color")
    env.pop("FORCE_COLOR", None)
    env.pop("TTY_COMPATIBLE", None)
    return env


@needs_wiring
def test_watch_piped_exits_2_with_a_hint(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/fleet.db"
    Fleet.init(url).close()
    proc = subprocess.run(
        [sys.executable, "-c", CTRL_C_ON, "status", "--watch"],
        env=shoal_env(url),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc
    said = " ".join((proc.stdout + proc.stderr).split())
    assert "--watch needs a terminal" in said
    assert "shoal status --json" in said


@needs_wiring
@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_watch_in_a_terminal_draws_and_quits_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/fleet.db"
    with Fleet.init(url) as fleet:
        fleet.register("ada")
        fleet.post("a task on the screen", to="ada")
    master, slave = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-c", CTRL_C_ON, "status", "--watch", "--interval", "0.5"],
        env=shoal_env(url),
        cwd=tmp_path,
        stdin=slave,
        stdout=slave,
        stderr=slave,
    )
    os.close(slave)
    seen = b""

    def read(timeout: float) -> None:
        nonlocal seen
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed the terminal (EIO on Linux)
                    return
                if not chunk:
                    return
                seen += chunk
            elif proc.poll() is not None:
                return

    try:
        deadline = time.monotonic() + 30
        while b"recent steals" not in seen and time.monotonic() < deadline:
            read(0.2)
        assert b"recent steals" in seen and b"ada" in seen, seen[-2000:]
        proc.send_signal(signal.SIGINT)
        read(10)
        assert proc.wait(timeout=20) == 0, seen[-2000:]
        assert b"Traceback" not in seen and b"internal error" not in seen
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
