"""History that ends -- Fleet.prune and the history_retention setting -- on every store: what
finished long ago goes with its events, live work and what it still needs stay, a dry run
counts exactly what a run then deletes, and bad input changes nothing."""

from __future__ import annotations

import pytest

from shoal import BadInput, Fleet, InvalidSetting, ManualClock, TaskState, UnknownTask
from shoal.runtime.hub import Hub
from tests.helpers import one, snapshot

HOUR = 3600.0


@pytest.fixture
def busy(fleet: Fleet) -> Fleet:
    fleet.configure(max_agents=10)
    fleet.register("ada", max_concurrent=100)
    fleet.register("bob", max_concurrent=100)
    return fleet


def finish(fleet: Fleet, agent: str, count: int, **post: object) -> list[int]:
    """Post ``count`` tasks to ``agent``'s queue and complete them; their ids."""
    done = []
    for i in range(count):
        task = fleet.post(f"{agent} {i}", to=agent, **post)  # type: ignore[arg-type]
        claim = fleet.claim(agent)
        assert claim.tasks[0].id == task.id
        fleet.complete(claim.leases[0])
        done.append(task.id)
    return done


def gone(fleet: Fleet, task_id: int) -> bool:
    try:
        fleet.get(task_id)
    except UnknownTask:
        return True
    return False


def events_of(fleet: Fleet, task_id: int) -> list[str]:
    return [e.kind for e in fleet.events(task=task_id)]


def test_old_finished_tasks_go_with_their_events_and_everything_else_stays(
    busy: Fleet, clock: ManualClock
) -> None:
    old_done = finish(busy, "ada", 3)
    dead = busy.post("doomed", max_attempts=1, to="ada")
    busy.fail(one(busy.claim("ada"))[1], "broken")
    cancelled = busy.post("dropped")
    busy.cancel(cancelled.id)
    busy.post("running all day", to="bob", lease_ttl="1d")
    claimed_task, _lease = one(busy.claim("bob"))
    pending = busy.post("waiting in the pool")
    blocked = busy.post("after the pool task", after=[pending.id])
    clock.advance(2 * HOUR)
    young = finish(busy, "ada", 1)
    assert busy.get(dead.id).state is TaskState.DEAD

    report = busy.prune(HOUR)

    old = [*old_done, dead.id, cancelled.id]
    assert report.tasks == len(old) and not report.dry_run and not report.more
    assert report.cutoff == clock.now() - HOUR
    assert all(gone(busy, i) for i in old)
    assert all(events_of(busy, i) == [] for i in old)
    for kept in (pending.id, claimed_task.id, blocked.id, *young):
        assert not gone(busy, kept) and events_of(busy, kept)
    assert busy.get(claimed_task.id).state is TaskState.CLAIMED
    counts = busy.status().counts
    assert counts == {
        "blocked": 1,
        "pending": 1,
        "claimed": 1,
        "done": 1,
        "dead": 0,
        "cancelled": 0,
    }
    assert busy.prune(HOUR).tasks == 0  # nothing more to do


def test_a_dry_run_counts_exactly_what_the_run_deletes_and_changes_nothing(
    busy: Fleet, clock: ManualClock
) -> None:
    finish(busy, "ada", 4)
    root = busy.post("root", max_attempts=1, to="ada")
    middle = busy.post("middle", after=[root.id])
    busy.fail(one(busy.claim("ada"))[1], "broken")  # the middle is stuck on a dead task ...
    busy.cancel(middle.id)  # ... then given up: both go, the middle first
    busy.set_status("bob", "idle")
    clock.advance(2 * HOUR)
    finish(busy, "bob", 1)  # young
    before = snapshot(busy)

    preview = busy.prune(HOUR, dry_run=True)

    assert preview.dry_run and snapshot(busy) == before
    events_before = len(busy.events(limit=100_000))
    run = busy.prune(HOUR, batch=2)
    assert (run.tasks, run.events) == (preview.tasks, preview.events) == (6, run.events)
    pruned_events = sum(1 for e in busy.events(limit=100_000) if e.kind == "pruned")
    assert len(busy.events(limit=100_000)) == events_before - run.events + pruned_events
    assert gone(busy, root.id) and gone(busy, middle.id)


