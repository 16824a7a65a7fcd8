"""Liveness and seats on every store, with no monitor running (docs/ARCHITECTURE.md,
"Liveness and seats"): a silent agent is offline at once in every read and its queue is
claimable at the next claim; an expired lease is shown expired, not running; offline agents
hold no seat; a pause is status ``paused`` and ends at ``paused_until`` everywhere; it
outlives a termination; an assessment is logged when its verdict changes."""

from __future__ import annotations

import pytest

from shoal import (
    AgentStatus,
    Fleet,
    FleetFull,
    LeaseLost,
    ManualClock,
    TaskState,
)
from tests.helpers import kinds, last_event_id, one, post_many, snapshot


@pytest.fixture
def silent_iris(fleet: Fleet, clock: ManualClock) -> Fleet:
    """iris registered with three tasks queued for her (one pinned), then silent 13 s past
    a 3 s heartbeat_timeout; loom heard from just now."""
    fleet.configure(heartbeat_timeout=3)
    fleet.register("iris", domains=["research"], skills=["web"])
    fleet.register("loom", domains=["ci"], skills=["web"], max_concurrent=5)
    post_many(fleet, 2, to="iris", domain="research")
    fleet.post("iris only", to="iris", pinned=True)
    clock.advance(16)
    fleet.heartbeat("loom")
    return fleet


def test_a_silent_agents_queue_is_claimable_at_the_next_claim(silent_iris: Fleet) -> None:
    fleet = silent_iris
    claim = fleet.claim("loom", 5)
    assert [g.source for g in claim.grants] == ["pool", "pool"]  # back in the pool first
    assert {t.title for t in claim.tasks} == {"task 0", "task 1"}
    iris = fleet.agent("iris")
    assert iris.status is AgentStatus.OFFLINE and iris.queued == 1  # the pinned one waits
    offline = [e for e in fleet.events() if e.kind == "agent.offline"]
    assert [(e.agent, e.data["from"], e.data["silent_for"]) for e in offline] == [
        ("iris", "idle", 16.0)
    ]
    assert kinds(fleet, agent="iris").count("returned") == 2


def test_the_silent_agent_is_written_down_offline_once(silent_iris: Fleet) -> None:
    fleet = silent_iris
    fleet.claim("loom")
    after = last_event_id(fleet)
    fleet.claim("loom")
    fleet.claim("loom")
    assert "agent.offline" not in kinds(fleet, since=after)


def test_the_returned_work_keeps_its_skill_rules(fleet: Fleet, clock: ManualClock) -> None:
    fleet.configure(heartbeat_timeout=3)
    fleet.register("iris", skills=["gpu"])
    fleet.register("loom")
    gpu = fleet.post("render", to="iris", skills=["gpu"]).id
    clock.advance(13)
    claim = fleet.claim("loom")
    assert not claim and claim.reason == "empty"  # back in the pool, but not loom's to take
    assert fleet.get(gpu).in_pool and fleet.agent("iris").status is AgentStatus.OFFLINE


def test_reads_show_the_dead_offline_and_their_leases_expired_without_writing(
    fleet: Fleet, clock: ManualClock
) -> None:
    """Two agents die holding work; fourteen minutes later, with nothing run since, every
    read says they are offline and their tasks are not running -- and writes nothing."""
    fleet.register("ann")
    fleet.register("bob")
    post_many(fleet, 2)
    held = {one(fleet.claim(name))[0].id for name in ("ann", "bob")}
    clock.advance(14 * 60)  # leases of 10 minutes ran out 4 minutes ago
    before = snapshot(fleet)
    agents = {a.id: a.status for a in fleet.agents()}
    assert agents == {"ann": AgentStatus.OFFLINE, "bob": AgentStatus.OFFLINE}
    assert fleet.agent("ann").status is AgentStatus.OFFLINE
    status = fleet.status()
    assert {line.agent.status for line in status.agents} == {AgentStatus.OFFLINE}
    assert all(line.held == () for line in status.agents)  # no load: nothing running
    assert {t.id for t in status.expired} == held
    assert status.counts.get("claimed", 0) == 0 and status.live == 0
    data = status.to_dict()
    assert {e["id"] for e in data["expired"]} == held
    assert all(e["expired"] for e in data["expired"])
    assert snapshot(fleet) == before  # a read presents the rules; it writes nothing


