"""Running a command for a task (``shoal.runtime.command``): arguments, output bounds, and
stopping a command with everything it started. Real processes, in this process's tests."""

from __future__ import annotations

import sys
import threading

import pytest

from shoal import Lease, Task, TaskState
from shoal.runtime.command import (
    STDERR_TAIL,
    STDOUT_LIMIT,
    CommandOutcome,
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
