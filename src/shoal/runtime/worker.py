"""A worker: one agent of the fleet, running a handler on every task it claims.

``Worker`` is what ``shoal worker`` runs, and what a Python program uses to be an agent::

    worker = Worker(Fleet.open(url), agent="ada", skills=["python"], max_concurrent=2)

    @worker.task
    def handle(ctx: TaskContext) -> object:
        ...                      # ctx.task, ctx.post(...) children, ctx.defer(...) on them
        return {"ok": True}      # the result; an exception fails the task (retried)

    worker.run()                 # until stopped, or idle past the grace (ephemeral)

What it promises, and how:

* **No busy polling.** After an empty claim it waits for the fleet to change (the store's
  wake-up: a commit anywhere wakes it), but never longer than the adaptive polling delay
  (``policy.poll_delay``: ``poll_base``, doubling after ``poll_backoff_after`` empty polls,
  up to ``poll_max``), and it claims again at once when a task of its own finishes. Wake-ups
  are spaced by at least ``MIN_POLL_GAP`` so a busy fleet cannot spin an idle worker.
* **Leases outlive long tasks, not hung ones.** A heartbeat thread renews the agent and all
  its leases every third of the shortest lease TTL, whatever the handlers are doing. A task
  gets ``timeout`` seconds; past that it is stopped (a command's process group is killed) and
  failed, so a hung handler keeps its lease only until its timeout ends it.
* **A lost lease stops the work.** The task is then someone else's, or soon may be: a lease
  a heartbeat finds gone (expired, the task cancelled or taken back, the agent terminated)
  stops its handler -- a command's process group -- and so does a lease no heartbeat
  renewed before it could run out (the store out of reach, the clock jumped), a little
  before its end by the worker's own count (``_holding``); that task is released once the
  store answers. The log says which. And a command never outlives its worker: it runs
  under a shim that ends its group when the worker dies, ``kill -9`` included
  (``command``, ``_shim``).
* **Idle, then gone (ephemeral).** An empty claim marks the agent idle in the fleet; an
  ephemeral worker that stays idle for the fleet's ``idle_timeout`` terminates its agent and
  returns. A persistent one keeps waiting.
* **Graceful shutdown.** ``stop()`` (SIGTERM/SIGINT in ``shoal worker``) stops claiming and
  lets running tasks finish for up to ``drain`` seconds; what is still running then is
  stopped and released (back to the pool, the attempt not counted). A second ``stop()``
  releases at once. A worker that leaves on purpose terminates its agent (its place under
  max_agents is freed, its queue goes back to the pool). ``stop(now=True, why=...)`` releases
  at once and says why (``shoal worker --supervised`` does so when its supervisor dies).
  SIGKILL is what leases are for.
* **The worker's faults are not the tasks' failures.** A command that is not there or not
  executable is refused before anything is claimed (``CommandHandler`` checks it). One that
  still cannot be started for a task (a ``{placeholder}`` program, a tool missing from the
  host, exit 126/127 from a shell), or a handler raising ``WorkerFault``, would fail every
  task of the fleet in turn: instead the task is released untouched (the attempt not
  counted) and the worker stops as on ``stop()``, with reason ``fault`` and the words why.

A ``Fleet`` may be shared by threads, so the claim loop, the heartbeat thread and the task
threads share one; each call is one short transaction.

Settling a task once its handler is over -- complete, fail, release, give back on a fault,
try again while the store is away -- is ``_settling``'s (``TaskSettling``, a part of
``Worker`` it inherits); the rest is here.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from shoal import policy
from shoal._log import get_logger
from shoal.clock import Clock, SystemClock, monotonic
from shoal.clock import wait as wait_for
from shoal.errors import BadInput, LeaseLost, ShoalError, StoreUnavailable, UnknownAgent
from shoal.fleet import Fleet
from shoal.model import Grant, Lease, Task
from shoal.runtime._holding import LEASE_GONE, LEASE_UNRENEWED, Hold
from shoal.runtime._settling import TaskSettling
from shoal.runtime.handlers import CommandHandler, Deferred, Handler, TaskContext, WorkerFault
from shoal.runtime.report import WorkerReport
from shoal.settings import Settings
from shoal.times import iso_time
from shoal.validation import check_worker_times
from shoal.vocabulary import ClaimReason, ClaimSource

__all__ = [
    "MIN_POLL_GAP",
    "CommandHandler",
    "Deferred",
    "TaskContext",
    "Worker",
    "WorkerFault",
    "WorkerReport",
]

#: Seconds an idle worker leaves at least between two claims woken by fleet changes.
MIN_POLL_GAP = 0.05
#: How long a released or timed-out task's handler gets to notice before it is abandoned.
STOP_GRACE = 3.0

Listener = Callable[[str, dict[str, Any]], None]

log = get_logger(__name__)


@dataclass
class _Slot:
    """One running task."""

    ctx: TaskContext
    hold: Hold  # how long the lease lasts, as this worker reckons it
    finished: threading.Event = field(default_factory=threading.Event)
    over: bool = False  # its handler has returned (or been abandoned): it is being settled


class Worker(TaskSettling):
    """One agent: register, claim, run handlers, heartbeat, idle, leave. See the module."""

    def __init__(
        self,
        fleet: Fleet,
        agent: str,
        handler: Handler | None = None,
        *,
        skills: Sequence[str] = (),
        domains: Sequence[str] = (),
        role: str = "worker",
        max_concurrent: int = 1,
        ephemeral: bool = False,
        timeout: float | None = None,
        drain: float = 30.0,
        listener: Listener | None = None,
        clock: Clock | None = None,
    ) -> None:
        check_worker_times(timeout, drain)
        self.fleet = fleet
        #: The worker's own time: its poll gaps, idle grace, task timeouts and drain. The
        #: real clock by default; a test may pass a ManualClock and move it instead of
        #: sleeping (the fleet's rules keep to the fleet's clock).
        self.clock: Clock = clock or SystemClock()
        self.agent = agent
        self.handler = handler
        self.skills = tuple(skills)
        self.domains = tuple(domains)
        self.role = role
        self.max_concurrent = max_concurrent
        self.ephemeral = ephemeral
        self.timeout = timeout
        self.drain = drain
        self.listener: Listener = listener or (lambda kind, data: None)
        self.report = WorkerReport(agent)
        self._stopping = threading.Event()  # first stop(): no more claims, drain
        self._aborting = threading.Event()  # second stop() or drain over: release now
        self._wake = threading.Event()  # a task finished: claim again at once
        self._gone = threading.Event()  # the agent was terminated from outside
        self._done = threading.Event()  # run() is over: the heartbeats end
        self._slots: dict[int, _Slot] = {}
        self._signals_seen: list[str] = []
        self._fault: tuple[int, WorkerFault] | None = None  # the first: why the worker stops
        self._settings_read: tuple[float, Settings] | None = None
        self._stop_why = ""  # why stop() was called, if its caller said
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ the public face

    def task(self, fn: Handler) -> Handler:
        """Decorator: ``@worker.task`` makes ``fn`` the handler of every task."""
        self.handler = fn
        return fn

    def stop(self, *, now: bool = False, why: str = "") -> None:
        """Stop claiming and drain; called a second time (or with ``now``), release running
        tasks at once. ``why`` (the first given) is what the released tasks and the
        agent's end say, e.g. "its supervisor (pid 41) died"."""
        if why and not self._stop_why:
            self._stop_why = why
        if now or self._stopping.is_set():
            self._aborting.set()
        self._stopping.set()
        self._wake.set()

    @property
    def running(self) -> list[Task]:
        with self._lock:
            return [slot.ctx.task for slot in self._slots.values()]

    def run(self, *, handle_signals: bool = False) -> WorkerReport:
        """Register and work until idle past the grace (ephemeral), stopped, or terminated.

        With ``handle_signals`` (main thread only) SIGTERM and SIGINT call ``stop()``.
        """
        if self.handler is None:
            raise BadInput(
                "this worker has no handler",
                hint="pass handler=... or decorate a function with @worker.task",
            )
        with self._signals(handle_signals):
            self.fleet.register(
                self.agent,
                role=self.role,
                skills=self.skills,
                domains=self.domains,
                max_concurrent=self.max_concurrent,
                ephemeral=self.ephemeral,
            )
            log.info(
                "%s registered (skills %s, domains %s, up to %d at once%s)",
                self.agent,
                ",".join(self.skills) or "-",
                ",".join(self.domains) or "-",
                self.max_concurrent,
                ", ephemeral" if self.ephemeral else "",
            )
            self._say("registered", skills=list(self.skills), domains=list(self.domains))
            self._fail_leftovers()
            beats = threading.Thread(target=self._heartbeats, name="shoal-heartbeat", daemon=True)
            beats.start()
            try:
                self.report.reason = self._loop()
                if self._signals_seen:
                    self._say("signal", signal=self._signals_seen[0], again=False)
                self._finish_running()
                if self._fault is not None:  # it wins over a stop that came with it
                    self.report.reason = "fault"
            finally:
                self._aborting.set()
                self._stopping.set()
                self._done.set()
                beats.join(timeout=5.0)
            self._leave()
        return self.report

    def _fail_leftovers(self) -> None:
        """Leases this agent id still holds are from a process of it that died (a worker
        restarted after a crash): nobody is running those tasks, so they fail now (the
        attempt counts, so a task that kills its worker every time ends up dead) instead of
        being renewed by our heartbeats forever."""
        for lease in self.fleet.heartbeat(self.agent):
            log.warning(
                "%s: task #%d was left by a dead worker of it: failing it",
                self.agent,
                lease.task_id,
            )
            with suppress(LeaseLost):
                after = self.fleet.fail(lease, "the worker running it died; its agent restarted")
                self._say("failed", task=lease.task_id, error="left by a dead worker",
                          state=after.state.value)  # fmt: skip

    # ------------------------------------------------------------------ the claim loop

    def _loop(self) -> str:
        empty = 0
        idle_from: float | None = None
        last_poll = 0.0
        while not self._stopping.is_set():
            if self._gone.is_set():
                return "terminated"
            self._collect()
            room = self.max_concurrent - len(self._slots)
            if room <= 0:
                self._wake.wait(0.5)
                self._wake.clear()
                continue
            gap = MIN_POLL_GAP - (monotonic(self.clock) - last_poll)
            if empty and gap > 0 and not self._wake.is_set():
                self.clock.sleep(gap)
            self._wake.clear()
            last_poll = monotonic(self.clock)
            try:
                claim = self.fleet.claim(self.agent, room)
                settings = self._settings()
            except UnknownAgent:
                return "terminated"
            except StoreUnavailable as exc:
                log.warning(
                    "%s: the store is unavailable (%s); trying again", self.agent, exc.message
                )
                self._say("store-unavailable", error=exc.message)
                self._wait(1.0)
                continue
            if claim:
                empty, idle_from = 0, None
                for grant in claim.grants:
                    if self._stopping.is_set():  # stopped (or faulted) while it claimed
                        self._release_unstarted(grant.task, grant.lease)
                    else:
                        self._start(grant)
                continue
            if claim.reason is ClaimReason.BUSY:  # held elsewhere too (another process, same agent)
                self._wait(settings.poll_base)
                continue
            if claim.reason is ClaimReason.PAUSED:  # the circuit breaker: not idle, waiting it out
                if empty == 0:
                    self._say("paused", until=iso_time(claim.retry_at), agent=self.agent)
                empty, idle_from = empty + 1, None
                until = (claim.retry_at or 0.0) - self.fleet.clock.now()
                self._wait(min(max(until, MIN_POLL_GAP), settings.poll_max))
                continue
            empty += 1
            delay = policy.poll_delay(empty, settings)
            if claim.retry_at is not None:  # work passed over is free to take then
                delay = min(delay, max(0.0, claim.retry_at - self.fleet.clock.now()))
            if self._slots:
                idle_from = None
            else:
                now = monotonic(self.clock)
                if idle_from is None:
                    idle_from = now
                    self._say("idle", grace=settings.idle_timeout if self.ephemeral else None)
                if self.ephemeral:
                    left = settings.idle_timeout - (now - idle_from)
                    if left <= 0:
                        return "idle"
                    delay = min(delay, left)
            self._wait(delay)
        return "stopped"

    def _settings(self) -> Settings:
        """The fleet's settings, read at most once a second (they change rarely, and a
        busy worker would otherwise pay a read per task for them)."""
        now = monotonic(self.clock)
        if self._settings_read is None or now - self._settings_read[0] >= 1.0:
            self._settings_read = (now, self.fleet.settings())
        return self._settings_read[1]

    def _wait(self, seconds: float) -> None:
        """Wait up to ``seconds`` for the fleet to change, a task of ours to finish, or a stop."""
        deadline = monotonic(self.clock) + seconds
        while not (self._wake.is_set() or self._stopping.is_set()):
            left = deadline - monotonic(self.clock)
            if left <= 0:
                return
            if wait_for(self.clock, self.fleet.wait_for_change, min(left, 0.25)):
                return

    # ------------------------------------------------------------------ running tasks

    def _start(self, grant: Grant) -> None:
        task, lease, source, origin = grant.task, grant.lease, grant.source, grant.origin
        ctx = TaskContext(self, task, lease, source)
        log.debug(
            "%s claimed #%d %r (%s%s)",
            self.agent,
            task.id,
            task.title,
            source,
            f" from {origin}" if origin else "",
        )
        if source is ClaimSource.STEAL:
            self._tally("stolen")
        self._say("claimed", task=task.id, title=task.title, source=source, origin=origin)
        # The lease's length on this worker's clock, counted from now (after the claim).
        hold = Hold.granted(monotonic(self.clock), lease.expires, self.fleet.clock.now())
        slot = _Slot(ctx, hold)
        with self._lock:
            self._slots[task.id] = slot
        threading.Thread(target=self._run_task, args=(slot,), daemon=True).start()

    def _release_unstarted(self, task: Task, lease: Lease) -> None:
        """Give back a task claimed as the worker was stopping: it never ran here."""
        try:
            self.fleet.release(lease)
        except ShoalError as exc:  # its lease expires by itself if the store is away
            log.warning("%s: could not release #%d: %s", self.agent, task.id, exc.message)
            self._say("error", task=task.id, error=exc.message)
            return
        self._tally("released")
        self._say("released", task=task.id, why="claimed as the worker was stopping; not run")

    def _run_task(self, slot: _Slot) -> None:
        """Run the handler in its own thread, within the timeout and the lease; then settle
        the task."""
        ctx = slot.ctx
        box: dict[str, Any] = {}

        def call() -> None:
            try:
                assert self.handler is not None
                box["result"] = self.handler(ctx)
            except BaseException as exc:  # the task's failure, not the worker's
                box["error"] = exc

        inner = threading.Thread(target=call, name=f"shoal-task-{ctx.task.id}", daemon=True)
        started = monotonic(self.clock)
        inner.start()
        deadline = None if self.timeout is None else started + self.timeout
        while inner.is_alive():
            inner.join(0.05)
            if not inner.is_alive():
                break
            now = monotonic(self.clock)
            if deadline is not None and now >= deadline:
                ctx.stop(f"timed out after {self.timeout:g}s")
            elif self._aborting.is_set():
                ctx.stop(self._stop_why or "the worker is shutting down")
            elif not (ctx.deferred or ctx.stopped.is_set()) and self._running_out(slot, now):
                self._lease_unrenewed(slot, now)
            if ctx.stopped.is_set():
                inner.join(STOP_GRACE)  # a command is killed within KILL_GRACE
                break
        slot.over = True
        seconds = monotonic(self.clock) - started
        self._tally("busy_seconds", seconds)
        try:
            finished = not inner.is_alive()
            self._settle_while_leased(ctx, slot.hold, box, finished, round(seconds, 3))
        finally:
            slot.finished.set()
            self._wake.set()

    def _running_out(self, slot: _Slot, now: float) -> bool:
        with self._lock:  # the heartbeat thread renews holds
            return slot.hold.running_out(now, self.fleet.clock.now())

    def _lease_unrenewed(self, slot: _Slot, now: float) -> None:
        """No heartbeat renewed the lease in time (the store is out of reach, or the clock
        jumped past the lease's end): stop the command before the task can be handed to
        anyone else."""
        hold, wall = slot.hold, self.fleet.clock.now()
        if now >= hold.until - hold.margin:
            why = f"no heartbeat has reached the store for {now - hold.renewed:.1f}s"
        else:
            why = f"this host's clock is {wall - hold.expires:+.1f}s from its end (it jumped)"
        log.warning(
            "%s: stopping #%d: %s, and its lease may run out within %.1fs, after which the "
            "task may be given to another agent",
            self.agent,
            slot.ctx.task.id,
            why,
            max(0.0, min(hold.until - now, hold.expires - wall)),
        )
        slot.ctx.stop(LEASE_UNRENEWED)

    def _tally(self, counter: str, amount: float = 1) -> None:
        """Add to one of the report's counters (task threads settle at the same time)."""
        with self._lock:
            setattr(self.report, counter, getattr(self.report, counter) + amount)

    def _collect(self) -> None:
        """Forget tasks whose threads have settled them."""
        with self._lock:
            for task_id in [i for i, s in self._slots.items() if s.finished.is_set()]:
                del self._slots[task_id]

    def _finish_running(self) -> None:
        """Drain: let running tasks finish for up to ``drain`` seconds, then release them."""
        self._collect()
        if not self._slots:
            return
        log.info(
            "%s: draining %d running task(s) for up to %gs",
            self.agent,
            len(self._slots),
            self.drain,
        )
        self._say("draining", running=sorted(self._slots), seconds=self.drain)
        deadline = monotonic(self.clock) + self.drain
        while self._slots and not self._aborting.is_set():
            if monotonic(self.clock) >= deadline:
                break
            self._wake.wait(0.1)
            self._wake.clear()
            self._collect()
        if len(self._signals_seen) > 1:
            self._say("signal", signal=self._signals_seen[-1], again=True)
        self._aborting.set()  # what is left is stopped and released by its own thread
        # Real time: the grace a stopped command gets before it is killed is the operating
        # system's, whatever clock the worker keeps.
        deadline = time.monotonic() + STOP_GRACE + 10.0  # for them all, not each in turn
        for slot in list(self._slots.values()):
            slot.finished.wait(max(0.0, deadline - time.monotonic()))
        self._collect()

    # ------------------------------------------------------------------ heartbeats

    def _heartbeats(self) -> None:
        """Renew the agent and its leases every third of the shortest TTL, until the end."""
        interval = 1.0
        while not (self._gone.is_set() or self._done.is_set()):
            with self._lock:
                before = {i: s for i, s in self._slots.items() if not s.finished.is_set()}
            try:
                settings = self._settings()
                ttls = [settings.lease_ttl, settings.heartbeat_timeout]
                ttls += [s.ctx.task.lease_ttl for s in before.values() if s.ctx.task.lease_ttl]
                interval = min(ttls) / 3
                asked = monotonic(self.clock)
                renewed = self.fleet.heartbeat(self.agent)
                self._renew_holds(asked, renewed)
                held = {lease.task_id for lease in renewed}
            except UnknownAgent:
                log.warning("%s was terminated from outside: stopping its tasks", self.agent)
                self._say("terminated", why="the agent was terminated from outside")
                self._gone.set()
                for slot in before.values():
                    slot.ctx.stop(LEASE_GONE)
                self._wake.set()
                return
            except Exception as exc:  # keep beating: a lost heartbeat thread loses every lease
                message = exc.message if isinstance(exc, ShoalError) else repr(exc)
                log.warning("%s: heartbeat failed (%s); trying again", self.agent, message)
                self._say("heartbeat-failed", error=message)
                interval = min(interval, 1.0)
            else:
                for task_id, slot in before.items():
                    if task_id not in held:
                        self._lease_gone(slot)
            self._done.wait(interval)

    def _renew_holds(self, asked: float, renewed: list[Lease]) -> None:
        """Move each renewed lease's end, as this worker reckons it (see ``_holding``)."""
        wall = self.fleet.clock.now()
        with self._lock:
            for lease in renewed:
                slot = self._slots.get(lease.task_id)
                if slot is not None:
                    slot.hold.renew(asked, lease.expires, wall)

    def _lease_gone(self, slot: _Slot) -> None:
        """A heartbeat answered without this task's lease: the task is no longer ours."""
        if slot.over or slot.ctx.deferred or slot.ctx.stopped.is_set():
            return  # settled (or settling) already, or its lease ended on purpose
        log.warning(
            "%s: stopping #%d: a heartbeat found its lease gone (it expired, or the task was "
            "cancelled or taken back); the task is no longer this agent's",
            self.agent,
            slot.ctx.task.id,
        )
        slot.ctx.stop(LEASE_GONE)

    # ------------------------------------------------------------------ leaving

    def _leave(self) -> None:
        """Leaving on purpose frees the agent's place; if it is gone already, nothing to do."""
        report = self.report
        report.why, report.hint = self._why_left()
        log.info("%s left: %s", self.agent, report.why)
        if report.reason != "terminated":
            with suppress(UnknownAgent):
                self.fleet.set_status(self.agent, "terminated", why=report.why)
        self._say("left", **report.to_dict())

    def _why_left(self) -> tuple[str, str]:
        """Why the worker left, in words, and how to fix it (a fault only)."""
        if self._fault is not None:
            task_id, fault = self._fault
            return f"the worker stopped, releasing task #{task_id} untouched: {fault}", fault.hint
        return {
            "idle": "idle past idle_timeout; left by itself",
            "stopped": self._stop_why or "its worker was stopped",
            "terminated": "its agent was terminated from outside",
        }[self.report.reason], ""

    def _say(self, kind: str, **data: Any) -> None:
        with suppress(Exception):  # a face that cannot print must not stop the work
            self.listener(kind, {"agent": self.agent, **data})

    @contextmanager
    def _signals(self, handle: bool) -> Iterator[None]:
        if not handle or threading.current_thread() is not threading.main_thread():
            yield
            return

        def on_signal(signum: int, _frame: object) -> None:
            # Only flags here: a handler that printed could wait on a lock its own thread
            # holds (it runs between two bytecodes of whatever the main thread was doing).
            self._signals_seen.append(signal.Signals(signum).name)
            self.stop()

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
