"""Running a shell command for a task: what it is given, what comes back, how it is stopped.

A command is any program. It learns its task three ways, so that it can use whichever suits
it: environment variables (``SHOAL_TASK_ID``, ``SHOAL_TASK_TITLE``, ... and the lease, so a
``shoal add --parent $SHOAL_TASK_ID`` or ``shoal done`` inside it just works), the task's
body on stdin, and ``{placeholders}`` in its arguments (``{id}``, ``{title}``,
``{priority}``, ``{domain}``, ``{skills}``, ``{agent}``, ``{attempt}``, ``{payload[key]}``).
Only those names are replaced; any other braces (an awk program, a JSON literal) are left
as they are.

What comes back: exit 0 is success, and the first 64 KiB of stdout is the result (JSON if it
parses, else text); any other exit is a failure, described by the exit code and the tail of
stderr. The command runs in its own process group, so stopping it (a timeout, a shutdown, a
lost lease) stops everything it started: SIGTERM to the group, then SIGKILL if it lingers.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from shoal.model import Lease, Task

__all__ = [
    "STDERR_TAIL",
    "STDOUT_LIMIT",
    "CommandFailed",
    "CommandOutcome",
    "expand_args",
    "run_command",
    "task_env",
]

#: Bytes of stdout kept as the result; the rest is read and dropped.
STDOUT_LIMIT = 64 * 1024
#: Bytes at the end of stderr kept to explain a failure.
STDERR_TAIL = 4 * 1024
#: A payload this large or larger goes only to the file, not to an environment variable.
PAYLOAD_ENV_LIMIT = 32 * 1024
#: Seconds between SIGTERM and SIGKILL when a command is stopped.
KILL_GRACE = 2.0

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
    names it (the task fails, saying which placeholder had no value).
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

    return [_PLACEHOLDER.sub(fill, arg) for arg in argv]


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
    """SIGTERM the command's process group, then SIGKILL it if it is still there."""
    for sig, grace in ((signal.SIGTERM, KILL_GRACE), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


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
    stop (for the error)."""
    started = time.monotonic()
    args = expand_args(argv, task, agent)
    with tempfile.TemporaryDirectory(prefix=f"shoal-task-{task.id}-") as scratch:
        payload_file = Path(scratch) / "payload.json"
        payload_file.write_text(json.dumps(task.payload), "utf-8")
        env = {
            **os.environ,
            **task_env(task, lease, agent=agent, store=store, payload_file=payload_file),
        }
        proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,  # its own process group: stopping it stops its children
        )
        assert proc.stdin is not None
        assert proc.stdout is not None
        assert proc.stderr is not None
        threading.Thread(
            target=_feed, args=(proc.stdin, task.body.encode("utf-8")), daemon=True
        ).start()
        out = _Capture(proc.stdout, STDOUT_LIMIT, keep_tail=False)
        err = _Capture(proc.stderr, STDERR_TAIL, keep_tail=True)
        stopped: str | None = None
        while True:
            try:
                proc.wait(timeout=0.05)
                break
            except subprocess.TimeoutExpired:
                pass
            if stop.is_set():
                stopped = why_stopped() if why_stopped is not None else "asked to stop"
                _stop_group(proc)
                break
        out.thread.join(timeout=5.0)
        err.thread.join(timeout=5.0)
    return CommandOutcome(
        exit_code=None if stopped is not None else proc.returncode,
        stdout=bytes(out.data),
        truncated=out.total > STDOUT_LIMIT,
        stderr_tail=bytes(err.data).decode("utf-8", errors="replace"),
        stopped=stopped,
        seconds=time.monotonic() - started,
    )
