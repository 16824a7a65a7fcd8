"""The order equal priorities are taken in -- in an agent's queue, work others posted to it
oldest first and the children it spawns newest first ahead of that; or longest expected
first -- and the settings that steer the claim, checked the same way on every store."""

from __future__ import annotations

import pytest

from shoal import Fleet, InvalidSetting, ManualClock, TaskState
from tests.helpers import claim_all, one, snapshot


def test_an_owner_takes_work_posted_to_it_in_posting_order_by_default(fleet: Fleet) -> None:
    fleet.register("ada")
    for title, minutes in (("short", 5), ("long", 60), ("unknown", None), ("medium", 20)):
        fleet.post(title, to="ada", expected_duration=None if minutes is None else minutes * 60)
    fleet.post("urgent", to="ada", priority=2)
    assert claim_all(fleet, "ada") == ["urgent", "short", "long", "unknown", "medium"]


def test_steps_posted_to_an_agent_run_in_the_order_they_were_posted(fleet: Fleet) -> None:
    """The report: `add "step 1" --to ada; add "step 2" --to ada; claim --agent ada` gave
    ada step 2 first. The preview (`ready`) shows the order a claim will take."""
    fleet.register("ada")
    fleet.post("step 1: migrate the database", to="ada")
    fleet.post("step 2: deploy", to="ada")
    fleet.post("step 3: announce", to="ada")
    expected = ["step 1: migrate the database", "step 2: deploy", "step 3: announce"]
    assert [t.title for t in fleet.ready("ada")] == expected
    assert [t.title for t in fleet.ready()] == expected
    assert claim_all(fleet, "ada") == expected


def test_children_an_agent_spawns_go_ahead_of_posted_work_newest_first(fleet: Fleet) -> None:
    """Depth-first: what an agent spawns from the task it holds comes before the work others
    sent it, the newest child first, and a grandchild before its aunts."""
    fleet.register("ada")
    fleet.post("parent", to="ada")
    parent, lease = one(fleet.claim("ada"))
    fleet.post("sent 1", to="ada")
    first = fleet.post("child 1", parent=parent.id)
    fleet.post("sent 2", to="ada")
    fleet.post("child 2", parent=parent.id, to="ada")  # to its holder: still its own child
    assert first.agent == "ada"
    fleet.complete(lease)
    titles = []
    while claim := fleet.claim("ada"):
        task, held = one(claim)
        titles.append(task.title)
        if task.title == "child 2":
            fleet.post("grandchild", parent=task.id)
        fleet.complete(held)
    assert titles == ["child 2", "grandchild", "child 1", "sent 1", "sent 2"]


def test_a_batch_of_children_and_sent_work_keeps_its_listed_order_in_each(fleet: Fleet) -> None:
    """One call is one moment: the children come first, the sent work after them, each in
    the order listed; a thief takes the last-listed sent task."""
    fleet.configure(max_steals_per_agent=10)
    fleet.register("ada", max_concurrent=2)
    fleet.register("bob")
    fleet.post("parent", to="ada")
    parent, lease = one(fleet.claim("ada", 1))
    specs: list[dict[str, object]] = [
        {"title": "child a", "parent": parent.id},
        {"title": "sent x", "to": "ada"},
        {"title": "child b", "parent": parent.id},
        {"title": "sent y", "to": "ada"},
    ]
    fleet.post_many(specs)
    assert [t.title for t in fleet.ready("ada")] == ["child a", "child b", "sent x", "sent y"]
    assert one(fleet.claim("bob"))[0].title == "sent y"
    fleet.complete(lease)
    assert claim_all(fleet, "ada") == ["child a", "child b", "sent x"]


