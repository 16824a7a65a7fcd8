"""Where shoal gets the time.

Leases expire, agents go silent, tasks age and stall: every rule in shoal is a rule about
time, so time is an input. ``Fleet`` asks its ``Clock`` for ``now()`` and never calls
``time.time()`` itself. Production uses ``SystemClock``; tests and the simulator use
``ManualClock`` and move time forward by hand, so a ten-minute lease expires in a
microsecond and a test never sleeps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "ManualClock", "SystemClock", "monotonic", "wait"]


@runtime_checkable
class Clock(Protocol):
    """A source of wall-clock time in seconds since the epoch."""

    def now(self) -> float:
        """The current time."""
        ...

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` pass (really, or by moving a manual clock forward)."""
        ...

    # A clock may also offer ``monotonic()`` and ``wait(until_change, seconds)`` (both clocks
    # here do); deadlines and waits go through the functions below, which use them when
    # they are there and the real ones when not, so a clock with only now() and sleep()
    # keeps working.


def monotonic(clock: Clock) -> float:
    """Seconds on ``clock``'s never-going-back scale, for deadlines and durations: its own
    ``monotonic()`` if it has one (a manual clock's is its manual time), else the real one."""
    own: Callable[[], float] | None = getattr(clock, "monotonic", None)
    return own() if own is not None else time.monotonic()


def wait(clock: Clock, until_change: Callable[[float], bool], seconds: float) -> bool:
    """Wait up to ``seconds`` for a change that ``until_change(timeout)`` blocks on (it
    returns whether the change came), as ``clock`` keeps time: a manual clock never blocks
    -- it looks once, and if nothing changed lets the time pass -- and a clock without a
    ``wait`` of its own waits really."""
    own: Callable[[Callable[[float], bool], float], bool] | None = getattr(clock, "wait", None)
    return own(until_change, seconds) if own is not None else until_change(max(seconds, 0.0))


class SystemClock:
    """The real clock: ``time.time()`` and ``time.sleep()``."""

    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def monotonic(self) -> float:
        return time.monotonic()

    def wait(self, until_change: Callable[[float], bool], seconds: float) -> bool:
        return until_change(max(seconds, 0.0))

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock:
    """A clock that moves only when told to. Safe to share between threads.

    ``sleep`` moves the clock forward instead of blocking, so code that waits "five
    minutes" under a manual clock returns at once with five minutes gone.
    """

    def __init__(self, start: float = 1_767_225_600.0) -> None:  # 2026-01-01T00:00:00Z
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        """Move time forward by ``seconds`` and return the new time."""
        if seconds < 0:
            raise ValueError(f"a clock cannot go back; got advance({seconds})")
        with self._lock:
            self._now += seconds
            return self._now

    def set(self, when: float) -> None:
        """Jump to ``when``; it must not be earlier than now."""
        with self._lock:
            if when < self._now:
                raise ValueError(f"a clock cannot go back from {self._now} to {when}")
            self._now = float(when)

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.advance(seconds)

    def monotonic(self) -> float:
        """The manual time itself: deadlines pass as the clock is moved."""
        return self.now()

    def wait(self, until_change: Callable[[float], bool], seconds: float) -> bool:
        if until_change(0.0):
            return True
        self.sleep(seconds)
        return until_change(0.0)

    def __repr__(self) -> str:
        return f"ManualClock({self._now!r})"
