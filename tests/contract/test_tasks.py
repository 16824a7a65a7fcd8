"""Posting work, dependencies, children, cancel and retry -- on every store."""

from __future__ import annotations

import pytest

from shoal import (
    BadInput,
    DependencyCycle,
    Fleet,
    InvalidPriority,
    InvalidTransition,
    LeaseLost,
    ManualClock,
    TaskState,
    UnknownAgent,
    UnknownTask,
)
from tests.helpers import kinds, last_event_id, one, snapshot


def test_a_posted_task_waits_in_the_pool_with_defaults(fleet: Fleet, clock: ManualClock) -> None:
    task = fleet.post("write the parser", body="details", payload={"file": "p.py"})
    assert task.state is TaskState.PENDING
    assert task.agent is None and task.in_pool
    assert (task.priority, task.attempts, task.payload) == (5, 0, {"file": "p.py"})
    assert task.created_at == clock.now()
    assert fleet.get(task.id) == task
    assert kinds(fleet) == ["posted"]


@pytest.mark.parametrize(
    ("given", "number"),
    [(1, 1), (9, 9), ("3", 3), ("critical", 1), ("high", 2), ("medium", 5), ("LOW", 8)],
)
def test_priorities_by_number_or_name(fleet: Fleet, given: object, number: int) -> None:
    assert fleet.post("t", priority=given).priority == number  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, 10, -1, "urgentish", "", True, 2.5, None])
def test_a_malformed_priority_is_refused_and_changes_nothing(fleet: Fleet, bad: object) -> None:
    before = snapshot(fleet)
    with pytest.raises(InvalidPriority) as err:
        fleet.post("t", priority=bad)  # type: ignore[arg-type]
    assert "1" in str(err.value) and "9" in str(err.value)
    assert snapshot(fleet) == before


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"title": "  "}, "title"),
        ({"title": "t", "payload": {1, 2}}, "JSON"),
        ({"title": "t", "lease_ttl": -5}, "lease_ttl"),
        ({"title": "t", "lease_ttl": 0}, "lease_ttl"),
        ({"title": "t", "max_attempts": 0}, "max_attempts"),
        ({"title": "t", "pinned": True}, "pinned"),
        ({"title": "t", "skills": ["has space"]}, "skill"),
        ({"title": "t", "expected_duration": "soon"}, "expected_duration"),
        ({"title": "t", "after": ["x"]}, "after"),
        ({"title": "t", "after": [2**70]}, "not a task id"),
        ({"title": "t", "after": [0]}, "not a task id"),
        ({"title": "t", "max_attempts": 10**20}, "max_attempts"),
        ({"title": "t", "expected_duration": 0}, "expected_duration"),
        ({"title": "t", "lease_ttl": "400d"}, "at most a year"),
        ({"title": "t", "parent": -3}, "not a task id"),
    ],
)
def test_bad_task_input_is_refused_and_changes_nothing(
    fleet: Fleet, kwargs: dict[str, object], words: str
) -> None:
    before = snapshot(fleet)
    with pytest.raises(BadInput, match=words):
        fleet.post(**kwargs)  # type: ignore[arg-type]
    assert snapshot(fleet) == before


def test_routing_to_an_unknown_or_unable_agent_is_refused(fleet: Fleet) -> None:
    fleet.register("ada", skills=["python"])
    before = snapshot(fleet)
    with pytest.raises(UnknownAgent, match="register"):
        fleet.post("t", to="nobody")
    with pytest.raises(BadInput, match="lacks the skills"):
        fleet.post("t", to="ada", skills=["rust"])
    assert snapshot(fleet) == before


def test_a_repeated_key_returns_the_first_task(fleet: Fleet) -> None:
    first = fleet.post("deploy", key="deploy-2026-11-22")
    again = fleet.post("deploy (retry)", key="deploy-2026-11-22", priority=1)
    assert again == first
    assert len(fleet.tasks()) == 1
    assert kinds(fleet) == ["posted"]


