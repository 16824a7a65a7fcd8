"""Every MCP session ends clean: its agent leaves the fleet and its tasks come back at once.

A short `shoal mcp` session that claims a task and ends without finishing it must not keep
the task until its lease runs out, nor keep its place under max_agents. So on a fleet of
max_agents 4, six sessions in a row each join, claim the one task and end: all six work,
each time the task is claimable again within a second of the session's end (with no
attempt counted: it allows only 3), and no agent is left online afterwards. Over stdio
(each session its own server process, ended by closing its stdin) and over streamable HTTP
(one server, sessions ended by DELETE, or by going idle past the session TTL). The pinned
servers in a row are the stdio server served in this process (``memory_session``), ended
the same way: their subject is what the pinned agent becomes, the process's end being
the unpinned stdio test's and the one-call test's.

A client that crashed without ending its HTTP session, and comes back in a new one, gets
its agent back once the old session has been silent for the fleet's heartbeat_timeout (not
after the 30-minute session TTL); the tasks the agent held stay under their leases. Over
stdio the session is the server process, so a claim lasts only as long as it: the claim's
next_step says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest
from mcp import Client, ClientSession, StdioServerParameters

pytest.importorskip("mcp")

from shoal import Fleet, ManualClock, TaskState
from shoal.faces.mcp.server import FleetDesk
from tests.faces.mcp_support import (
    COMMAND,
    call,
    eventually,
    http_server,
    http_server_here,
    http_session,
    memory_session,
    refused,
    server_env,
    stdio_session,
)
from tests.helpers import snapshot

pytestmark = pytest.mark.anyio

SESSIONS = 6
WITHIN = 1.0  # seconds from a session's end to its task being claimable again


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    Fleet.init(url).close()
    return url


def one_task(url: str) -> int:
    """A max_agents 4 fleet with one task that allows 3 attempts."""
    with Fleet.open(url) as fleet:
        fleet.configure(max_agents=4)
        return fleet.post("the one task", max_attempts=3).id


def claimable(url: str, task_id: int) -> Callable[[], bool]:
    def check() -> bool:
        with Fleet.open(url) as fleet:
            task = fleet.get(task_id)
            return task.state is TaskState.PENDING and task.agent is None

    return check


async def sessions_in_a_row(
    url: str,
    task_id: int,
    open_session: Callable[[int], AbstractAsyncContextManager[ClientSession]],
    *,
    register: bool = True,
) -> list[float]:
    """``SESSIONS`` sessions, one after the other: each joins (``register_agent``, unless
    the server is pinned to its agent), claims the task and ends; how long each took to
    free the task."""
    freed = []
    for i in range(1, SESSIONS + 1):
        async with open_session(i) as session:
            if register:
                await call(session, "register_agent", agent=f"visitor-{i}")
            claim = await call(session, "claim_best_task")
            assert claim["claimed"] and claim["task"]["id"] == task_id, (i, claim)
        freed.append(await eventually(claimable(url, task_id), f"session {i}'s task", WITHIN))
    print(f"tasks claimable again {max(freed) * 1000:.0f} ms after a session's end at worst")
    return freed


def none_online(url: str) -> dict[str, str]:
    """Every agent's status, after checking none is online and another agent can claim."""
    with Fleet.open(url) as fleet:
        statuses = {a.id: a.status.value for a in fleet.agents()}
        assert set(statuses.values()) <= {"offline", "terminated"}, statuses
        fleet.register("watcher", manager=True)
        (task,) = fleet.claim("watcher").tasks
        assert task.attempts <= 2, "a session's end counted an attempt"  # 6 claims, 3 allowed
    return statuses


