"""`shoal mcp` keeps one client off another's work, and strangers off the port.

- **Leases belong to sessions.** A second session cannot complete, fail, release or
  heartbeat a task the first session's agent holds: naming that agent is refused
  (`agent_in_use`), and acting as its own agent it has no lease (`stale_lease`, in words
  that do not say who holds the task). With the lease token it can finish the task: the
  token is the lease. The same over HTTP (two sessions of one server) and over stdio (two
  server processes on one fleet, where only the store knows who holds what).
- **HTTP off loopback needs a token.** `--host 0.0.0.0` without one refuses to start
  (exit 2); with one, a request without the right bearer gets 401 (a wrong one after a
  pause), and a request naming a host not let through gets 421 even with the token.
- **Addresses.** A port out of range is exit 2; a port in use, or an address not this
  machine's, exit 4 -- before anything is served, with the address named.

One HTTP server serves the whole module (on 0.0.0.0, with a token), so it starts once.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

pytest.importorskip("mcp")

from shoal import Fleet, TaskState
from shoal.faces.cli import main
from tests.faces.cli_support import ENV_NAMES, Result
from tests.faces.mcp_support import (
    call,
    free_port,
    http_server,
    http_session,
    refused,
    stdio_session,
)

pytestmark = pytest.mark.anyio

TOKEN = "s3cret-token-for-the-fleet-0123456789"
TOKEN_ENV = "SHOAL_MCP_TOKEN"
SERVING = 30  # seconds: a `shoal mcp` that should have refused but serves is stopped then
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite://{tmp_path_factory.mktemp('mcp-security') / 'fleet.db'}"
    Fleet.init(url).close()
    return url


@pytest.fixture(scope="module")
def endpoint(url: str) -> Iterator[str]:
    """The module's server: every interface, a token from the environment, one extra name."""
    with http_server(
        url,
        "--host",
        "0.0.0.0",
        "--allow-host",
        "fleet.example",
        env={"SHOAL_MCP_TOKEN": TOKEN},
    ) as found:
        yield found


def snapshot(url: str) -> list[tuple[Any, ...]]:
    with Fleet.open(url) as fleet:
        whole = [fleet.get(t.id) for t in fleet.tasks(limit=1000)]  # results included
        tasks = [(t.id, t.state, t.agent, t.attempts, t.result) for t in whole]
        live = [a.id for a in fleet.agents() if a.status.value != "terminated"]
        leases = [(agent, tuple(fleet.leases(agent))) for agent in live]
    return [*tasks, *leases]


async def assert_kept_off(url: str, other: Any, task_id: int, holder: str) -> None:
    """``other`` (a session whose own agent is not ``holder``) tries every way onto
    ``holder``'s lease on ``task_id`` without its token: each is refused, changes nothing,
    and no refusal of the lease names who holds it."""
    before = snapshot(url)
    for tool in ("complete_task", "fail_task", "release_task"):
        text = await refused(other, tool, task_id=task_id, agent=holder)
        assert text.startswith("agent_in_use:"), text
        text = await refused(other, tool, task_id=task_id)
        assert text.startswith("stale_lease:") and "not yours" in text, text
        assert holder not in text, f"a refusal named the lease's holder: {text}"
        for wrong in ("f" * 32, "ä" * 20):
            text = await refused(other, tool, task_id=task_id, token=wrong)
            assert text.startswith("stale_lease:") and holder not in text, text
    for tool in ("heartbeat", "claim_best_task"):
        text = await refused(other, tool, agent=holder)
        assert text.startswith("agent_in_use:") and "register_agent" in text, text
    text = await refused(other, "set_agent_status", status="terminated", agent=holder)
    assert text.startswith("agent_in_use:")
    assert snapshot(url) == before


async def test_an_http_session_cannot_act_on_another_sessions_lease(
    url: str, endpoint: str
) -> None:
    with Fleet.open(url) as fleet:
        task = fleet.post("h1's work", skills=["h1-only"]).id
    async with (
        http_session(endpoint, token=TOKEN) as one,
        http_session(endpoint, token=TOKEN) as two,
    ):
        await call(one, "register_agent", agent="h1", skills=["h1-only"])
        claim = await call(one, "claim_best_task")
        assert claim["task"]["id"] == task
        await call(two, "register_agent", agent="h2")
        text = await refused(two, "register_agent", agent="h1")
        assert text.startswith("agent_in_use:")
        await assert_kept_off(url, two, task, "h1")
        # The token is the lease: with it, the second session may finish the task.
        done = await call(two, "complete_task", task_id=task, token=claim["lease"]["token"])
        assert done["task"]["state"] == "done"
        text = await refused(one, "complete_task", task_id=task)
        assert text.startswith("already_done:")
    with Fleet.open(url) as fleet:
        assert fleet.get(task).state is TaskState.DONE


async def test_a_second_stdio_server_cannot_act_on_the_first_ones_lease(
    url: str, tmp_path: Path
) -> None:
    """Two clients, each with its own `shoal mcp` process: the second process knows nothing
    of the first's session, and is kept off all the same (the store says h3 is at work)."""
    with Fleet.open(url) as fleet:
        task = fleet.post("h3's work", skills=["h3-only"]).id
    async with stdio_session(url) as one, stdio_session(url) as two:
        await call(one, "register_agent", agent="h3", skills=["h3-only"])
        claim = await call(one, "claim_best_task")
        assert claim["task"]["id"] == task
        await call(two, "register_agent", agent="h4")
        await assert_kept_off(url, two, task, "h3")
        beat = await call(one, "heartbeat")  # the holder's own session still may
        assert [lease["task_id"] for lease in beat["leases"]] == [task]
        failed = await call(two, "fail_task", task_id=task, token=claim["lease"]["token"])
        assert failed["task"]["state"] == "pending"
    with Fleet.open(url) as fleet:
        assert fleet.get(task).attempts == 1


