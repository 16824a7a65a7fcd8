"""How a worker settles a task once its handler is over: complete, fail or release it,
give it back on a fault of the worker's own, and keep trying while the store is away.

``Worker`` inherits this part (``worker`` holds the claim loop, the task threads, the
heartbeats and leaving; the promises of both are in its module docstring). The state it
shares with them is set by ``Worker.__init__`` and declared here once, so mypy checks
every use of it.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from shoal._log import get_logger
from shoal.clock import Clock, monotonic
from shoal.clock import wait as wait_for
from shoal.errors import BadInput, LeaseLost, ShoalError, StoreUnavailable
from shoal.fleet import Fleet
from shoal.runtime._holding import LEASE_GONE, LEASE_UNRENEWED, Hold
from shoal.runtime.command import CommandFailed
from shoal.runtime.handlers import TaskContext, WorkerFault
from shoal.runtime.report import WorkerReport

__all__ = ["SETTLE_RETRY", "TaskSettling"]

#: Seconds between two tries to settle a task while the store is unavailable.
SETTLE_RETRY = 1.0

# The worker's own logger: settling is a part of it, and its lines say so.
log = get_logger("shoal.runtime.worker")


class TaskSettling:
    """The settling of finished (or stopped) tasks: a part of ``Worker``."""

    fleet: Fleet
    agent: str
    clock: Clock
    report: WorkerReport
    _lock: threading.Lock
    _done: threading.Event
    _stopping: threading.Event
    _wake: threading.Event
    _fault: tuple[int, WorkerFault] | None

    if TYPE_CHECKING:  # the worker's own, used here too

        def _tally(self, counter: str, amount: float = 1) -> None: ...

        def _say(self, kind: str, **data: Any) -> None: ...

    def _settle_while_leased(
        self, ctx: TaskContext, hold: Hold, box: dict[str, Any], finished: bool, seconds: float
    ) -> None:
        """Settle the task, trying again every ``SETTLE_RETRY`` seconds while the store is
        away (a server restarting, a full disk) and the lease may still be ours: giving up
        at the first ``StoreUnavailable`` would throw the work's outcome away, and leave
        the task held -- renewed by our own heartbeats -- by nobody running it. A retry
        whose first try did commit is harmless: a second complete says ``already_done``,
        a second fail or release finds the lease gone (``LeaseLost``).

        A task stopped because no heartbeat renewed its lease in time (``_holding``) is
        given back the same way, but for as long as the worker runs: once the store
        answers, a lease still ours would otherwise be renewed by our heartbeats for a task
        nobody runs."""
        task_id = ctx.task.id
        while True:
            try:
                self._settle(ctx, box, finished=finished, seconds=seconds)
                return
            except ShoalError as exc:
                retry = isinstance(exc, StoreUnavailable)
                unrenewed = ctx.stop_reason == LEASE_UNRENEWED
                may_hold = unrenewed or hold.may_hold(monotonic(self.clock), self.fleet.clock.now())
                if not retry or self._done.is_set() or not may_hold:
                    log.warning("%s: could not settle #%d: %s", self.agent, task_id, exc.message)
                    self._say("error", task=task_id, error=exc.message)
                    return
                log.warning(
                    "%s: could not settle #%d (%s); trying again", self.agent, task_id, exc.message
                )
                self._say("store-unavailable", task=task_id, error=exc.message)
                wait_for(self.clock, self._done.wait, SETTLE_RETRY)

    def _settle(
        self, ctx: TaskContext, box: dict[str, Any], finished: bool, seconds: float
    ) -> None:
        task, lease = ctx.task, ctx.lease
        try:
            if ctx.deferred:  # the lease ended with the defer (a heartbeat may see it gone)
                self._tally("deferred")
                self._say("deferred", task=task.id)
            elif ctx.stopped.is_set() and ctx.stop_reason.startswith("timed out"):
                after = self.fleet.fail(lease, ctx.stop_reason)
                log.info("%s: #%d %s: %s", self.agent, task.id, ctx.stop_reason, after.state.value)
                self._tally("failed")
                self._say("failed", task=task.id, error=ctx.stop_reason, state=after.state.value)
            elif ctx.stopped.is_set() and ctx.stop_reason == LEASE_GONE:
                log.warning("%s: lost #%d; its handler was stopped", self.agent, task.id)
                self._tally("lost")
                self._say("lost", task=task.id, error=ctx.stop_reason)
            elif ctx.stopped.is_set() and ctx.stop_reason == LEASE_UNRENEWED:
                self.fleet.release(lease)  # the store is back in time: the task goes now
                log.warning(
                    "%s: released #%d once the store answered again; its handler was stopped "
                    "when the lease might have run out",
                    self.agent,
                    task.id,
                )
                self._tally("released")
                self._say("released", task=task.id, why=ctx.stop_reason)
            elif isinstance(box.get("error"), WorkerFault):
                self._give_back(ctx, box["error"])
            elif ctx.stopped.is_set() or not finished:
                self.fleet.release(lease)
                log.info(
                    "%s: released #%d (%s)", self.agent, task.id, ctx.stop_reason or "shutting down"
                )
                self._tally("released")
                self._say("released", task=task.id, why=ctx.stop_reason or "shutting down")
            elif "error" in box:
                exc = box["error"]
                error = (
                    str(exc) if isinstance(exc, CommandFailed) else f"{type(exc).__name__}: {exc}"
                )
                after = self.fleet.fail(lease, error[-4000:])
                # Not the error's words: a command's stderr may hold what it was given.
                log.debug(
                    "%s: #%d failed after %.3fs (%s): %s",
                    self.agent,
                    task.id,
                    seconds,
                    type(exc).__name__,
                    after.state.value,
                )
                self._tally("failed")
                self._say("failed", task=task.id, error=error, state=after.state.value)
            else:
                self._complete(ctx, box.get("result"), seconds)
        except LeaseLost as exc:
            log.warning("%s: lost the lease on #%d: %s", self.agent, task.id, exc.message)
            self._tally("lost")
            self._say("lost", task=task.id, error=exc.message)

    def _give_back(self, ctx: TaskContext, fault: WorkerFault) -> None:
        """The worker cannot run tasks: stop claiming (before the release, whose commit
        would wake our own claim loop), then release the task untouched for others."""
        with self._lock:
            first = self._fault is None
            if first:
                self._fault = (ctx.task.id, fault)
        self._stopping.set()
        self._wake.set()
        if first:
            log.error(
                "%s: stopping on a fault of its own, releasing #%d untouched: %s",
                self.agent,
                ctx.task.id,
                fault,
            )
            self._say("fault", task=ctx.task.id, error=str(fault), hint=fault.hint)
        self.fleet.release(ctx.lease)
        self._tally("released")
        self._say("released", task=ctx.task.id, why="the worker's fault, not the task's")

    def _complete(self, ctx: TaskContext, result: Any, seconds: float) -> None:
        try:
            outcome = self.fleet.complete(ctx.lease, result)
        except BadInput as exc:  # a result that is not JSON: the task failed, say why
            after = self.fleet.fail(ctx.lease, f"the result could not be stored: {exc.message}")
            log.info(
                "%s: #%d's result could not be stored: %s",
                self.agent,
                ctx.task.id,
                after.state.value,
            )
            self._tally("failed")
            self._say("failed", task=ctx.task.id, error=exc.message, state=after.state.value)
            return
        log.debug(
            "%s: #%d done in %.3fs%s",
            self.agent,
            ctx.task.id,
            seconds,
            " (already done)" if outcome.already_done else "",
        )
        self._tally("done")
        self._say("done", task=ctx.task.id, seconds=seconds, already=outcome.already_done)
