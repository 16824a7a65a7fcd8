# ruff: noqa: F811 -- the tests take the CLI tests' fixtures as parameters
"""The CLI after trouble, through the real `shoal` script: delayed tasks, bulk retry and
cancel, a paused agent resumed, and an agent that may not go idle holding work."""

from __future__ import annotations

import pytest

from shoal import AgentStatus, Fleet, TaskState
from shoal.times import parse_moment
from tests.faces.cli_support import Shoal, claim_one, fleet, shoal, url  # noqa: F401 (its fixtures)
from tests.helpers import one


def dead_tasks(fleet: Fleet, count: int, **fields: object) -> list[int]:
    """``count`` tasks that died on their only attempt."""
    fleet.register("sink", max_concurrent=count)
    for i in range(count):
        fleet.post(f"doomed {i}", max_attempts=1, **fields)  # type: ignore[arg-type]
    claim = fleet.claim("sink", count)
    for lease in claim.leases:
        fleet.fail(lease, "boom")
    return [lease.task_id for lease in claim.leases]


def test_a_task_added_for_later_waits_and_retry_makes_it_ready(shoal: Shoal, fleet: Fleet) -> None:
    fleet.register("ada")
    added = shoal("add", "nightly report", "--in", "30m", "--json")
    assert added.code == 0, added
    ready_at = parse_moment(added.data["ready_at"])
    assert ready_at - parse_moment(added.data["created_at"]) == pytest.approx(1800, abs=1)
    assert "ready in 30m" in shoal("add", "second", "--in", "30m").text
    assert "[ready in 30m]" in shoal("list").text
    claim = shoal("claim", "--agent", "ada")
    assert claim.code == 1 and "free to take in 30m" in claim.text
    retried = shoal("retry", str(added.data["id"]))
    assert retried.code == 0 and "ready now" in retried.text, retried
    assert claim_one(shoal, "ada")[0] == added.data["id"]


def test_a_time_without_a_zone_is_refused_and_nothing_is_added(shoal: Shoal, fleet: Fleet) -> None:
    result = shoal("add", "x", "--at", "2026-12-01T09:00")
    assert result.code == 2 and "no time zone" in result.err and "Z" in result.err
    both = shoal("add", "x", "--at", "2026-12-01T09:00Z", "--in", "5m")
    assert both.code == 2 and "not both" in both.err
    assert fleet.tasks() == []


def test_bulk_retry_asks_for_yes_above_ten_and_narrows_by_domain(
    shoal: Shoal, fleet: Fleet
) -> None:
    web = dead_tasks(fleet, 12, domain="web")
    refused = shoal("retry", "--state", "dead")
    assert refused.code == 2 and "--yes" in refused.err and "12 tasks" in refused.err
    assert all(fleet.get(i).state is TaskState.DEAD for i in web)
    done = shoal("retry", "--state", "dead", "--domain", "web", "--yes", "--json")
    assert done.code == 0, done
    assert done.data["count"] == 12 and sorted(done.data["tasks"]) == sorted(web)
    assert all(fleet.get(i).state is TaskState.PENDING for i in web)
    none = shoal("retry", "--state", "dead")
    assert none.code == 0 and "no tasks to retry" in none.text


def test_bulk_cancel_by_ids_and_by_state(shoal: Shoal, fleet: Fleet) -> None:
    ids = [fleet.post(f"t{i}", domain="a" if i < 3 else "b").id for i in range(6)]
    by_id = shoal("cancel", str(ids[0]), str(ids[1]), "--json")
    assert by_id.code == 0 and by_id.data["count"] == 2, by_id
    by_state = shoal("cancel", "--state", "pending", "--domain", "b")
    assert by_state.code == 0 and "cancelled 3 tasks" in by_state.text, by_state
    states = [fleet.get(i).state for i in ids]
    assert states == [TaskState.CANCELLED] * 2 + [TaskState.PENDING] + [TaskState.CANCELLED] * 3
    again = shoal("cancel", str(ids[0]), str(ids[2]), "--json")
    assert again.code == 3  # one was finished already: reported, the other still cancelled
    assert [s["id"] for s in again.data["skipped"]] == [ids[0]]
    assert fleet.get(ids[2]).state is TaskState.CANCELLED
    neither = shoal("cancel")
    assert neither.code == 2 and "say what to cancel" in neither.err
    assert "--state pending" in neither.err  # a state cancel takes
    spared = fleet.post("spared", domain="a").id
    mixed = shoal("cancel", str(spared), "--domain", "b")
    assert mixed.code == 2 and "do not apply to task ids" in mixed.err
    assert fleet.get(spared).state is TaskState.PENDING


def test_a_paused_agent_is_shown_and_resumed(shoal: Shoal, fleet: Fleet) -> None:
    fleet.register("ada")
    for i in range(5):
        fleet.post(f"t{i}")
        _, lease = one(fleet.claim("ada"))
        fleet.fail(lease, "command not found")
    assert fleet.agent("ada").status is AgentStatus.PAUSED
    assert "paused (10m more, after 5 failures)" in shoal("agents").text
    claim = shoal("claim", "--agent", "ada")
    assert claim.code == 1 and "paused" in claim.text and "shoal agent resume" in claim.text
    resumed = shoal("agent", "resume", "ada")
    assert resumed.code == 0 and "resumed" in resumed.text, resumed
    fleet.post("fresh", retry_delay=0)
    assert claim_one(shoal, "ada")
    again = shoal("agent", "resume", "ada")
    assert again.code == 0 and "not paused" in again.text


def test_an_agent_holding_work_is_set_idle_only_with_release(shoal: Shoal, fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.post("held")
    task_id, _ = claim_one(shoal, "ada")
    refused = shoal("agent", "set-status", "ada", "idle")
    assert refused.code == 3 and f"holds tasks {task_id}" in refused.err, refused
    assert "--release" in refused.err
    released = shoal("set-status", "ada", "idle", "--release")
    assert released.code == 0, released
    task = fleet.get(task_id)
    assert task.state is TaskState.PENDING and task.attempts == 0