def test_routed_task_goes_to_the_agents_queue(fleet: Fleet) -> None:
    fleet.register("ada")
    task = fleet.post("t", to="ada")
    assert task.agent == "ada" and task.state is TaskState.PENDING and not task.in_pool
    assert fleet.agent("ada").queued == 1


def test_unknown_dependencies_are_refused(fleet: Fleet) -> None:
    fleet.post("a")
    before = snapshot(fleet)
    with pytest.raises(UnknownTask, match="99"):
        fleet.post("b", after=[1, 99])
    assert snapshot(fleet) == before


def test_a_task_waits_until_every_dependency_is_done(fleet: Fleet) -> None:
    fleet.register("ada", max_concurrent=5)
    a, b = fleet.post("a").id, fleet.post("b").id
    c = fleet.post("c", after=[a, b])
    assert c.state is TaskState.BLOCKED and c.waiting_on == 2
    claim = fleet.claim("ada", 5)
    assert sorted(t.id for t in claim.tasks) == [a, b]  # c is not claimable
    lease_a, lease_b = claim.leases
    assert fleet.complete(lease_a).released == ()
    assert fleet.get(c.id).state is TaskState.BLOCKED
    # The last dependency finishing makes the dependent pending in the same call.
    assert fleet.complete(lease_b).released == (c.id,)
    assert fleet.get(c.id).state is TaskState.PENDING
    assert one(fleet.claim("ada"))[0].id == c.id


def test_a_task_after_finished_work_is_pending_at_once(fleet: Fleet) -> None:
    fleet.register("ada")
    a = fleet.post("a")
    fleet.complete(one(fleet.claim("ada"))[1])
    assert fleet.post("b", after=[a.id]).state is TaskState.PENDING


def test_a_dependent_of_a_dead_task_waits_for_its_retry(fleet: Fleet) -> None:
    fleet.register("ada")
    a = fleet.post("a", max_attempts=1)
    b = fleet.post("b", after=[a.id])
    fleet.fail(one(fleet.claim("ada"))[1], "boom")
    assert fleet.get(a.id).state is TaskState.DEAD
    assert fleet.get(b.id).state is TaskState.BLOCKED
    fleet.retry(a.id)
    assert fleet.complete(one(fleet.claim("ada"))[1]).released == (b.id,)


def test_defer_refuses_a_cycle_and_changes_nothing(fleet: Fleet) -> None:
    fleet.register("ada")
    parent = fleet.post("parent")
    _, lease = one(fleet.claim("ada"))
    child = fleet.post("child", after=[parent.id])
    grandchild = fleet.post("grandchild", after=[child.id])
    before = snapshot(fleet)
    for after in ([child.id], [grandchild.id], [parent.id]):
        with pytest.raises(DependencyCycle, match="itself"):
            fleet.defer(lease, after)
    assert snapshot(fleet) == before
    assert fleet.get(parent.id).state is TaskState.CLAIMED


def test_children_go_to_the_head_of_the_spawners_queue(fleet: Fleet) -> None:
    fleet.register("ada", max_concurrent=3)
    fleet.register("bob")
    parent = fleet.post("build", priority=5)
    fleet.post("unrelated pool work", priority=1)
    held, _ = one(fleet.claim("ada", 1))
    assert held.id == 2  # priority 1 wins the pool
    # ada holds task 2, bob holds nothing: children of 2 go to ada's queue.
    first = fleet.post("child 1", parent=held.id)
    second = fleet.post("child 2", parent=held.id)
    assert first.agent == second.agent == "ada"
    assert one(fleet.claim("bob"))[0].id == parent.id  # bob gets the pool, not ada's children
    claim = fleet.claim("ada", 2)
    assert [t.id for t in claim.tasks] == [second.id, first.id]  # newest first (LIFO)
    assert claim.sources == ("queue", "queue")


