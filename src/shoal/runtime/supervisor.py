"""The supervisor: local ``shoal worker`` processes, as many as the work calls for.

``shoal assess`` only recommends; a supervisor acts on it. Every ``interval`` it does the
hub's job (reap, rebalance, assess: a supervised fleet needs nothing else running), then asks
``sizing.scale_decision`` what to do given the assessment, its workers, the hard cap, the
floor and the cooldown since its last change, and starts or stops worker processes to match:

* **Starting**: a new worker gets the skills every worker has (``skills``) plus the skills
  the pending work asks for, so the agent it adds can take that work. Workers above the
  floor (``minimum``) are ephemeral: once idle for the fleet's ``idle_timeout`` they leave
  on their own, which is how a fleet shrinks when the supervisor is not asked to shrink it.
* **Stopping**: when the assessment says agents sit idle, the longest-idle worker (an
  ephemeral one first) gets SIGTERM: it stops claiming, finishes nothing (it is idle) and
  leaves the fleet.
* **Crashes**: a worker that exits non-zero without being asked is restarted under the same
  agent id, after ``sizing.restart_delay`` (doubling per crash in a row, capped), so a broken
  command does not spin. A worker that ran ``stable_after`` seconds starts its count afresh.
  A worker that exits 0 on its own (idle, or terminated from outside) is not restarted.
* **Faults**: a worker that exits ``FAULT_EXIT`` (2: its command cannot run -- not found,
  not executable, a shell's 126/127) released its task untouched; a restart would only take
  the same task and stop again. The supervisor stops instead (draining the others), and
  ``fault`` says why, so the operator fixes the command.

* **Logs**: with ``log_dir`` each worker's stdout and stderr go to ``log_dir/<agent>.log``
  (one line each: time, stream, the line), rotated by the stdlib's ``RotatingFileHandler``
  (``log_bytes``, ``log_backups`` old files kept); the directory is made 0700 and the files
  0600, since a worker's output may carry what its tasks print. Without it, stdout is
  dropped. Either way the last lines of stderr are kept in memory for the crash and fault
  messages.

* **Secrets**: a worker learns its store from ``SHOAL_STORE`` in its environment, which only
  its own user (and root) may read, never from its command line, which every user of the
  host may read (``ps``, ``/proc/PID/cmdline``): a PostgreSQL URL carries its password.
* **If the supervisor dies** (``kill -9``, the OOM killer, a crash), its workers end with it:
  each holds a pipe from the supervisor as its stdin (``shoal worker --supervised``), whose
  end they see at once, and stops as on a second SIGTERM -- no more claims, running
  commands stopped, their tasks released untouched (the attempt not counted), its agent
  terminated with the reason. Left running, they would be watched by nobody and stopped by
  nothing, and a supervisor started again would start workers of the same names beside
  them; the released work is taken at once by the workers of whoever runs next.

The decision is a pure function so that it is tested without processes; this module does
only the processes, the clock and the bookkeeping. Worker processes run in their own
session: a Ctrl-C at the terminal reaches the supervisor alone, which then drains them.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import re
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from io import TextIOWrapper
from pathlib import Path
from typing import IO, Any

from shoal import sizing
from shoal._log import get_logger
from shoal.errors import BadInput, ShoalError
from shoal.fleet import Fleet
from shoal.model import Agent, AgentStatus, Assessment, Event
from shoal.runtime.hub import Hub, HubAction

__all__ = ["Supervisor", "SupervisorEvent", "WorkerSlot", "WorkerSpec"]

#: The exit code of a worker that stopped on a fault of its own (``shoal worker``'s bad input).
FAULT_EXIT = 2
#: Steals kept for the live view.
RECENT_STEALS = 8
#: Events read from the fleet's log at a time.
EVENT_PAGE = 10_000
#: A worker's log file is rotated at this size, keeping this many older files.
LOG_BYTES = 10 * 1024 * 1024
LOG_BACKUPS = 3
#: A line of a log record (``2025-01-31T12:00:00...``): not part of a worker's error message.
_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")

log = get_logger(__name__)

#: How loud the log is about each thing the supervisor does (the rest: INFO).
_LEVELS = {
    "crashed": logging.WARNING,
    "killed": logging.WARNING,
    "error": logging.WARNING,
    "fault": logging.ERROR,
}


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """Who a worker process is: its agent id, skills, domains, and whether it is ephemeral."""

    agent: str
    skills: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    ephemeral: bool = True


#: Something the supervisor did or saw, with a sentence for people: the hub's actions as
#: they are, and its own (spawned, restarted, stopping, exited, crashed, killed, hurry, error).
SupervisorEvent = HubAction


@dataclass
class WorkerSlot:
    """One place for a worker process: the process now, or a restart pending after a crash."""

    spec: WorkerSpec
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    crashes: int = 0
    restart_at: float | None = None
    stopping: bool = False
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=20))
    reader: threading.Thread | None = None  # copies its stderr into ``tail`` (and ``log``)
    out_reader: threading.Thread | None = None  # copies its stdout into ``log``
    log: logging.Handler | None = None  # its log file (``log_dir``), kept across restarts

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def state(self) -> str:
        if self.restart_at is not None:
            return "restarting"
        return "stopping" if self.stopping else "running"


def _last_error(tail: Iterable[str]) -> str:
    """The last ``error:`` a worker printed, its wrapped lines joined (up to its hint)."""
    lines = list(tail)
    starts = [i for i, line in enumerate(lines) if line.startswith("error:")]
    if not starts:
        return "its command cannot run"
    said: list[str] = []
    for line in lines[starts[-1] :]:
        if line.startswith("hint:") or (said and _LOG_LINE.match(line)):
            break
        said.append(line.strip())
    return " ".join(said).removeprefix("error:").strip()


def _drain_stderr(
    pipe: IO[bytes],
    tail: deque[str] | None,
    sink: logging.Handler | None = None,
    stream: str = "stderr",
) -> None:
    """Read a worker's pipe to its end: each line into ``tail`` and the log file, if any."""
    with pipe:
        for raw in pipe:
            line = raw.decode("utf-8", errors="replace").rstrip()
            if tail is not None:
                tail.append(line)
            if sink is not None:
                record = logging.LogRecord(log.name, logging.INFO, __file__, 0, line, None, None)
                record.stream = stream
                sink.handle(record)


