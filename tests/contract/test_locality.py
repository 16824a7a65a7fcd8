"""Domain first (domain_wait), delay scheduling (locality_wait) and ready_at, on every store."""

from __future__ import annotations

import pytest

from shoal import Fleet, ManualClock, TaskState
from shoal.times import iso_time
from tests.helpers import one


@pytest.fixture
def crew(fleet: Fleet) -> Fleet:
    """iris does research (with the web skill), loom does CI; both idle, both able to take
    anything in the pool."""
    fleet.register("iris", domains=["research"], skills=["web"])
    fleet.register("loom", domains=["ci"], skills=["web", "shell"])
    return fleet


# --------------------------------------------------------------------------- domain first


def test_an_idle_agent_of_the_domain_gets_its_new_work(crew: Fleet) -> None:
    task = crew.post("paper", domain="research")
    claim = crew.claim("loom")
    assert claim.reason == "empty"
    assert claim.retry_at == pytest.approx(task.created_at + 120)  # domain_wait
    assert one(crew.claim("iris"))[0].id == task.id


def test_nothing_waits_when_no_agent_of_the_domain_is_idle(crew: Fleet) -> None:
    crew.set_status("iris", "working")
    task = crew.post("paper", domain="research")
    assert one(crew.claim("loom"))[0].id == task.id


def test_an_idle_agent_that_cannot_do_the_task_does_not_hold_it(crew: Fleet) -> None:
    task = crew.post("build the site", domain="research", skills=["shell"])  # iris lacks shell
    assert one(crew.claim("loom"))[0].id == task.id


def test_after_domain_wait_anyone_may_take_it(crew: Fleet, clock: ManualClock) -> None:
    crew.configure(heartbeat_timeout=3600)  # iris is idle, not gone: she would be offline
    task = crew.post("paper", domain="research")
    clock.advance(119)
    assert crew.claim("loom").reason == "empty"
    clock.advance(1)
    assert one(crew.claim("loom"))[0].id == task.id


def test_held_work_is_passed_over_not_waited_on(crew: Fleet) -> None:
    crew.register("loom", domains=["ci"], skills=["web", "shell"], max_concurrent=3)
    crew.post("paper", domain="research", priority=2)  # the best score, but iris's
    own = crew.post("flaky test", domain="ci", priority=7).id
    anyone = crew.post("tidy up", priority=8).id
    assert [t.id for t in crew.claim("loom", 3).tasks] == [own, anyone]


def test_domain_wait_applies_to_steals_too(crew: Fleet) -> None:
    crew.register("spark", domains=["research"])
    crew.set_status("spark", "working")
    crew.set_status("iris", "working")  # iris at work, her simple task queued
    simple = crew.post("reformat refs", to="iris", domain="research", priority=8).id
    crew.set_status("spark", "idle")  # spark, of research, is idle: the task is left to it
    claim = crew.claim("loom")
    assert claim.reason == "empty" and claim.retry_at is not None
    task = one(crew.claim("spark"))[0]
    assert task.id == simple and task.stolen


def test_domain_wait_zero_turns_it_off(crew: Fleet) -> None:
    crew.configure(domain_wait=0)
    task = crew.post("paper", domain="research")
    assert one(crew.claim("loom"))[0].id == task.id


# --------------------------------------------------------------------------- delay scheduling


def test_locality_wait_holds_other_domains_work_whoever_is_idle(
    crew: Fleet, clock: ManualClock
) -> None:
    crew.configure(locality_wait="10m", domain_wait=0)
    crew.set_status("iris", "working")
    task = crew.post("paper", domain="research")
    claim = crew.claim("loom")
    assert claim.reason == "empty" and claim.retry_at == pytest.approx(task.created_at + 600)
    clock.advance(599)
    assert crew.claim("loom").reason == "empty"
    clock.advance(1)
    assert one(crew.claim("loom"))[0].id == task.id


def test_locality_wait_counts_from_ready_not_from_posted(crew: Fleet, clock: ManualClock) -> None:
    crew.configure(locality_wait=60, domain_wait=0)
    crew.set_status("iris", "working")
    blocker = crew.post("data", domain="ci")
    paper = crew.post("paper", domain="research", after=[blocker.id])
    clock.advance(300)  # posted long ago, but blocked all along
    _, lease = one(crew.claim("loom"))
    crew.complete(lease)
    freed = crew.get(paper.id)
    assert freed.state is TaskState.PENDING and freed.ready_at == clock.now()
    assert crew.claim("loom").retry_at == pytest.approx(clock.now() + 60)
    clock.advance(60)
    assert one(crew.claim("loom"))[0].id == paper.id


def test_locality_never_holds_own_domain_or_domainless_work(crew: Fleet) -> None:
    crew.configure(locality_wait="1h")
    crew.register("loom", domains=["ci"], skills=["web", "shell"], max_concurrent=2)
    mine = crew.post("flaky test", domain="ci").id
    free = crew.post("tidy up").id
    got = crew.claim("loom", 2)
    assert sorted(t.id for t in got.tasks) == sorted([mine, free])


# --------------------------------------------------------------------------- ready_at


def test_ready_at_follows_every_transition_to_pending(crew: Fleet, clock: ManualClock) -> None:
    crew.configure(domain_wait=0)
    first = crew.post("first")
    assert first.ready_at == first.created_at
    blocked = crew.post("second", after=[first.id])
    assert blocked.ready_at is None
    clock.advance(10)
    _, lease = one(crew.claim("loom"))
    crew.release(lease)  # released: ready again now
    assert crew.get(first.id).ready_at == clock.now()
    clock.advance(10)
    _, lease = one(crew.claim("loom"))
    crew.fail(lease, "flaky")  # failed, to be retried: ready after its backoff (<= 10 s)
    ready_at = crew.get(first.id).ready_at
    assert ready_at is not None and clock.now() <= ready_at <= clock.now() + 10
    clock.advance(10)
    _, lease = one(crew.claim("loom"))
    crew.complete(lease)  # its dependency done, the second task is ready now
    assert crew.get(blocked.id).ready_at == clock.now()
    clock.advance(10)
    _, lease = one(crew.claim("loom"))
    crew.defer(lease, [crew.post("later").id])  # deferred: blocked, not ready
    assert crew.get(blocked.id).ready_at is None
    crew.cancel(blocked.id)
    clock.advance(10)
    crew.retry(blocked.id)  # revived while it still waits on "later": blocked
    assert crew.get(blocked.id).ready_at is None
    crew.cancel(first.id + 2)  # "later" itself: cancelled, then revived with nothing to wait on
    clock.advance(10)
    crew.retry(first.id + 2)
    assert crew.get(first.id + 2).ready_at == clock.now()


def test_an_expired_lease_makes_its_task_ready_again(crew: Fleet, clock: ManualClock) -> None:
    task = crew.post("t", lease_ttl=30)
    one(crew.claim("loom"))
    clock.advance(31)
    crew.reap()
    assert crew.get(task.id).ready_at == clock.now()


def test_ready_at_is_shown_in_the_task(crew: Fleet) -> None:
    task = crew.post("paper", domain="research")
    shown = crew.show(task.id).task.to_dict()
    assert shown["ready_at"] == shown["created_at"] == iso_time(task.created_at)
    assert shown["ready_at"].endswith("Z")  # ISO 8601 UTC, as every time in JSON