def test_a_dead_dependency_stays_while_a_live_task_waits_on_it(
    busy: Fleet, clock: ManualClock
) -> None:
    dependency = busy.post("fetch", max_attempts=1, to="ada")
    waiter = busy.post("build", after=[dependency.id])
    busy.fail(one(busy.claim("ada"))[1], "network")
    clock.advance(2 * HOUR)

    assert busy.prune(HOUR, dry_run=True).tasks == 0
    assert busy.prune(HOUR).tasks == 0
    assert busy.status().stuck == (waiter.id,)
    busy.retry(dependency.id)  # still here to be retried, which frees the waiter in time
    task, lease = one(busy.claim("ada"))
    assert task.id == dependency.id
    busy.complete(lease)
    assert busy.get(waiter.id).state is TaskState.PENDING


def test_a_done_dependency_goes_and_its_waiter_still_waits_on_the_rest(
    busy: Fleet, clock: ManualClock
) -> None:
    (first,) = finish(busy, "ada", 1)
    second = busy.post("second", to="bob")
    waiter = busy.post("third", after=[first, second.id])
    assert busy.get(waiter.id).waiting_on == 1
    clock.advance(2 * HOUR)
    busy.post("the newest task stays; it is not this test's")

    assert busy.prune(HOUR).tasks == 1
    assert gone(busy, first) and busy.show(waiter.id).after == (second.id,)
    busy.complete(one(busy.claim("bob"))[1])
    assert busy.get(waiter.id).state is TaskState.PENDING


def test_a_parent_goes_before_its_live_child_which_keeps_the_number(
    busy: Fleet, clock: ManualClock
) -> None:
    busy.post("parent", to="ada")
    parent, lease = one(busy.claim("ada"))
    child = busy.post("child", parent=parent.id)
    busy.complete(lease)
    clock.advance(2 * HOUR)

    assert busy.prune(HOUR).tasks == 1
    assert gone(busy, parent.id)
    assert busy.get(child.id).parent == parent.id and busy.get(child.id).agent == "ada"


def test_an_idempotency_key_lasts_as_long_as_its_task(busy: Fleet, clock: ManualClock) -> None:
    first = busy.post("nightly report", key="report-2026-11-23", to="ada")
    busy.complete(one(busy.claim("ada"))[1])
    assert busy.post("nightly report", key="report-2026-11-23").id == first.id
    clock.advance(2 * HOUR)
    busy.post("a newer task")

    busy.prune(HOUR)

    assert busy.by_key("report-2026-11-23") is None
    again = busy.post("nightly report", key="report-2026-11-23")
    assert again.id > first.id and busy.by_key("report-2026-11-23") == again


def test_the_cutoff_never_reaches_into_the_steal_window(busy: Fleet, clock: ManualClock) -> None:
    busy.configure(max_steals_per_agent=1, max_steals_per_cycle=10)
    busy.set_status("ada", "working")
    for i in range(3):
        busy.post(f"queued {i}", to="ada", priority=8)
    task, lease = one(busy.claim("bob"))  # bob has nothing: it steals one of ada's
    assert busy.get(task.id).stolen
    busy.complete(lease)
    clock.advance(60)
    busy.post("the newest task", to="ada")

    report = busy.prune(1)  # one second: but the window is rebalance_interval (300 s)

    assert report.tasks == 0 and not gone(busy, task.id)
    assert report.cutoff == clock.now() - busy.settings().rebalance_interval
    assert busy.claim("bob").reason == "empty"  # its one steal of the window still counts
    clock.advance(300)
    assert busy.prune(1).tasks == 1


def test_the_newest_task_and_event_stay_so_no_id_is_handed_out_twice(
    busy: Fleet, clock: ManualClock
) -> None:
    done = finish(busy, "ada", 3)
    clock.advance(2 * HOUR)
    newest_event = busy.events(newest=True, limit=1)[0].id

    report = busy.prune(HOUR)

    assert report.tasks == 2 and not gone(busy, done[-1])
    assert busy.events(newest=True, limit=1)[0].id >= newest_event
    fresh = busy.post("after the prune")
    assert fresh.id == done[-1] + 1
    assert busy.events(newest=True, limit=1)[0].id > newest_event


