"""Editing a task after posting it, and labels -- on every store (issue 31, item 3)."""

from __future__ import annotations

import pytest

from shoal import BadInput, Fleet, InvalidTransition, ManualClock, TaskState, UnknownTask
from tests.helpers import snapshot


def edits(fleet: Fleet, task_id: int) -> list[dict[str, object]]:
    return [dict(e.data) for e in fleet.events(task=task_id) if e.kind == "edited"]


def test_labels_are_kept_sorted_once_each_and_listed_by(fleet: Fleet) -> None:
    one = fleet.post("one", labels=["backend", "good first issue", "backend"])
    two = fleet.post("two", labels="backend")
    fleet.post("three")
    assert one.labels == ("backend", "good first issue")
    assert fleet.get(one.id).labels == ("backend", "good first issue")
    assert [t.id for t in fleet.tasks(label="backend")] == [two.id, one.id]
    assert [t.id for t in fleet.tasks(label="good first issue")] == [one.id]
    assert fleet.tasks(label="good") == []
    assert fleet.tasks(label="backend", state="done") == []
    assert fleet.get(one.id).to_dict()["labels"] == ["backend", "good first issue"]


@pytest.mark.parametrize("bad", ["", "   ", "a\nb", "x" * 65, ["ok", 3], ["\u202eevil"]])
def test_a_bad_label_is_refused_and_adds_nothing(fleet: Fleet, bad: object) -> None:
    before = snapshot(fleet)
    with pytest.raises(BadInput):
        fleet.post("t", labels=bad)  # type: ignore[arg-type]
    assert snapshot(fleet) == before


def test_an_edit_changes_what_was_given_and_logs_one_event(
    fleet: Fleet, clock: ManualClock
) -> None:
    task = fleet.post("fix the parsr", body="short", skills=["py"], labels=["a"])
    clock.advance(5)
    edited = fleet.edit(
        task.id,
        title="fix the parser",
        body="longer body",
        priority="high",
        skills=["sql", "py"],
        domain="db",
        labels=["b", "a"],
        expected_duration="10m",
    )
    assert (edited.title, edited.body, edited.priority) == ("fix the parser", "longer body", 2)
    assert (edited.skills, edited.domain, edited.labels) == (("py", "sql"), "db", ("a", "b"))
    assert edited.expected_duration == 600.0 and edited.updated_at == clock.now()
    assert edited.state is TaskState.PENDING and fleet.get(task.id) == edited
    (data,) = edits(fleet, task.id)
    assert data == {
        "changed": {
            "title": {"from": "fix the parsr", "to": "fix the parser"},
            "body": {"from_chars": 5, "to_chars": 11},
            "priority": {"from": 5, "to": 2},
            "skills": {"from": ["py"], "to": ["py", "sql"]},
            "domain": {"from": None, "to": "db"},
            "labels": {"from": ["a"], "to": ["a", "b"]},
            "expected_duration": {"from": None, "to": 600.0},
        }
    }
    cleared = fleet.edit(task.id, domain=None, expected_duration=None, labels=[])
    assert (cleared.domain, cleared.expected_duration, cleared.labels) == (None, None, ())


def test_an_edited_task_is_claimed_by_its_new_skills_and_priority(fleet: Fleet) -> None:
    first = fleet.post("first")
    later = fleet.post("later", skills=["rust"])
    fleet.register("ann", skills=["py"])
    assert [t.id for t in fleet.ready("ann")] == [first.id]
    fleet.edit(later.id, skills=["py"], priority="critical")
    assert fleet.claim("ann").tasks[0].id == later.id


def test_an_edit_that_changes_nothing_writes_nothing(fleet: Fleet) -> None:
    task = fleet.post("same", skills=["py"], labels=["x"])
    before = snapshot(fleet)
    assert fleet.edit(task.id, title="same", skills=["py"], labels=["x"]) == task
    assert snapshot(fleet) == before


def test_a_held_task_keeps_its_routing_fields_but_takes_the_rest(fleet: Fleet) -> None:
    task = fleet.post("held", skills=["py"], domain="web")
    fleet.register("ann", skills=["py"], domains=["web"])
    fleet.claim("ann")
    before = snapshot(fleet)
    for change in ({"skills": ["go"]}, {"domain": "db"}, {"domain": None, "title": "x"}):
        with pytest.raises(InvalidTransition, match="held by ann") as raised:
            fleet.edit(task.id, **change)
        assert raised.value.hint and "released" in raised.value.hint
        assert snapshot(fleet) == before
    edited = fleet.edit(task.id, title="held, renamed", labels=["urgent"], priority=1)
    assert edited.state is TaskState.CLAIMED and edited.agent == "ann"
    assert (edited.title, edited.labels, edited.priority) == ("held, renamed", ("urgent",), 1)
    assert fleet.edit(task.id, skills=["py"], domain="web").title == "held, renamed"


def test_a_finished_or_unknown_task_is_not_edited(fleet: Fleet) -> None:
    task = fleet.post("gone")
    fleet.cancel(task.id)
    before = snapshot(fleet)
    with pytest.raises(InvalidTransition, match="already cancelled"):
        fleet.edit(task.id, title="back")
    with pytest.raises(UnknownTask):
        fleet.edit(999, title="who")
    assert snapshot(fleet) == before


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"state": "done"},
        {"payload": {}},
        {"title": ""},
        {"title": "a\nb"},
        {"priority": 12},
        {"skills": ["bad skill"]},
        {"expected_duration": "-1s"},
        {"labels": [""]},
    ],
)
def test_bad_edits_are_refused_and_change_nothing(fleet: Fleet, change: dict[str, object]) -> None:
    task = fleet.post("t")
    before = snapshot(fleet)
    with pytest.raises(BadInput):
        fleet.edit(task.id, **change)
    assert snapshot(fleet) == before


def test_too_many_skills_or_domains_are_refused_and_change_nothing(fleet: Fleet) -> None:
    """A task text may steer its agent into posting or registering with every name it can
    think of; past 64 names the call is refused whole, by post, edit and register alike."""
    task = fleet.post("t", skills=["py"])
    many = [f"s{i}" for i in range(65)]
    before = snapshot(fleet)
    for refused in (
        lambda: fleet.post("u", skills=many),
        lambda: fleet.edit(task.id, skills=many),
        lambda: fleet.register("ada", skills=many),
        lambda: fleet.register("ada", domains=",".join(many)),
    ):
        with pytest.raises(BadInput, match=r"at most 64 (skill|domain)s may be given, not 65"):
            refused()
    assert snapshot(fleet) == before
    assert fleet.edit(task.id, skills=many[:64]).skills == tuple(sorted(many[:64]))
