"""``shoal status --watch``: the fleet redrawn in place until Ctrl-C (see ``live.fleet_view``)."""

from __future__ import annotations

import threading
import time
from collections import deque

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from shoal.errors import BadInput, ShoalError
from shoal.faces.cli.live import STEALS_SHOWN, fleet_view, safe_text
from shoal.fleet import Fleet
from shoal.model import Event

__all__ = ["StealFollower", "watch_status"]

#: Events read per page while following the log.
EVENT_PAGE = 10_000
#: The fewest seconds between two frames, however busy the fleet (a redraw reads the fleet).
MIN_GAP = 0.2
#: The longest a wait for a change goes without looking at ``stop``.
STOP_POLL = 0.5


class StealFollower:
    """The latest steals (events of kind ``stolen``), newest last, read from the fleet's
    log page by page from where the last read stopped, as ``Supervisor._follow_events``
    does; unlike it, steals already in the log when it starts count too."""

    def __init__(self, fleet: Fleet, keep: int = STEALS_SHOWN) -> None:
        self.fleet = fleet
        self.steals: deque[Event] = deque(maxlen=keep)
        self.seen = 0

    def follow(self) -> list[Event]:
        while batch := self.fleet.events(self.seen, limit=EVENT_PAGE):
            self.steals.extend(e for e in batch if e.kind == "stolen")
            self.seen = batch[-1].id
            if len(batch) < EVENT_PAGE:
                break
        return list(self.steals)


def watch_status(
    fleet: Fleet,
    console: Console,
    interval: float = 2.0,
    stop: threading.Event | None = None,
) -> None:
    """Redraw the fleet on ``console`` in place until Ctrl-C (or until ``stop`` is set):
    at once when the fleet changes, and at least every ``interval`` seconds (so times
    move on). Ctrl-C returns normally. Refuses off a terminal with BadInput: a live view
    piped to a file would be a stream of cursor moves."""
    if not console.is_terminal:
        raise BadInput(
            "--watch needs a terminal",
            hint="run `shoal status` (or `shoal status --json`) for a snapshot",
        )
    if not interval > 0:
        raise BadInput(f"--interval must be more than 0 seconds, not {interval}")
    stop = stop or threading.Event()
    follower = StealFollower(fleet)
    last_frame: Group | None = None

    def frame() -> Group | Text:
        nonlocal last_frame
        try:
            status = fleet.status()
            last_frame = fleet_view(status, follower.follow(), status.at)
            return last_frame
        except ShoalError as exc:  # a busy or lost store: say so, keep the last frame, retry
            note = Text(f"could not read the fleet: {safe_text(exc.message, 200)}", "bold red")
            note.append(f" (trying again every {interval:g}s)", style="dim")
            return note if last_frame is None else Group(last_frame, note)

    try:
        with Live(frame(), console=console, auto_refresh=False, transient=False) as live:
            while not stop.is_set():
                drawn = time.monotonic()
                _wait(fleet, drawn + interval, stop)
                if stop.wait(max(0.0, drawn + MIN_GAP - time.monotonic())):
                    break
                live.update(frame(), refresh=True)
    except KeyboardInterrupt:
        return


def _wait(fleet: Fleet, deadline: float, stop: threading.Event) -> None:
    """Until the fleet changes, ``deadline`` (monotonic) passes or ``stop`` is set."""
    while not stop.is_set():
        left = deadline - time.monotonic()
        if left <= 0 or fleet.wait_for_change(min(left, STOP_POLL)):
            return
