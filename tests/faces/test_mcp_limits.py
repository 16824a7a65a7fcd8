"""`shoal mcp --transport http` keeps a bounded number of sessions, and ends idle ones first.

Each session costs the server memory until its client deletes it or it idles out (30
minutes): 2,000 `initialize` requests never followed by a DELETE took a server from 82 to
120 MB. So sessions are bounded per client (its address) and in total; past a bound the
idle ones end -- those holding no agent before those that do, the longest idle first --
and when all in the way are busy, a new session is refused (503) rather than opened.

The server runs in this process with small bounds (``http_server_here``); a second
client is a second loopback address (127.0.0.2).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

pytest.importorskip("mcp")

from shoal import Fleet, TaskState
from shoal.faces.mcp.http_sessions import MAX_SESSIONS_PER_CLIENT, SessionLimits
from shoal.faces.mcp.server import FleetDesk
from tests.faces.mcp_support import (
    call,
    eventually,
    http_server,
    http_server_here,
    http_session,
    made_token,
)

pytestmark = pytest.mark.anyio

VERSION = "2025-06-18"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def headers(endpoint: str, **extra: str) -> dict[str, str]:
    """The headers of a request to ``endpoint``, with the bearer token its loopback server
    made for its owner (loopback is not trust: every request carries it)."""
    return {**HEADERS, "Authorization": f"Bearer {made_token(endpoint)}", **extra}


def request(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


INIT = request(
    "initialize",
    protocolVersion=VERSION,
    capabilities={},
    clientInfo={"name": "forgetful", "version": "0"},
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    Fleet.init(url).close()
    return url


_clients: dict[str, httpx.AsyncClient] = {}


def client(source: str = "127.0.0.1") -> httpx.AsyncClient:
    """An HTTP client whose requests come from ``source`` (one per address and test: a new
    client costs an SSL context)."""
    if source not in _clients:
        transport = httpx.AsyncHTTPTransport(local_address=source)
        _clients[source] = httpx.AsyncClient(transport=transport, timeout=10)
    return _clients[source]


@pytest.fixture(autouse=True)
async def close_clients() -> AsyncIterator[None]:
    yield
    while _clients:
        await _clients.popitem()[1].aclose()


async def initialize(endpoint: str, source: str = "127.0.0.1") -> httpx.Response:
    """An `initialize` from ``source``, never followed by a DELETE."""
    return await client(source).post(endpoint, json=INIT, headers=headers(endpoint))


async def opened(endpoint: str, source: str = "127.0.0.1", count: int = 1) -> list[str]:
    """The ids of ``count`` sessions opened from ``source`` and forgotten, one by one."""
    ids = []
    for _ in range(count):
        response = await initialize(endpoint, source)
        assert response.status_code == 200, response.text
        ids.append(response.headers["mcp-session-id"])
    return ids


async def still_open(endpoint: str, ids: list[str]) -> list[bool]:
    """Whether each session still answers (a ping), asked in order, so the longest idle
    stays the longest idle."""
    answers = []
    for sid in ids:
        session = {"mcp-session-id": sid, "mcp-protocol-version": VERSION}
        response = await client().post(
            endpoint, json=request("ping"), headers=headers(endpoint, **session)
        )
        assert response.status_code in (200, 404), response.text
        answers.append(response.status_code == 200)
    return answers


async def test_sessions_never_deleted_are_bounded_per_client_and_in_all(url: str) -> None:
    """12 forgotten sessions from one client leave its newest 4; a second client gets 4 of
    its own; a third pushes the total past 8, and the longest idle of all go."""
    limits = SessionLimits(total=8, per_client=4)
    with http_server_here(FleetDesk(Fleet.open(url)), limits=limits) as endpoint:
        first = await opened(endpoint, count=12)
        assert await still_open(endpoint, first) == [False] * 8 + [True] * 4
        second = await opened(endpoint, "127.0.0.2", count=4)
        assert await still_open(endpoint, first[8:] + second) == [True] * 8
        third = await opened(endpoint, "127.0.0.3", count=2)
        assert await still_open(endpoint, first[8:] + second + third) == ([False] * 2 + [True] * 8)


async def test_a_session_holding_an_agent_goes_last_and_its_agent_leaves(url: str) -> None:
    """A crashed client's session holds agent keeper and a task: forgotten sessions that
    hold nothing go before it, though it is the longest idle; once it is the one idle
    session in the way, it ends as the TTL would end it, and the task comes back."""
    with Fleet.open(url) as fleet:
        task = fleet.post("kept").id
    limits = SessionLimits(total=10, per_client=3)
    with http_server_here(FleetDesk(Fleet.open(url)), limits=limits) as endpoint:
        async with http_session(endpoint, delete=False) as crashed:
            await call(crashed, "register_agent", agent="keeper")
            assert (await call(crashed, "claim_best_task"))["task"]["id"] == task
        bare = await opened(endpoint, count=4)
        assert await still_open(endpoint, bare) == [False, False, True, True]
        with Fleet.open(url) as fleet:
            assert fleet.get(task).state is TaskState.CLAIMED
        # Two clients connected (each with a stream open: never idle) make room for
        # themselves from the bare ones; then keeper's is the one idle session in the way.
        async with http_session(endpoint) as one, http_session(endpoint) as two:
            assert await still_open(endpoint, bare) == [False] * 4
            with Fleet.open(url) as fleet:
                assert fleet.get(task).state is TaskState.CLAIMED
            await opened(endpoint)

            def back() -> bool:
                with Fleet.open(url) as fleet:
                    return fleet.get(task).state is TaskState.PENDING

            await eventually(back, "keeper's task, its session ended", 10)
            with Fleet.open(url) as fleet:
                assert fleet.agent("keeper").status.value == "terminated"
            await call(one, "read_state")  # the busy sessions were left alone
            await call(two, "read_state")


async def test_a_new_session_is_refused_while_every_session_in_the_way_is_busy(
    url: str,
) -> None:
    limits = SessionLimits(total=10, per_client=2)
    with http_server_here(FleetDesk(Fleet.open(url)), limits=limits) as endpoint:
        async with http_session(endpoint) as one:
            async with http_session(endpoint) as two:
                refused = await initialize(endpoint)
                assert refused.status_code == 503
                assert "Too many open sessions" in refused.text
                assert "mcp-session-id" not in refused.headers
                assert (await initialize(endpoint, "127.0.0.2")).status_code == 200
                await call(two, "read_state")
            assert (await initialize(endpoint)).status_code == 200  # two was deleted
            await call(one, "read_state")


async def test_shoal_mcp_bounds_its_sessions(url: str) -> None:
    """The real `shoal mcp --transport http`, with its own bounds: five sessions forgotten
    early are gone once the client has opened MAX_SESSIONS_PER_CLIENT more."""
    with http_server(url) as endpoint:
        early = await opened(endpoint, count=5)
        later: list[str] = []

        async def open_some(count: int) -> None:
            later.extend(await opened(endpoint, count=count))

        async with anyio.create_task_group() as tg:
            for _ in range(10):
                tg.start_soon(open_some, MAX_SESSIONS_PER_CLIENT // 10)
        assert await still_open(endpoint, early) == [False] * 5
        assert await still_open(endpoint, later[-3:]) == [True] * 3
