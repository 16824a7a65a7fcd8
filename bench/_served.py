"""A real ``shoal serve`` process for the benchmarks and scripts that need the web face
(``sse_load``, ``screenshots``): started on a free loopback port on a given fleet, yielded
once it answers HTTP, stopped afterwards.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SCRIPT = Path(sys.executable).with_name("shoal")
COMMAND = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "shoal.faces.cli"]
START_DEADLINE = 60.0  # seconds for the server to answer its first request


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answers(base: str) -> bool:
    """Whether the server answers HTTP at all (asking for no page: any status will do)."""
    try:
        with urllib.request.urlopen(base + "/no-such-page", timeout=5):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def environment() -> dict[str, str]:
    """This environment without shoal's own variables (the fleet is given by --store), but
    for the folder of private files (where the server's sign-in secret is found)."""
    return {
        k: v for k, v in os.environ.items() if not k.startswith("SHOAL_") or k == "SHOAL_STATE_DIR"
    }


@dataclass(frozen=True)
class Served:
    """A running server: where it answers, and its process (for its CPU time)."""

    base: str  # http://127.0.0.1:PORT
    pid: int

    def cpu_seconds(self) -> float:
        """The server process's CPU time so far, user and system (Linux's /proc)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def serving(store: str, log: Path) -> Iterator[Served]:
    """``shoal serve`` on ``store`` at a free port, its output in ``log``; yielded once it
    answers. A port taken between the probe and the bind is retried on another."""
    for attempt in range(3):
        port = free_port()
        with log.open("w") as sink:
            proc = subprocess.Popen(
                [*COMMAND, "--store", store, "serve", "--port", str(port)],
                env=environment(),
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + START_DEADLINE
            while proc.poll() is None and not answers(base):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"shoal serve did not answer: {log.read_text()}")
                time.sleep(0.05)
            if proc.poll() is None:
                yield Served(base, proc.pid)
                return
            if attempt == 2:
                raise RuntimeError(f"shoal serve exited {proc.returncode}: {log.read_text()}")
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    raise AssertionError("unreachable")
