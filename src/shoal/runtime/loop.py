"""The agent loop: claim, run, complete-and-claim-next, and wait well when there is no work.

This is the small core every in-process agent runs (the demo's threads use it; the
``shoal worker`` runtime builds on it). One ``step`` is one claim or one task, so a test
can drive it step by step. Waiting follows the adaptive polling rule: poll again at once
after finishing a task, wait ``poll_base`` while work may come, double the wait after
``poll_backoff_after`` empty polls up to ``poll_max`` -- and wake early whenever the store
says the fleet changed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shoal import policy
from shoal.errors import LeaseLost
from shoal.fleet import Fleet
from shoal.model import Claim, Lease, Task

__all__ = ["AgentLoop", "LoopStats"]

Handler = Callable[[Task], Any]
Listener = Callable[[str, Task | None, dict[str, Any]], None]


@dataclass(slots=True)
class LoopStats:
    """What one agent loop did."""

    done: int = 0
    failed: int = 0
    lost: int = 0
    stolen: int = 0
    busy_seconds: float = 0.0
    idle_seconds: float = 0.0


class AgentLoop:
    """Run ``handler`` on every task ``agent`` claims, one at a time, until ``stop`` is set.

    The handler's return value is the result; an exception fails the task (retried while
    attempts remain). ``listener(kind, task, data)`` hears ``claimed``, ``done``, ``failed``,
    ``lost`` and ``idle``, for a face to show progress.
    """

    def __init__(
        self,
        fleet: Fleet,
        agent: str,
        handler: Handler,
        *,
        stop: threading.Event | None = None,
        listener: Listener | None = None,
    ) -> None:
        self.fleet = fleet
        self.agent = agent
        self.handler = handler
        self.stop = stop or threading.Event()
        self.listener = listener or (lambda kind, task, data: None)
        self.stats = LoopStats()
        self._next: Claim | None = None
        self._empty_polls = 0

    def step(self) -> bool:
        """Claim (or take the claim that came with the last completion) and run one task.

        Returns True if a task ran, False if there was nothing to do.
        """
        claim = self._next if self._next is not None else self.fleet.claim(self.agent)
        self._next = None
        if not claim:
            self._empty_polls += 1
            self.listener("idle", None, {"reason": claim.reason, "polls": self._empty_polls})
            return False
        self._empty_polls = 0
        task, lease = claim.tasks[0], claim.leases[0]
        source = claim.sources[0]
        if source == "steal":
            self.stats.stolen += 1
        self.listener("claimed", task, {"source": source, "from": claim.origins[0]})
        clock = self.fleet.clock
        started = clock.now()
        try:
            result = self.handler(task)
        except Exception as exc:  # the task's failure, not the loop's
            self.stats.busy_seconds += clock.now() - started
            self._fail(task, lease, exc)
            return True
        self.stats.busy_seconds += clock.now() - started
        try:
            completion = self.fleet.complete(lease, result, then_claim=1)
        except LeaseLost as exc:
            self.stats.lost += 1
            self.listener("lost", task, {"error": exc.message})
            return True
        self.stats.done += 1
        self.listener("done", task, {})
        self._next = completion.next
        return True

    def _fail(self, task: Task, lease: Lease, exc: Exception) -> None:
        try:
            after = self.fleet.fail(lease, f"{type(exc).__name__}: {exc}")
        except LeaseLost as lost:
            self.stats.lost += 1
            self.listener("lost", task, {"error": lost.message})
            return
        self.stats.failed += 1
        self.listener("failed", task, {"error": str(exc), "state": after.state.value})

    def wait(self) -> None:
        """Wait before the next poll, as the adaptive polling rule says; wake on changes."""
        delay = policy.poll_delay(self._empty_polls, self.fleet.settings())
        if delay <= 0:
            return
        clock = self.fleet.clock
        started = clock.now()
        self.fleet.wait_for_change(delay)
        self.stats.idle_seconds += clock.now() - started

    def run(self, until: Callable[[], bool] | None = None) -> LoopStats:
        """Loop until ``stop`` is set (or ``until()`` is true when there is no work)."""
        while not self.stop.is_set():
            if not self.step():
                if until is not None and until():
                    break
                self.wait()
        return self.stats