def test_fork_join_a_deferred_parent_comes_back_to_its_agent(fleet: Fleet) -> None:
    fleet.register("ada", max_concurrent=2)
    fleet.register("bob", max_concurrent=2)
    root = fleet.post("fib(3)")
    _, lease = one(fleet.claim("ada"))
    kids = [fleet.post(f"fib({n})", parent=root.id).id for n in (2, 1)]
    deferred = fleet.defer(lease, kids)
    assert deferred.state is TaskState.BLOCKED and deferred.agent == "ada"
    assert deferred.attempts == 0  # a deferral is not a failed attempt
    claim = fleet.claim("ada", 2)
    assert sorted(t.id for t in claim.tasks) == sorted(kids)
    for lease in claim.leases:
        fleet.complete(lease)
    back = fleet.get(root.id)
    assert back.state is TaskState.PENDING and back.agent == "ada"
    assert fleet.claim("bob").reason == "empty"  # it is ada's continuation, not pool work
    assert one(fleet.claim("ada"))[0].id == root.id


def test_cancel_revokes_a_held_lease(fleet: Fleet) -> None:
    fleet.register("ada")
    task = fleet.post("t")
    _, lease = one(fleet.claim("ada"))
    assert fleet.cancel(task.id).state is TaskState.CANCELLED
    with pytest.raises(LeaseLost):
        fleet.complete(lease)
    with pytest.raises(InvalidTransition, match="already cancelled"):
        fleet.cancel(task.id)


def test_retry_brings_back_dead_work_with_fresh_attempts(fleet: Fleet) -> None:
    fleet.register("ada")
    task = fleet.post("t", max_attempts=1)
    fleet.fail(one(fleet.claim("ada"))[1], "disk full")
    dead = fleet.get(task.id)
    assert dead.state is TaskState.DEAD and dead.error == "disk full"
    revived = fleet.retry(task.id)
    assert revived.state is TaskState.PENDING and revived.attempts == 0 and revived.error is None
    with pytest.raises(InvalidTransition, match="only dead or cancelled"):
        fleet.retry(task.id)


def test_unknown_task_ids_are_reported(fleet: Fleet) -> None:
    with pytest.raises(UnknownTask, match="42"):
        fleet.get(42)
    with pytest.raises(UnknownTask):
        fleet.cancel(42)
    with pytest.raises(UnknownTask):
        fleet.show(42)


def test_show_lists_dependencies_dependents_and_history(fleet: Fleet) -> None:
    a = fleet.post("a")
    b = fleet.post("b", after=[a.id])
    detail = fleet.show(b.id)
    assert detail.after == (a.id,) and fleet.show(a.id).dependents == (b.id,)
    assert [e.kind for e in detail.events] == ["posted"]
    assert fleet.show(b.id, events=0).events == ()  # no history asked, none read


