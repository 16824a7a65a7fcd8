"""A git board written before queue places had a sign (its task files' ``store`` without
``"signed": true``) is read with the places the SQL stores' migration 0007 gives: the work
posted to an agent oldest first, the children of the task it holds newest first ahead of
it -- by a fleet that had the board in memory (it reads the changed files only) and by a
fresh one (it reads them all) alike; the next write marks what it writes."""

from __future__ import annotations

import json
from pathlib import Path

from shoal import ManualClock
from tests.helpers import claim_all, one
from tests.stores.test_git_hand_edits import hand_edit, open_on, url  # noqa: F401 (a fixture)


def unsign(work: Path) -> None:
    """Every task file as shoal wrote it before: a place that only grew, and no mark."""
    for path in sorted((work / "tasks").glob("*/*.json")):
        raw = json.loads(path.read_text())
        raw["store"]["seq"] = abs(raw["store"]["seq"])
        del raw["store"]["signed"]
        path.write_text(json.dumps(raw, indent=2) + "\n")


def test_a_board_from_before_signed_places_runs_sent_work_in_posting_order(
    url: str,  # noqa: F811 (the fixture)
    clock: ManualClock,
    tmp_path: Path,
) -> None:
    before = open_on(url, clock, tmp_path / "before")
    before.register("ada")
    before.post("parent", to="ada")
    parent, lease = one(before.claim("ada"))
    before.post("sent 1", to="ada")
    before.post("sent 2", to="ada")
    before.post("child 1", parent=parent.id)
    before.post("child 2", parent=parent.id)
    hand_edit(url, tmp_path / "work", unsign)
    fresh = open_on(url, clock, tmp_path / "fresh")
    expected = ["child 2", "child 1", "sent 1", "sent 2"]
    assert [t.title for t in fresh.ready("ada")] == expected
    assert [t.title for t in before.ready("ada")] == expected
    fresh.complete(lease)
    assert claim_all(fresh, "ada") == expected
