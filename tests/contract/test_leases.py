"""Leases and fencing: only the current token changes a task -- on every store."""

from __future__ import annotations

import pytest

from shoal import BadInput, Fleet, Lease, LeaseLost, ManualClock, TaskState, UnknownTask
from tests.helpers import kinds, one, post_many, snapshot


@pytest.fixture
def held(fleet: Fleet) -> tuple[Fleet, Lease]:
    fleet.register("ada", max_concurrent=3)
    fleet.register("bob", max_concurrent=3)
    fleet.post("the task")
    return fleet, one(fleet.claim("ada"))[1]


def test_a_foreign_token_is_refused_and_changes_nothing(held: tuple[Fleet, Lease]) -> None:
    fleet, lease = held
    forged = Lease(lease.task_id, "ada", "0" * 16, lease.expires)
    before = snapshot(fleet)
    for call in (
        lambda: fleet.complete(forged, "x"),
        lambda: fleet.fail(forged, "x"),
        lambda: fleet.release(forged),
        lambda: fleet.defer(forged, [1]),
    ):
        with pytest.raises(LeaseLost):
            call()
    assert snapshot(fleet) == before


def test_completing_twice_reports_already_done(held: tuple[Fleet, Lease]) -> None:
    fleet, lease = held
    first = fleet.complete(lease, {"answer": 42})
    assert not first.already_done and first.task.result == {"answer": 42}
    before = snapshot(fleet)
    again = fleet.complete(lease, {"answer": 43})
    assert again.already_done and again.task.result == {"answer": 42}
    assert snapshot(fleet) == before
    assert kinds(fleet, task=lease.task_id).count("completed") == 1


def test_a_completion_answers_with_the_task_as_it_is_stored(held: tuple[Fleet, Lease]) -> None:
    """The finished task a completion returns is the stored one, however the store got it
    (SQLite has it from the statement that finished it, without reading it again)."""
    fleet, lease = held
    fleet.post("the next one")
    done = fleet.complete(lease, {"answer": 42}, then_claim=1)
    assert done.task == fleet.get(lease.task_id)
    assert done.task.state is TaskState.DONE and done.task.result == {"answer": 42}
    assert done.next is not None and done.next.leases


def test_fail_after_complete_is_lease_lost(held: tuple[Fleet, Lease]) -> None:
    fleet, lease = held
    fleet.complete(lease)
    with pytest.raises(LeaseLost, match="done"):
        fleet.fail(lease, "late")


def test_an_expired_lease_cannot_complete_even_before_anyone_reclaims(
    held: tuple[Fleet, Lease], clock: ManualClock
) -> None:
    fleet, lease = held
    clock.advance(600)
    before = snapshot(fleet)
    with pytest.raises(LeaseLost, match="expired"):
        fleet.complete(lease)
    assert snapshot(fleet) == before


def test_unknown_task_in_a_lease(fleet: Fleet) -> None:
    with pytest.raises(UnknownTask):
        fleet.complete(Lease(99, "ada", "abc", 0.0))


def test_fail_retries_until_attempts_are_used_up(fleet: Fleet, clock: ManualClock) -> None:
    fleet.register("ada")
    task = fleet.post("flaky")
    for attempt in (1, 2):
        claimed, lease = one(fleet.claim("ada"))
        assert claimed.attempts == attempt
        again = fleet.fail(lease, f"boom {attempt}")
        assert again.state is TaskState.PENDING and again.in_pool
        assert again.error == f"boom {attempt}"
        assert again.ready_at is not None
        clock.set(again.ready_at)  # its retry backoff is over
    _, lease = one(fleet.claim("ada"))
    dead = fleet.fail(lease, "boom 3")
    assert dead.state is TaskState.DEAD and dead.attempts == 3
    assert kinds(fleet, task=task.id)[-1] == "dead"


def test_fail_without_retry_is_dead_at_once(held: tuple[Fleet, Lease]) -> None:
    fleet, lease = held
    assert fleet.fail(lease, "bad input file", retry=False).state is TaskState.DEAD


def test_release_returns_the_task_without_counting_an_attempt(
    held: tuple[Fleet, Lease],
) -> None:
    fleet, lease = held
    released = fleet.release(lease)
    assert released.state is TaskState.PENDING and released.in_pool and released.attempts == 0
    again, _ = one(fleet.claim("bob"))
    assert again.id == lease.task_id and again.attempts == 1