def test_listing_filters_by_state_and_agent(fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.post("a")
    fleet.post("b", to="ada")
    fleet.post("c", after=[1])
    assert [t.title for t in fleet.tasks()] == ["c", "b", "a"]
    assert [t.title for t in fleet.tasks(state="blocked")] == ["c"]
    assert [t.title for t in fleet.tasks(agent="ada")] == ["b"]
    with pytest.raises(BadInput, match="state"):
        fleet.tasks(state="sleeping")


def test_ready_previews_the_claim_order(fleet: Fleet) -> None:
    fleet.register("ada", domains=["web"])
    fleet.post("pool low", priority=8)
    fleet.post("pool web", priority=5, domain="web")
    fleet.post("mine", priority=9, to="ada")
    fleet.post("pool high", priority=2)
    preview = [t.title for t in fleet.ready("ada")]
    assert preview == ["mine", "pool high", "pool web", "pool low"]
    claimed = [t.title for t in fleet.claim("ada").tasks]
    assert claimed == preview[:1]


def test_every_post_writes_one_event(fleet: Fleet) -> None:
    start = last_event_id(fleet)
    for i in range(5):
        fleet.post(f"t{i}")
    assert kinds(fleet, start) == ["posted"] * 5


def test_a_retried_task_is_ranked_with_the_current_aging(fleet: Fleet, clock: ManualClock) -> None:
    fleet.register("ada")
    urgent = fleet.post("urgent", priority=1)
    fleet.cancel(urgent.id)
    fleet.configure(aging=0)  # re-keys the waiting tasks; a cancelled one is not waiting
    clock.advance(3600)
    fleet.post("filler", priority=9)
    fleet.retry(urgent.id)
    assert one(fleet.claim("ada"))[0].id == urgent.id


def test_ids_and_names_are_read_the_way_people_write_them(fleet: Fleet) -> None:
    a, b = fleet.post("a"), fleet.post("b")
    assert fleet.show(fleet.post("c", after=f"{a.id}, {b.id}").id).after == (a.id, b.id)
    assert fleet.show(fleet.post("d", after=a.id).id).after == (a.id,)
    assert fleet.post("e", skills=["python,go", "sql"]).skills == ("go", "python", "sql")
    with pytest.raises(BadInput, match="not a task id"):
        fleet.get(2**70)


def test_work_waiting_on_dead_or_cancelled_tasks_is_flagged_not_hidden(fleet: Fleet) -> None:
    fleet.register("ada")
    a = fleet.post("a", max_attempts=1)
    b = fleet.post("b")
    waits_a = fleet.post("after a", after=[a.id])
    waits_b = fleet.post("after b", after=[b.id])
    fleet.fail(one(fleet.claim("ada"))[1], "broken")  # a dies
    fleet.cancel(b.id)
    assert kinds(fleet, task=waits_a.id)[-1] == "stuck"
    assert fleet.events(task=waits_b.id)[-1].data == {"on": b.id, "because": "cancelled"}
    assert fleet.status().stuck == (waits_a.id, waits_b.id)
    assessment = fleet.assess()
    assert assessment.stuck == 2 and "dead or cancelled" in assessment.reason
    before = snapshot(fleet)
    with pytest.raises(InvalidTransition, match="never finish"):
        fleet.post("after a dead task", after=[a.id])
    assert snapshot(fleet) == before
    fleet.retry(a.id)
    fleet.complete(one(fleet.claim("ada"))[1])
    assert fleet.get(waits_a.id).state is TaskState.PENDING
    assert fleet.status().stuck == (waits_b.id,)


def test_pending_tasks_are_counted_by_domain(fleet: Fleet) -> None:
    fleet.post_many(
        [{"title": "a", "domain": "web"}, {"title": "b", "domain": "web"}, {"title": "c"}]
    )
    fleet.register("ann", domains="web")
    fleet.post("queued", domain="db", to="ann")
    assert fleet.pending_by_domain() == {"web": 2, None: 1, "db": 1}
    fleet.claim("ann")
    counts = fleet.pending_by_domain()
    assert sum(counts.values()) == 3 and counts.get(None) == 1


def test_a_new_priority_reorders_the_pool_and_is_logged(fleet: Fleet, clock: ManualClock) -> None:
    old = fleet.post("old, low", priority="low")
    clock.advance(60)
    new = fleet.post("new, medium")
    assert [t.id for t in fleet.ready()] == [new.id, old.id]
    raised = fleet.set_priority(old.id, "critical")
    assert raised.priority == 1 and raised.state == "pending"
    assert [t.id for t in fleet.ready()] == [old.id, new.id]
    (event,) = [e for e in fleet.events(task=old.id) if e.kind == "reprioritized"]
    assert event.data == {"from": 8, "to": 1}
    same = len(fleet.events())
    assert fleet.set_priority(old.id, 1).priority == 1 and len(fleet.events()) == same
    fleet.register("ann")
    assert fleet.claim("ann").tasks[0].id == old.id


def test_a_priority_change_is_refused_for_bad_input_or_a_finished_task(fleet: Fleet) -> None:
    task = fleet.post("x")
    before = snapshot(fleet)
    with pytest.raises(InvalidPriority):
        fleet.set_priority(task.id, "soon")
    with pytest.raises(UnknownTask):
        fleet.set_priority(999, 1)
    assert snapshot(fleet) == before
    fleet.cancel(task.id)
    before = snapshot(fleet)
    with pytest.raises(InvalidTransition):
        fleet.set_priority(task.id, 1)
    assert snapshot(fleet) == before