class _PrivateLog(logging.handlers.RotatingFileHandler):
    """The stdlib's rotating file, created 0600 (a new one at each rollover too)."""

    def _open(self) -> TextIOWrapper:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.fchmod(fd, 0o600)  # a file left from an earlier run may be more open
        except OSError:
            os.close(fd)
            raise
        return open(fd, "a", encoding=self.encoding, errors=self.errors)


class _UTCFormatter(logging.Formatter):
    def __init__(self, fmt: str, datefmt: str) -> None:
        super().__init__(fmt, datefmt)
        self.converter = time.gmtime


def _worker_log(directory: Path, agent: str, max_bytes: int, backups: int) -> logging.Handler:
    """The log file of worker ``agent``: ``directory/<agent>.log``, rotated."""
    handler = _PrivateLog(
        directory / f"{agent}.log", maxBytes=max_bytes, backupCount=backups, encoding="utf-8"
    )
    handler.setFormatter(
        _UTCFormatter("%(asctime)s.%(msecs)03dZ %(stream)s: %(message)s", "%Y-%m-%dT%H:%M:%S")
    )
    return handler


def _log_dir(path: Path | str) -> Path:
    """The directory for the workers' logs, made private (0700) if this makes it."""
    directory = Path(path)
    try:
        if not directory.is_dir():
            directory.mkdir(mode=0o700, parents=True)
            directory.chmod(0o700)  # whatever the umask
    except OSError as exc:
        raise BadInput(
            f"cannot make the log directory {directory}: {exc.strerror}",
            hint="choose a directory this user may write to (--log-dir DIR)",
        ) from exc
    if not os.access(directory, os.W_OK | os.X_OK):
        raise BadInput(
            f"cannot write worker logs in {directory}",
            hint="choose a directory this user may write to (--log-dir DIR)",
        )
    return directory


