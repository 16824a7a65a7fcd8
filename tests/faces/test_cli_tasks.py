# ruff: noqa: F811 -- the tests take the CLI fixtures as parameters
"""Tasks from the command line: ``add`` (priorities, bodies, payloads, keys), ``ready``,
``list``, ``show``, and ``cancel`` and ``retry``.

See cli_support.py for how these tests run the CLI."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from shoal import Fleet, TaskState
from tests.faces.cli_support import Result, Shoal, claim_one, cli, fleet, shoal, url  # noqa: F401 (fixtures)
from tests.helpers import snapshot

# ---------------------------------------------------------------------- adding and reading tasks


@pytest.mark.parametrize(
    ("given", "number"),
    [("1", 1), ("9", 9), ("critical", 1), ("high", 2), ("medium", 5), ("low", 8), ("High", 2)],
)
def test_add_takes_a_priority_by_number_or_by_name(
    cli: Callable[..., Result], given: str, number: int
) -> None:
    result = cli("add", "a task", "--priority", given, "--json")
    assert result.code == 0, result
    assert result.data["priority"] == number
    assert result.data["state"] == "pending"


def test_add_reports_where_the_task_went(shoal: Shoal, fleet: Fleet) -> None:
    fleet.register("ada", skills=["python"])
    pool = shoal("add", "fix the parser", "-p", "high", "-s", "python")
    assert pool.code == 0, pool
    assert "task 1 pending in the pool" in pool.text
    routed = shoal("add", "ada's chore", "--to", "ada", "--json")
    assert routed.code == 0, routed
    assert routed.data["agent"] == "ada"
    assert fleet.get(1).priority == 2
    assert fleet.get(1).skills == ("python",)


@pytest.mark.parametrize("priority", ["urgentish", "0", "10"])
def test_a_bad_priority_exits_2_with_a_hint_and_adds_nothing(
    shoal: Shoal, fleet: Fleet, priority: str
) -> None:
    fleet.post("already here")
    listed = shoal("list", "--json")
    before = snapshot(fleet)

    result = shoal("add", "fix the parser", "-p", priority)
    assert result.code == 2, result
    assert "priority" in result.text
    assert "1 (most urgent) to 9" in result.text
    assert "critical" in result.text

    assert shoal("list", "--json").out == listed.out
    assert snapshot(fleet) == before


def test_add_reads_the_body_from_stdin_and_the_payload_from_a_file(
    shoal: Shoal, fleet: Fleet, tmp_path: Path
) -> None:
    payload = tmp_path / "payload.json"
    payload.write_text('{"files": ["a.py", "b.py"]}', "utf-8")
    args = ("add", "review", "--body", "-", "--payload", f"@{payload}", "--json")
    added = shoal(*args, stdin="look at both files\ncarefully")
    assert added.code == 0, added
    task = fleet.get(added.data["id"])
    assert task.body == "look at both files\ncarefully"
    assert task.payload == {"files": ["a.py", "b.py"]}

    before = snapshot(fleet)
    broken = shoal("add", "review", "--payload", "{not json")
    assert broken.code == 2, broken
    assert "payload is not valid json" in broken.text
    assert snapshot(fleet) == before


def test_add_with_the_same_key_twice_returns_the_first_task(shoal: Shoal, fleet: Fleet) -> None:
    first = shoal("add", "nightly build", "--key", "build-2024-05-01", "--json")
    second = shoal("add", "nightly build", "--key", "build-2024-05-01", "--json")
    assert first.code == second.code == 0
    assert first.data["id"] == second.data["id"]
    assert (first.data["created"], second.data["created"]) == (True, False)
    assert "already exists" in shoal("add", "nightly build", "--key", "build-2024-05-01").out
    assert len(fleet.tasks()) == 1


def test_ready_lists_pending_work_in_claim_order_for_the_fleet_or_one_agent(
    shoal: Shoal, fleet: Fleet
) -> None:
    fleet.register("ada", skills=["python"])
    fleet.register("bob", skills=["rust"])
    rust = fleet.post("port to rust", priority=1, skills=["rust"]).id
    python = fleet.post("fix the parser", priority=3, skills=["python"]).id
    docs = fleet.post("tidy the docs", priority=9).id
    own = fleet.post("ada's own chore", priority=5, to="ada").id
    before = snapshot(fleet)

    everything = shoal("ready", "--json")
    assert everything.code == 0, everything
    ids = [t["id"] for t in everything.data]
    assert sorted(ids) == sorted([rust, python, docs, own])
    assert ids[0] == rust  # the most urgent pool task first

    for_ada = shoal("ready", "--agent", "ada", "--json")
    assert [t["id"] for t in for_ada.data] == [own, python, docs]  # no rust; own queue first

    for_bob = shoal("ready", "--json", env={"SHOAL_AGENT": "bob"})
    assert [t["id"] for t in for_bob.data] == [rust, docs]

    human = shoal("ready", "-a", "ada")
    assert human.code == 0
    assert "ready for ada" in shoal("ready", "--agent", "ada", "--format", "table").text
    assert "fix the parser" in human.text
    assert "port to rust" not in human.text
    assert snapshot(fleet) == before  # reading changes nothing


def test_list_filters_by_state_and_agent(shoal: Shoal, fleet: Fleet) -> None:
    fleet.register("ada")
    first = fleet.post("first").id
    second = fleet.post("second").id
    third = fleet.post("third", priority=9).id
    claim = fleet.claim("ada")
    fleet.complete(claim.leases[0])
    fleet.claim("ada")

    pending = shoal("list", "--state", "pending", "--json")
    assert pending.code == 0
    assert [t["id"] for t in pending.data] == [third]
    done = shoal("list", "--state", "done", "--json")
    assert [t["id"] for t in done.data] == [first]
    mine = shoal("list", "--agent", "ada", "--json")
    assert sorted(t["id"] for t in mine.data) == [first, second]

    bogus = shoal("list", "--state", "finished")
    assert bogus.code == 2, bogus
    assert "pending" in bogus.text  # it lists the states there are


def test_show_prints_one_task_with_its_history(cli: Callable[..., Result], fleet: Fleet) -> None:
    fleet.register("ada")
    parent = fleet.post("write the report", body="all of it", payload={"n": 3})
    child = fleet.post("gather data", after=[parent.id])

    human = cli("show", str(parent.id))
    assert human.code == 0, human
    for word in ("write the report", "pending", "all of it", "history", "posted", "dependents"):
        assert word in human.text

    as_json = cli("show", str(child.id), "--json")
    assert as_json.code == 0
    assert as_json.data["state"] == "blocked"
    assert as_json.data["after"] == [parent.id]
    assert [e["kind"] for e in as_json.data["events"]] == ["posted"]

    missing = cli("show", "99")
    assert missing.code == 2
    assert "there is no task 99" in missing.text


# ---------------------------------------------------------------------- cancel and retry


def test_cancel_and_retry(shoal: Shoal, fleet: Fleet) -> None:
    fleet.register("ada")
    first = fleet.post("first").id
    second = fleet.post("second", priority=9).id

    cancelled = shoal("cancel", str(first))
    assert cancelled.code == 0, cancelled
    assert "cancelled" in cancelled.text
    assert fleet.get(first).state is TaskState.CANCELLED

    before = snapshot(fleet)
    twice = shoal("cancel", str(first))
    assert twice.code == 3, twice
    assert "already cancelled" in twice.text
    assert "shoal retry" in twice.text
    live = shoal("retry", str(second), "--json")
    assert live.code == 3, live
    assert live.data["error"]["code"] == "invalid_transition"
    assert snapshot(fleet) == before

    retried = shoal("retry", str(first), "--json")
    assert retried.code == 0, retried
    assert retried.data["state"] == "pending"
    assert retried.data["attempts"] == 0

    # Cancelling a claimed task revokes the holder's lease.
    task_id, token = claim_one(shoal, "ada")
    assert task_id == first
    assert shoal("cancel", str(task_id)).code == 0
    revoked = shoal("done", str(task_id), "--token", token)
    assert revoked.code == 3, revoked
    assert "lease lost" in revoked.text
    assert fleet.get(task_id).state is TaskState.CANCELLED


def test_set_priority_changes_it_and_refuses_what_it_cannot(shoal: Shoal, fleet: Fleet) -> None:
    task = fleet.post("reorder me")
    done = shoal("set-priority", str(task.id), "critical", "--json")
    assert done.code == 0, done
    assert done.data["priority"] == 1 and fleet.get(task.id).priority == 1
    before = snapshot(fleet)
    bad = shoal("set-priority", str(task.id), "soonish")
    assert bad.code == 2 and "soonish" in bad.text and "critical" in bad.text
    assert shoal("set-priority", "999", "1").code == 2
    assert snapshot(fleet) == before
    fleet.cancel(task.id)
    before = snapshot(fleet)
    finished = shoal("set-priority", str(task.id), "1")
    assert finished.code == 3 and "already cancelled" in finished.text
    assert snapshot(fleet) == before
