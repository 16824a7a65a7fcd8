"""Cancelling a task as settled elsewhere (``Fleet.cancel(note=, met=True)``: an imported
issue closed at its source) -- on every store (issue 31, item 4)."""

from __future__ import annotations

import pytest

from shoal import BadInput, Fleet, InvalidTransition, TaskState
from tests.helpers import snapshot


def test_a_met_cancel_lets_what_waits_on_it_go_on(fleet: Fleet) -> None:
    blocker = fleet.post("blocker")
    other = fleet.post("other")
    waits = fleet.post("waits on it", after=[blocker.id])
    both = fleet.post("waits on both", after=[blocker.id, other.id])
    fleet.cancel(blocker.id, note="closed in beads (bd-1)", met=True)
    assert fleet.get(waits.id).state is TaskState.PENDING
    assert fleet.get(both.id).state is TaskState.BLOCKED and fleet.get(both.id).waiting_on == 1
    (event,) = [e for e in fleet.events(task=blocker.id) if e.kind == "cancelled"]
    assert event.data == {"was": "pending", "note": "closed in beads (bd-1)", "met": True}
    assert [e.kind for e in fleet.events(task=waits.id)][-1] == "ready"
    before = snapshot(fleet)
    with pytest.raises(InvalidTransition, match="closed at its source"):
        fleet.retry(blocker.id)
    assert snapshot(fleet) == before


def test_a_plain_cancel_leaves_what_waits_on_it_stuck_and_may_be_retried(fleet: Fleet) -> None:
    blocker = fleet.post("blocker")
    waits = fleet.post("waits on it", after=[blocker.id])
    fleet.cancel(blocker.id, note="not needed")
    assert fleet.get(waits.id).state is TaskState.BLOCKED
    assert "stuck" in [e.kind for e in fleet.events(task=waits.id)]
    assert fleet.retry(blocker.id).state is TaskState.PENDING


def test_a_bad_note_is_refused_and_changes_nothing(fleet: Fleet) -> None:
    task = fleet.post("t")
    before = snapshot(fleet)
    with pytest.raises(BadInput):
        fleet.cancel(task.id, note="two\nlines")
    assert snapshot(fleet) == before