def post(endpoint: str, headers: dict[str, str]) -> httpx2.Response:
    """An MCP initialize request with ``headers``, raw (no SDK client)."""
    base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    return httpx2.post(endpoint, json=INIT, headers=base | headers, timeout=10)


async def test_http_needs_the_bearer_token(endpoint: str) -> None:
    assert post(endpoint, {}).status_code == 401
    began = time.monotonic()
    wrong = post(endpoint, {"Authorization": f"Bearer {TOKEN[:-1]}x"})
    assert wrong.status_code == 401
    assert time.monotonic() - began >= 0.45, "a wrong token was answered at once"
    assert TOKEN not in wrong.text
    assert post(endpoint, {"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    async with http_session(endpoint, token=TOKEN) as session:
        assert (await session.list_tools()).tools


async def test_host_and_origin_are_checked_off_loopback(endpoint: str) -> None:
    """DNS rebinding: a page on evil.example.com that resolves its name to this machine
    sends its own name as Host (and Origin). Refused even with the right token."""
    port = endpoint.split(":")[2].split("/", maxsplit=1)[0]
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert post(endpoint, bearer | {"Host": f"evil.example.com:{port}"}).status_code == 421
    assert post(endpoint, bearer | {"Origin": "http://evil.example.com"}).status_code == 403
    assert post(endpoint, bearer | {"Host": f"fleet.example:{port}"}).status_code == 200


# ---------------------------------------------------------------------- refusing to start


@pytest.fixture
def start(
    url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Result]:
    """`shoal mcp --transport http ARGS`, which must stop by itself (it is refused before
    serving, so it runs in this process, through the CLI's ``main``: exit code included)."""
    for name in (*ENV_NAMES, TOKEN_ENV):
        monkeypatch.delenv(name, raising=False)

    def served(signum: int, frame: Any) -> None:
        raise TimeoutError(f"shoal mcp served for {SERVING} s instead of refusing to start")

    def run(*args: str, token: str | None = None) -> Result:
        with monkeypatch.context() as env:
            if token is not None:
                env.setenv(TOKEN_ENV, token)
            previous = signal.signal(signal.SIGALRM, served)
            signal.alarm(SERVING)
            try:
                with pytest.raises(SystemExit) as stop:
                    main(["--store", url, "mcp", "--transport", "http", *args])
            finally:
                signal.alarm(0)
                signal.signal(signal.SIGALRM, previous)
        captured = capsys.readouterr()
        return Result(int(stop.value.code or 0), captured.out, captured.err)

    return run


def test_a_bind_beyond_this_machine_needs_a_sound_token(
    url: str, tmp_path: Path, start: Callable[..., Result]
) -> None:
    before = snapshot(url)
    port = str(free_port())
    bare = start("--host", "0.0.0.0", "--port", port)
    assert bare.code == 2, bare.err
    assert "no authentication" in bare.err and "--token-file" in bare.err
    loose = tmp_path / "loose-token"
    loose.write_text(TOKEN)
    loose.chmod(0o644)
    shown = start("--host", "0.0.0.0", "--port", port, "--token-file", str(loose))
    assert shown.code == 2 and "chmod 600" in shown.err, shown.err
    short = start("--host", "0.0.0.0", "--port", port, token="abc123")
    assert short.code == 2 and "at least 16" in short.err, short.err
    assert "abc123" not in short.out + short.err, "the token was printed"
    assert snapshot(url) == before


def test_a_bad_port_or_an_address_that_cannot_be_bound_says_so(
    url: str, start: Callable[..., Result]
) -> None:
    before = snapshot(url)
    out_of_range = start("--port", "99999", "--agent", "never-registered")
    assert out_of_range.code == 2, out_of_range.err
    assert "99999" in out_of_range.err and "65535" in out_of_range.err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        in_use = start("--port", port, "--agent", "never-registered")
    assert in_use.code == 4, in_use.err
    assert f"127.0.0.1:{port}" in in_use.err and "in use" in in_use.err
    assert "--port" in in_use.err
    elsewhere = start("--host", "192.0.2.1", "--port", port, token=TOKEN)
    assert elsewhere.code == 4, elsewhere.err
    assert "192.0.2.1" in elsewhere.err and "not an address of this machine" in elsewhere.err
    assert "Traceback" not in out_of_range.err + in_use.err + elsewhere.err
    assert snapshot(url) == before, "a refused server changed the fleet"
    with Fleet.open(url) as fleet:
        assert "never-registered" not in {a.id for a in fleet.agents()}


def test_a_token_file_is_read_and_never_shown(tmp_path: Path) -> None:
    """The exposure plan itself: a 0600 file's token is used, kept out of repr."""
    from shoal.faces.mcp.http_serving import plan_exposure

    secret = tmp_path / "token"
    secret.write_text(TOKEN + "\n")
    os.chmod(secret, 0o600)
    plan = plan_exposure("0.0.0.0", 8765, token_file=secret, environ={})
    assert plan.token == TOKEN and TOKEN not in repr(plan)
    assert "0.0.0.0" not in plan.allowed and "localhost" in plan.allowed