class Supervisor:
    """Run between ``minimum`` and ``maximum`` local workers, following the assessment."""

    def __init__(
        self,
        fleet: Fleet,
        argv_for: Callable[[WorkerSpec], list[str]],
        *,
        maximum: int,
        minimum: int = 0,
        interval: float = 2.0,
        cooldown: float = 10.0,
        skills: Sequence[str] = (),
        domains: Sequence[str] = (),
        prefix: str = "worker",
        namer: Callable[[int, tuple[str, ...]], WorkerSpec] | None = None,
        restart_base: float = 1.0,
        restart_max: float = 60.0,
        stable_after: float = 30.0,
        drain: float = 30.0,
        listener: Callable[[SupervisorEvent], None] | None = None,
        env: dict[str, str] | None = None,
        log_dir: Path | str | None = None,
        log_bytes: int = LOG_BYTES,
        log_backups: int = LOG_BACKUPS,
    ) -> None:
        if maximum < 1:
            raise BadInput(f"--max-agents must be at least 1, not {maximum}")
        if not 0 <= minimum <= maximum:
            raise BadInput(
                f"--min must be between 0 and --max-agents ({maximum}), not {minimum}",
                hint="the floor cannot be above the cap",
            )
        for name, value in (("interval", interval), ("cooldown", cooldown), ("drain", drain)):
            if value < 0 or (name == "interval" and value == 0):
                raise BadInput(f"--{name} must be above 0 seconds, not {value:g}")
        self.fleet = fleet
        self.hub = Hub(fleet)
        self.argv_for = argv_for
        self.maximum, self.minimum = maximum, minimum
        self.interval, self.cooldown, self.drain = interval, cooldown, drain
        self.skills, self.domains, self.prefix = tuple(skills), tuple(domains), prefix
        self.namer = namer
        self.restart_base, self.restart_max = restart_base, restart_max
        self.stable_after = stable_after
        self.listener = listener or (lambda event: None)
        self.env = env
        #: Where each worker's output is kept (None: only its stderr's last lines, in memory).
        self.log_dir = None if log_dir is None else _log_dir(log_dir)
        self.log_bytes, self.log_backups = log_bytes, log_backups
        self.slots: dict[str, WorkerSlot] = {}
        self.assessment: Assessment | None = None
        self.agents: dict[str, Agent] = {}
        self.steals: deque[Event] = deque(maxlen=RECENT_STEALS)
        self.spawned = 0
        self.last_change = -float("inf")
        self._seen_event = 0
        self._count = 0
        #: Why the supervisor stopped on a worker's fault (None: it did not).
        self.fault: str | None = None

    # ------------------------------------------------------------------ one pass

    def step(self, now: float | None = None) -> None:
        """One pass: collect exits, restart what is due, do the hub's job, scale."""
        now = time.monotonic() if now is None else now
        self._collect(now)
        self._restart_due(now)
        try:  # a store outage costs this pass, not the supervisor (and its workers)
            hub = self.hub.step()
            for action in hub.actions:
                self._tell(action)
            self.assessment = hub.assessment
            self.agents = {a.id: a for a in self.fleet.agents()}
            self._follow_events()
        except ShoalError as exc:
            self._say("error", f"hub pass failed: {exc.message}")
            return
        decision = sizing.scale_decision(
            recommendation=hub.assessment.recommendation,
            running=len(self.slots),
            idle=self._idle_workers(),
            minimum=self.minimum,
            maximum=self.maximum,
            room=hub.assessment.max_agents - hub.assessment.live_agents,
            since_change=now - self.last_change,
            cooldown=self.cooldown,
        )
        if decision:
            self.last_change = now
            wanted = self._wanted_skills() if decision.spawn else ()
            for _ in range(decision.spawn):
                self._spawn(self._new_spec(wanted), now, why=decision.reason)
            for agent in decision.stop:
                self._stop(agent, why=decision.reason)

    def run(self, stop: threading.Event, on_pass: Callable[[], None] | None = None) -> None:
        """Pass after pass until ``stop`` is set; then drain and stop every worker."""
        try:
            while not stop.is_set() and self.fault is None:
                self.step()
                if on_pass is not None:
                    on_pass()
                stop.wait(self.interval)
        finally:
            self.shutdown()

    # ------------------------------------------------------------------ workers

    def _new_spec(self, wanted: tuple[str, ...]) -> WorkerSpec:
        """The next worker, able to take the pending work that asks for ``wanted``."""
        self._count += 1
        if self.namer is not None:
            spec = self.namer(self._count, wanted)
        else:
            spec = WorkerSpec(
                f"{self.prefix}-{self._count}",
                tuple(sorted(set(self.skills) | set(wanted))),
                self.domains,
            )
        # The floor is made of persistent workers; the ones above it leave when idle.
        return replace(spec, ephemeral=len(self.slots) >= self.minimum)

    def _wanted_skills(self) -> tuple[str, ...]:
        """The skills the pending work asks for (so a new agent can take it)."""
        try:
            pending = self.fleet.tasks(state="pending", limit=500)
        except ShoalError:
            return ()
        return tuple(sorted({s for task in pending for s in task.skills}))

    def _spawn(
        self, spec: WorkerSpec, now: float, why: str, slot: WorkerSlot | None = None
    ) -> None:
        argv = self.argv_for(spec)
        # The store in the environment, never on the command line: any user of the host
        # may read a command line (ps, /proc/PID/cmdline), with a password in the URL.
        env = {**os.environ, **(self.env or {}), "SHOAL_STORE": self.fleet.url}
        keep = self.log_dir is not None
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,  # its lifeline: never written, closed when we die
            stdout=subprocess.PIPE if keep else subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,  # Ctrl-C reaches the supervisor, which drains them
        )
        if slot is None:
            slot = WorkerSlot(spec)
            self.slots[spec.agent] = slot
            self.spawned += 1
        slot.proc, slot.started, slot.restart_at, slot.stopping = proc, now, None, False
        if self.log_dir is not None and slot.log is None:
            slot.log = _worker_log(self.log_dir, spec.agent, self.log_bytes, self.log_backups)
        assert proc.stderr is not None
        slot.reader = threading.Thread(
            target=_drain_stderr,
            args=(proc.stderr, slot.tail, slot.log, "stderr"),
            name=f"shoal-stderr-{spec.agent}",
            daemon=True,
        )
        slot.reader.start()
        if proc.stdout is not None:
            slot.out_reader = threading.Thread(
                target=_drain_stderr,
                args=(proc.stdout, None, slot.log, "stdout"),
                name=f"shoal-stdout-{spec.agent}",
                daemon=True,
            )
            slot.out_reader.start()
        kind = "restarted" if slot.crashes else "spawned"
        skills = ",".join(spec.skills) or "-"
        self._say(
            kind,
            f"{kind} {spec.agent} (pid {proc.pid}, skills {skills}"
            f"{', ephemeral' if spec.ephemeral else ''}): {why}",
            agent=spec.agent,
            pid=proc.pid,
            skills=list(spec.skills),
            domains=list(spec.domains),
        )

    def _stop(self, agent: str, why: str) -> None:
        slot = self.slots.get(agent)
        if slot is None or slot.proc is None or slot.stopping:
            return
        slot.stopping = True
        with suppress(ProcessLookupError):
            slot.proc.send_signal(signal.SIGTERM)
        self._say("stopping", f"stopping {agent}: {why}", agent=agent)

    def _collect(self, now: float) -> None:
        """Workers that exited: gone for good, or (a crash) restarted after a delay."""
        for agent, slot in list(self.slots.items()):
            if slot.proc is None or slot.proc.poll() is None:
                continue
            code = slot.proc.returncode
            if slot.proc.stdin is not None:
                slot.proc.stdin.close()  # its lifeline: nobody is at the other end now
            if slot.stopping or code == 0:
                del self.slots[agent]
                self._close_log(slot)
                why = "as asked" if slot.stopping else "on its own (idle, or terminated)"
                self._say("exited", f"{agent} exited {why}", agent=agent, code=code)
                continue
            if code == FAULT_EXIT:  # its command cannot run: restarting will not fix that
                del self.slots[agent]
                self._close_log(slot)  # its last words (why it stopped) are read by then
                self.fault = f"{agent} stopped: {_last_error(slot.tail)}"
                self._say("fault", f"{self.fault}; stopping the supervisor", agent=agent)
                continue
            ran = now - slot.started
            slot.crashes = 1 if ran >= self.stable_after else slot.crashes + 1
            delay = sizing.restart_delay(slot.crashes, self.restart_base, self.restart_max)
            slot.restart_at = now + delay
            slot.proc = None
            last = slot.tail[-1] if slot.tail else ""
            self._say(
                "crashed",
                f"{agent} crashed (exit {code}) after {ran:.1f}s; restart in {delay:.1f}s"
                + (f": {last}" if last else ""),
                agent=agent,
                code=code,
                crashes=slot.crashes,
                restart_in=delay,
            )

    def _restart_due(self, now: float) -> None:
        for slot in list(self.slots.values()):
            if slot.restart_at is not None and now >= slot.restart_at:
                self._spawn(slot.spec, now, why=f"crash {slot.crashes} in a row", slot=slot)

    def _idle_workers(self) -> list[str]:
        """This supervisor's workers the fleet sees idle: ephemeral first, longest idle first."""
        idle = [
            (not slot.spec.ephemeral, self.agents[agent].idle_since or 0.0, agent)
            for agent, slot in self.slots.items()
            if slot.proc is not None
            and not slot.stopping
            and agent in self.agents
            and self.agents[agent].status is AgentStatus.IDLE
        ]
        return [agent for *_, agent in sorted(idle)]

    def hurry(self) -> None:
        """A second Ctrl-C: signal the stopping workers again, so they release their running
        tasks at once instead of draining."""
        for slot in self.slots.values():
            if slot.proc is not None and slot.stopping and slot.proc.poll() is None:
                with suppress(ProcessLookupError):
                    slot.proc.send_signal(signal.SIGTERM)
        self._say("hurry", "stopping now: workers release what they run")

    def shutdown(self) -> None:
        """Stop every worker: SIGTERM (they drain for up to ``drain``), then SIGKILL."""
        for agent in list(self.slots):
            self._stop(agent, "the supervisor is stopping")
        deadline = time.monotonic() + self.drain + 10.0
        for slot in list(self.slots.values()):
            if slot.proc is None:
                continue
            try:
                slot.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                slot.proc.kill()
                slot.proc.wait()
                self._say("killed", f"{slot.spec.agent} did not stop in time: killed")
        # A worker that did not leave by itself (a crash waiting for its restart, or one
        # stopped before it could set up its signal handlers) still has a live agent: end it.
        for agent, slot in self.slots.items():
            if slot.proc is None or slot.proc.returncode != 0:
                with suppress(ShoalError):
                    self.fleet.set_status(agent, "terminated", why="its worker was stopped")
        self._collect(time.monotonic())
        for slot in self.slots.values():
            self._close_log(slot)
        self.slots.clear()

    @staticmethod
    def _close_log(slot: WorkerSlot) -> None:
        """Read the exited worker's pipes to their end, then close its log file."""
        for reader in (slot.reader, slot.out_reader):
            if reader is not None:
                reader.join(2.0)
        if slot.log is not None:
            slot.log.close()
            slot.log = None

    # ------------------------------------------------------------------ what it saw

    def _follow_events(self) -> None:
        """Keep the latest steals for the live view (from the fleet's own log)."""
        history = self._seen_event == 0  # start from now: skip the history
        while batch := self.fleet.events(self._seen_event, limit=EVENT_PAGE):
            if not history:
                self.steals.extend(event for event in batch if event.kind == "stolen")
            self._seen_event = batch[-1].id
            if len(batch) < EVENT_PAGE:
                return

    def _say(self, kind: str, text: str, **data: Any) -> None:
        log.log(_LEVELS.get(kind, logging.INFO), "%s", text)
        self._tell(SupervisorEvent(kind, text, data))

    def _tell(self, event: SupervisorEvent) -> None:
        with suppress(Exception):  # a face that cannot print must not stop the supervisor
            self.listener(event)

    def workers(self) -> Iterable[tuple[WorkerSlot, Agent | None]]:
        """Each worker slot with its agent as the fleet last showed it."""
        for agent, slot in sorted(self.slots.items()):
            yield slot, self.agents.get(agent)