def test_a_pause_is_a_status_and_ends_at_paused_until_everywhere(
    fleet: Fleet, clock: ManualClock
) -> None:
    fleet.register("bob")
    fleet.post("t")
    paused = fleet.pause("bob", for_="10m")
    assert paused.status is AgentStatus.PAUSED and paused.paused_until == clock.now() + 600
    assert fleet.status().agents[0].agent.status is AgentStatus.PAUSED
    assert fleet.claim("bob").reason == "paused"
    clock.advance(599)
    fleet.heartbeat("bob")
    assert fleet.agent("bob").status is AgentStatus.PAUSED
    clock.advance(1)  # the pause is over now: in every view, with no monitor
    seen = [fleet.agent("bob"), *fleet.agents(), fleet.status().agents[0].agent]
    assert {(a.status, a.paused_until) for a in seen} == {(AgentStatus.WAITING, None)}
    assert one(fleet.claim("bob"))  # and for claims
    assert kinds(fleet, agent="bob")[-2:] == ["agent.resumed", "claimed"]


def test_the_breakers_pause_is_status_paused_and_says_why_in_the_log(
    fleet: Fleet, clock: ManualClock
) -> None:
    fleet.configure(failure_streak=2)
    fleet.register("bob")
    post_many(fleet, 3)
    for _ in range(2):
        fleet.fail(one(fleet.claim("bob"))[1], "no tool")
    assert fleet.agent("bob").status is AgentStatus.PAUSED
    reason = [e.data for e in fleet.events(agent="bob") if e.kind == "agent.paused"]
    assert reason == [{"failures": 2, "until": reason[0]["until"], "from": "working"}]
    clock.advance(599)
    fleet.heartbeat("bob")  # a paused agent still heartbeats
    clock.advance(1)
    assert fleet.agent("bob").status is AgentStatus.WAITING  # over, though nobody reaped


# ---------------------------------------------------------------------------- seats


def test_an_offline_agent_coming_back_takes_a_free_seat_or_is_refused(
    fleet: Fleet, clock: ManualClock
) -> None:
    fleet.configure(max_agents=2)
    fleet.register("ann", skills=["web"], domains=["docs"])
    fleet.register("bob")
    pinned = fleet.post("for ann", to="ann", pinned=True).id
    clock.advance(91)
    fleet.heartbeat("bob")  # bob is back; ann, silent, is written down offline
    assert fleet.agent("ann").status is AgentStatus.OFFLINE
    assert fleet.register("cy").live == 2  # ann's seat is free
    before = snapshot(fleet)
    for comes_back in (
        lambda: fleet.heartbeat("ann"),
        lambda: fleet.claim("ann"),
        lambda: fleet.register("ann", skills=["web"], domains=["docs"]),
        lambda: fleet.set_status("ann", "idle"),
    ):
        with pytest.raises(FleetFull, match="2 of 2 seats are taken") as refused:
            comes_back()
        assert "agent 'ann' stays offline" in refused.value.message
    assert snapshot(fleet) == before  # refused: nothing changed, ann still offline
    ann = fleet.agent("ann")
    assert ann.status is AgentStatus.OFFLINE and ann.skills == ("web",)  # identity kept
    assert fleet.get(pinned).agent == "ann"  # its pinned work waits for it
    fleet.set_status("cy", "terminated")
    claim = fleet.claim("ann")  # a seat again: back, and its pinned task first
    assert one(claim)[0].id == pinned
    assert fleet.agent("ann").status is AgentStatus.WORKING
    assert fleet.status().live == 2


def test_a_silent_agent_holds_no_seat_before_anyone_writes_it_down(
    fleet: Fleet, clock: ManualClock
) -> None:
    fleet.configure(max_agents=1)
    fleet.register("ann")
    clock.advance(91)
    assert fleet.status().live == 0
    assert fleet.register("bob").live == 1  # ann is written down offline as bob joins
    assert fleet.agent("ann").status is AgentStatus.OFFLINE
    with pytest.raises(FleetFull):
        fleet.heartbeat("ann")


def test_a_manager_comes_back_whatever_the_seats(fleet: Fleet, clock: ManualClock) -> None:
    fleet.configure(max_agents=1)
    fleet.register("boss", manager=True)
    clock.advance(91)
    fleet.register("ann")
    assert fleet.agent("boss").status is AgentStatus.OFFLINE
    fleet.heartbeat("boss")
    assert fleet.agent("boss").status is AgentStatus.WAITING


