"""``GET /live``: the fleet's changes as server-sent events, for the dashboard's live lanes.

One poller per app, however many people watch (``Feed``): a thread that blocks in
``Fleet.wait_for_change`` -- LISTEN/NOTIFY on PostgreSQL, the event log's high-water mark
on SQLite -- and reads what is new with ``Fleet.events(since=cursor)``. Fifty open pages
cost the store what one does. The thread starts with the first watcher and sleeps (touching
nothing) while nobody watches; the app's shutdown stops it (``lifespan``). PostgreSQL
notifies only for transactions that make work (a post, a release, a retry...), so a claim
or a completion there is seen when the wait times out: within ``WAIT`` seconds (about 0.5 s,
against a few milliseconds for a post); on SQLite every commit wakes the poller.

Each change is broadcast to every watcher through a bounded asyncio queue of its own. A
watcher that falls behind (its queue full) is not allowed to grow memory: what it had not
read is dropped for one ``refresh`` message, which makes its page reload the lanes as any
message does. Pushes are debounced: after one, the poller waits ``INTERVAL`` before reading
again, so a busy fleet sends at most about two messages a second, each naming what
changed since the last.

The wire format: event ``fleet`` whose data is JSON ``{"cursor": N, "events": [{"id",
"kind", "task", "agent"}, ...]}`` (at most ``LISTED`` events; past that ``{"cursor": N,
"refresh": true, "count": M}``). Only ids, kinds, task ids and agent ids: no titles, no
data, and never a lease token. A comment every ``PING`` seconds keeps proxies from closing
a quiet stream; a client that goes away is dropped at once (sse-starlette watches for the
disconnect and cancels the stream, whose ``finally`` forgets the watcher).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from sse_starlette import EventSourceResponse, ServerSentEvent

from shoal._log import get_logger
from shoal.faces.web.views import Viewer
from shoal.fleet import Fleet
from shoal.model import Event

__all__ = ["INTERVAL", "PING", "Feed", "feed_of", "lifespan", "router"]

log = get_logger("shoal.web.live")

#: Seconds the poller waits after a push before it reads again (the debounce).
INTERVAL = 0.5
#: Seconds the poller blocks in ``wait_for_change`` before it reads the log anyway (a wake-up
#: another thread of this process consumed is never missed for longer than this).
WAIT = 0.5
#: Seconds between keep-alive comments on a quiet stream.
PING = 15
#: Messages a watcher may have waiting before it is sent one ``refresh`` instead.
BACKLOG = 16
#: Events one message names at most; past that it says ``refresh``.
LISTED = 50
# Not in the OpenAPI document: a stream that never ends is no API call (and a fuzzer
# following the document would wait on it for ever).
router = APIRouter(tags=["dashboard"], include_in_schema=False)


def encode(events: list[Event], cursor: int) -> str:
    """One message's data: the events' ids, kinds, tasks and agents, as JSON safe to put
    anywhere (``<``, ``>`` and ``&`` written as escapes)."""
    body: dict[str, Any]
    if len(events) > LISTED:
        body = {"cursor": cursor, "refresh": True, "count": len(events)}
    else:
        listed = [{"id": e.id, "kind": e.kind, "task": e.task_id, "agent": e.agent} for e in events]
        body = {"cursor": cursor, "events": listed}
    text = json.dumps(body, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def encode_many(count: int, cursor: int) -> str:
    """The message for more new events than one message lists: refresh, up to ``cursor``."""
    return json.dumps({"cursor": cursor, "refresh": True, "count": count})


def refresh(cursor: int) -> str:
    return json.dumps({"cursor": cursor, "refresh": True})


@dataclass(eq=False)
class Watcher:
    """One open stream: its event loop and its bounded queue of messages."""

    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[str] = field(default_factory=lambda: asyncio.Queue(BACKLOG))
    dropped: int = 0  # messages it lost for falling behind

    def offer(self, message: str) -> None:
        """Queue ``message`` (on the watcher's loop); a full queue becomes one refresh."""
        try:
            self.queue.put_nowait(message)
        except asyncio.QueueFull:
            while not self.queue.empty():
                self.queue.get_nowait()
                self.dropped += 1
            cursor = json.loads(message).get("cursor", 0)
            self.queue.put_nowait(refresh(cursor))


class Feed:
    """The one poller of an app and the watchers it feeds (module docstring)."""

    def __init__(self, fleet: Fleet, *, interval: float = INTERVAL, wait: float = WAIT) -> None:
        self.fleet = fleet
        self.interval = interval
        self.wait = wait
        self.pushes = 0  # messages broadcast, for tests and curious people
        #: Set while the poller follows the log (it has read the high-water mark): from then
        #: on no change is missed.
        self.following = threading.Event()
        #: The last event the poller has read (None: it is not following the log).
        self.cursor: int | None = None
        self._watchers: set[Watcher] = set()
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def watching(self) -> int:
        with self._cond:
            return len(self._watchers)

    def watch(self) -> Watcher:
        """A new watcher on the running loop; starts the poller if it is not running."""
        watcher = Watcher(asyncio.get_running_loop())
        with self._cond:
            self._watchers.add(watcher)
            if self._thread is None and not self._stopping.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="shoal-live-feed", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()
        return watcher

    def drop(self, watcher: Watcher) -> None:
        with self._cond:
            self._watchers.discard(watcher)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the poller (the app is shutting down) and wait for it."""
        with self._cond:
            self._stopping.set()
            thread, self._thread = self._thread, None
            self._cond.notify_all()
        if thread is not None:
            thread.join(timeout)

    # -- the poller's thread

    def _high_water(self) -> int:
        newest = self.fleet.events(newest=True, limit=1)
        return newest[-1].id if newest else 0

    def _run(self) -> None:
        cursor: int | None = None
        while True:
            with self._cond:  # sleep while nobody watches, touching nothing
                if not self._watchers:
                    cursor = self.cursor = None  # then start from the high-water mark
                    self.following.clear()
                while not self._watchers and not self._stopping.is_set():
                    self._cond.wait()
                if self._stopping.is_set():
                    return
            try:
                if cursor is None:  # (re)started: only what happens from now on
                    cursor = self.cursor = self._high_water()
                    self.following.set()
                self.fleet.wait_for_change(self.wait)
                if self._stopping.is_set():
                    break
                # A message names at most LISTED events, so no more are read: past that
                # it says "refresh" with the log's high-water mark (one row), and a busy
                # fleet costs the poller the same small read each round.
                new = self.fleet.events(since=cursor, limit=LISTED + 1)
                if len(new) > LISTED:
                    top = self._high_water()
                    message = encode_many(top - cursor, top)
                    cursor = self.cursor = top
                elif new:
                    cursor = self.cursor = new[-1].id
                    message = encode(new, cursor)
            except Exception:
                log.exception("the live feed could not read the fleet; trying again")
                with self._cond:
                    self._cond.wait(1.0)
                continue
            if not new:
                continue
            self._broadcast(message)
            with self._cond:
                self._cond.wait(self.interval)  # the debounce (a stop cuts it short)

    def _broadcast(self, message: str) -> None:
        with self._cond:
            watchers = list(self._watchers)
        self.pushes += 1
        for watcher in watchers:
            try:
                watcher.loop.call_soon_threadsafe(watcher.offer, message)
            except RuntimeError:  # its loop has closed: it is gone
                self.drop(watcher)


def feed_of(app: FastAPI) -> Feed:
    """The app's feed (made at the first use)."""
    feed: Feed | None = getattr(app.state, "feed", None)
    if feed is None:
        feed = app.state.feed = Feed(app.state.fleet)
    return feed


@contextlib.asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """The app's lifespan: on shutdown, stop the live feed's poller."""
    try:
        yield
    finally:
        feed: Feed | None = getattr(app.state, "feed", None)
        if feed is not None:
            await asyncio.to_thread(feed.stop)


@router.get(
    "/live",
    summary="The fleet's changes as server-sent events (event `fleet`)",
    response_class=EventSourceResponse,
)
async def live(request: Request, _: Viewer) -> EventSourceResponse:
    feed = feed_of(request.app)

    async def stream() -> AsyncIterator[ServerSentEvent]:
        watcher = feed.watch()
        try:
            yield ServerSentEvent(comment="watching the fleet")
            while True:
                message = await watcher.queue.get()
                yield ServerSentEvent(data=message, event="fleet")
        finally:
            feed.drop(watcher)

    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    # A client that stops reading (its connection stalled) is dropped after two pings' time.
    return EventSourceResponse(stream(), ping=PING, headers=headers, send_timeout=2 * PING)
