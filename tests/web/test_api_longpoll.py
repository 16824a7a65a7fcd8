"""A long-poll claim against a real server: it returns when work comes, and a client that
hangs up while waiting is handed nothing (the task stays for an agent that is there)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from shoal import Fleet
from shoal.faces.exposure import Exposure, allowed_hosts
from shoal.faces.web import create_app
from tests.web.dash_support import OWNER, OWNER_HEADERS


def _until(condition: object, deadline: float = 15.0) -> None:
    end = time.monotonic() + deadline
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < end, "the condition did not come true in time"
        time.sleep(0.01)  # polling a condition, not waiting for time to pass


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Fleet, str, uvicorn.Server]]:
    fleet = Fleet.open(f"sqlite://{tmp_path / 'fleet.db'}", create=True)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    exposure = Exposure("127.0.0.1", port, None, allowed_hosts("127.0.0.1", ()))
    server = uvicorn.Server(
        uvicorn.Config(create_app(fleet, exposure, local_secret=OWNER), log_level="warning")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    _until(lambda: server.started)
    yield fleet, f"http://127.0.0.1:{port}", server
    server.should_exit = True
    thread.join(timeout=10)
    fleet.close()


def test_a_waiting_claim_gets_work_posted_elsewhere(
    served: tuple[Fleet, str, uvicorn.Server],
) -> None:
    fleet, base, server = served
    fleet.register("ann")
    answers: list[httpx.Response] = []
    waiting = threading.Thread(
        target=lambda: answers.append(
            httpx.post(
                f"{base}/api/v1/agents/ann/claim",
                json={"wait": "20s"},
                headers=OWNER_HEADERS,
                timeout=30,
            )
        )
    )
    started = time.monotonic()
    waiting.start()
    # The claim has reached the server (registering already made ann idle, so her status
    # says nothing about it) and has found nothing: the work comes after.
    _until(lambda: len(server.server_state.tasks) == 1)
    assert not answers
    fleet.post("late work")
    waiting.join(timeout=25)
    assert answers and answers[0].status_code == 200
    assert answers[0].json()["claimed"][0]["task"]["title"] == "late work"
    assert time.monotonic() - started < 15


def test_a_client_that_hangs_up_while_waiting_is_handed_nothing(
    served: tuple[Fleet, str, uvicorn.Server],
) -> None:
    fleet, base, server = served
    fleet.register("ann")
    port = int(base.rsplit(":", 1)[1])
    body = json.dumps({"wait": "60s"}).encode()
    with socket.create_connection(("127.0.0.1", port)) as raw:
        raw.sendall(
            b"POST /api/v1/agents/ann/claim HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Authorization: %s\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (OWNER_HEADERS["Authorization"].encode(), len(body), body)
        )
        # The owner's claim is waiting (one without the header would be refused at once).
        _until(lambda: len(server.server_state.tasks) == 1)
    # The client is gone; the server notices within a wait slice and ends the request.
    _until(lambda: not server.server_state.tasks)
    fleet.post("for someone who is there")
    assert fleet.get(1).state == "pending"
    assert fleet.leases("ann") == []