@pytest.mark.parametrize(("store", "served"), [("sqlite", "stdio"), ("postgres", "in-process")])
async def test_stdio_sessions_that_end_give_back_their_task_and_their_place(
    store: str, served: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Closing stdin ends the session: its task and its place come back. The transport's end
    is the same on every store, so PostgreSQL's run serves `shoal mcp` in this process (the
    store's part: the session's agent leaving, its lease given back) and SQLite's starts a
    process per session."""
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    if store == "postgres":
        url = str(request.getfixturevalue("postgres_url"))
    Fleet.init(url).close()
    task = one_task(url)
    opener = stdio_session if served == "stdio" else memory_session
    await sessions_in_a_row(url, task, lambda i: opener(url))
    statuses = none_online(url)
    assert statuses == {f"visitor-{i}": "terminated" for i in range(1, SESSIONS + 1)}


async def test_pinned_sessions_take_their_agent_back_and_leave_it_offline(url: str) -> None:
    """The same --agent six times: each session takes the identity back (working while it
    holds the task), and leaves it offline, holding nothing, when it ends."""
    task = one_task(url)
    seen = []

    def opener(i: int) -> AbstractAsyncContextManager[ClientSession]:
        with Fleet.open(url) as fleet:
            if i > 1:
                seen.append(fleet.agent("regular").status.value)
        return memory_session(url, "--agent", "regular", "--skill", "python")

    await sessions_in_a_row(url, task, opener, register=False)
    assert seen == ["offline"] * (SESSIONS - 1)
    with Fleet.open(url) as fleet:
        agent = fleet.agent("regular")
        assert agent.skills == ("python",) and agent.incarnation == 1
    assert none_online(url)["regular"] == "offline"


async def test_ephemeral_pinned_sessions_are_removed_when_they_end(url: str) -> None:
    """Six different --agent --ephemeral servers on a fleet of four: each agent is
    terminated when its session ends, so the fifth and sixth find room."""
    task = one_task(url)
    await sessions_in_a_row(
        url,
        task,
        lambda i: memory_session(url, "--agent", f"temp-{i}", "--ephemeral"),
        register=False,
    )
    statuses = none_online(url)
    assert [statuses[f"temp-{i}"] for i in range(1, SESSIONS + 1)] == ["terminated"] * SESSIONS


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
async def test_http_sessions_that_end_give_back_their_task_and_their_place(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    if store == "postgres":
        url = str(request.getfixturevalue("postgres_url"))
    Fleet.init(url).close()
    task = one_task(url)
    with http_server(url) as endpoint:
        await sessions_in_a_row(url, task, lambda i: http_session(endpoint))
        statuses = none_online(url)
    assert statuses == {f"visitor-{i}": "terminated" for i in range(1, SESSIONS + 1)}


async def test_an_http_session_whose_client_vanished_ends_after_its_ttl(url: str) -> None:
    """A client that goes away without deleting its session (a crash, a dropped network):
    the session ends once idle for mcp_session_ttl (1 s here), and so does its agent."""
    task = one_task(url)
    with http_server(url, env={"SHOAL_MCP_SESSION_TTL": "1s"}) as endpoint:
        async with http_session(endpoint, delete=False) as session:
            await call(session, "register_agent", agent="vanishing")
            await call(session, "claim_best_task")
        gone = time.monotonic()
        await eventually(claimable(url, task), "the vanished session's task", 10)
        took = time.monotonic() - gone
        with Fleet.open(url) as fleet:
            assert fleet.agent("vanishing").status.value == "terminated"
    print(f"a vanished HTTP session ended {took:.1f} s after its client left (TTL 1 s)")
    assert took >= 0.9, "the session ended before its TTL"


async def test_a_pinned_http_agent_leaves_when_its_last_session_ends(url: str) -> None:
    """Over HTTP every session of a pinned server is the same agent: it stays while any
    session is open, leaves (releasing what it holds) when the last ends, and the next
    session takes it back."""
    with Fleet.open(url) as fleet:
        first, second = fleet.post("first", priority=1).id, fleet.post("second").id
    with http_server(url, "--agent", "shared", "--max-concurrent", "2") as endpoint:
        async with http_session(endpoint) as one:
            async with http_session(endpoint) as two:
                assert (await call(one, "claim_best_task"))["task"]["id"] == first
                assert (await call(two, "claim_best_task"))["task"]["id"] == second
            with Fleet.open(url) as fleet:  # `one` still holds the agent: nothing moves
                assert fleet.agent("shared").status.value == "working"
                assert fleet.get(first).state is TaskState.CLAIMED
        await eventually(claimable(url, first), "the pinned agent's first task", WITHIN)
        await eventually(claimable(url, second), "the pinned agent's second task", WITHIN)
        with Fleet.open(url) as fleet:
            assert fleet.agent("shared").status.value == "offline"
        async with http_session(endpoint) as three:
            again = await call(three, "claim_best_task")
            assert again["task"]["id"] == first
            with Fleet.open(url) as fleet:
                assert fleet.agent("shared").status.value == "working"


async def test_a_client_that_crashed_gets_its_agent_back_after_heartbeat_timeout(
    url: str,
) -> None:
    """carol's client claims a task and crashes, its HTTP session left open. Its new session
    is refused carol until the old one has been silent for heartbeat_timeout (90 s, on the
    server's manual clock), then takes her up; the task she held is still hers, under its
    lease, and is finished with its token. The old session, had it only hung, no longer
    acts as carol, and its end (the TTL) leaves her be."""
    clock = ManualClock()
    with Fleet.open(url, clock=clock) as fleet:
        first, second = fleet.post("first", priority=1).id, fleet.post("second").id
        timeout = fleet.settings().heartbeat_timeout
    with http_server_here(FleetDesk(Fleet.open(url, clock=clock))) as endpoint:
        async with http_session(endpoint, delete=False) as crashed:
            await call(crashed, "register_agent", agent="carol")
            held = await call(crashed, "claim_best_task")
            assert held["task"]["id"] == first
            async with http_session(endpoint) as back:
                text = await refused(back, "register_agent", agent="carol")
                assert text.startswith("agent_in_use:"), text
                clock.advance(timeout)
                text = await refused(back, "register_agent", agent="carol")
                assert text.startswith("agent_in_use:"), text
                clock.advance(1)
                await call(back, "register_agent", agent="carol")
                with Fleet.open(url) as fleet:
                    task = fleet.get(first)
                    assert task.state is TaskState.CLAIMED and task.agent == "carol"
                text = await refused(back, "complete_task", task_id=first)
                assert text.startswith("no_token:"), text
                text = await refused(crashed, "claim_best_task")
                assert text.startswith("agent_in_use:") and "silent" in text, text
                token = held["lease"]["token"]
                await call(back, "complete_task", task_id=first, token=token, result="ok")
                again = await call(back, "claim_best_task")
                assert again["task"]["id"] == second
                await call(back, "complete_task", task_id=second, result="ok")  # hers now
                with Fleet.open(url) as fleet:
                    assert fleet.get(first).state is TaskState.DONE
                    assert fleet.agent("carol").status.value != "terminated"

        # `back` ended: carol, its own, leaves the fleet once the server has seen the end
        # (it handles the session's close after the client's request returns).
        def carol_left() -> bool:
            with Fleet.open(url) as fleet:
                return fleet.agent("carol").status.value == "terminated"

        await eventually(carol_left, "carol terminated when her session ended", 10)


async def test_an_agent_another_process_drives_is_taken_up_only_once_the_fleet_counts_it_gone(
    url: str,
) -> None:
    """dave is a worker between tasks, driven by another process: it holds no lease, but the
    fleet has just heard from it. A session naming dave -- to register over it, claim the
    work queued for it, or end it -- is refused, and nothing changes. Once the fleet has not
    heard from dave for heartbeat_timeout (his process died), a client may take him up
    again, as one back from a crash does."""
    clock = ManualClock()
    with Fleet.open(url, clock=clock) as fleet:
        fleet.register("dave")
        queued = fleet.post("dave's next", to="dave", pinned=True).id
        timeout = fleet.settings().heartbeat_timeout
        before = snapshot(fleet)
    with http_server_here(FleetDesk(Fleet.open(url, clock=clock))) as endpoint:
        async with http_session(endpoint) as other:
            for tool, arguments in (
                ("register_agent", {}),
                ("claim_best_task", {}),
                ("set_agent_status", {"status": "terminated"}),
            ):
                text = await refused(other, tool, agent="dave", **arguments)
                assert text.startswith("agent_in_use:") and "heard from it" in text, text
            clock.advance(timeout)
            text = await refused(other, "claim_best_task", agent="dave")
            assert text.startswith("agent_in_use:"), text
            with Fleet.open(url, clock=clock) as fleet:  # read as of the same moment
                assert snapshot(fleet) == before
            clock.advance(1)
            claim = await call(other, "claim_best_task", agent="dave")
            assert claim["task"]["id"] == queued


async def test_a_pinned_stdio_claim_says_the_session_must_stay_open(url: str) -> None:
    """A client that starts a server for each call (MCP Inspector's CLI mode) ends the
    session, and the claim with it, after every call: the claim says so."""
    with Fleet.open(url) as fleet:
        task = fleet.post("keep me").id
    async with stdio_session(url, "--agent", "carol") as carol:
        claim = await call(carol, "claim_best_task")
    assert claim["task"]["id"] == task
    assert "Keep this MCP session open" in claim["next_step"]
    assert "new server for each call" in claim["next_step"]
    await eventually(claimable(url, task), "the one-call session's task", WITHIN)


async def test_a_stdio_client_of_one_connection_per_call_keeps_its_claim(url: str) -> None:
    """The SDK's own Client, in its default mode, sends each call as a connection of its
    own (the per-request protocol): over stdio the session is still the process, so the
    claim outlives the call that made it, and the next call finishes it without a token."""
    with Fleet.open(url) as fleet:
        task = fleet.post("kept across calls").id
    params = StdioServerParameters(
        command=COMMAND[0],
        args=[*COMMAND[1:], "--store", url, "mcp", "--agent", "carol"],
        env=server_env(),
    )
    async with Client(params) as carol:
        claim = await carol.call_tool("claim_best_task", {})
        assert claim.structured_content and claim.structured_content["task"]["id"] == task
        await carol.call_tool("read_state", {})  # a call later: the claim is still held
        with Fleet.open(url) as fleet:
            assert fleet.get(task).state is TaskState.CLAIMED
        done = await carol.call_tool("complete_task", {"task_id": task, "result": "ok"})
        assert not done.is_error, done.content
    with Fleet.open(url) as fleet:
        assert fleet.get(task).state is TaskState.DONE
        assert fleet.agent("carol").status.value == "offline"
