"""The reaper of the long-lived faces: ``Fleet.reap()`` on an interval, on a thread of its
own, for as long as ``shoal serve`` or ``shoal mcp --transport http`` runs.

Correctness never waits for it: every claim and every read applies the liveness rules
itself (docs/ARCHITECTURE.md, "Liveness and seats"). What a server that runs for days adds
by reaping is that the fleet's own record keeps up when nobody claims: silent agents are
written down offline (their queues in the pool, the event log saying when), expired leases
come back, idle ephemeral agents end, stalled tasks are flagged, finished pauses end --
what ``shoal monitor`` does, without its rebalance and assessments.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

from shoal._log import get_logger
from shoal.errors import ShoalError
from shoal.fleet import Fleet

__all__ = ["REAP_EVERY", "Reaper"]

log = get_logger(__name__)

#: Seconds between a server's reaps: well inside the default heartbeat_timeout (90 s), so
#: a silent agent is written down offline within a fraction of it.
REAP_EVERY = 15.0


class Reaper:
    """Reap the fleet ``open_fleet()`` gives every ``interval`` seconds, the first time at
    once, until ``stop`` (or the end of a ``with`` block). A round that fails -- the store
    away, the fleet not open yet -- is logged and the next one tries again."""

    def __init__(self, open_fleet: Callable[[], Fleet], interval: float = REAP_EVERY) -> None:
        self._open = open_fleet
        self.interval = interval
        self.rounds = 0  # rounds finished, reaped or not
        self._stop = threading.Event()
        self._round = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="shoal-reaper", daemon=True)

    def __enter__(self) -> Reaper:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10.0)

    def wait_rounds(self, count: int, timeout: float) -> bool:
        """Wait until ``count`` rounds have finished (a test's way to know one ran)."""
        with self._round:
            return self._round.wait_for(lambda: self.rounds >= count, timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._open().reap()
            except ShoalError as exc:
                log.warning("reap skipped: %s", exc.message)
            except Exception:  # keep reaping: one bad round must not end the thread
                log.exception("reap failed")
            with self._round:
                self.rounds += 1
                self._round.notify_all()
            self._stop.wait(self.interval)
