"""The chaos audit finds what it looks for: a real SQLite fleet taken through every move the
chaos run makes (claims, a completion, an expiry, a failure, a release, a steal) passes, and
each fault planted into its file -- a double completion, a lost task, an acknowledged post
that is not there, an event missing, a task claimed with no lease -- is reported."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from shoal import Fleet, ManualClock
from tests.chaos.audit import Audit, audit_fleet

KEYS = [f"job-{i}" for i in range(6)]


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    """A fleet whose history has every move of a chaos run; one task ends pending (its
    lease expired), the rest done."""
    clock = ManualClock()
    with Fleet.open(f"sqlite://{tmp_path / 'fleet.db'}", clock=clock) as fleet:
        fleet.configure(lease_ttl=10, retry_delay=0, retry_delay_max=0, max_attempts=9)
        for key in KEYS:
            fleet.post(key, key=key)
        for agent in ("ada", "bob", "cyd"):
            fleet.register(agent, max_concurrent=6)
        first = fleet.claim("ada", 3)
        fleet.complete(first.leases[0], "ok")
        fleet.fail(first.leases[1], "flaky")
        fleet.release(first.leases[2])
        clock.advance(1)
        again = fleet.claim("bob", 6)  # the five left
        assert len(again.leases) == 5
        for lease in again.leases[1:]:
            fleet.complete(lease, "ok")
        clock.advance(11)
        fleet.reap()  # bob's first lease expired: pending again
        held = fleet.claim("ada")  # ada works on it ...
        fleet.post("queued", key="queued", to="ada")
        stolen = fleet.claim("cyd")  # ... so cyd steals from her queue
        assert stolen.grants[0].source == "steal"
        fleet.complete(stolen.leases[0], "ok")
        clock.advance(11)
        fleet.reap()  # ada's lease expired too: pending again
        assert held
        yield fleet


def raw(fleet: Fleet, tmp_path: Path, sql: str, *args: object) -> None:
    """Plant a fault straight into the fleet's file, as a bug would leave it."""
    with sqlite3.connect(tmp_path / "fleet.db") as db:
        db.execute(sql, args)
    db.close()


def test_a_sound_fleet_passes_with_its_totals(fleet: Fleet) -> None:
    found = audit_fleet(fleet, KEYS)
    assert found.ok, found.problems()
    totals = found.totals()
    assert totals["posted"] == 7 and totals["expiries"] == 2
    assert totals["failures"] == 1 and totals["releases"] == 1
    assert totals["done"] == 6 and totals["waiting"] == 1
    # claims = posted + expiries + failures + releases - still waiting
    assert totals["claims"] == 7 + 2 + 1 + 1 - 1


def test_a_double_completion_is_a_duplicate(fleet: Fleet, tmp_path: Path) -> None:
    done = next(t for t in fleet.tasks(state="done"))
    raw(fleet, tmp_path, "INSERT INTO events (at, kind, task_id, agent_id) VALUES "
        "(0, 'completed', ?, 'bob')", done.id)  # fmt: skip
    found = audit_fleet(fleet, KEYS)
    assert found.duplicates == [done.id]
    assert any(f"task {done.id}" in p and "more than once" in p for p in found.problems())


def test_a_lost_task_is_reported(fleet: Fleet, tmp_path: Path) -> None:
    victim = next(t for t in fleet.tasks(state="done") if t.key in KEYS)
    raw(fleet, tmp_path, "DELETE FROM tasks WHERE id = ?", victim.id)
    found = audit_fleet(fleet, KEYS)
    assert not found.ok
    assert f"the acknowledged post {victim.key!r} is no task" in found.lost
    assert f"task {victim.id} has events but no longer exists" in found.lost


def test_an_acknowledged_post_that_never_landed_is_lost(fleet: Fleet) -> None:
    found = audit_fleet(fleet, [*KEYS, "job-never"])
    assert found.lost == ["the acknowledged post 'job-never' is no task"]


def test_a_missing_event_breaks_the_replay_and_the_identity(fleet: Fleet, tmp_path: Path) -> None:
    done = next(t for t in fleet.tasks(state="done"))
    raw(fleet, tmp_path, "DELETE FROM events WHERE task_id = ? AND kind IN ('claimed', "
        "'stolen')", done.id)  # fmt: skip
    found = audit_fleet(fleet, KEYS)
    assert any(
        f"task {done.id}: event" in p and "'completed' cannot happen to a pending task" in p
        for p in found.inconsistent
    ), found.inconsistent
    assert found.identity  # one claim fewer than the tasks' waits call for


def test_a_final_state_the_log_does_not_explain_is_inconsistent(
    fleet: Fleet, tmp_path: Path
) -> None:
    done = next(t for t in fleet.tasks(state="done"))
    raw(fleet, tmp_path, "DELETE FROM events WHERE task_id = ? AND kind = 'completed'", done.id)
    found = audit_fleet(fleet, KEYS)
    assert f"task {done.id} is done but its events leave it claimed" in found.inconsistent


def test_a_claimed_task_without_a_lease_is_lost(fleet: Fleet, tmp_path: Path) -> None:
    waiting = next(t for t in fleet.tasks(state="pending"))
    fleet.register("cyd")
    held = fleet.claim("cyd")
    assert held.tasks[0].id == waiting.id
    raw(fleet, tmp_path, "UPDATE tasks SET lease_expires = NULL WHERE id = ?", waiting.id)
    found = audit_fleet(fleet, KEYS)
    assert found.lost == [f"task {waiting.id} is claimed without a lease (never claimable)"]


def test_problems_are_empty_exactly_when_ok() -> None:
    assert Audit().ok and Audit().problems() == []
    assert not Audit(duplicates=[3]).ok
