# ruff: noqa: F811 -- the tests take the CLI fixtures as parameters
"""Liveness on the command line, with no `shoal monitor` anywhere: each test sets a fleet
up as it would be some minutes after agents died (in this process, on a manual clock set
in the past), then runs the real `shoal` script, whose clock is the real one."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

from shoal import Fleet, ManualClock
from shoal.local_secrets import server_secret
from tests.faces.cli_support import Shoal, fleet, shoal, url  # noqa: F401 (fixtures)
from tests.helpers import post_many, wait_until


def past(url: str, seconds_ago: float) -> tuple[Fleet, ManualClock]:
    """The fleet at ``url`` on a clock ``seconds_ago`` behind the real one."""
    clock = ManualClock(time.time() - seconds_ago)
    return Fleet.open(url, clock=clock), clock


def test_a_silent_agents_queue_is_claimed_at_once_by_a_peer(
    shared_store: tuple[str, str], tmp_path: Path
) -> None:
    """iris registered with three tasks queued, then silent 13 s past a 3 s
    heartbeat_timeout: `shoal claim --agent loom` takes them, and nobody ran `shoal reap`."""
    _, store = shared_store
    fleet, clock = past(store, 16)
    fleet.configure(heartbeat_timeout=3)
    fleet.register("iris")
    queued = set(post_many(fleet, 3, to="iris"))
    fleet.register("loom", max_concurrent=3)
    clock.advance(16)
    fleet.close()
    run = Shoal(tmp_path, {"SHOAL_STORE": store})
    claimed = run("claim", "--agent", "loom", "-n", "3", "--json")
    assert claimed.code == 0, claimed
    assert {g["task"]["id"] for g in claimed.data["claimed"]} == queued
    assert {g["source"] for g in claimed.data["claimed"]} == {"pool"}
    agents = {a["id"]: a["status"] for a in run("agents", "--json").data}
    assert agents["iris"] == "offline"
    offline = [e for e in run("events", "--json").data if e["kind"] == "agent.offline"]
    assert [e["agent"] for e in offline] == ["iris"]


def test_status_shows_dead_agents_offline_and_their_leases_expired(shoal: Shoal, url: str) -> None:
    """Two agents died holding work 14 minutes ago (10-minute leases): `shoal status`
    shows them offline, their tasks not running but expired -- a read, which writes nothing."""
    fleet, _ = past(url, 14 * 60)
    fleet.register("ann")
    fleet.register("bob")
    post_many(fleet, 2)
    held = {fleet.claim(name).tasks[0].id for name in ("ann", "bob")}
    events = len(fleet.events())
    status = shoal("status", "--json").data
    assert {a["id"]: (a["status"], a["load"]) for a in status["agents"]} == {
        "ann": ("offline", 0),
        "bob": ("offline", 0),
    }
    assert {e["id"] for e in status["expired"]} == held
    assert status["counts"].get("claimed", 0) == 0
    assert status["capacity"]["live"] == 0
    text = shoal("status").text
    assert "offline" in text and "working" not in text
    assert "leases run out, not running (the next claim takes them back)" in text
    assert shoal("list").text.count("lease expired: not running") == 2
    shown = shoal("show", str(min(held))).text
    assert re.search(
        r"lease expired 4m( \d+s)? ago \(not running: the next claim takes it back\)", shown
    )
    assert len(fleet.events()) == events


def test_a_pause_that_ended_is_over_for_doctor_and_agents(shoal: Shoal, url: str) -> None:
    """The breaker paused bob for 10 minutes, 11 minutes ago: nobody reaped since, and
    every command says the pause is over."""
    fleet, _ = past(url, 11 * 60)
    fleet.configure(failure_streak=1, heartbeat_timeout=3600)
    fleet.register("bob")
    fleet.post("t")
    fleet.fail(fleet.claim("bob").leases[0], "no tool")
    assert fleet.agent("bob").status.value == "paused"
    (bob,) = shoal("agents", "--json").data
    assert (bob["status"], bob["paused_until"]) == ("waiting", None)
    checks = {c["name"]: c for c in shoal("doctor", "--json").data["checks"]}
    assert checks["paused_agents"]["ok"], checks["paused_agents"]


def test_assess_four_times_with_nothing_changed_logs_one_event(shoal: Shoal, fleet: Fleet) -> None:
    fleet.register("ann")
    for _ in range(4):
        assert shoal("assess", "--json").code == 0
    kinds = [e["kind"] for e in shoal("events", "--json").data]
    assert kinds.count("assessed") == 1


# ----------------------------------------------------------- long-lived faces reap


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _died_14_minutes_ago(url: str) -> set[int]:
    """ann and bob died holding a task each 14 minutes ago (10-minute leases); iris died
    with two tasks in her queue. The tasks held."""
    fleet, _ = past(url, 14 * 60)
    for name in ("ann", "bob", "iris"):
        fleet.register(name)
    post_many(fleet, 2)
    held = {fleet.claim(name).tasks[0].id for name in ("ann", "bob")}
    post_many(fleet, 2, to="iris")
    fleet.close()
    return held


def _stop(server: subprocess.Popen[str]) -> str:
    server.send_signal(signal.SIGTERM)
    _, err = server.communicate(timeout=20)
    return err


def test_shoal_serve_alone_shows_the_dead_and_writes_them_down(shoal: Shoal, url: str) -> None:
    """`shoal serve` with no monitor: its fleet page shows the dead agents offline and
    their tasks' leases expired, and the server's own reaper writes it all down."""
    held = _died_14_minutes_ago(url)
    port = _free_port()
    server = shoal.popen("serve", "--port", str(port))
    base = f"http://127.0.0.1:{port}"
    try:
        with Fleet.open(url) as fleet:

            def written_down() -> bool:
                events = fleet.events()
                offline = {e.agent for e in events if e.kind == "agent.offline"}
                expired = {e.task_id for e in events if e.kind == "expired"}
                return offline == {"ann", "bob", "iris"} and expired == held

            # the dead agents offline, and their leases back though nobody claimed
            wait_until(written_down, "the server's reaper to write the dead agents down")
            assert {t.agent for t in fleet.tasks(state="pending")} == {None}  # iris's too

        def lanes_page() -> str | None:  # once the server listens (its reaper may be first)
            secret = server_secret(base)  # open to its owner only
            try:
                answer = httpx.get(f"{base}/lanes", headers={"Authorization": f"Bearer {secret}"})
            except httpx.TransportError:
                return None
            return answer.text if secret and answer.status_code == 200 else None

        lanes = wait_until(lanes_page, "the server to show its fleet page")
        assert lanes.count('class="status status-offline"') == 3 and "running" not in lanes
    finally:
        err = _stop(server)
    assert "Traceback" not in err


def test_shoal_mcp_over_http_reaps_too(shoal: Shoal, url: str) -> None:
    held = _died_14_minutes_ago(url)
    server = shoal.popen("mcp", "--transport", "http", "--port", str(_free_port()))
    try:
        with Fleet.open(url) as fleet:
            wait_until(
                lambda: {e.task_id for e in fleet.events() if e.kind == "expired"} == held,
                "the MCP server's reaper to take the expired leases back",
            )
            assert {e.agent for e in fleet.events() if e.kind == "agent.offline"} == {
                "ann",
                "bob",
                "iris",
            }
    finally:
        _stop(server)


def test_a_group_whose_holder_died_is_not_full_for_any_read(shoal: Shoal, url: str) -> None:
    """Group deploy allows one held task; ann claimed one 14 minutes ago (10-minute
    lease) and died. Nobody reaped or claimed since: the lease is due, so the group holds no
    room -- as the claim counts it -- and `group list`, `status`, `ready` and `why --agent`
    say so, instead of calling the group full while `why TASK` says it may be taken."""
    fleet, _ = past(url, 14 * 60)
    fleet.set_group("deploy", 1)
    fleet.register("ann")
    first = fleet.post("deploy web", group="deploy").id
    second = fleet.post("deploy api", group="deploy").id
    assert fleet.claim("ann").tasks[0].id == first
    events = len(fleet.events())
    (deploy,) = shoal("group", "list", "--json").data
    assert (deploy["held"], deploy["full"]) == (0, False), deploy
    assert "full" not in shoal("group", "list").text
    status = shoal("status", "--json").data
    assert [(g["name"], g["held"], g["full"]) for g in status["groups"]] == [("deploy", 0, False)]
    assert second in {t["id"] for t in shoal("ready", "--json").data}
    assert len(fleet.events()) == events  # reads, which wrote nothing
    assert shoal("register", "bob").code == 0
    why = shoal("why", "--agent", "bob", "--json").data
    assert "group_full" not in {r["code"] for r in why["reasons"]}, why
    assert why["next"] in (first, second), why
    claimed = shoal("claim", "--agent", "bob", "--json").data
    assert claimed["task"]["id"] in (first, second)


def test_why_a_task_waits_when_every_agent_went_silent(shoal: Shoal, url: str) -> None:
    """Both agents went silent 20 minutes ago; nothing reaped. `shoal why` of a task that
    needs no skills says no live agent is there -- not that it lacks the skills "all of"
    (none) -- and names the offline agents."""
    fleet, _ = past(url, 20 * 60)
    fleet.register("ann")
    fleet.register("bob")
    task = fleet.post("tidy the docs").id
    text = shoal("why", str(task)).text
    assert "no live agent is there to take it (it needs no skills)" in text, text
    assert "all of" not in text and "ann, bob: offline" in text
