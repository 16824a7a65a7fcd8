"""Helpers for the tests that run real `shoal worker` and `shoal supervise` processes: start
one with its output read line by line, wait for a condition with a deadline, stop cleanly."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.helpers import wait_until

SCRIPT = Path(sys.executable).with_name("shoal")
SHOAL = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "shoal.faces.cli"]


class Proc:
    """A `shoal` process whose --json output lines are collected as they come."""

    def __init__(self, url: str, *args: str, cwd: Path | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
        env["SHOAL_STORE"] = url
        self.popen = subprocess.Popen(
            [*SHOAL, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=cwd,
        )
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self.err: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            try:
                self.lines.put(json.loads(line))
            except json.JSONDecodeError:
                self.err.append(line)

    def _read_err(self) -> None:
        assert self.popen.stderr is not None
        self.err.extend(self.popen.stderr)

    def _pump(self) -> None:
        while True:
            try:
                self.seen.append(self.lines.get_nowait())
            except queue.Empty:
                return

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        self._pump()
        return [e for e in self.seen if kind is None or e.get("kind") == kind]

    def wait_for(
        self, kind: str, what: str = "", timeout: float = 20.0, **match: Any
    ) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            for e in self.events(kind):
                if all(e.get(k) == v for k, v in match.items()):
                    return e
            return None

        return wait_until(found, what or f"a {kind!r} line {match}", timeout)  # type: ignore[no-any-return]

    def signal(self, sig: int = signal.SIGTERM) -> None:
        self.popen.send_signal(sig)

    def wait(self, timeout: float = 30.0) -> int:
        code = self.popen.wait(timeout=timeout)
        time.sleep(0)  # let the readers finish
        return code

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(timeout=10)

    def text(self) -> str:
        return "".join(self.err)


@contextmanager
def running(url: str, *args: str, cwd: Path | None = None) -> Iterator[Proc]:
    proc = Proc(url, *args, cwd=cwd)
    try:
        yield proc
    finally:
        proc.stop()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie is not running: check its state
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False
