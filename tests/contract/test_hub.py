"""The hub's jobs -- rebalance, assess, status, the event log, settings -- on every store."""

from __future__ import annotations

import pytest

from shoal import Fleet, InvalidSetting, ManualClock, TaskState
from tests.helpers import kinds, last_event_id, one, post_many, snapshot


@pytest.fixture
def night(fleet: Fleet, clock: ManualClock) -> Fleet:
    """The overnight fleet of the work-stealing document: five agents by domain, with iris
    buried under 12 research tasks while loom has run dry."""
    fleet.configure(max_agents=5)
    for name, domain in [
        ("arc", "ops"),
        ("spark", "protocol"),
        ("iris", "research"),
        ("loom", "ci"),
        ("forge", "infra"),
    ]:
        fleet.register(name, domains=[domain])
    fleet.post_many(  # one write (a batch keeps the order posts one by one would have)
        {
            "title": f"research {i}",
            "to": "iris",
            "domain": "research",
            "priority": 8 if i < 6 else 6,
        }
        for i in range(12)
    )
    fleet.set_status("loom", "idle")  # loom ran dry (and, unlike shoal agents, did not steal)
    return fleet


def test_rebalance_waits_for_the_idle_minimum(night: Fleet, clock: ManualClock) -> None:
    clock.advance(119)
    assert night.rebalance() == []
    clock.advance(1)
    assert night.rebalance() != []


def test_overnight_rebalance_moves_three_simple_tasks_to_the_idle_agent(
    night: Fleet, clock: ManualClock
) -> None:
    for name in ("arc", "spark", "iris", "forge"):
        night.set_status(name, "working")  # busy elsewhere: only loom is idle
    clock.advance(300)  # the next 5-minute cycle
    moves = night.rebalance()
    assert [m.to_agent for m in moves] == ["loom"] * 3  # capped at 3 per idle agent
    assert {m.from_agent for m in moves} == {"iris"}
    assert {m.priority for m in moves} == {8}  # lowest priority, and simple: cross-domain
    assert [m.task_id for m in moves] == [6, 5, 4]  # from the tail: the newest first
    for move in moves:
        task = night.get(move.task_id)
        assert task.agent == "loom" and task.stolen and task.state is TaskState.PENDING
    assert night.agent("iris").queued == 9 and night.agent("loom").queued == 3
    claim = night.claim("loom", 1)
    assert claim.sources == ("queue",)
    assert claim.tasks[0].id == 4  # in loom's queue, in the order they were posted


def test_rebalance_dry_run_changes_nothing(night: Fleet, clock: ManualClock) -> None:
    clock.advance(300)
    before = snapshot(night)
    moves = night.rebalance(dry_run=True)
    assert moves and snapshot(night) == before
    assert night.rebalance() == moves


def test_rebalance_caps_the_cycle_fleet_wide(fleet: Fleet, clock: ManualClock) -> None:
    fleet.configure(max_agents=10, max_steals_per_cycle=4)
    fleet.register("victim", domains=["x"])
    post_many(fleet, 30, to="victim", domain="x", priority=9)
    for i in range(3):
        fleet.register(f"idle{i}", domains=["x"])
        fleet.set_status(f"idle{i}", "idle")
    clock.advance(120)
    moves = fleet.rebalance()
    assert len(moves) == 4
    assert [m.to_agent for m in moves].count("idle0") == 3  # the longest idle is fed first


def test_rebalance_shares_the_window_with_claim_time_steals(
    fleet: Fleet, clock: ManualClock
) -> None:
    fleet.register("victim", domains=["x"])
    fleet.register("thief", domains=["x"], max_concurrent=5)
    fleet.set_status("victim", "working")
    post_many(fleet, 20, to="victim", domain="x", priority=9)
    for _ in range(2):
        assert fleet.claim("thief").sources == ("steal",)
    fleet.register("idler", domains=["x"])
    fleet.set_status("idler", "idle")
    fleet.set_status("thief", "idle", release=True)  # it gives its two back to the pool
    clock.advance(120)
    moves = fleet.rebalance()
    assert [m.to_agent for m in moves].count("thief") == 1  # 3 per window, 2 already used
    assert [m.to_agent for m in moves].count("idler") == 3