def test_a_completion_from_an_offline_agent_stands_but_does_not_bring_it_back(
    fleet: Fleet, clock: ManualClock
) -> None:
    fleet.configure(max_agents=1, heartbeat_timeout=60)
    fleet.register("ann")
    fleet.post("t")
    _, lease = one(fleet.claim("ann"))
    clock.advance(61)  # ann is quiet; her lease (600 s) still runs
    fleet.register("bob")  # takes the seat she left
    done = fleet.complete(lease, "ok", then_claim=1)
    assert done.task.state is TaskState.DONE and done.next is None
    assert fleet.agent("ann").status is AgentStatus.OFFLINE
    assert fleet.status().live == 1


# ------------------------------------------------------------------------ pauses last


def test_a_pause_survives_terminate_and_register_again(fleet: Fleet, clock: ManualClock) -> None:
    """An agent may not end its own pause by leaving and joining again: only a resume by a
    manager or a person ends it."""
    fleet.register("ann")
    fleet.post("t")
    until = fleet.pause("ann", for_="1h").paused_until
    fleet.set_status("ann", "terminated")
    assert fleet.agent("ann").paused_until == until
    again = fleet.register("ann")
    assert again.created and again.agent.incarnation == 2
    assert again.agent.status is AgentStatus.PAUSED and again.agent.paused_until == until
    claim = fleet.claim("ann")
    assert claim.reason == "paused" and claim.retry_at == until
    fleet.resume("ann")
    assert one(fleet.claim("ann"))


def test_a_pause_that_ended_does_not_follow_the_agent(fleet: Fleet, clock: ManualClock) -> None:
    fleet.register("ann")
    fleet.pause("ann", for_="1m")
    fleet.set_status("ann", "terminated")
    clock.advance(60)
    again = fleet.register("ann").agent
    assert again.status is AgentStatus.IDLE and again.paused_until is None


# ------------------------------------------------------------------------ assessments


def test_assess_logs_only_a_changed_verdict(fleet: Fleet) -> None:
    fleet.register("ann")
    for _ in range(4):
        fleet.assess()
    assert kinds(fleet).count("assessed") == 1
    post_many(fleet, 5)
    busy = fleet.assess()
    assert busy.workload == "overloaded"
    fleet.assess()
    assessed = [e.data for e in fleet.events() if e.kind == "assessed"]
    assert [(d["workload"], d["recommendation"]) for d in assessed] == [
        ("idle", "terminate_idle"),
        ("overloaded", "spawn"),
    ]
    fleet.post("needs a gpu", skills=["gpu"])
    assert fleet.assess().missing_skills == ("gpu",)
    assert [e.data["missing_skills"] for e in fleet.events() if e.kind == "assessed"][-1] == ["gpu"]


# ------------------------------------------------------------------------ the clock


def test_a_clock_jump_leaves_no_task_done_twice_and_says_so(
    fleet: Fleet, clock: ManualClock
) -> None:
    fleet.register("ann")
    fleet.register("bob")
    task = fleet.post("once").id
    _, lease = one(fleet.claim("ann"))
    clock.advance(3600)  # the clock jumps an hour: everyone looks silent, every lease ran out
    got, _ = one(fleet.claim("bob"))
    assert got.id == task and got.attempts == 2
    with pytest.raises(LeaseLost):
        fleet.complete(lease, "late")
    log = fleet.events()
    offline = [e for e in log if e.kind == "agent.offline"]
    assert [(e.agent, e.data["silent_for"]) for e in offline] == [("ann", 3600.0)]
    assert offline[0].data["last_seen"]
    assert [e.kind for e in log if e.task_id == task].count("expired") == 1
    assert [e.kind for e in log if e.task_id == task].count("completed") == 0


def test_a_host_whose_clock_runs_an_hour_ahead_does_no_task_twice(
    store_url: str, fleet: Fleet, clock: ManualClock
) -> None:
    """Two hosts on one fleet, the second's clock an hour ahead: to it everyone is silent
    and every lease ran out, so it takes the work back -- and says so in the log -- while
    the first host's agent, still working, can no longer finish under its old lease."""
    ahead = Fleet.open(store_url, clock=ManualClock(clock.now() + 3600))
    try:
        fleet.register("ann")
        task = fleet.post("once").id
        _, lease = one(fleet.claim("ann"))
        ahead.register("bob")
        got, bob_lease = one(ahead.claim("bob"))
        assert got.id == task
        with pytest.raises(LeaseLost):
            fleet.complete(lease, "ann's")
        ahead.complete(bob_lease, "bob's")
        log = fleet.events()
        assert [e.kind for e in log if e.task_id == task].count("completed") == 1
        assert fleet.get(task).result == "bob's"
        offline = [e.data for e in log if e.kind == "agent.offline" and e.agent == "ann"]
        assert offline and offline[0]["silent_for"] == 3600.0
    finally:
        ahead.close()
