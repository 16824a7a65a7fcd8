"""The watchers of ``sse_load``: one process holding many open ``/live`` streams, as that
many dashboards would, each counting the server-sent events it receives.

They run in a process of their own (spawned, like the claim workers), at the lowest CPU
priority (nice 19): fifty dashboards are browsers on other machines, so the CPU this
process spends reading streams is the harness's, not the server's, and on a two-core box
it would otherwise be taken straight from the claim race. What the server spends on its
watchers (its poller, one write per watcher per push) stays in the measurement whole.
Each watcher is one httpx stream with its own connection, read line by line, an event
counted when its blank line arrives (the SSE framing: ``event:`` and ``data:`` lines, ``:``
comments for keep-alives).

The protocol with the harness: ``ready`` is set once every watcher has its 200 (or one
failed), events are counted as "in the race" once ``race`` is set, and after ``stop`` each
watcher gets up to ``GRACE`` seconds to receive its first race event (the server debounces
its events) before all streams are closed and the report is sent.
"""

from __future__ import annotations

import asyncio
import os
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from shoal.local_secrets import server_secret

CONNECT_DEADLINE = 60.0  # seconds for every watcher to have its stream open
GRACE = 10.0  # seconds after the race for a watcher still waiting for its first event
NICE = 19  # the watcher process's CPU priority: the lowest (see above)


@dataclass
class Watcher:
    """One open ``/live`` stream and what came down it."""

    number: int
    connected: bool = False
    error: str | None = None
    events: Counter[str] = field(default_factory=Counter)
    in_race: int = 0  # events received while the race ran (or just after it)
    reload: bool = False  # fetch /lanes on each event, as the fleet page does
    reloads: int = 0
    reloading: asyncio.Task[None] | None = None
    again: bool = False  # an event came while a reload was in flight

    def changed(self, client: httpx.AsyncClient) -> None:
        """A ``fleet`` event: reload the lanes like the page (one request in flight, the
        last change queued behind it: htmx's ``hx-sync="this:queue last"``)."""
        if self.reloading is None or self.reloading.done():
            self.reloading = asyncio.create_task(self.reload_lanes(client))
        else:
            self.again = True

    async def reload_lanes(self, client: httpx.AsyncClient) -> None:
        while True:
            self.again = False
            try:
                answer = await client.get("/lanes")
                if answer.status_code != 200:
                    self.error = f"/lanes answered {answer.status_code}"
                self.reloads += 1
            except httpx.HTTPError as exc:
                self.error = f"/lanes: {type(exc).__name__}: {exc}"
            if not self.again:
                return

    async def run(self, client: httpx.AsyncClient, race: Any) -> None:
        try:
            headers = {"Accept": "text/event-stream"}
            async with client.stream("GET", "/live", headers=headers) as answer:
                if answer.status_code != 200:
                    self.error = f"/live answered {answer.status_code}"
                    return
                self.connected = True
                name, has_data = "message", False
                async for line in answer.aiter_lines():
                    if not line:
                        if has_data:
                            self.events[name] += 1
                            self.in_race += race.is_set()
                            if self.reload and name == "fleet":
                                self.changed(client)
                        name, has_data = "message", False
                    elif line.startswith("event:"):
                        name = line[6:].strip()
                    elif line.startswith("data:"):
                        has_data = True
            self.error = "the server ended the stream"
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"

    def report(self) -> dict[str, Any]:
        return {
            "connected": self.connected,
            "error": self.error,
            "events": dict(self.events),
            "in_race": self.in_race,
            "reloads": self.reloads,
        }


def watch(
    base: str, count: int, reload: bool, ready: Any, race: Any, stop: Any, results: Any
) -> None:  # pragma: no cover - runs in a child process
    """The watcher process: ``count`` streams on ``base``/live until ``stop`` (each also
    reloading the lanes on every event with ``reload``)."""
    try:
        os.nice(NICE)
        reports = asyncio.run(_watch(base, count, reload, ready, race, stop))
        results.put({"watchers": reports, "cpu": time.process_time()})
    except BaseException:
        ready.set()
        results.put({"error": f"watchers:\n{traceback.format_exc()}"})


async def _watch(
    base: str, count: int, reload: bool, ready: Any, race: Any, stop: Any
) -> list[dict[str, Any]]:
    watchers = [Watcher(n, reload=reload) for n in range(count)]
    limits = httpx.Limits(max_connections=2 * count, max_keepalive_connections=count)
    timeout = httpx.Timeout(30.0, read=None)  # a quiet stream is not an error
    # The fleet is open (no token made): its owner's sign-in secret, as the CLI finds it.
    secret = server_secret(base)
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    async with httpx.AsyncClient(
        base_url=base, limits=limits, timeout=timeout, headers=headers
    ) as client:
        streams = [asyncio.create_task(w.run(client, race)) for w in watchers]
        deadline = time.monotonic() + CONNECT_DEADLINE
        while not all(w.connected or w.error for w in watchers):
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.02)
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.05)
        deadline = time.monotonic() + GRACE
        while any(w.connected and not w.error and not w.in_race for w in watchers):
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
        tasks = [*streams, *(w.reloading for w in watchers if w.reloading is not None)]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for w in watchers:
        if not w.connected and w.error is None:
            w.error = f"not connected within {CONNECT_DEADLINE:.0f} s"
    return [w.report() for w in watchers]