def test_a_child_sent_to_another_agent_is_work_sent_to_it(fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.register("bob")
    fleet.post("parent", to="ada")
    parent, _ = one(fleet.claim("ada"))
    fleet.post("bob's own", to="bob")
    fleet.post("from ada", to="bob", parent=parent.id)
    assert claim_all(fleet, "bob") == ["bob's own", "from ada"]


def test_a_thief_takes_the_end_the_owner_reaches_last(fleet: Fleet) -> None:
    """The tail: within the lowest priority, the newest work sent to the victim; only then
    its own children, oldest first (the biggest piece of a tree)."""
    fleet.configure(max_steals_per_agent=10)
    fleet.register("ada")
    fleet.register("bob", max_concurrent=5)
    fleet.post("parent", to="ada")
    parent, _ = one(fleet.claim("ada"))  # ada at work: a victim
    fleet.post("child 1", parent=parent.id)
    fleet.post("child 2", parent=parent.id)
    fleet.post("sent 1", to="ada")
    fleet.post("sent 2", to="ada")
    fleet.post("sent later, but urgent", to="ada", priority=2)
    stolen = []
    for _ in range(4):
        task, _lease = one(fleet.claim("bob"))
        assert task.stolen
        stolen.append(task.title)
    assert stolen == ["sent 2", "sent 1", "child 1", "child 2"]


def test_work_sent_after_a_dependency_keeps_its_posting_order(fleet: Fleet) -> None:
    """A task posted to an agent to run after another joins the queue, when it is freed,
    where it was posted -- not in front of what was posted after it."""
    fleet.register("ada")
    fleet.register("bob")
    first = fleet.post("first").id
    fleet.post("step 1", to="ada")
    fleet.post("step 2, after the first", to="ada", after=[first])
    fleet.post("step 3", to="ada")
    fleet.complete(one(fleet.claim("bob"))[1])
    assert fleet.get(first).state is TaskState.DONE
    assert claim_all(fleet, "ada") == ["step 1", "step 2, after the first", "step 3"]


def test_a_pinned_task_handed_back_comes_first_again(fleet: Fleet, clock: ManualClock) -> None:
    """Work an agent started and lost (an expired lease, a release) is its own: it comes back
    in front of what waits in its queue."""
    fleet.register("ada")
    fleet.post("pinned", to="ada", pinned=True, lease_ttl=60)
    fleet.post("next", to="ada")
    fleet.post("last", to="ada")
    task, _ = one(fleet.claim("ada"))
    assert task.title == "pinned"
    clock.advance(61)
    assert claim_all(fleet, "ada") == ["pinned", "next", "last"]


def test_longest_first_within_a_priority_then_unknown_lengths(fleet: Fleet) -> None:
    fleet.configure(order="longest_first")
    fleet.register("ada")
    for title, minutes in (("short", 5), ("long", 60), ("unknown", None), ("medium", 20)):
        fleet.post(title, to="ada", expected_duration=None if minutes is None else minutes * 60)
    fleet.post("urgent but quick", to="ada", priority=2, expected_duration=1)
    assert claim_all(fleet, "ada") == ["urgent but quick", "long", "medium", "short", "unknown"]


def test_longest_first_in_the_pool(fleet: Fleet) -> None:
    fleet.configure(order="longest_first")
    fleet.register("ada")
    fleet.post("unknown")
    fleet.post("short", expected_duration="5m")
    fleet.post("long", expected_duration="1h")
    fleet.post("later", priority=7, expected_duration="9h")
    fleet.post("urgent", priority=3)
    assert claim_all(fleet, "ada") == ["urgent", "long", "short", "unknown", "later"]


def test_longest_first_ties_across_skill_sets_go_to_the_first_posted(
    fleet: Fleet, clock: ManualClock
) -> None:
    """Tasks equal in priority, expected duration and age but of different skill sets are
    taken in the order they were posted, on every store. (SQLite looks the pool up per skill
    set; its merge once kept the first skill set's task first, so it took the py task here
    while the memory store and PostgreSQL took the go task.)"""
    fleet.configure(order="longest_first")
    fleet.register("ada", skills=["go", "py"])
    fleet.cancel(fleet.post("makes the py skill set first", skills=["py"]).id)
    fleet.post("older, length unknown")  # the pool's best static key: ahead of both below
    clock.advance(10)
    specs = [
        {"title": "go task", "skills": ["go"], "expected_duration": 100},
        {"title": "py task", "skills": ["py"], "expected_duration": 100},
    ]
    fleet.post_many(specs)  # one moment: equal in every key but the id
    assert claim_all(fleet, "ada") == ["go task", "py task", "older, length unknown"]


def test_longest_first_for_thieves_within_the_lowest_priority(fleet: Fleet) -> None:
    fleet.configure(order="longest_first")
    fleet.register("iris")
    fleet.register("loom")
    fleet.set_status("iris", "working")
    for title, priority, minutes in (("p6 long", 6, 90), ("p9 short", 9, 5), ("p9 long", 9, 50)):
        fleet.post(title, to="iris", priority=priority, expected_duration=minutes * 60)
    assert claim_all(fleet, "loom") == ["p9 long", "p9 short", "p6 long"]


def test_a_batch_is_taken_in_the_order_it_was_listed(fleet: Fleet) -> None:
    """An owner works its queue newest first, and a batch posted in one call is one moment:
    its tasks come in the order listed, the way a claim from the pool takes them; thieves
    take the last-listed first."""
    fleet.register("ada")
    fleet.register("bob")
    fleet.post_many([{"title": f"step {i}", "to": "ada"} for i in (1, 2, 3, 4)])
    fleet.set_status("ada", "working")
    assert one(fleet.claim("bob"))[0].title == "step 4"  # the tail: last listed
    assert claim_all(fleet, "ada") == ["step 1", "step 2", "step 3"]
    fleet.post_many([{"title": f"pooled {i}"} for i in (1, 2)])
    assert claim_all(fleet, "ada") == ["pooled 1", "pooled 2"]


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"steal_threshold": -1}, "steal_threshold must be at least 0"),
        ({"steal_threshold": "many"}, "steal_threshold must be a whole number"),
        ({"domain_wait": "soon"}, "domain_wait must be a duration"),
        ({"locality_wait": -5}, "locality_wait must be"),
        ({"order": "fastest"}, "order must be one of priority, longest_first"),
        ({"order": 1}, "order must be one of priority, longest_first"),
    ],
)
def test_bad_claim_settings_are_refused_and_change_nothing(
    fleet: Fleet, changes: dict[str, object], says: str
) -> None:
    before = snapshot(fleet)
    with pytest.raises(InvalidSetting, match=says) as err:
        fleet.configure(**changes)
    assert err.value.hint
    assert snapshot(fleet) == before


def test_claim_settings_are_read_in_their_own_words(fleet: Fleet) -> None:
    settings = fleet.configure(
        steal_threshold="2", domain_wait="90s", locality_wait="20m", order=" Longest_First "
    )
    assert (settings.steal_threshold, settings.domain_wait, settings.locality_wait) == (2, 90, 1200)
    assert settings.order == "longest_first"
    assert fleet.settings().order == "longest_first"  # stored, and read back
