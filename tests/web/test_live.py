"""The live stream (``/live``) and its one poller per app, on a real server.

What a person watching the fleet page relies on: a change made anywhere -- another process,
another host -- reaches the page within moments as an event ``fleet``; a page that closes
stops costing anything at once; a page that cannot keep up is told to refresh rather than
making the server hold an ever longer backlog; any number of pages cost the store one
poller. The server runs in a thread of the test (uvicorn on a free port) and is read with
httpx, as a browser's EventSource would read it; every wait has a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from shoal import Fleet
from shoal.faces.web import live
from shoal.faces.web.lanes import LaneCache
from shoal.faces.web.live import BACKLOG, Feed, Watcher, encode, feed_of
from shoal.model import Event
from tests.web.dash_support import HOST, OWNER_HEADERS, app_for

pytestmark = pytest.mark.slow

DEADLINE = 10.0


def wait_until(check: Callable[[], bool], what: str, deadline: float = DEADLINE) -> None:
    end = time.monotonic() + deadline
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"waited {deadline} s for {what}")
        time.sleep(0.01)


@dataclass
class Server:
    url: str
    app: FastAPI


@contextlib.contextmanager
def serving(fleet: Fleet) -> Iterator[Server]:
    """The dashboard's app over ``fleet``, served by uvicorn in a thread."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((HOST, 0))
    port = sock.getsockname()[1]
    app = app_for(fleet, port)
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, "the server to start")
        yield Server(f"http://{HOST}:{port}", app)
    finally:
        server.should_exit = True
        thread.join(DEADLINE)
        sock.close()
        assert not thread.is_alive(), "the server did not stop"


class Stream:
    """An open ``/live`` stream read in a thread: its SSE messages arrive in ``messages``."""

    def __init__(self, url: str, headers: dict[str, str] | None = OWNER_HEADERS) -> None:
        self.messages: queue.Queue[tuple[str, str]] = queue.Queue()
        self.comments: list[str] = []
        self.status = 0
        self._client = httpx.Client(timeout=httpx.Timeout(DEADLINE, read=None))
        self._opened = threading.Event()
        self._response: httpx.Response | None = None
        self._thread = threading.Thread(target=self._read, args=(url, headers), daemon=True)
        self._thread.start()
        assert self._opened.wait(DEADLINE), "the stream did not open"

    def _read(self, url: str, headers: dict[str, str] | None) -> None:
        event, data = "message", []
        try:
            with self._client.stream("GET", url + "/live", headers=headers) as response:
                self._response = response
                self.status = response.status_code
                self._opened.set()
                for line in response.iter_lines():
                    if line.startswith(":"):
                        self.comments.append(line[1:].strip())
                    elif line.startswith("event:"):
                        event = line[6:].strip()
                    elif line.startswith("data:"):
                        data.append(line[5:].strip())
                    elif not line and data:
                        self.messages.put((event, "\n".join(data)))
                        event, data = "message", []
        except (httpx.HTTPError, RuntimeError):
            pass  # closed by the test
        finally:
            self._opened.set()

    def next_fleet(self, deadline: float = DEADLINE) -> dict[str, object]:
        event, data = self.messages.get(timeout=deadline)
        assert event == "fleet"
        found: dict[str, object] = json.loads(data)
        return found

    def wait_for(self, check: Callable[[dict[str, object]], bool]) -> dict[str, object]:
        end = time.monotonic() + DEADLINE
        while True:
            message = self.next_fleet(max(0.01, end - time.monotonic()))
            if check(message):
                return message

    def close(self) -> None:
        """Hang up, as a closed tab does: the connection's socket is shut (closing httpx's
        response from another thread does not wake a read blocked in it)."""
        if self._response is not None:
            sock = self._response.extensions["network_stream"].get_extra_info("socket")
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(DEADLINE)
        assert not self._thread.is_alive(), "the stream's reader did not end"
        self._client.close()


def kinds(message: dict[str, object]) -> set[tuple[object, object]]:
    events = message.get("events", [])
    assert isinstance(events, list)
    return {(e["kind"], e["task"]) for e in events}


