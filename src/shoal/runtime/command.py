"""Running a shell command for a task: what it is given, what comes back, how it is stopped.

A command is any program. It learns its task three ways, so that it can use whichever suits
it: environment variables (``SHOAL_TASK_ID``, ``SHOAL_TASK_TITLE``, ... and the lease, so a
``shoal add --parent $SHOAL_TASK_ID`` or ``shoal done`` inside it just works), the task's
body on stdin, and ``{placeholders}`` in its arguments (``{id}``, ``{title}``,
``{priority}``, ``{domain}``, ``{skills}``, ``{agent}``, ``{attempt}``, ``{payload[key]}``).
Only those names are replaced; any other braces (an awk program, a JSON literal) are left
as they are. Each filled argument stays one argument (no shell reads it), but a program
still reads an argument that starts with "-" as an option, and task text is written by
whoever posted the task: `sort {payload[file]}` given ``--output=~/.bashrc`` would write
the body there. So an argument that a placeholder starts may not come out starting with
"-" unless an argument ``--`` comes before it in the command (where programs stop reading
options): the task fails, naming the placeholder, and the command does not run.

What comes back: exit 0 is success, and the first 64 KiB of stdout is the result (JSON if it
parses, else text); any other exit is a failure, described by the exit code and the tail of
stderr. The command runs in its own process group, so stopping it (a timeout, a shutdown, a
lost lease) stops everything it started: SIGTERM to the group, then SIGKILL if it lingers.
That group is led by a small shim (``_shim``) that the worker starts in the command's place:
when the worker dies, by any means, ``kill -9`` included, the shim ends the group within a
second, so no command runs on for a task its worker can no longer hold.

A command that cannot be started at all is not a failure of the task: the fault is the
worker's (a mistyped name, a missing tool, a file without its execute bit), and every task
would fail the same way. ``check_command`` refuses such a command before any task is
claimed for it, and ``run_command`` raises ``CommandNotStarted`` -- never a failed outcome --
when the system cannot start it, or when it exits 126 or 127, which is how ``sh``, ``env``,
``timeout`` and ``xargs`` say that what they were to run was not executable or not found.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from shoal._log import get_logger
from shoal.errors import BadInput
from shoal.model import Lease, Task

__all__ = [
    "CANNOT_RUN_EXIT_CODES",
    "STDERR_TAIL",
    "STDOUT_LIMIT",
    "CommandFailed",
    "CommandNotStarted",
    "CommandOutcome",
    "check_command",
    "expand_args",
    "run_command",
    "task_env",
]

log = get_logger(__name__)

#: Bytes of stdout kept as the result; the rest is read and dropped.
STDOUT_LIMIT = 64 * 1024
#: Bytes at the end of stderr kept to explain a failure.
STDERR_TAIL = 4 * 1024
#: A payload this large or larger goes only to the file, not to an environment variable.
PAYLOAD_ENV_LIMIT = 32 * 1024
#: Seconds between SIGTERM and SIGKILL when a command is stopped.
KILL_GRACE = 2.0
#: Exit codes by which a shell (or env, timeout, xargs...) says it could not run a command.
CANNOT_RUN_EXIT_CODES = {126: "found but not executable", 127: "not found"}
#: The shim that owns a command's process group (see ``_shim``), run by its path so that
#: starting it imports nothing of shoal.
SHIM = Path(__file__).with_name("_shim.py")

_PLACEHOLDER = re.compile(
    r"\{(id|title|priority|domain|skills|agent|attempt|body|payload)((?:\[[^\]\[{}]+\])*)\}"
)
_INDEX = re.compile(r"\[([^\]]+)\]")


@dataclass(frozen=True, slots=True)
class CommandOutcome:
    """How one run of a command ended."""

    exit_code: int | None  # None when it was stopped
    stdout: bytes
    truncated: bool  # stdout was longer than STDOUT_LIMIT
    stderr_tail: str
    stopped: str | None  # why it was stopped (timeout, shutdown, lease lost), if it was
    seconds: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.stopped is None

    def result(self) -> Any:
        """stdout as JSON if it parses, else as text (None when there was none)."""
        text = self.stdout.decode("utf-8", errors="replace")
        if not text.strip():
            return None
        if not self.truncated:
            try:
                return json.loads(text)
            except json.JSONDecodeError:
                pass
        return text

    def error(self) -> str:
        """Words for a failure: the exit code (or why it was stopped) and stderr's tail."""
        if self.stopped is not None:
            head = f"stopped: {self.stopped}"
        elif self.exit_code is not None and self.exit_code < 0:
            head = f"killed by signal {-self.exit_code}"
        else:
            head = f"exit code {self.exit_code}"
        tail = self.stderr_tail.strip()
        return f"{head}: {tail}" if tail else head