def test_rebalanced_tasks_never_move_again(fleet: Fleet, clock: ManualClock) -> None:
    fleet.configure(busy_threshold=1, heartbeat_timeout=3600)  # everyone alive throughout
    fleet.register("victim", domains=["x"])
    post_many(fleet, 5, to="victim", domain="x", priority=9)
    fleet.register("first", domains=["x"])
    fleet.set_status("first", "idle")
    clock.advance(120)
    assert len(fleet.rebalance()) == 3  # first now has 3 queued, more than busy_threshold
    fleet.register("second", domains=["x"])
    fleet.set_status("second", "idle")
    clock.advance(301)
    moves = fleet.rebalance()
    assert all(m.from_agent == "victim" for m in moves)  # never from first's stolen tasks
    assert len(moves) == 1  # victim: 2 left, busy_threshold 1


def test_rebalance_respects_domains_and_skills(night: Fleet, clock: ManualClock) -> None:
    night.configure(cross_domain_priority=9)  # now nothing of iris's is "simple"
    clock.advance(300)
    assert night.rebalance() == []


# ------------------------------------------------------------------ assess


def test_assess_idle_when_there_is_nothing(fleet: Fleet) -> None:
    a = fleet.assess()
    assert (a.workload, a.recommendation) == ("idle", "terminate_idle")


def test_scale_up_scenario(fleet: Fleet) -> None:
    """The anti-idle document's scenario 1: a manager alone with 10 tasks."""
    fleet.register("manager", manager=True, role="bootstrap_manager")
    post_many(fleet, 10)
    a = fleet.assess()
    assert (a.workload, a.recommendation) == ("overloaded", "spawn")
    assert a.live_agents == 0 and a.pending == 10
    fleet.register("dev-1", role="developer", max_concurrent=3)
    fleet.claim("dev-1", 3)
    a = fleet.assess()
    assert (a.pending, a.in_progress) == (7, 3)
    assert a.recommendation == "spawn"  # 7 pending is still >= 3, and there is room
    for name in ("dev-2", "dev-3", "dev-4"):
        fleet.register(name, max_concurrent=2)
        fleet.claim(name, 2)
    a = fleet.assess()
    assert (a.workload, a.recommendation) == ("balanced", "maintain")
    assert (a.pending, a.in_progress) == (1, 9)


def test_overloaded_at_capacity_recommends_maintain(fleet: Fleet) -> None:
    fleet.configure(max_agents=1)
    fleet.register("solo")
    post_many(fleet, 5)
    a = fleet.assess()
    assert (a.workload, a.recommendation) == ("overloaded", "maintain")
    assert "at capacity" in a.reason


def test_underutilized_recommends_terminating_idle_agents(fleet: Fleet) -> None:
    for name in ("a", "b", "c"):
        fleet.register(name)
    fleet.post("last one")
    fleet.claim("a")
    fleet.claim("b")  # nothing: idle
    a = fleet.assess()
    assert (a.workload, a.recommendation) == ("underutilized", "terminate_idle")
    assert a.idle_agents >= 1


def test_assess_names_skills_no_live_agent_has(fleet: Fleet) -> None:
    fleet.register("ada", skills=["python"])
    fleet.post("needs a gpu", skills=["cuda", "python"])
    a = fleet.assess()
    assert a.missing_skills == ("cuda",) and a.unservable == 1
    assert a.recommendation == "spawn"


def test_the_last_assessment_shows_in_status(fleet: Fleet) -> None:
    assert fleet.status().assessment is None
    a = fleet.assess()
    assert fleet.status().assessment == a


# ------------------------------------------------------------------ status, events, settings


def test_status_snapshot(fleet: Fleet) -> None:
    fleet.register("ada", max_concurrent=2)
    fleet.register("bob")
    post_many(fleet, 3)
    post_many(fleet, 2, to="bob")
    fleet.post("later", after=[1])
    held = fleet.claim("ada", 2)
    status = fleet.status()
    lines = {line.agent.id: line for line in status.agents}
    assert [t.id for t in lines["ada"].held] == [t.id for t in held.tasks]
    assert lines["bob"].agent.queued == 2
    assert dict(status.counts) | {} == {
        "blocked": 1,
        "pending": 3,
        "claimed": 2,
        "done": 0,
        "dead": 0,
        "cancelled": 0,
    }
    assert status.pool == 1 and (status.live, status.max_agents) == (2, 4)
    data = status.to_dict()
    assert data["queues"] == {"bob": 2} and data["capacity"] == {"live": 2, "max_agents": 4}