def test_a_claim_by_another_fleet_reaches_the_stream(shared_store: tuple[str, str]) -> None:
    _, url = shared_store
    with Fleet.open(url) as served, Fleet.open(url) as other, serving(served) as server:
        other.register("ada")
        task = other.post("watch me")
        stream = Stream(server.url)
        try:
            assert stream.status == 200
            wait_until(feed_of(server.app).following.is_set, "the poller to follow the log")
            started = time.monotonic()
            lease = other.claim("ada").leases[0]
            message = stream.wait_for(lambda m: ("claimed", task.id) in kinds(m))
            print(f"\nclaim seen on the stream after {time.monotonic() - started:.3f} s")
            assert lease.token not in json.dumps(message)
            assert "watch me" not in json.dumps(message)  # ids and kinds only
            assert "watching the fleet" in stream.comments
        finally:
            stream.close()


def test_a_watcher_that_disconnects_is_dropped_at_once(tmp_path: object) -> None:
    with Fleet.open(f"sqlite://{tmp_path}/fleet.db") as fleet, serving(fleet) as server:
        first, second = Stream(server.url), Stream(server.url)
        feed = feed_of(server.app)
        wait_until(lambda: feed.watching == 2, "both watchers to be counted")
        wait_until(feed.following.is_set, "the poller to follow the log")
        first.close()
        wait_until(lambda: feed.watching == 1, "the closed watcher to be dropped", 3.0)
        fleet.post("still watched")
        assert ("posted", 1) in kinds(second.next_fleet())
        second.close()
        wait_until(lambda: feed.watching == 0, "the last watcher to be dropped", 3.0)


class CountingFleet(Fleet):
    """A fleet that counts its reads of the event log (the store is the real one)."""

    reads = 0

    def events(self, *args: Any, **kwargs: Any) -> list[Event]:
        self.reads += 1
        return super().events(*args, **kwargs)


def test_fifty_watchers_share_one_poller_and_each_gets_every_change(tmp_path: object) -> None:
    with CountingFleet.open(f"sqlite://{tmp_path}/fleet.db") as fleet, serving(fleet) as server:
        assert isinstance(fleet, CountingFleet)
        streams = [Stream(server.url) for _ in range(50)]
        try:
            feed = feed_of(server.app)
            wait_until(lambda: feed.watching == 50, "every watcher to be counted")
            wait_until(feed.following.is_set, "the poller to follow the log")
            reads, started = fleet.reads, time.monotonic()
            tasks = [fleet.post(f"for everyone {i}").id for i in range(5)]
            for stream in streams:
                seen: set[object] = set()
                while not set(tasks) <= seen:
                    seen |= {task for kind, task in kinds(stream.next_fleet()) if kind == "posted"}
            elapsed = time.monotonic() - started
            pollers = [t for t in threading.enumerate() if t.name == "shoal-live-feed"]
            assert len(pollers) == 1
            # One read per change or per wait, whatever the number of watchers.
            assert fleet.reads - reads <= len(tasks) + elapsed / live.WAIT + 2
        finally:
            for stream in streams:
                stream.close()


def test_pages_reloading_for_a_change_share_one_read_of_the_fleet(tmp_path: object) -> None:
    url = f"sqlite://{tmp_path}/fleet.db"
    with Fleet.open(url) as fleet, Fleet.open(url) as other, serving(fleet) as server:
        other.register("ada")
        stream = Stream(server.url)
        try:
            wait_until(feed_of(server.app).following.is_set, "the poller to follow the log")
            task = other.post("new work", to="ada")
            message = stream.wait_for(lambda m: ("posted", task.id) in kinds(m))
            server.app.state.lanes = cache = LaneCache(shared_for=60.0)  # a slow machine's margin
            for _ in range(10):  # ten pages reload their lanes for the same change
                html = httpx.get(
                    server.url + "/lanes", headers=OWNER_HEADERS, timeout=DEADLINE
                ).text
                assert f'data-task="{task.id}"' in html
            assert cache.reads == 1
            assert feed_of(server.app).cursor == message["cursor"]
            page_html = httpx.get(
                server.url + "/", headers=OWNER_HEADERS, timeout=DEADLINE
            ).text  # a whole page: fresh
            assert f'data-task="{task.id}"' in page_html
            assert cache.reads == 2
        finally:
            stream.close()


def test_the_stream_needs_a_token_on_a_closed_fleet(tmp_path: object) -> None:
    with Fleet.open(f"sqlite://{tmp_path}/fleet.db") as fleet:
        _, secret = fleet.create_token("viewer")
        with serving(fleet) as server:
            refused = httpx.get(server.url + "/live", timeout=DEADLINE)
            assert refused.status_code == 401
            stream = Stream(server.url, {"Authorization": f"Bearer {secret}"})
            try:
                assert stream.status == 200
                wait_until(feed_of(server.app).following.is_set, "the poller to follow the log")
                fleet.post("seen by the viewer")
                assert stream.next_fleet()["events"]
            finally:
                stream.close()


