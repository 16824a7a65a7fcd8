"""Imports follow their source (issue 31, item 4): importing a later beads export or GitHub
issue list again updates the tasks whose issues changed, closes (cancels, with a note) the
tasks whose issues closed -- and what waited on them goes on --, adds the new issues (to
their assignee's queue when that agent can take them), holds back an issue blocked on
nothing the file names, and is still idempotent. Run through the real `shoal` script on
the fixtures a later `bd export` and `gh issue list --state all --json ...,state` wrote."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from shoal import Fleet, InvalidTransition, TaskState
from tests.faces.test_import import BEADS, FIXTURES, GITHUB, after, fleet, keyed, shoal, url
from tests.helpers import snapshot

__all__ = ["fleet", "url"]  # the fixtures, taken as parameters

BEADS_LATER = FIXTURES / "beads_issues_later.jsonl"
GITHUB_LATER = FIXTURES / "github_issues_later.json"


def imported(url: str, kind: str, path: Path) -> dict[str, Any]:
    result = shoal(url, "import", kind, str(path), "--json")
    assert result.code == 0, result.err
    data: dict[str, Any] = result.data
    return data


def test_a_later_beads_export_updates_closes_adds_and_holds_back(url: str, fleet: Fleet) -> None:
    imported(url, "beads", BEADS)
    fleet.register("ada", skills=["python"])
    fleet.register("bob", skills=["python"])
    assert fleet.claim("ada").tasks[0].key == "beads:shl-b27"  # the middleware, priority 1
    assert fleet.claim("bob").tasks[0].key == "beads:shl-e05"  # the flaky test
    before = keyed(fleet)

    later = shoal(url, "import", "beads", str(BEADS_LATER))
    assert later.code == 0, later.err
    assert "7 tasks: 1 added, 2 updated, 1 closed, 3 already there" in later.text
    assert "1 closed issue skipped" in later.text  # shl-a1f: closed before it was imported
    assert "2 blocked issues held back" in later.text  # shl-i90, and shl-j01 waiting on it
    tasks = keyed(fleet)
    middleware, load, flaky = (tasks[f"beads:shl-{k}"] for k in ("b27", "c3d", "e05"))

    # closed in beads: cancelled with a note, though ada held it; what waited on it goes on
    assert middleware.state is TaskState.CANCELLED
    (cancel,) = [e for e in fleet.events(task=middleware.id) if e.kind == "cancelled"]
    assert cancel.data["note"] == "closed in beads (shl-b27): Merged in #212"
    assert load.state is TaskState.PENDING and tasks["beads:shl-d44"].state is TaskState.PENDING
    assert tasks["beads:shl-g70"].state is TaskState.BLOCKED  # still waits for the load test
    with pytest.raises(InvalidTransition, match="closed at its source"):
        fleet.retry(middleware.id)

    # changed in beads: updated; bob's held task keeps its skills and takes the rest
    assert load.title == "Load-test the gateway under 5k rps bursts" and load.priority == 2
    assert "p99 under 250 ms" in load.body and load.id == before["beads:shl-c3d"].id
    assert flaky.state is TaskState.CLAIMED and flaky.skills == ("python",)
    assert "ci" in flaky.labels and "arm64 runners" in flaky.body
    (edit,) = [e for e in fleet.events(task=load.id) if e.kind == "edited"]
    assert edit.data["changed"]["priority"] == {"from": 5, "to": 2}

    # new: in progress for ada, who is here and can do it -> her queue
    retry_after = tasks["beads:shl-h81"]
    assert retry_after.state is TaskState.PENDING and retry_after.agent == "ada"
    # blocked on nothing the file names: held back, and what waits on it too
    assert "beads:shl-i90" not in tasks and "beads:shl-j01" not in tasks
    # the epic still waits for its child
    assert after(fleet, tasks["beads:shl-f6a"].id) == {tasks["beads:shl-d44"].id}

    state = snapshot(fleet)
    again = shoal(url, "import", "beads", str(BEADS_LATER))
    assert "0 added, 0 updated, 0 closed, 6 already there" in again.text, again.text
    assert "2 closed issues skipped" in again.text and "(nothing changed)" in again.text
    assert snapshot(fleet) == state


def test_an_assignee_who_is_not_here_leaves_the_task_in_the_pool(url: str, fleet: Fleet) -> None:
    imported(url, "beads", BEADS)
    data = imported(url, "beads", BEADS_LATER)
    (new,) = data["added"]
    assert fleet.get(new).agent is None and fleet.get(new).in_pool


def test_a_later_github_list_closes_updates_and_adds(url: str, fleet: Fleet) -> None:
    first = imported(url, "github", GITHUB)
    assert len(first["added"]) == 6
    data = imported(url, "github", GITHUB_LATER)
    tasks = keyed(fleet)
    slow, crash = tasks["github:41"], tasks["github:42"]
    assert data["closed"] == [slow.id] and data["updated"] == [crash.id]
    assert len(data["added"]) == 1 and data["skipped"] == 1 and len(data["existing"]) == 4
    assert slow.state is TaskState.CANCELLED
    assert crash.priority == 5 and "good first issue" in crash.labels  # P0 -> P2, a label
    assert crash.title == "shoal done crashes on a result that is not UTF-8"
    assert [t.key for t in fleet.tasks(label="good first issue")] == ["github:42"]
    assert tasks["github:48"].labels == ("domain:cli", "enhancement")
    state = snapshot(fleet)
    again = imported(url, "github", GITHUB_LATER)
    assert (again["added"], again["updated"], again["closed"]) == ([], [], [])
    assert snapshot(fleet) == state
