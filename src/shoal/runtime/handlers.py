"""What a worker runs for each task: a handler, and what the handler is given.

A handler is any callable taking a ``TaskContext`` -- the task, its lease, the fleet, and
ways to post children and wait on them (fork-join) -- and returning the task's result; an
exception fails the task. ``CommandHandler`` is the handler ``shoal worker -- CMD`` uses:
it runs a command per task (``shoal.runtime.command``). ``WorkerFault`` is how a handler
says the fault is the worker's (a command that cannot start), not the task's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from shoal.model import Lease, Task
from shoal.runtime.command import CommandFailed, CommandNotStarted, check_command, run_command

if TYPE_CHECKING:
    from shoal.fleet import Fleet

__all__ = ["CommandHandler", "Deferred", "Handler", "RunsTasks", "TaskContext", "WorkerFault"]


class RunsTasks(Protocol):
    """What a ``TaskContext`` needs of the worker that runs its task: the fleet and the
    agent it works as. The worker is one; naming only this keeps the handlers below the
    worker (the worker imports them, never the reverse)."""

    @property
    def fleet(self) -> Fleet: ...

    @property
    def agent(self) -> str: ...


class Deferred:
    """What ``TaskContext.defer`` returns: the task waits on others; the worker does not
    complete it (it comes back to this agent's queue when they are done, as a ready join:
    taken once the agent has nothing else to do)."""

    def __init__(self, task: Task) -> None:
        self.task = task


class TaskContext:
    """What a handler gets: the task, its lease, the fleet, and ways to fork and join."""

    def __init__(self, worker: RunsTasks, task: Task, lease: Lease, source: str) -> None:
        self.worker = worker
        self.fleet = worker.fleet
        self.agent = worker.agent
        self.task = task
        self.lease = lease
        self.source = source  # queue | pool | steal
        #: Set when the handler should stop: timeout, shutdown, or the lease was lost.
        self.stopped = threading.Event()
        self.stop_reason = ""
        self.deferred = False

    def stop(self, reason: str) -> None:
        if not self.stopped.is_set():
            self.stop_reason = reason
            self.stopped.set()

    def post(self, title: str, **fields: Any) -> Task:
        """Post a child task: it goes to the head of this agent's queue (if it can do it),
        where an idle agent may steal it from the tail."""
        fields.setdefault("parent", self.task.id)
        return self.fleet.post(title, **fields)

    def defer(self, after: Sequence[int | Task]) -> Deferred:
        """Set this task aside until ``after`` are done (fork-join): return what this gives.

        When they are done the task is claimed again; ``ctx.after()`` then has their results.
        """
        ids = [t.id if isinstance(t, Task) else t for t in after]
        task = self.fleet.defer(self.lease, ids)
        self.deferred = True
        return Deferred(task)

    def after(self) -> list[Task]:
        """The tasks this one waits (or waited) on, with their states and results."""
        return [self.fleet.get(i) for i in self.fleet.show(self.task.id, events=0).after]


Handler = Callable[[TaskContext], Any]


class WorkerFault(Exception):
    """Raised by a handler when the fault is the worker's, not the task's (its command cannot
    start, a tool it needs is missing): the task is released untouched and the worker stops,
    rather than failing every task it would claim next. ``hint`` says how to fix it."""

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


class CommandHandler:
    """A handler that runs a command per task (see ``shoal.runtime.command``). A command
    that is not there or not executable is refused here, before the worker claims anything.
    """

    def __init__(self, argv: Sequence[str], *, cwd: Path | None = None) -> None:
        check_command(argv, cwd)
        self.argv = list(argv)
        self.cwd = cwd

    def __call__(self, ctx: TaskContext) -> Any:
        try:
            outcome = run_command(
                self.argv,
                ctx.task,
                ctx.lease,
                agent=ctx.agent,
                store=ctx.fleet.url,
                stop=ctx.stopped,
                why_stopped=lambda: ctx.stop_reason,
                cwd=self.cwd,
            )
        except CommandNotStarted as exc:
            raise WorkerFault(str(exc), hint=exc.hint) from exc
        if not outcome.ok:
            raise CommandFailed(outcome)
        return outcome.result()
