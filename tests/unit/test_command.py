"""Running a command for a task (``shoal.runtime.command``): arguments, output bounds, and
stopping a command with everything it started. Real processes, in this process's tests."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from shoal import BadInput, Lease, Task, TaskState
from shoal.runtime.command import (
    STDERR_TAIL,
    STDOUT_LIMIT,
    CommandNotStarted,
    CommandOutcome,
    check_command,
    expand_args,
    run_command,
)

TASK = Task(
    id=7,
    title="resize the cluster",
    state=TaskState.CLAIMED,
    priority=2,
    payload={"size": 5, "zones": ["a", "b"], "tags": {"team": "infra"}},
    skills=("shell", "k8s"),
    domain="infra",
    attempts=1,
)
LEASE = Lease(7, "forge", "f00d", 0.0)


def run(*argv: str, stop: threading.Event | None = None) -> CommandOutcome:
    return run_command(
        argv, TASK, LEASE, agent="forge", store="sqlite:///x", stop=stop or threading.Event()
    )


def test_placeholders_are_filled_and_other_braces_left_alone() -> None:
    args = expand_args(
        ["{id}", "{title}", "{priority}", "{domain}", "{skills}", "{agent}", "{attempt}",
         "{payload[size]}", "{payload[zones][1]}", "{payload[tags]}", "awk '{print $1}'",
         "{unknown}", '{"json": true}'],
        TASK,
        "forge",
    )  # fmt: skip
    assert args == [
        "7", "resize the cluster", "2", "infra", "shell,k8s", "forge", "1",
        "5", "b", '{"team": "infra"}', "awk '{print $1}'", "{unknown}", '{"json": true}',
    ]  # fmt: skip


def test_a_placeholder_missing_from_the_payload_names_itself() -> None:
    with pytest.raises(ValueError, match=r"\{payload\[nope\]\} has no value"):
        expand_args(["{payload[nope]}"], TASK, "forge")


def test_stdout_is_kept_up_to_64_kib_and_stderr_only_its_tail() -> None:
    script = (
        "import sys; sys.stdout.write('x' * 200_000); "
        "sys.stderr.write('early ' * 10_000 + 'the last words')"
    )
    outcome = run(sys.executable, "-c", script)
    assert outcome.ok
    result = outcome.result()
    assert result == "x" * STDOUT_LIMIT  # too long to be JSON: the head, as text
    assert outcome.truncated
    assert len(outcome.stderr_tail) <= STDERR_TAIL
    assert outcome.stderr_tail.endswith("the last words")


def test_a_stop_ends_the_command_and_says_why() -> None:
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    outcome = run("sleep", "30", stop=stop)
    assert not outcome.ok
    assert outcome.error() == "stopped: asked to stop"
    assert outcome.seconds < 5


# ---------------------------------------------------------------------- commands that cannot run


def test_a_program_missing_from_path_is_refused_saying_it_searched_path() -> None:
    with pytest.raises(
        BadInput, match=r"'nosuchcmd-xyz' was not found: it is in no folder of PATH"
    ):
        check_command(["nosuchcmd-xyz", "{title}"])


def test_a_program_on_path_without_its_execute_bit_is_refused_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tool").write_text("#!/bin/sh\n")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(BadInput, match="on PATH but not executable") as refused:
        check_command(["tool"])
    assert refused.value.hint is not None and f"chmod +x {tmp_path / 'tool'}" in refused.value.hint


def test_a_relative_path_is_looked_for_in_the_command_folder(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=f"there is no {tmp_path / 'run.sh'}") as refused:
        check_command(["./run.sh"], cwd=tmp_path)
    assert (
        refused.value.hint == f"fix the path after -- (relative to the worker's folder {tmp_path})"
    )
    (tmp_path / "run.sh").write_text("#!/bin/sh\n")
    with pytest.raises(BadInput, match="is not executable"):
        check_command(["./run.sh"], cwd=tmp_path)
    (tmp_path / "run.sh").chmod(0o755)
    check_command(["./run.sh"], cwd=tmp_path)


def test_programs_that_can_run_or_are_known_only_per_task_pass() -> None:
    check_command(["sh", "-c", "nosuchcmd-xyz"])  # sh is there: what it runs shows per task
    check_command([sys.executable, "-c", "pass"])
    check_command(["{payload[tool]}", "{id}"])  # a placeholder: known only per task
    with pytest.raises(BadInput, match=r"'\{nope\}' was not found"):
        check_command(["{nope}"])  # unknown braces are not placeholders: taken as they are


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["nosuchcmd-xyz"], "No such file or directory: nosuchcmd-xyz (searched PATH)"),
        (["sh", "-c", "nosuchcmd-xyz"], "exit code 127 (not found): sh:"),
        (["sh", "-c", "exit 126"], "exit code 126 (found but not executable)"),
    ],
)
def test_a_command_that_cannot_start_raises_instead_of_failing(argv: list[str], words: str) -> None:
    with pytest.raises(CommandNotStarted) as raised:
        run(*argv)
    assert words in str(raised.value)
    assert "start the worker again" in raised.value.hint


def test_a_command_that_runs_and_fails_is_an_outcome_not_a_fault() -> None:
    outcome = run("sh", "-c", "echo broke >&2; exit 1")
    assert not outcome.ok and outcome.error() == "exit code 1: broke"
