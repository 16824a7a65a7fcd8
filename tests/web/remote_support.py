"""Hubs for the remote-fleet tests: ``shoal serve`` in a real process (``served``), or the
same app under uvicorn in a thread of the test (``hub_thread``), each on a free port of
127.0.0.1 and waited for with a deadline, never a sleep."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import httpx

from shoal import Fleet
from tests.faces.cli_support import COMMAND, base_env
from tests.helpers import wait_until

#: Seconds a hub may take to answer its first request.
START_DEADLINE = 30.0


@dataclass(frozen=True)
class Tokens:
    """Secrets of the fleet's access tokens, made before the hub starts (a fleet with no
    token served on loopback is open to everyone)."""

    admin: str
    ada: str  # an agent token: acts as ada only
    viewer: str


def make_tokens(fleet: Fleet, *workers: str) -> tuple[Tokens, dict[str, str]]:
    """The admin, ada and viewer tokens, and an agent token for each of ``workers``."""
    tokens = Tokens(
        admin=fleet.create_token("admin", name="test")[1],
        ada=fleet.create_token("agent", agent="ada")[1],
        viewer=fleet.create_token("viewer")[1],
    )
    return tokens, {w: fleet.create_token("agent", agent=w)[1] for w in workers}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/api/v1/health", timeout=1.0).status_code == 200
    except httpx.TransportError:
        return False


@contextmanager
def served(store: str, cwd: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`shoal serve` on ``store`` in its own process: (its URL, the process), stopped at the
    end. A port taken meanwhile by someone else (exit 4) is tried again on another."""
    for _attempt in range(3):
        port = free_port()
        proc = subprocess.Popen(
            [*COMMAND, "--store", store, "serve", "--port", str(port)],
            cwd=cwd,
            env=base_env({}),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_DEADLINE
        while proc.poll() is None and not answers(url):
            if time.monotonic() > deadline:
                try:
                    last = httpx.get(f"{url}/api/v1/health", timeout=5.0).text
                except httpx.HTTPError as exc:
                    last = repr(exc)
                stop(proc, keep_err=True)
                err = proc.stderr.read() if proc.stderr else ""
                raise AssertionError(f"shoal serve did not answer in time: {err} {last}")
            time.sleep(0.05)
        if proc.poll() is None:
            break
        err = proc.stderr.read() if proc.stderr else ""
        assert proc.returncode == 4, f"shoal serve exited {proc.returncode}: {err}"
    try:
        yield url, proc
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[str], *, keep_err: bool = False) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stderr is not None and not keep_err:
        with suppress(OSError):
            proc.stderr.close()


@contextmanager
def hub_thread(fleet: Fleet) -> Iterator[str]:
    """The web app over ``fleet`` under uvicorn in a thread of this process: its URL."""
    import uvicorn

    from shoal.faces.exposure import Exposure, allowed_hosts
    from shoal.faces.web.app import create_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    exposure = Exposure("127.0.0.1", port, None, allowed_hosts("127.0.0.1", ()))
    server = uvicorn.Server(uvicorn.Config(create_app(fleet, exposure), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, "the hub to start", timeout=START_DEADLINE)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()
