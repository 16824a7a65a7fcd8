"""`shoal supervise` and `shoal monitor`: real supervisor and worker processes on a real
SQLite fleet, with short settings, waiting on conditions with deadlines."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from shoal import Fleet, ManualClock, TaskState
from shoal.errors import StoreUnavailable
from shoal.runtime.supervisor import Supervisor, SupervisorEvent
from tests.helpers import wait_until
from tests.workers import SHOAL, pid_alive, running

pytestmark = pytest.mark.slow


@pytest.fixture
def url(tmp_path: Path) -> str:
    store = f"sqlite://{tmp_path / 'fleet.db'}"
    Fleet.init(store).close()
    return store


@pytest.fixture
def fleet(url: str) -> Iterator[Fleet]:
    with Fleet.open(url) as opened:
        yield opened


def test_supervise_scales_up_under_load_and_back_down_when_idle_never_past_its_cap(
    url: str, fleet: Fleet
) -> None:
    fleet.configure(idle_timeout=0.5, assess_spawn_pending=2)  # max_agents stays 4
    # The work needs a skill the supervisor was not told about: its workers must bring it.
    tasks = [fleet.post(f"job {i}", payload={"s": 0.4}, skills=["py"]).id for i in range(16)]
    peak = 0

    def finished_and_gone() -> bool:
        nonlocal peak
        live = [a for a in fleet.agents() if a.status.live]
        peak = max(peak, len(live))
        done = all(fleet.get(t).state is TaskState.DONE for t in tasks)
        return done and not live

    with running(url, "supervise", "--max-agents", "3", "--interval", "0.1", "--cooldown",
                 "0.3", "--prefix", "w", "--drain", "2", "--json", "--",
                 "sleep", "{payload[s]}") as sup:  # fmt: skip
        wait_until(finished_and_gone, "the work done and every worker gone", timeout=60)
        assert sup.popen.poll() is None  # the supervisor itself keeps watching
        sup.signal(signal.SIGTERM)
        assert sup.wait() == 0, sup.text()
    spawned = sup.events("spawned")
    assert sorted(e["agent"] for e in spawned) == ["w-1", "w-2", "w-3"]  # up to the cap
    assert all(e["skills"] == ["py"] for e in spawned)
    assert peak <= 3
    running_now, most = 0, 0
    for event in sup.events():
        running_now += {"spawned": 1, "exited": -1}.get(event["kind"], 0)
        most = max(most, running_now)
    assert most == 3
    for event in spawned:
        assert not pid_alive(event["pid"])
    doers = {e.agent for e in fleet.events() if e.kind == "completed"}
    assert len(doers) >= 2  # the load was shared


def test_supervise_keeps_its_floor_and_restarts_a_crashed_worker_with_backoff(
    url: str, fleet: Fleet
) -> None:
    with running(url, "supervise", "--max-agents", "2", "--min", "1", "--interval", "0.1",
                 "--prefix", "w", "--json", "--", "true") as sup:  # fmt: skip
        first = sup.wait_for("spawned")
        wait_until(lambda: "w-1" in {a.id for a in fleet.agents()}, "w-1 to register")
        os.kill(first["pid"], signal.SIGKILL)
        crashed = sup.wait_for("crashed", agent="w-1")
        restarted = sup.wait_for("restarted", agent="w-1")
        assert crashed["restart_in"] == 1.0  # the first crash in a row: the base delay
        assert restarted["pid"] != first["pid"]
        wait_until(lambda: "agent.updated" in [e.kind for e in fleet.events(agent="w-1")],
                   "the restarted worker to register again, as the same agent")  # fmt: skip
        assert fleet.agent("w-1").incarnation == 1
        assert len(sup.events("spawned")) == 1  # a restart, not a second worker
        sup.signal(signal.SIGTERM)
        assert sup.wait() == 0, sup.text()
    assert not pid_alive(restarted["pid"])
    assert fleet.agent("w-1").status.value == "terminated"


def test_supervise_stops_on_a_command_that_cannot_run_and_spares_the_task(
    url: str, fleet: Fleet
) -> None:
    """A worker whose command cannot start for a task (a shell's exit 127) gives the task
    back and exits 2; restarting it would take the same task and stop again, so the
    supervisor stops too, saying why (exit 2), and the task is untouched."""
    task = fleet.post("needs a tool")
    with running(url, "supervise", "--max-agents", "2", "--min", "1", "--interval", "0.1",
                 "--prefix", "w", "--json", "--", "sh", "-c", "nosuchtool-xyz") as sup:  # fmt: skip
        fault = sup.wait_for("fault", agent="w-1")
        assert sup.wait() == 2, sup.text()
    assert "nosuchtool-xyz" in fault["text"] or "127" in fault["text"]
    [stopped] = [e["error"] for e in sup.events() if "error" in e]  # one compact JSON line
    assert stopped["code"] == "bad_input" and "the supervisor stopped" in stopped["message"]
    assert "fix the command" in stopped["hint"]
    assert not sup.events("restarted")
    back = fleet.get(task.id)
    assert back.state is TaskState.PENDING and back.attempts == 0


def test_supervise_refuses_a_floor_above_its_cap_and_starts_nothing(url: str, fleet: Fleet) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    proc = subprocess.run(
        [*SHOAL, "--store", url, "supervise", "--max-agents", "1", "--min", "2", "--", "true"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 2
    assert "--min" in proc.stderr
    assert fleet.agents() == []


def test_supervise_refuses_a_bad_worker_timeout_at_once_instead_of_restarting_workers(
    url: str, fleet: Fleet
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    for option, value in (("--timeout", "0"), ("--max-concurrent", "0")):
        proc = subprocess.run(
            [*SHOAL, "--store", url, "supervise", "--max-agents", "2", option, value, "--", "true"],
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
            check=False,
        )
        assert proc.returncode == 2, proc.stderr
        assert option in proc.stderr
        assert fleet.agents() == []


def test_a_store_outage_while_the_supervisor_reads_its_agents_costs_one_pass(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[SupervisorEvent] = []
    sup = Supervisor(fleet, lambda spec: ["true"], maximum=1, listener=said.append)

    def outage(*_args: object, **_kwargs: object) -> list[object]:
        raise StoreUnavailable("the store is down")

    monkeypatch.setattr(fleet, "agents", outage)
    sup.step()  # does not raise
    assert [e.kind for e in said][-1] == "error"
    assert "the store is down" in said[-1].text
    monkeypatch.undo()
    sup.step()
    assert sup.slots == {}


def test_worker_without_a_command_says_how_to_give_one(url: str, fleet: Fleet) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    proc = subprocess.run(
        [*SHOAL, "--store", url, "worker", "--agent", "ada"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 2
    assert "after --" in proc.stderr
    assert fleet.agents() == []


# ---------------------------------------------------------------------- monitor


def test_monitor_reaps_rebalances_and_assesses_with_a_line_per_action(url: str) -> None:
    # An agent that claimed a task long ago and went silent: set up with a clock in the past.
    with Fleet.open(url, clock=ManualClock(time.time() - 1000)) as past:
        past.configure(lease_ttl=60)
        past.register("ghost")
        task = past.post("orphaned")
        past.claim("ghost")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    env["COLUMNS"] = "200"
    human = subprocess.run(
        [*SHOAL, "--store", url, "monitor", "--once"],
        capture_output=True, text=True, env=env, timeout=30, check=False,
    )  # fmt: skip
    assert human.returncode == 0, human.stderr
    assert f"#{task.id} back to pending" in human.stdout
    assert "ghost went silent: offline" in human.stdout
    assert "assess:" in human.stdout
    with running(url, "monitor", "--interval", "0.1", "--json") as monitor:
        assessed = monitor.wait_for("assessed")
        assert assessed["workload"] == "overloaded"  # work pending, nobody present
        monitor.signal(signal.SIGTERM)
        assert monitor.wait() == 0, monitor.text()
    with Fleet.open(url) as fleet:
        assert fleet.get(task.id).state is TaskState.PENDING
        assert fleet.agent("ghost").status.value == "offline"
