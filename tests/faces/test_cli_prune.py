# ruff: noqa: F811 -- the tests take the CLI fixtures as parameters
"""``shoal prune`` and the ``history_retention`` setting through the installed script: what
went is said in words and in JSON, a dry run changes nothing, the monitor prunes on its
pass, and bad input exits 2 having changed nothing.

The history is made by a fleet on a manual clock 40 days back; the commands run on the
real clock. Each look at the fleet opens it anew: a process that keeps one SQLite fleet open
while it opens and closes another on the same file loses its locks on the file (POSIX
drops a process's locks when any of its descriptors of the file closes), and the commands'
processes, closing last, would then take the WAL away from under it. See cli_support.py
for how these tests run the CLI."""

from __future__ import annotations

import time

from shoal import Fleet, ManualClock
from tests.faces.cli_support import Shoal, shoal, url  # noqa: F401 (fixtures)
from tests.helpers import snapshot as snapshot_of

DAY = 86400.0


def snapshot(url: str) -> dict[str, object]:
    with Fleet.open(url) as fleet:
        return snapshot_of(fleet)


def titles(url: str) -> list[str]:
    with Fleet.open(url) as fleet:
        return [t.title for t in fleet.tasks()]


def old_history(url: str, count: int) -> list[int]:
    """``count`` tasks done 40 days ago, and one task posted now (the newest always stays)."""
    with Fleet.open(url, clock=ManualClock(time.time() - 40 * DAY)) as past:
        past.register("ada", max_concurrent=count)
        past.post_many([{"title": f"old {i}"} for i in range(count)])
        claim = past.claim("ada", count)
        past.complete_many([(lease, None) for lease in claim.leases])
        done = [t.id for t in claim.tasks]
    with Fleet.open(url) as now:
        now.post("posted today")
    return done


def test_prune_says_what_it_would_delete_then_deletes_it(shoal: Shoal, url: str) -> None:
    done = old_history(url, 5)
    before = snapshot(url)

    dry = shoal("prune", "--older-than", "30d", "--dry-run", "--json")
    assert dry.code == 0, dry
    assert dry.data["dry_run"] is True and dry.data["tasks"] == 5 and dry.data["events"] > 10
    assert snapshot(url) == before

    human = shoal("prune", "--older-than", "30d", "--batch", "2")
    assert human.code == 0, human
    assert f"deleted 5 tasks and {dry.data['events']} events" in human.text
    assert titles(url) == ["posted today"]
    shown = shoal("show", str(done[0]))
    assert shown.code == 2 and f"no task {done[0]}" in shown.text


def test_prune_without_an_age_takes_the_fleets_retention_and_the_monitor_applies_it(
    shoal: Shoal, url: str
) -> None:
    old_history(url, 3)
    before = snapshot(url)
    refused = shoal("prune", "--json")
    assert refused.code == 2 and refused.data["error"]["code"] == "bad_input"
    assert "history_retention" in refused.data["error"]["hint"]
    assert snapshot(url) == before

    assert shoal("config", "set", "history_retention", "30d").code == 0
    assert shoal("prune", "--dry-run", "--json").data["tasks"] == 3
    monitor = shoal("monitor", "--once")
    assert monitor.code == 0, monitor
    assert "3 tasks" in monitor.text and "deleted" in monitor.text
    assert titles(url) == ["posted today"]


def test_bad_prune_input_exits_2_and_changes_nothing(shoal: Shoal, url: str) -> None:
    old_history(url, 2)
    before = snapshot(url)
    for args in (
        ["--older-than", "0"],
        ["--older-than", "a while"],
        ["--older-than", "30d", "--batch", "0"],
    ):
        result = shoal("prune", *args)
        assert result.code == 2, (args, result)
        assert "error" in result.text
    bad = shoal("config", "set", "history_retention", "-1d")
    assert bad.code == 2 and "history_retention" in bad.text
    assert snapshot(url) == before