def test_events_are_ordered_and_filterable(fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.post("a")
    fleet.post("b")
    _, lease = one(fleet.claim("ada"))
    fleet.complete(lease)
    every = fleet.events()
    assert [e.id for e in every] == sorted(e.id for e in every)
    assert kinds(fleet, task=1) == ["posted", "claimed", "completed"]
    assert kinds(fleet, agent="ada") == ["agent.registered", "claimed", "completed"]
    assert [e.id for e in fleet.events(every[2].id)] == [e.id for e in every[3:]]
    assert len(fleet.events(limit=2)) == 2


def test_one_event_per_state_change_across_a_busy_sequence(
    fleet: Fleet, clock: ManualClock
) -> None:
    fleet.register("ada", max_concurrent=3)
    start = last_event_id(fleet)
    fleet.post("x")  # posted
    fleet.post("y", after=[1])  # posted (blocked)
    claim = fleet.claim("ada", 2)  # claimed (only x is claimable)
    fleet.complete(claim.leases[0])  # completed + ready (y)
    _, lease = one(fleet.claim("ada"))  # claimed y
    fleet.fail(lease, "boom")  # failed
    clock.advance(10)  # its retry backoff (at most retry_delay the first time) is over
    _, lease = one(fleet.claim("ada"))  # claimed
    fleet.release(lease)  # released
    fleet.cancel(2)  # cancelled
    fleet.retry(2)  # retried
    one(fleet.claim("ada"))  # claimed
    clock.advance(601)
    fleet.reap()  # expired (+ agent offline)
    assert kinds(fleet, start) == [
        "posted",
        "posted",
        "claimed",
        "completed",
        "ready",
        "claimed",
        "failed",
        "claimed",
        "released",
        "cancelled",
        "retried",
        "claimed",
        "expired",
        "agent.offline",
    ]


def test_settings_are_validated_and_refusals_change_nothing(fleet: Fleet) -> None:
    before = snapshot(fleet)
    with pytest.raises(InvalidSetting, match="did you mean lease_ttl"):
        fleet.configure(lease_tll=30)
    with pytest.raises(InvalidSetting, match="lease_ttl"):
        fleet.configure(lease_ttl=-5)
    with pytest.raises(InvalidSetting, match="max_agents"):
        fleet.configure(max_agents="lots")
    with pytest.raises(InvalidSetting, match="steal_min_priority"):
        fleet.configure(steal_min_priority=0)
    with pytest.raises(InvalidSetting):
        fleet.configure(lease_ttl=30, max_agents=0)  # all or nothing
    assert snapshot(fleet) == before


def test_settings_change_at_run_time_and_are_shared(open_fleet: object) -> None:
    first = open_fleet()  # type: ignore[operator]
    second = open_fleet()  # type: ignore[operator]
    assert first.configure(lease_ttl="15m", max_agents="6").lease_ttl == 900
    assert second.settings().lease_ttl == 900 and second.settings().max_agents == 6
    assert kinds(first)[-1] == "configured"
    first.configure(lease_ttl=900)  # no change: no event
    assert kinds(first).count("configured") == 1


def test_a_shoal_agent_steals_the_moment_it_runs_dry(night: Fleet) -> None:
    """Where rebalance makes loom wait minutes, a claim steals at once."""
    night.set_status("iris", "working")
    claim = night.claim("loom")
    assert claim.sources == ("steal",)
    assert claim.tasks[0].priority == 8 and claim.tasks[0].id == 6  # the tail: iris's last


def test_events_of_one_task_and_one_agent_respect_the_limit(
    fleet: Fleet, clock: ManualClock
) -> None:
    fleet.register("a")
    fleet.register("b")
    fleet.post("t")
    one(fleet.claim("a"))
    clock.advance(601)
    _, lease = one(fleet.claim("b"))
    fleet.complete(lease)
    found = fleet.events(task=1, agent="b", limit=2)
    assert [(e.kind, e.agent) for e in found] == [("claimed", "b"), ("completed", "b")]
