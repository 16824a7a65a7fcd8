"""Ready joins come last: a task deferred on its children, once they are done, is taken
after everything else its agent could do -- its queue, the pool, a steal of other work --
the first freed first, and an agent that runs dry takes a busy agent's ready join. Checked
the same way on every store (PostgreSQL's direct claim refuses a claim that would lease a
join, and the general path takes it)."""

from __future__ import annotations

from shoal import Fleet
from tests.helpers import claim_all, one


def test_a_ready_join_comes_after_the_queue_and_the_pool(fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.post("parent", to="ada")
    fleet.post("sent before", to="ada")
    parent, lease = one(fleet.claim("ada"))
    assert parent.title == "parent"
    child = fleet.post("child", parent=parent.id)
    fleet.defer(lease, [child.id])
    fleet.post("sent meanwhile", to="ada")
    fleet.post("in the pool")
    task, held = one(fleet.claim("ada"))
    assert task.title == "child"  # its own child first, as ever
    fleet.complete(held)
    expected = ["sent before", "sent meanwhile", "in the pool", "parent"]
    assert [t.title for t in fleet.ready("ada")] == expected
    assert claim_all(fleet, "ada") == expected


def test_an_agent_steals_other_work_before_its_own_ready_join(fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.register("bob")
    fleet.post("bob's first", to="bob")
    fleet.post("bob's second", to="bob")
    assert one(fleet.claim("bob"))[0].title == "bob's first"  # bob at work: a victim
    fleet.post("parent", to="ada")
    parent, lease = one(fleet.claim("ada"))
    child = fleet.post("child", parent=parent.id)
    fleet.defer(lease, [child.id])
    task, held = one(fleet.claim("ada"))
    assert task.title == "child"
    fleet.complete(held)  # the parent's join is ready in ada's queue
    stolen, held = one(fleet.claim("ada"))
    assert (stolen.title, stolen.stolen) == ("bob's second", True)
    fleet.complete(held)
    assert claim_all(fleet, "ada") == ["parent"]


def test_ready_joins_are_taken_the_first_freed_first(fleet: Fleet) -> None:
    """Not the first deferred: a's join waits on carol, b's on bob, and bob finishes first."""
    for agent in ("ada", "bob", "carol"):
        fleet.register(agent)
    for name, helper in (("a", "carol"), ("b", "bob")):
        fleet.post(f"parent {name}", to="ada")
        parent, lease = one(fleet.claim("ada"))
        child = fleet.post(f"child {name}", parent=parent.id, to=helper)
        fleet.defer(lease, [child.id])
    assert claim_all(fleet, "bob") == ["child b"]
    assert claim_all(fleet, "carol") == ["child a"]
    assert claim_all(fleet, "ada") == ["parent b", "parent a"]


def test_a_dry_agent_takes_a_busy_agents_ready_join(fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.register("bob")
    fleet.post("parent", to="ada")
    parent, lease = one(fleet.claim("ada"))
    first = fleet.post("child 1", parent=parent.id)
    fleet.post("child 2", parent=parent.id)
    fleet.defer(lease, [first.id])
    assert one(fleet.claim("ada"))[0].title == "child 2"  # newest first; ada at work
    task, held = one(fleet.claim("bob"))
    assert (task.title, task.stolen) == ("child 1", True)
    fleet.complete(held)  # frees the parent's join in ada's queue, while ada works
    join, held = one(fleet.claim("bob"))
    assert (join.title, join.stolen, join.agent) == ("parent", True, "bob")
    fleet.complete(held)
