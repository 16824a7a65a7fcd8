"""Who posted a task (``Task.posted_by``), on every store: the faces record the agent that
posted through an agent's face, and that agent may edit its task (issue 31, item 3)."""

from __future__ import annotations

import pytest

from shoal import BadInput, Fleet
from tests.helpers import snapshot


def test_a_post_records_its_poster_and_every_read_returns_it(fleet: Fleet) -> None:
    fleet.register("ann", max_concurrent=2)
    mine = fleet.post("ann's", posted_by="ann")
    theirs = fleet.post("a person's")
    assert (mine.posted_by, theirs.posted_by) == ("ann", None)
    assert fleet.get(mine.id).posted_by == "ann"
    assert fleet.show(mine.id).task.posted_by == "ann"
    assert {t.id: t.posted_by for t in fleet.tasks()} == {mine.id: "ann", theirs.id: None}
    assert fleet.get(mine.id).to_dict()["posted_by"] == "ann"
    assert fleet.get(theirs.id).to_dict()["posted_by"] is None
    claimed = fleet.claim("ann", n=2)
    assert {g.task.id: g.task.posted_by for g in claimed.grants} == {
        mine.id: "ann",
        theirs.id: None,
    }


def test_an_edit_keeps_the_poster(fleet: Fleet) -> None:
    task = fleet.post("parsr", posted_by="ann")
    assert fleet.edit(task.id, title="parser").posted_by == "ann"
    assert fleet.get(task.id).posted_by == "ann"


@pytest.mark.parametrize("bad", ["", "a b", "x" * 300, "\u202eevil"])
def test_a_bad_poster_is_refused_and_adds_nothing(fleet: Fleet, bad: str) -> None:
    before = snapshot(fleet)
    with pytest.raises(BadInput):
        fleet.post("t", posted_by=bad)
    assert snapshot(fleet) == before


def test_a_batch_cannot_name_a_poster(fleet: Fleet) -> None:
    before = snapshot(fleet)
    with pytest.raises(BadInput, match="posted_by"):
        fleet.post_many([{"title": "t", "posted_by": "ann"}])
    assert snapshot(fleet) == before