class CommandFailed(Exception):
    """The command exited non-zero (or was stopped); the task fails with ``outcome.error()``."""

    def __init__(self, outcome: CommandOutcome) -> None:
        super().__init__(outcome.error())
        self.outcome = outcome


class CommandNotStarted(Exception):
    """The command could not be started (not found, not executable, no such folder...): a
    fault of the worker's command or of its host, not of the task. ``hint`` says how to fix it.
    """

    def __init__(self, message: str, *, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


#: How to fix a command that could not be started for a task.
_FIX_COMMAND = (
    "fix the command after -- (install what it runs, correct its name or path, or chmod +x "
    "it) and start the worker again"
)


def _not_started(program: str, exc: OSError) -> CommandNotStarted:
    """Words for the system's refusal to start ``program`` (Popen's OSError)."""
    what = exc.filename if exc.filename is not None else program
    searched = " (searched PATH)" if what == program and os.sep not in program else ""
    return CommandNotStarted(
        f"the command could not be started: {exc.strerror or exc}: {what}{searched}",
        hint=_FIX_COMMAND,
    )


def _cannot_run(outcome: CommandOutcome) -> CommandNotStarted | None:
    """A ``CommandNotStarted`` if the command's exit code says it could not run what it was
    to run (126, 127), else None."""
    if outcome.stopped is not None or outcome.exit_code not in CANNOT_RUN_EXIT_CODES:
        return None
    tail = outcome.stderr_tail.strip()
    return CommandNotStarted(
        f"the command could not run: exit code {outcome.exit_code} "
        f"({CANNOT_RUN_EXIT_CODES[outcome.exit_code]})" + (f": {tail}" if tail else ""),
        hint=_FIX_COMMAND,
    )


def check_command(argv: Sequence[str], cwd: Path | None = None) -> None:
    """Refuse (``BadInput``) a command whose program is not there or not executable, before
    any task is claimed for it. A program named by a ``{placeholder}`` is known only per
    task: it is not checked here (``run_command`` still refuses to charge the task for it).
    """
    if not argv:
        raise BadInput(
            "a command worker needs a command to run",
            hint="put it after --, e.g. shoal worker --agent ada -- ./do-task.sh {id}",
        )
    program = argv[0]
    if _PLACEHOLDER.search(program):
        return
    if os.sep in program:
        _check_path(program, cwd)
    elif shutil.which(program) is None:
        _refuse_name(program)


def _check_path(program: str, cwd: Path | None) -> None:
    """A program given as a path (it has a slash): it must be an executable file."""
    base = Path.cwd() if cwd is None else cwd
    path = (base / program).absolute()
    if not path.exists():
        where = "" if Path(program).is_absolute() else f" (relative to the worker's folder {base})"
        raise BadInput(
            f"the command {program!r} does not exist: there is no {path}",
            hint=f"fix the path after --{where}",
        )
    if path.is_dir():
        raise BadInput(
            f"the command {program!r} is a folder, not a program: {path}",
            hint="name the program inside it after --",
        )
    if shutil.which(str(path)) is None:
        raise BadInput(
            f"the command {program!r} is not executable: {path}",
            hint=f"make it executable (chmod +x {path}) or run it through its interpreter "
            f"(e.g. -- sh {program} {{id}})",
        )


def _refuse_name(program: str) -> None:
    """A bare program name that PATH does not resolve to an executable."""
    found = shutil.which(program, mode=os.F_OK)  # there, but without its execute bit
    if found is not None:
        raise BadInput(
            f"the command {program!r} is on PATH but not executable: {found}",
            hint=f"make it executable (chmod +x {found}) or run it through its interpreter",
        )
    raise BadInput(
        f"the command {program!r} was not found: it is in no folder of PATH "
        f"({os.environ.get('PATH', '')})",
        hint=f"check its spelling, install it, or give its path (./{program} for one in "
        "this folder)",
    )


def _payload_value(payload: Any, path: str) -> Any:
    value = payload
    for key in _INDEX.findall(path):
        if isinstance(value, list):
            value = value[int(key)]
        elif isinstance(value, dict):
            value = value[key]
        else:
            raise KeyError(key)
    return value


def _as_arg(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return ",".join(value)
    return json.dumps(value)


def expand_args(argv: Sequence[str], task: Task, agent: str) -> list[str]:
    """``argv`` with the task's ``{placeholders}`` filled in (unknown braces untouched).

    ``{payload[a][0]}`` indexes into a JSON payload; a missing key is a ``ValueError`` that
    names it (the task fails, saying which placeholder had no value), and so is a value
    that would start an argument with "-" before any ``--`` (the module docstring).
    """
    fields: Mapping[str, Any] = {
        "id": task.id,
        "title": task.title,
        "priority": task.priority,
        "domain": task.domain,
        "skills": task.skills,
        "agent": agent,
        "attempt": task.attempts,
        "body": task.body,
    }

    def fill(match: re.Match[str]) -> str:
        name, path = match.group(1), match.group(2)
        if name == "payload":
            try:
                return _as_arg(_payload_value(task.payload, path))
            except (KeyError, IndexError, ValueError):
                raise ValueError(
                    f"placeholder {match.group(0)} has no value in the payload"
                ) from None
        if path:
            return match.group(0)
        return _as_arg(fields[name])

    args: list[str] = []
    operands = False  # past an argument "--": no more options
    for arg in argv:
        filled = _PLACEHOLDER.sub(fill, arg)
        starts = _PLACEHOLDER.match(arg)
        if starts and filled.startswith("-") and not arg.startswith("-") and not operands:
            raise ValueError(
                f"placeholder {starts.group(0)} gives {filled[:40]!r}, which the command "
                "would read as an option, not as the task's text; the command was not run "
                "(to pass such values, put -- before the placeholders in the worker's "
                "command, if its program takes it)"
            )
        operands = operands or arg == "--"
        args.append(filled)
    return args


def task_env(
    task: Task, lease: Lease, *, agent: str, store: str, payload_file: Path | None
) -> dict[str, str]:
    """The environment variables that tell a command its task and its lease."""
    env = {
        "SHOAL_STORE": store,
        "SHOAL_AGENT": agent,
        "SHOAL_TOKEN": lease.token,
        "SHOAL_TASK_ID": str(task.id),
        "SHOAL_TASK_TITLE": task.title,
        "SHOAL_TASK_PRIORITY": str(task.priority),
        "SHOAL_TASK_SKILLS": ",".join(task.skills),
        "SHOAL_TASK_DOMAIN": task.domain or "",
        "SHOAL_TASK_ATTEMPT": str(task.attempts),
        "SHOAL_TASK_PARENT": "" if task.parent is None else str(task.parent),
    }
    if task.payload is not None:
        text = json.dumps(task.payload)
        if len(text) < PAYLOAD_ENV_LIMIT:
            env["SHOAL_TASK_PAYLOAD"] = text
    if payload_file is not None:
        env["SHOAL_TASK_PAYLOAD_FILE"] = str(payload_file)
    return env


class _Capture:
    """Drain a pipe in a thread, keeping its head (stdout) or its tail (stderr)."""

    def __init__(self, pipe: IO[bytes], limit: int, keep_tail: bool) -> None:
        self.data = bytearray()
        self.total = 0
        self._pipe, self._limit, self._tail = pipe, limit, keep_tail
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        with self._pipe:
            while chunk := self._pipe.read(8192):
                self.total += len(chunk)
                if self._tail:
                    self.data += chunk
                    del self.data[: max(0, len(self.data) - self._limit)]
                elif len(self.data) < self._limit:
                    self.data += chunk[: self._limit - len(self.data)]


def _feed(pipe: IO[bytes], data: bytes) -> None:
    try:
        with pipe:
            pipe.write(data)
    except (BrokenPipeError, OSError):
        pass  # the command does not read its stdin; that is its business


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the command's process group, then SIGKILL it if it is still there. ``proc``
    is the shim, the group's leader: it outlives the command, then ends what is left."""
    for sig, grace in ((signal.SIGTERM, KILL_GRACE), (signal.SIGKILL, 5.0)):
        if sig == signal.SIGKILL:
            log.warning(
                "command (group %d) still running %gs after SIGTERM: SIGKILL", proc.pid, KILL_GRACE
            )
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _kill_group(group: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)


@dataclass(frozen=True, slots=True)
class _Started:
    """The shim's first word: the command's pid, or why it could not be started."""

    pid: int | None
    error: OSError | None


class _Replies:
    """What the shim says on its channel (see ``_shim``): ``pid N`` or ``error ERRNO``
    first, ``exit CODE`` last. Closing it closes the worker's end: the shim's lifeline."""

    def __init__(self, channel: socket.socket, program: str) -> None:
        self._channel, self._program = channel, program
        self._file = channel.makefile("r", encoding="ascii", newline="\n")

    def first(self) -> _Started:
        """Wait for the shim to start the command (milliseconds); an empty answer means
        the shim ended before it could (stopped at once, or killed)."""
        word, _, value = self._file.readline().strip().partition(" ")
        if word == "error":
            code = int(value)
            return _Started(None, OSError(code, os.strerror(code), self._program))
        return _Started(int(value) if word == "pid" else None, None)

    def exit_code(self) -> int | None:
        """The command's exit code, read once the shim has ended (None: it never said)."""
        self._channel.settimeout(5.0)  # the shim is gone: its end is closed, or soon is
        try:
            rest = self._file.read().split()
        except OSError:
            return None
        if len(rest) >= 2 and rest[-2] == "exit":
            return int(rest[-1])
        return None

    def __enter__(self) -> _Replies:
        return self

    def __exit__(self, *_exc: object) -> None:
        self._file.close()
        self._channel.close()


def _start_shim(
    args: Sequence[str], env: Mapping[str, str], cwd: Path | None
) -> tuple[subprocess.Popen[bytes], _Replies]:
    """Start the shim that runs ``args`` in a process group of its own and ends that group
    if this process dies (``_shim``); the channel's other end stays with the shim alone."""
    ours, theirs = socket.socketpair()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", str(SHIM), str(theirs.fileno()), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            pass_fds=(theirs.fileno(),),
            start_new_session=True,  # the shim leads a new group: stopping it stops it all
        )
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    return proc, _Replies(ours, args[0])


def run_command(
    argv: Sequence[str],
    task: Task,
    lease: Lease,
    *,
    agent: str,
    store: str,
    stop: threading.Event,
    why_stopped: Callable[[], str] | None = None,
    cwd: Path | None = None,
) -> CommandOutcome:
    """Run ``argv`` for ``task`` and wait for it, or stop it when ``stop`` is set (by the
    worker: a timeout, a shutdown, a lost lease). ``why_stopped()`` names the reason for a
    stop (for the error).

    Raises ``CommandNotStarted`` when the command could not be started, or exits 126/127
    (see the module): the task is not to blame, so there is no outcome to charge it with.
    """
    started = time.monotonic()
    args = expand_args(argv, task, agent)
    with tempfile.TemporaryDirectory(prefix=f"shoal-task-{task.id}-") as scratch:
        payload_file = Path(scratch) / "payload.json"
        payload_file.write_text(json.dumps(task.payload), "utf-8")
        env = {
            **os.environ,
            **task_env(task, lease, agent=agent, store=store, payload_file=payload_file),
        }
        try:
            proc, replies = _start_shim(args, env, cwd)
        except OSError as exc:  # no such cwd (the shim reports the command's own failures)
            log.warning("task #%d: %s could not start: %s", task.id, argv[0], exc.strerror)
            raise _not_started(args[0], exc) from exc
        assert proc.stdin is not None
        assert proc.stdout is not None
        assert proc.stderr is not None
        threading.Thread(
            target=_feed, args=(proc.stdin, task.body.encode("utf-8")), daemon=True
        ).start()
        out = _Capture(proc.stdout, STDOUT_LIMIT, keep_tail=False)
        err = _Capture(proc.stderr, STDERR_TAIL, keep_tail=True)
        with replies:
            first = replies.first()
            if first.error is not None:  # not found, not executable, exec format...
                proc.wait()
                log.warning("task #%d: %s could not start: %s", task.id, argv[0],
                            first.error.strerror)  # fmt: skip
                raise _not_started(args[0], first.error)
            # The program as written, not as filled in: its arguments may hold the task's data.
            log.debug("task #%d: started %s (pid %d, group %d)", task.id, argv[0],
                      first.pid or 0, proc.pid)  # fmt: skip
            stopped: str | None = None
            while True:
                try:
                    proc.wait(timeout=0.05)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if stop.is_set():
                    stopped = why_stopped() if why_stopped is not None else "asked to stop"
                    log.info("task #%d: stopping its command (group %d): %s", task.id,
                             proc.pid, stopped)  # fmt: skip
                    _stop_group(proc)
                    break
            exit_code = replies.exit_code()
        if exit_code is None:  # the shim was killed before the command ended: end it here
            exit_code = proc.returncode
            if stopped is None:
                log.warning("task #%d: the shim of its command (group %d) was killed (%s): "
                            "ending the group", task.id, proc.pid, exit_code)  # fmt: skip
                _kill_group(proc.pid)
        out.thread.join(timeout=5.0)
        err.thread.join(timeout=5.0)
    outcome = CommandOutcome(
        exit_code=None if stopped is not None else exit_code,
        stdout=bytes(out.data),
        truncated=out.total > STDOUT_LIMIT,
        stderr_tail=bytes(err.data).decode("utf-8", errors="replace"),
        stopped=stopped,
        seconds=time.monotonic() - started,
    )
    log.debug(
        "task #%d: %s (group %d) %s after %.3fs",
        task.id,
        argv[0],
        proc.pid,
        f"stopped ({stopped})" if stopped is not None else f"exited {exit_code}",
        outcome.seconds,
    )
    cannot_run = _cannot_run(outcome)
    if cannot_run is not None:
        raise cannot_run
    return outcome