def test_a_released_pinned_task_goes_back_to_its_agent(fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.post("only ada", to="ada", pinned=True)
    _, lease = one(fleet.claim("ada"))
    released = fleet.release(lease)
    assert released.agent == "ada" and released.state is TaskState.PENDING


def test_heartbeat_extends_every_lease(fleet: Fleet, clock: ManualClock) -> None:
    fleet.register("ada", max_concurrent=2)
    fleet.post("a")
    fleet.post("b", lease_ttl=60)
    claim = fleet.claim("ada", 2)
    clock.advance(50)
    renewed = fleet.heartbeat("ada")
    assert sorted((r.task_id, r.expires) for r in renewed) == [
        (1, clock.now() + 600),
        (2, clock.now() + 60),
    ]
    assert {r.token for r in renewed} == {lease.token for lease in claim.leases}
    clock.advance(59)
    for lease in claim.leases:
        fleet.complete(lease)  # still good thanks to the heartbeat


def test_a_heartbeat_does_not_revive_an_expired_lease(
    held: tuple[Fleet, Lease], clock: ManualClock
) -> None:
    fleet, lease = held
    clock.advance(601)
    assert fleet.heartbeat("ada") == []
    task = fleet.get(lease.task_id)
    assert task.state is TaskState.PENDING and task.in_pool


def test_complete_and_claim_the_next_in_one_call(fleet: Fleet) -> None:
    fleet.register("ada")
    post_many(fleet, 2)
    _, lease = one(fleet.claim("ada"))
    done = fleet.complete(lease, "ok", then_claim=1)
    assert done.task.state is TaskState.DONE
    assert done.next is not None and done.next.tasks[0].id == 2
    last = fleet.complete(done.next.leases[0], then_claim=1)
    assert last.next is not None and last.next.reason == "empty"


def test_complete_many_checks_each_lease(fleet: Fleet, clock: ManualClock) -> None:
    fleet.register("ada", max_concurrent=3)
    post_many(fleet, 5)
    claim = fleet.claim("ada", 3)
    good, gone, twice = claim.leases
    fleet.cancel(gone.task_id)
    fleet.complete(twice)
    batch = fleet.complete_many([(good, 1), (gone, 2), (twice, 3)], then_claim=3)
    assert batch.completed == (good.task_id,)
    assert batch.already_done == (twice.task_id,)
    assert [t for t, _ in batch.lost] == [gone.task_id]
    assert batch.next is not None and [t.id for t in batch.next.tasks] == [4, 5]


def test_complete_many_refuses_leases_of_several_agents(fleet: Fleet) -> None:
    with pytest.raises(BadInput, match="one agent"):
        fleet.complete_many([(Lease(1, "a", "x", 0), None), (Lease(2, "b", "y", 0), None)])


def test_results_must_be_json(held: tuple[Fleet, Lease]) -> None:
    fleet, lease = held
    with pytest.raises(BadInput, match="JSON"):
        fleet.complete(lease, object())
    assert fleet.get(lease.task_id).state is TaskState.CLAIMED


def test_defer_on_finished_work_is_a_ready_join_at_once(fleet: Fleet) -> None:
    """Pending again at once, as a ready join: after the rest of the agent's queue."""
    fleet.register("ada", max_concurrent=2)
    done = fleet.post("prep")
    fleet.complete(one(fleet.claim("ada"))[1])
    fleet.post("first", to="ada", priority=5)
    main = fleet.post("main", to="ada", priority=5)
    fleet.post("other", to="ada", priority=5)
    task, lease = one(fleet.claim("ada"))
    assert task.title == "first"
    back = fleet.defer(lease, [done.id])
    assert back.state is TaskState.PENDING and back.agent == "ada" and back.attempts == 0
    taken = []
    while claim := fleet.claim("ada"):
        task, held = one(claim)
        taken.append(task.id if task.id == main.id else task.title)
        fleet.complete(held)
    assert taken == [main.id, "other", "first"]  # the ready join, last


@pytest.mark.parametrize(
    "lease",
    [Lease(2**70, "ada", "abc", 0.0), Lease(1, "ada", "", 0.0), Lease(1, "ada", "x" * 65, 0.0)],
)
def test_a_malformed_lease_is_bad_input(held: tuple[Fleet, Lease], lease: Lease) -> None:
    fleet, _ = held
    before = snapshot(fleet)
    with pytest.raises(BadInput):
        fleet.complete(lease)
    assert snapshot(fleet) == before
