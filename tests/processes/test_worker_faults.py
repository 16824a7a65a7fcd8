"""A worker's own faults are not its tasks' failures: real `shoal worker` processes on real
stores (SQLite, and PostgreSQL where it matters most).

A command that cannot run -- a mistyped name, a missing tool, a file without its execute
bit -- would fail every task of the fleet in turn, each at once, until the whole backlog was
dead. So the worker refuses such a command before it claims anything, and one that still
cannot be started for a task releases that task untouched and stops the worker (exit 2).
A command that runs and fails is the task's failure, as before.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from shoal import Fleet, TaskState
from shoal.runtime import TaskContext, Worker, WorkerFault
from tests.helpers import wait_until
from tests.workers import Proc, running

pytestmark = pytest.mark.slow

BACKLOG = 5


def post_backlog(fleet: Fleet) -> list[int]:
    return [fleet.post(f"task {i}", max_attempts=3).id for i in range(BACKLOG)]


def assert_backlog_intact(fleet: Fleet, task_ids: list[int]) -> None:
    """Every task pending and never charged: no attempt counted, no failure recorded."""
    for task in (fleet.get(i) for i in task_ids):
        assert task.state is TaskState.PENDING, task
        assert task.attempts == 0 and task.error is None, task
    kinds = {e.kind for e in fleet.events(limit=100_000)}
    assert not kinds & {"failed", "dead"}, kinds


def error_of(proc: Proc) -> dict[str, Any]:
    """The `{"error": ...}` object a --json command printed before it exited."""

    def printed() -> dict[str, Any] | None:
        # Piped, the error is one compact JSON line among the worker's event lines.
        errors = [e["error"] for e in proc.events() if "error" in e]
        return errors[-1] if errors else None

    return wait_until(printed, "the error the worker printed", 5)  # type: ignore[no-any-return]


def seconds_to_run(url: str, *args: str) -> float:
    """How long a `shoal` command takes from start to exit, right now on this machine."""
    started = time.monotonic()
    with running(url, *args) as proc:
        assert proc.wait() == 0, proc.text()
    return time.monotonic() - started


# ---------------------------------------------------------------------- before any claim


def test_a_mistyped_command_stops_the_worker_at_once_and_claims_nothing(
    shared_store: tuple[str, str],
) -> None:
    _kind, url = shared_store
    with Fleet.init(url) as fleet:
        backlog = post_backlog(fleet)
        startup = seconds_to_run(url, "--version")  # Python and the CLI's imports, no more
        started = time.monotonic()
        with running(url, "worker", "--agent", "ada", "--json", "--",
                     "nosuchcmd-xyz", "{title}") as worker:  # fmt: skip
            assert worker.wait(timeout=startup + 10) == 2, worker.text()
            elapsed = time.monotonic() - started
            error = error_of(worker)
        print(f"refused in {elapsed:.2f} s; a bare `shoal --version` took {startup:.2f} s")
        # Within 2 s; on a machine too busy to start Python in less, within a few startups.
        assert elapsed < max(2.0, 3 * startup)
        assert error["code"] == "bad_input"
        assert "'nosuchcmd-xyz' was not found" in error["message"]
        assert "PATH" in error["message"] and "spelling" in error["hint"]
        assert_backlog_intact(fleet, backlog)
        assert not any(e.kind == "claimed" for e in fleet.events(limit=100_000))
        assert fleet.agents() == []  # refused before it even registered


@pytest.mark.parametrize("make", ["missing", "not executable", "folder"])
def test_a_command_path_that_cannot_run_is_refused_with_the_path_and_the_fix(
    make: str, tmp_path: Path
) -> None:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    program = tmp_path / "run-task.sh"
    if make == "not executable":
        program.write_text("#!/bin/sh\necho ok\n")
    elif make == "folder":
        program.mkdir()
    with Fleet.init(url) as fleet:
        backlog = post_backlog(fleet)
        with running(url, "worker", "--agent", "ada", "--json", "--",
                     "./run-task.sh", "{id}", cwd=tmp_path) as worker:  # fmt: skip
            assert worker.wait(timeout=10) == 2, worker.text()
            error = error_of(worker)
        assert str(program) in error["message"]
        expected = {
            "missing": ("does not exist", "fix the path"),
            "not executable": ("is not executable", f"chmod +x {program}"),
            "folder": ("is a folder", "the program inside it"),
        }[make]
        assert expected[0] in error["message"] and expected[1] in error["hint"]
        assert_backlog_intact(fleet, backlog)
        assert fleet.agents() == []


# ---------------------------------------------------------------------- per task


def test_a_command_its_shell_cannot_find_releases_the_task_and_stops_the_worker(
    shared_store: tuple[str, str],
) -> None:
    """`sh` starts, but what it is to run is not there (exit 127): the task is released
    untouched, the worker leaves with the reason, and another agent does the work."""
    _kind, url = shared_store
    with Fleet.init(url) as fleet:
        fleet.configure(idle_timeout=0.3)
        backlog = post_backlog(fleet)
        with running(url, "worker", "--agent", "ada", "--json", "--",
                     "sh", "-c", "nosuchcmd-xyz {title}") as worker:  # fmt: skip
            assert worker.wait(timeout=10) == 2, worker.text()
            error = error_of(worker)
            fault = worker.wait_for("fault")
            left = worker.wait_for("left")
        assert "exit code 127 (not found)" in fault["error"]
        assert "nosuchcmd-xyz" in fault["error"]  # the shell's own words
        assert left["reason"] == "fault" and left["released"] == 1 and left["failed"] == 0
        assert f"releasing task #{fault['task']} untouched" in left["why"]
        assert (
            error["message"] == f"ada: {left['why']}" and "start the worker again" in error["hint"]
        )
        assert_backlog_intact(fleet, backlog)
        assert [e.kind for e in fleet.events(task=fault["task"])][-1] == "released"
        terminated = [e for e in fleet.events(agent="ada") if e.kind == "agent.terminated"]
        assert fleet.agent("ada").status.value == "terminated"
        assert terminated[0].data["why"] == left["why"]
        # The work was never lost: an agent whose command runs does all of it.
        with running(url, "worker", "--agent", "bob", "--ephemeral", "--json", "--",
                     "true") as bob:  # fmt: skip
            assert bob.wait() == 0, bob.text()
        for task in (fleet.get(i) for i in backlog):
            assert task.state is TaskState.DONE and task.attempts == 1, task


@pytest.mark.parametrize(
    ("command", "words"),
    [
        (["sh", "-c", "./tool.sh"], "exit code 126 (found but not executable)"),
        (["{payload[tool]}", "{id}"], "Permission denied"),
        (["{payload[missing]}", "{id}"], "No such file or directory"),
    ],
    ids=["shell-126", "placeholder-not-executable", "placeholder-not-found"],
)
def test_a_command_that_cannot_start_for_a_task_releases_it_untouched(
    command: list[str], words: str, tmp_path: Path
) -> None:
    """A program known only per task (a placeholder) cannot be checked up front; a file
    without its execute bit run through a shell exits 126. Either way: released, stopped."""
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    tool = tmp_path / "tool.sh"
    tool.write_text("#!/bin/sh\necho ok\n")  # no execute bit
    with Fleet.init(url) as fleet:
        task = fleet.post(
            "uses a tool",
            payload={"tool": str(tool), "missing": str(tmp_path / "nope")},
            max_attempts=3,
        )
        with running(url, "worker", "--agent", "ada", "--json", "--", *command,
                     cwd=tmp_path) as worker:  # fmt: skip
            assert worker.wait(timeout=10) == 2, worker.text()
            fault = worker.wait_for("fault")
            left = worker.wait_for("left")
            error = error_of(worker)
        assert fault["task"] == task.id and words in fault["error"]
        assert left["reason"] == "fault" and words in left["why"] and words in error["message"]
        assert_backlog_intact(fleet, [task.id])


def test_other_running_tasks_finish_during_the_drain_when_one_cannot_start(
    tmp_path: Path,
) -> None:
    """With two tasks at once, the one whose tool is missing is released and the worker
    stops claiming; the other runs to its end (the drain of a graceful stop)."""
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    script = (
        'if [ "$SHOAL_TASK_TITLE" = broken ]; then exec nosuchcmd-xyz; fi; '
        "while [ ! -f go ]; do sleep 0.05; done; echo finished"
    )
    with Fleet.init(url) as fleet:
        working = fleet.post("working", priority=2)
        broken = fleet.post("broken", priority=3)
        later = fleet.post("later", priority=9)
        with running(url, "worker", "--agent", "ada", "--max-concurrent", "2", "--json", "--",
                     "sh", "-c", script, cwd=tmp_path) as worker:  # fmt: skip
            worker.wait_for("fault", task=broken.id)
            worker.wait_for("draining")
            assert worker.popen.poll() is None  # still running the working task
            (tmp_path / "go").touch()
            assert worker.wait(timeout=10) == 2, worker.text()
            left = worker.wait_for("left")
        assert left["done"] == 1 and left["released"] == 1 and left["failed"] == 0
        assert fleet.get(working.id).state is TaskState.DONE
        assert_backlog_intact(fleet, [broken.id, later.id])


# ---------------------------------------------------------------------- the task's failures


def test_a_command_that_runs_and_fails_still_fails_its_task(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    with Fleet.init(url) as fleet:
        fleet.configure(idle_timeout=0.3)
        task = fleet.post("fails", max_attempts=1)
        with running(url, "worker", "--agent", "ada", "--ephemeral", "--json", "--",
                     "sh", "-c", "exit 1") as worker:  # fmt: skip
            assert worker.wait() == 0, worker.text()
            left = worker.wait_for("left")
        dead = fleet.get(task.id)
        assert dead.state is TaskState.DEAD and dead.attempts == 1
        assert dead.error == "exit code 1"
        assert left["reason"] == "idle" and left["failed"] == 1


# ---------------------------------------------------------------------- the Python API


def test_a_python_handler_raising_worker_fault_releases_the_task_and_stops(
    tmp_path: Path,
) -> None:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    with Fleet.init(url) as fleet:
        backlog = post_backlog(fleet)

        def handle(ctx: TaskContext) -> Any:
            raise WorkerFault("no GPU on this host", hint="run this worker where there is one")

        done = threading.Event()
        worker = Worker(Fleet.open(url), "ada", handle, max_concurrent=1)
        thread = threading.Thread(target=lambda: (worker.run(), done.set()))
        thread.start()
        assert done.wait(10), "the worker did not stop on its fault"
        thread.join(5)
        report = worker.report
        assert report.reason == "fault" and report.released == 1 and report.failed == 0
        assert report.why.endswith("untouched: no GPU on this host")
        assert report.hint == "run this worker where there is one"
        assert report.to_dict()["why"] == report.why
        assert_backlog_intact(fleet, backlog)


def test_a_command_handler_refuses_a_command_that_cannot_run_before_any_claim(
    tmp_path: Path,
) -> None:
    from shoal import BadInput
    from shoal.runtime import CommandHandler

    with pytest.raises(BadInput, match="was not found"):
        CommandHandler(["nosuchcmd-xyz"])
    assert CommandHandler([sys.executable, "-c", "pass"]).argv[0] == sys.executable


def test_tasks_claimed_as_the_worker_stops_are_given_back_unrun(tmp_path: Path) -> None:
    """A fault (or a signal) that lands while a claim is in flight: what that claim brings
    is released at once, never started."""
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    with Fleet.init(url) as fleet:
        backlog = post_backlog(fleet)
        ran: list[int] = []
        handle_fleet = Fleet.open(url)
        worker = Worker(handle_fleet, "ada", lambda ctx: ran.append(ctx.task.id), max_concurrent=2)
        claim = handle_fleet.claim

        def claim_then_stop(agent: str, limit: int = 1) -> Any:
            found = claim(agent, limit)
            worker.stop()  # as if SIGTERM came while the claim was in flight
            return found

        handle_fleet.claim = claim_then_stop  # type: ignore[method-assign]
        report = worker.run()
        assert ran == [] and report.released == 2 and report.reason == "stopped"
        assert_backlog_intact(fleet, backlog)
        handle_fleet.close()
