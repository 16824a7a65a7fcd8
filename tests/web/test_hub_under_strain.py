"""A hub under strain keeps its word: wrong tokens flooding in from the address its agents
share do not lock the agents out, racing posts with one key make one task and one ``201``,
and a client whose hub dies after it sent a change says the change may have been made."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import httpx
import pytest

from shoal import Fleet
from shoal.errors import StoreUnavailable
from shoal.faces.web import guard
from shoal.remote.client import ApiClient
from tests.web.remote_support import served

pytestmark = pytest.mark.slow

#: Concurrent wrong tokens in one burst.
BURST = 300


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _burst(base: str, count: int) -> Counter[int]:
    """``count`` requests at once, each with its own wrong (but well-formed) token."""
    limits = httpx.Limits(max_connections=count, max_keepalive_connections=count)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=60) as client:
        answers = await asyncio.gather(
            *(
                client.get("/api/v1/status", headers=_bearer(f"shoal_{n:08x}_{'w' * 32}"))
                for n in range(count)
            )
        )
    return Counter(a.status_code for a in answers)


def test_wrong_tokens_never_lock_out_a_valid_one(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    with Fleet.open(url) as fleet:
        agent = fleet.create_token("agent", agent="ada")[1]
        admin = fleet.create_token("admin")[1]
    # A hub just started: it has seen no token work yet.
    with served(url, tmp_path) as (base, _):
        wrong = _bearer("shoal_00000000_" + "x" * 32)
        for _ in range(guard.MAX_FAILURES):
            assert httpx.get(f"{base}/api/v1/status", headers=wrong).status_code == 401
        throttled = httpx.get(f"{base}/api/v1/status", headers=wrong)
        assert throttled.status_code == 429 and int(throttled.headers["retry-after"]) > 0
        # Every valid token from the same address still works, one it has never seen too.
        for token in (agent, admin):
            assert httpx.get(f"{base}/api/v1/status", headers=_bearer(token)).status_code == 200
        claimed = httpx.post(f"{base}/api/v1/agents", json={"id": "ada"}, headers=_bearer(agent))
        assert claimed.status_code == 200


def test_a_burst_of_concurrent_wrong_tokens_is_counted_whole(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    with Fleet.open(url) as fleet:
        agent = fleet.create_token("agent", agent="ada")[1]
    with served(url, tmp_path) as (base, _):
        statuses = asyncio.run(_burst(base, BURST))
        assert sum(statuses.values()) == BURST and set(statuses) <= {401, 429}, statuses
        assert statuses[401] <= guard.MAX_FAILURES, f"a burst was not counted: {statuses}"
        assert httpx.get(f"{base}/api/v1/status", headers=_bearer(agent)).status_code == 200


def test_racing_posts_with_one_key_make_one_task_and_one_201(
    shared_store: tuple[str, str], tmp_path: Path
) -> None:
    _, url = shared_store
    with Fleet.open(url) as fleet:
        admin = fleet.create_token("admin")[1]
    with served(url, tmp_path) as (base, _):
        start = threading.Barrier(20)
        statuses: list[int] = []
        ids: list[int] = []

        def post(n: int) -> None:
            with httpx.Client(base_url=base, headers=_bearer(admin), timeout=60) as client:
                client.get("/api/v1/health")  # connected before the race starts
                start.wait()
                answer = client.post(
                    "/api/v1/tasks",
                    json={"title": f"post {n}"},
                    headers={"Idempotency-Key": "deploy-42"},
                )
                statuses.append(answer.status_code)
                ids.append(answer.json()["id"])

        threads = [threading.Thread(target=post, args=(n,)) for n in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    assert sorted(statuses) == [200] * 19 + [201], Counter(statuses)
    assert len(set(ids)) == 1
    with Fleet.open(url) as fleet:
        assert [t.id for t in fleet.tasks()] == ids[:1]


#: A server that takes one request whole and then says nothing: the test kills it -9.
_SWALLOW = """
import socket, sys
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen(1)
print(sock.getsockname()[1], flush=True)
conn, _ = sock.accept()
seen = b""
while b"\\r\\n\\r\\n" not in seen:
    seen += conn.recv(65536)
head, _, body = seen.partition(b"\\r\\n\\r\\n")
length = next(
    int(line.split(b":")[1]) for line in head.split(b"\\r\\n")
    if line.lower().startswith(b"content-length:")
)
while len(body) < length:
    body += conn.recv(65536)
print("received", flush=True)
sys.stdin.read()
"""


def test_a_hub_killed_after_the_request_was_sent_may_have_made_the_change() -> None:
    hub = subprocess.Popen(
        [sys.executable, "-c", _SWALLOW],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert hub.stdout is not None
    try:
        port = int(hub.stdout.readline())
        client = ApiClient(f"http://127.0.0.1:{port}", token="shoal_00000000_" + "t" * 32)
        failed: list[StoreUnavailable] = []

        def complete() -> None:
            try:
                client.post("/tasks/7/complete", {"token": "abc", "result": "done"})
            except StoreUnavailable as exc:
                failed.append(exc)

        caller = threading.Thread(target=complete)
        caller.start()
        assert hub.stdout.readline().strip() == "received"
        hub.kill()  # kill -9, with the completion sent and no answer given
        hub.wait()
        caller.join(timeout=30)
    finally:
        if hub.poll() is None:
            hub.kill()
            hub.wait()
    assert failed, "the lost answer was not reported"
    said = f"{failed[0].message} {failed[0].hint}"
    assert "may have been made" in said and "nothing was changed" not in said
    assert "shoal show" in said
    # A hub that was never reached did nothing: that one says so.
    with pytest.raises(StoreUnavailable) as refused:
        client.post("/tasks/7/complete", {"token": "abc"})
    assert "nothing was changed" in str(refused.value.hint)
    client.close()