def test_the_poller_stops_with_the_app(tmp_path: object) -> None:
    with Fleet.open(f"sqlite://{tmp_path}/fleet.db") as fleet:
        with serving(fleet) as server:
            stream = Stream(server.url)
            wait_until(lambda: feed_of(server.app).watching == 1, "the watcher")
            stream.close()
        wait_until(
            lambda: not any(t.name == "shoal-live-feed" for t in threading.enumerate()),
            "the poller to stop when the app shuts down",
        )


# ---------------------------------------------------------------- the feed itself


def test_a_slow_watcher_gets_one_refresh_instead_of_a_growing_backlog(tmp_path: object) -> None:
    """A watcher that reads nothing holds at most BACKLOG messages, the last a refresh."""

    async def scenario(fleet: Fleet) -> tuple[Watcher, Watcher, int]:
        feed = Feed(fleet, interval=0.0, wait=0.05)
        slow, quick = feed.watch(), feed.watch()
        assert await asyncio.to_thread(feed.following.wait, DEADLINE)
        seen = 0
        try:
            for i in range(BACKLOG * 3):
                await asyncio.to_thread(fleet.post, f"change {i}")
                # Each change is pushed on its own: wait until the quick watcher has it.
                message = await asyncio.wait_for(quick.queue.get(), DEADLINE)
                seen += len(json.loads(message).get("events", []))
        finally:
            feed.stop()
        return slow, quick, seen

    with Fleet.open(f"sqlite://{tmp_path}/fleet.db") as fleet:
        slow, _, seen = asyncio.run(scenario(fleet))
    assert seen == BACKLOG * 3  # the one that keeps up misses nothing
    assert slow.queue.qsize() <= BACKLOG
    assert slow.dropped > 0
    messages = [json.loads(slow.queue.get_nowait()) for _ in range(slow.queue.qsize())]
    assert any(m.get("refresh") for m in messages)


def test_pushes_are_debounced(tmp_path: object) -> None:
    """A burst of changes is a handful of messages, each naming what changed since the
    last, not one message per change."""

    async def scenario(fleet: Fleet) -> tuple[int, int, float]:
        feed = Feed(fleet)
        watcher = feed.watch()
        assert await asyncio.to_thread(feed.following.wait, DEADLINE)
        cursors: list[int] = []
        told = 0  # changes the messages named or counted

        async def read() -> None:
            nonlocal told
            while True:
                message = json.loads(await watcher.queue.get())
                cursors.append(message["cursor"])
                told += message.get("count", len(message.get("events", [])))

        reader = asyncio.create_task(read())
        started = time.monotonic()
        try:
            for i in range(100):  # a change every 10 ms or so, for about a second
                await asyncio.to_thread(fleet.post, f"burst {i}")
                await asyncio.sleep(0.01)  # paces the load; nothing waits on time passing
            elapsed = time.monotonic() - started
            last = fleet.events(newest=True, limit=1)[-1].id
            end = time.monotonic() + DEADLINE
            while last not in cursors and time.monotonic() < end:
                await asyncio.sleep(0.01)
        finally:
            reader.cancel()
            feed.stop()
        return feed.pushes, told, elapsed

    with Fleet.open(f"sqlite://{tmp_path}/fleet.db") as fleet:
        pushes, told, elapsed = asyncio.run(scenario(fleet))
    print(f"\n100 changes in {elapsed:.2f} s: {pushes} messages")
    assert told == 100  # every change named or counted, once
    assert pushes <= elapsed / live.INTERVAL + 3, (pushes, elapsed)
    assert pushes < 50


def test_a_message_names_ids_and_kinds_only_and_is_escaped() -> None:
    events = [Event(7, 0.0, "claimed", 3, "ada<script>", {"token": "secret-lease"})]
    data = encode(events, 7)
    assert "secret-lease" not in data and "<" not in data
    assert json.loads(data) == {
        "cursor": 7,
        "events": [{"id": 7, "kind": "claimed", "task": 3, "agent": "ada<script>"}],
    }
    many = [Event(i, 0.0, "posted", i) for i in range(1, live.LISTED + 2)]
    assert json.loads(encode(many, 99)) == {"cursor": 99, "refresh": True, "count": 51}
