"""Concurrency groups on every store: at most a group's limit of its tasks held at once,
the claim taking the next best instead; tasks of no group, or of a group without a
limit, untouched (docs/ARCHITECTURE.md, "Concurrency groups")."""

from __future__ import annotations

import pytest

from shoal import BadInput, Fleet, ManualClock, TaskState
from tests.helpers import one


def test_a_full_group_is_passed_over_for_the_next_best(fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.register("bob")
    first = fleet.post("deploy web", priority=1, group="deploy")
    second = fleet.post("deploy api", priority=1, group="deploy")
    plain = fleet.post("lint", priority=9)
    fleet.set_group("deploy", 1)
    assert one(fleet.claim("ada"))[0].id == first.id
    # the best left is the second deploy, but its group is full: the next best comes up
    assert one(fleet.claim("bob"))[0].id == plain.id
    assert fleet.get(second.id).state is TaskState.PENDING
    assert [g.to_dict() for g in fleet.groups()] == [
        {"name": "deploy", "max": 1, "held": 1, "full": True}
    ]


def test_a_group_frees_its_place_when_its_task_ends(fleet: Fleet) -> None:
    fleet.register("ada", max_concurrent=5)
    a, b = fleet.post("a", group="deploy"), fleet.post("b", group="deploy")
    fleet.set_group("deploy", 1)
    grant = one(fleet.claim("ada", 5))
    assert grant[0].id == a.id
    assert fleet.claim("ada").reason == "empty"  # b waits for its group
    fleet.complete(grant[1])
    assert one(fleet.claim("ada"))[0].id == b.id


def test_one_claim_of_many_takes_no_more_than_a_group_allows(fleet: Fleet) -> None:
    fleet.register("ada", max_concurrent=10)
    for i in range(4):
        fleet.post(f"api {i}", priority=2, group="github")
    fleet.post("other", priority=5)
    fleet.set_group("github", 2)
    claim = fleet.claim("ada", 10)
    taken = [g.task for g in claim.grants]
    assert sum(t.group == "github" for t in taken) == 2
    assert "other" in [t.title for t in taken]


def test_the_own_queue_and_steals_pass_over_a_full_group(fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.register("bob")
    fleet.register("eve")
    fleet.post("running", group="deploy", to="ada")
    fleet.set_group("deploy", 1)
    one(fleet.claim("ada"))
    queued = fleet.post("queued deploy", group="deploy", to="bob", priority=1)
    other = fleet.post("queued other", to="bob", priority=5)
    assert one(fleet.claim("bob"))[0].id == other.id  # own queue: the next best
    # bob at work, with the deploy still queued: nothing to steal but a full group's
    assert fleet.claim("eve").reason == "empty"
    assert fleet.get(queued.id).state is TaskState.PENDING


def test_tasks_of_no_group_or_of_a_group_without_limit_are_untouched(fleet: Fleet) -> None:
    fleet.register("ada", max_concurrent=10)
    for i in range(3):
        fleet.post(f"g {i}", group="free")
    fleet.post("plain")
    assert len(fleet.claim("ada", 10).grants) == 4
    assert [g.to_dict() for g in fleet.groups()] == [
        {"name": "free", "max": None, "held": 3, "full": False}
    ]


def test_a_limit_changes_and_clears(fleet: Fleet, clock: ManualClock) -> None:
    fleet.register("ada", max_concurrent=10)
    for i in range(3):
        fleet.post(f"d {i}", group="deploy")
    assert fleet.set_group("deploy", 1).max == 1
    assert len(fleet.claim("ada", 10).grants) == 1
    fleet.set_group("deploy", 2)
    assert len(fleet.claim("ada", 10).grants) == 1
    cleared = fleet.clear_group("deploy")
    assert cleared.max is None and cleared.held == 2
    assert len(fleet.claim("ada", 10).grants) == 1
    events = [e.data for e in fleet.events() if e.kind == "configured"]
    assert events == [
        {"group": "deploy", "max": 1},
        {"group": "deploy", "max": 2},
        {"group": "deploy", "max": None},
    ]
    assert fleet.get(1).group == "deploy" and fleet.get(1).to_dict()["group"] == "deploy"


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "two", None, 10**7])
def test_a_bad_limit_is_refused_and_changes_nothing(fleet: Fleet, bad: object) -> None:
    with pytest.raises(BadInput, match="max must be a whole number"):
        fleet.set_group("deploy", bad)  # type: ignore[arg-type]
    assert fleet.groups() == []


@pytest.mark.parametrize("bad", ["", "de ploy", "x\x1b[31m", "a\nb", "-lead", "x" * 65, 3])
def test_a_bad_group_name_is_refused_and_changes_nothing(fleet: Fleet, bad: object) -> None:
    with pytest.raises(BadInput, match="group name"):
        fleet.set_group(bad, 1)  # type: ignore[arg-type]
    with pytest.raises(BadInput, match="group name"):
        fleet.post("t", group=bad)  # type: ignore[arg-type]
    with pytest.raises(BadInput, match="group name"):
        fleet.post_many([{"title": "t", "group": bad}])
    assert fleet.groups() == [] and fleet.tasks() == []


def test_clearing_a_group_without_a_limit_says_so(fleet: Fleet) -> None:
    with pytest.raises(BadInput, match="has no limit"):
        fleet.clear_group("deploy")
    assert [e.kind for e in fleet.events()] == []


def test_status_shows_the_groups(fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.post("d", group="deploy")
    fleet.set_group("deploy", 1)
    fleet.claim("ada")
    status = fleet.status()
    assert status.to_dict()["groups"] == [{"name": "deploy", "max": 1, "held": 1, "full": True}]


def test_ready_leaves_out_a_full_groups_tasks_as_a_claim_does(fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.post("running", group="deploy", priority=1)
    waiting = fleet.post("waiting", group="deploy", priority=1)
    plain = fleet.post("plain", priority=5)
    fleet.set_group("deploy", 1)
    one(fleet.claim("ada"))
    assert [t.id for t in fleet.ready()] == [plain.id]
    assert [t.id for t in fleet.ready("ada")] == [plain.id]
    fleet.clear_group("deploy")
    assert [t.id for t in fleet.ready()] == [waiting.id, plain.id]
