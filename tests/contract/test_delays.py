"""Delayed tasks (not_before) and retry backoff, on every store: a pending task is
claimable only once its ready_at has come -- by its own agent, from the pool, by a thief and
by the rebalance."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from shoal import BadInput, Fleet, InvalidTransition, ManualClock, TaskState
from tests.helpers import kinds, one, post_many, snapshot


def test_a_delayed_task_waits_for_its_moment_in_the_pool(fleet: Fleet, clock: ManualClock) -> None:
    fleet.register("ada")
    later = fleet.post("report", not_before=clock.now() + 1800)
    assert later.state is TaskState.PENDING and later.ready_at == clock.now() + 1800
    assert later.waiting(clock.now())
    claim = fleet.claim("ada")
    assert claim.reason == "empty" and claim.retry_at == later.ready_at  # wake then
    assert fleet.ready("ada") == [] and fleet.ready() == []
    clock.advance(1799)
    assert not fleet.claim("ada")
    clock.advance(1)
    assert one(fleet.claim("ada"))[0].id == later.id


def test_a_delayed_task_waits_in_its_agents_queue_and_the_rest_go_first(
    fleet: Fleet, clock: ManualClock
) -> None:
    fleet.register("ada")
    fleet.post("first in line", to="ada", priority=1, not_before=clock.now() + 60)
    now_task = fleet.post("now", to="ada", priority=9)
    assert one(fleet.claim("ada"))[0].id == now_task.id  # the urgent one is not ready yet


def test_not_before_takes_iso_times_with_a_zone_and_refuses_others(
    fleet: Fleet, clock: ManualClock
) -> None:
    clock.set(datetime(2026, 11, 23, 9, 0, tzinfo=UTC).timestamp())
    task = fleet.post("standup", not_before="2026-11-23T09:30Z")
    assert task.ready_at == clock.now() + 1800
    aware = fleet.post("call", not_before=datetime(2026, 11, 23, 10, 0, tzinfo=UTC))
    assert aware.ready_at == clock.now() + 3600
    before = snapshot(fleet)
    for bad in ("2026-11-23T09:30", "next tuesday", -5, True):
        with pytest.raises(BadInput, match="not_before"):
            fleet.post("bad", not_before=bad)  # type: ignore[arg-type]
    assert snapshot(fleet) == before


def test_a_past_not_before_is_ready_at_once(fleet: Fleet, clock: ManualClock) -> None:
    fleet.register("ada")
    task = fleet.post("overdue", not_before=clock.now() - 3600)
    assert task.ready_at == clock.now()  # ready since it was posted, not before
    assert one(fleet.claim("ada"))[0].id == task.id


def test_a_blocked_task_freed_before_its_not_before_still_waits(
    fleet: Fleet, clock: ManualClock
) -> None:
    fleet.register("ada", max_concurrent=2)
    first = fleet.post("build")
    deploy = fleet.post("deploy", after=[first.id], not_before=clock.now() + 600)
    assert deploy.state is TaskState.BLOCKED
    _, lease = one(fleet.claim("ada"))
    fleet.complete(lease)
    freed = fleet.get(deploy.id)
    assert freed.state is TaskState.PENDING and freed.ready_at == clock.now() + 600
    assert not fleet.claim("ada")
    clock.advance(600)
    assert one(fleet.claim("ada"))[0].id == deploy.id


def test_thieves_and_the_rebalance_leave_delayed_tasks_alone(
    fleet: Fleet, clock: ManualClock
) -> None:
    fleet.configure(busy_threshold=0, heartbeat_timeout=3600)  # both alive throughout
    fleet.register("victim")
    fleet.register("thief")
    fleet.post("held", to="victim")
    one(fleet.claim("victim"))  # working, so it may be robbed
    post_many(fleet, 3, to="victim", priority=9, not_before=clock.now() + 300)
    assert not fleet.claim("thief")  # its whole queue waits: nothing to steal yet
    clock.advance(200)  # the thief has been idle long enough to be fed
    assert fleet.rebalance() == []
    clock.advance(100)
    assert fleet.claim("thief").sources == ("steal",)


def test_retry_skips_the_wait_and_refuses_a_task_that_is_ready(
    fleet: Fleet, clock: ManualClock
) -> None:
    fleet.register("ada")
    task = fleet.post("later", not_before=clock.now() + 3600)
    retried = fleet.retry(task.id)
    assert retried.ready_at == clock.now() and not retried.waiting(clock.now())
    assert kinds(fleet, task=task.id) == ["posted", "retried"]
    with pytest.raises(InvalidTransition, match="only dead or cancelled"):
        fleet.retry(task.id)  # ready already: nothing to skip
    assert one(fleet.claim("ada"))[0].id == task.id


def test_status_counts_the_waiting_tasks(fleet: Fleet, clock: ManualClock) -> None:
    fleet.post("a", not_before=clock.now() + 60)
    fleet.post("b", not_before=clock.now() + 30)
    fleet.post("c")
    status = fleet.status()
    assert (status.waiting, status.next_ready) == (2, clock.now() + 30)


# --------------------------------------------------------------------------- retry backoff


def fail_once(fleet: Fleet, agent: str = "ada") -> float:
    """Claim the one ready task, fail it, and return how long it must wait."""
    _, lease = one(fleet.claim(agent))
    failed = fleet.fail(lease, "flaky")
    assert failed.state is TaskState.PENDING and failed.ready_at is not None
    return failed.ready_at - fleet.clock.now()


def test_a_failed_task_waits_a_jittered_doubling_backoff(fleet: Fleet, clock: ManualClock) -> None:
    fleet.configure(retry_delay=10, retry_delay_max=25, max_attempts=5, failure_streak=0)
    fleet.register("ada")
    task = fleet.post("flaky")
    for ceiling in (10, 20, 25, 25):  # 10 x 2^(attempt-1), capped by retry_delay_max
        wait = fail_once(fleet)
        assert 0 <= wait <= ceiling
        if wait > 0:
            assert not fleet.claim("ada")  # not before its backoff is over
            assert fleet.claim("ada").retry_at == fleet.get(task.id).ready_at
        clock.advance(wait)
    _, lease = one(fleet.claim("ada"))
    assert fleet.fail(lease, "flaky").state is TaskState.DEAD  # fifth attempt: no more waits


def test_backoff_is_jittered_so_tasks_that_fail_together_come_back_apart(
    fleet: Fleet,
) -> None:
    fleet.configure(retry_delay=60, failure_streak=0)
    fleet.register("ada", max_concurrent=20)
    post_many(fleet, 20)
    claim = fleet.claim("ada", 20)
    waits = {round(fleet.fail(lease, "down").ready_at or 0, 6) for lease in claim.leases}
    assert len(waits) > 15  # full jitter: spread over [now, now + 60]
    assert all(fleet.clock.now() <= w <= fleet.clock.now() + 60 for w in waits)


def test_a_task_can_carry_its_own_retry_delay(fleet: Fleet, clock: ManualClock) -> None:
    fleet.configure(retry_delay=3600, failure_streak=0)
    fleet.register("ada")
    fleet.post("quick to retry", retry_delay=0)
    assert fail_once(fleet) == 0  # retried at once, despite the fleet's hour
    assert fleet.get(1).retry_delay == 0
    fleet.post("slow", retry_delay="2h", priority=1)
    assert fail_once(fleet) <= 7200
    with pytest.raises(BadInput, match="retry_delay"):
        fleet.post("bad", retry_delay="soon")


def test_an_expired_lease_is_retried_at_once(fleet: Fleet, clock: ManualClock) -> None:
    fleet.register("ada")
    fleet.register("bob")
    task = fleet.post("held by a crashed agent", lease_ttl=30)
    one(fleet.claim("ada"))
    clock.advance(31)
    assert one(fleet.claim("bob"))[0].id == task.id  # the agent died; the task is fine


def test_a_delayed_task_gains_no_age_while_it_waits(fleet: Fleet, clock: ManualClock) -> None:
    fleet.register("ada")
    fleet.post("low, for tomorrow", priority=9, not_before=clock.now() + 86400)
    clock.advance(86400)
    urgent = fleet.post("urgent", priority=1)
    assert one(fleet.claim("ada"))[0].id == urgent.id


def test_times_beyond_what_a_date_can_say_are_refused(fleet: Fleet) -> None:
    before = snapshot(fleet)
    for far in (253402300800, 1e300, "10000-01-01T00:00Z", "9999-12-31T23:59:59-05:00"):
        with pytest.raises(BadInput, match="not_before"):
            fleet.post("far", not_before=far)
    for name in ("lease_ttl", "retry_delay_max", "pause_cooldown"):
        with pytest.raises(BadInput, match=name):
            fleet.configure(**{name: "999999999999d"})
    assert snapshot(fleet) == before
    old = fleet.post("long ago", not_before="0001-01-01T00:00Z")
    assert old.ready_at == old.created_at  # long past: ready now