def test_old_events_of_no_task_go_too(busy: Fleet, clock: ManualClock) -> None:
    busy.configure(aging=2)  # a fleet event
    clock.advance(2 * HOUR)
    busy.configure(aging=3)  # a young one, and the newest

    report = busy.prune(HOUR)

    assert report.tasks == 0 and report.events >= 3  # two registrations and a change
    left = busy.events(limit=1000)
    assert [e.kind for e in left if e.task_id is None][-2:] == ["configured", "pruned"]
    assert all(e.at >= clock.now() - HOUR for e in left)


def test_a_prune_runs_in_batches_one_event_each_and_stops_at_its_limit(
    busy: Fleet, clock: ManualClock
) -> None:
    finish(busy, "ada", 11)
    clock.advance(2 * HOUR)
    since = busy.events(newest=True, limit=1)[0].id

    # The limit counts tasks and events of no task: three tasks and the three old events of
    # the fleet (two registrations, a change of settings) reach four.
    first = busy.prune(HOUR, batch=3, limit=4)

    assert first.more and first.tasks == 3
    assert [e.data["tasks"] for e in busy.events(since) if e.kind == "pruned"] == [3]
    rest = busy.prune(HOUR, batch=3)
    assert rest.tasks == 7 and not rest.more  # all but the newest task
    pruned = [e for e in busy.events(since) if e.kind == "pruned"]
    assert [e.data["tasks"] for e in pruned] == [3, 3, 3, 1]
    assert all(e.task_id is None and e.data["older_than"] == HOUR for e in pruned)


def test_a_pruned_task_is_unknown_and_a_late_complete_changes_nothing(
    busy: Fleet, clock: ManualClock
) -> None:
    busy.post("finished long ago", to="ada")
    task, lease = one(busy.claim("ada"))
    busy.complete(lease)
    clock.advance(2 * HOUR)
    busy.post("the newest")
    busy.prune(HOUR)
    before = snapshot(busy)

    with pytest.raises(UnknownTask):
        busy.complete(lease)
    with pytest.raises(UnknownTask):
        busy.post("after it", after=[task.id])
    with pytest.raises(UnknownTask):
        busy.show(task.id)
    assert snapshot(busy) == before


def test_the_log_reads_on_across_the_gaps_a_prune_leaves(busy: Fleet, clock: ManualClock) -> None:
    old = finish(busy, "ada", 2)
    clock.advance(2 * HOUR)
    young = finish(busy, "bob", 2)
    every = busy.events(limit=1000)

    busy.prune(HOUR)

    kept = [e for e in every if e.task_id not in old and e.at >= clock.now() - HOUR]
    after = busy.events(limit=1000)
    assert [e.id for e in after][: len(kept)] == [e.id for e in kept]
    middle = kept[len(kept) // 2].id
    assert [e.id for e in busy.events(middle)] == [e.id for e in after if e.id > middle]
    assert {e.task_id for e in after if e.task_id} == set(young)


def test_retention_is_a_setting_off_by_default_and_the_hub_applies_it(
    busy: Fleet, clock: ManualClock
) -> None:
    assert busy.settings().history_retention == 0
    finish(busy, "ada", 3)
    clock.advance(2 * HOUR)
    busy.post("the newest")
    assert busy.prune().cutoff is None and Hub(busy).step().pruned.tasks == 0

    busy.configure(history_retention="1h")
    hub_pass = Hub(busy).step()

    assert hub_pass.pruned.tasks == 3
    assert [a.kind for a in hub_pass.actions][-1] == "pruned"
    assert hub_pass.actions[-1].data["tasks"] == 3


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"older_than": 0}, "more than zero"),
        ({"older_than": -5}, "zero or more"),
        ({"older_than": "soon"}, "not a duration"),
        ({"older_than": "1h", "batch": 0}, "batch"),
        ({"older_than": "1h", "limit": 0}, "limit"),
    ],
)
def test_bad_prune_input_is_refused_and_changes_nothing(
    busy: Fleet, clock: ManualClock, changes: dict[str, object], message: str
) -> None:
    finish(busy, "ada", 2)
    clock.advance(2 * HOUR)
    before = snapshot(busy)
    with pytest.raises(BadInput, match=message):
        busy.prune(**changes)  # type: ignore[arg-type]
    assert snapshot(busy) == before


def test_a_bad_retention_is_refused(busy: Fleet) -> None:
    for bad in (-1, "forever", "11000d"):
        with pytest.raises(InvalidSetting, match="history_retention"):
            busy.configure(history_retention=bad)
    assert busy.settings().history_retention == 0
