"""The circuit breaker, on every store: an agent that fails task after task is paused before
it burns the backlog's attempts, its queue goes to others, and it comes back when resumed or
when its cooldown ends."""

from __future__ import annotations

import pytest

from shoal import AgentStatus, Fleet, InvalidTransition, ManualClock, TaskState, UnknownAgent
from shoal.errors import BadInput
from shoal.runtime.hub import Hub
from tests.helpers import kinds, one, post_many, snapshot


@pytest.fixture
def broken(fleet: Fleet) -> Fleet:
    """ada fails every task it takes; bob is fine. A backlog of 20 in the pool (a failed
    task waits out its retry backoff, so ada moves on to the next)."""
    fleet.register("ada")
    fleet.register("bob")
    post_many(fleet, 20)  # one batch, one write (tests.helpers)
    return fleet


def fail_next(fleet: Fleet, agent: str = "ada") -> None:
    _, lease = one(fleet.claim(agent))
    fleet.fail(lease, "tool not found")


def test_five_failures_in_a_row_pause_the_agent(broken: Fleet, clock: ManualClock) -> None:
    for _ in range(4):
        fail_next(broken)
    assert broken.agent("ada").status is not AgentStatus.PAUSED
    _, lease = one(broken.claim("ada"))
    post_many(broken, 2, to="ada")  # work routed to ada while she fails her fifth
    broken.post("only ada", to="ada", pinned=True)
    broken.fail(lease, "tool not found")
    ada = broken.agent("ada")
    assert ada.status is AgentStatus.PAUSED and ada.failures == 5
    assert ada.paused_until == clock.now() + 600  # pause_cooldown
    assert kinds(broken, agent="ada")[-3:] == ["agent.paused", "returned", "returned"]
    claim = broken.claim("ada")
    assert claim.reason == "paused" and claim.retry_at == ada.paused_until
    # Its unpinned queue went back to the pool; the pinned task waits for it.
    queued = broken.tasks(agent="ada", state=TaskState.PENDING)
    assert [t.title for t in queued] == ["only ada"]
    # The failures cost five attempts, not the backlog: the other 18 tasks never ran.
    untouched = [t for t in broken.tasks(limit=100) if t.attempts == 0]
    assert len(untouched) == 18
    assert all(t.state is not TaskState.DEAD for t in broken.tasks(limit=100))
    assert broken.claim("bob")  # others keep working


def test_a_completion_ends_the_streak(broken: Fleet) -> None:
    for _ in range(4):
        fail_next(broken)
    _, lease = one(broken.claim("ada"))
    broken.complete(lease, "ok")
    assert broken.agent("ada").failures == 0
    for _ in range(4):
        fail_next(broken)
    assert broken.agent("ada").status is not AgentStatus.PAUSED


def test_a_completion_that_claims_the_next_task_ends_the_streak_too(broken: Fleet) -> None:
    for _ in range(4):
        fail_next(broken)
    _, lease = one(broken.claim("ada"))
    assert broken.complete(lease, "ok", then_claim=1).next
    assert broken.agent("ada").failures == 0


def test_resume_lets_a_paused_agent_claim_again(broken: Fleet) -> None:
    for _ in range(5):
        fail_next(broken)
    resumed = broken.resume("ada")
    assert resumed.status is AgentStatus.WAITING
    assert (resumed.failures, resumed.paused_until) == (0, None)
    assert kinds(broken, agent="ada")[-1] == "agent.resumed"
    assert broken.claim("ada")
    before = snapshot(broken)
    broken.resume("ada")  # not paused: nothing changes
    assert snapshot(broken) == before


def test_the_pause_ends_by_itself_after_the_cooldown(broken: Fleet, clock: ManualClock) -> None:
    broken.configure(pause_cooldown="2m")
    for _ in range(5):
        fail_next(broken)
    clock.advance(119)
    assert broken.claim("ada").reason == "paused"
    clock.advance(1)
    assert broken.claim("ada")
    assert broken.agent("ada").failures == 0


def test_the_monitor_resumes_agents_whose_cooldown_is_over(
    broken: Fleet, clock: ManualClock
) -> None:
    for _ in range(5):
        fail_next(broken)
    broken.heartbeat("ada")
    clock.advance(599)
    broken.heartbeat("ada")  # still paused to the heartbeat: it keeps its status
    assert broken.agent("ada").status is AgentStatus.PAUSED
    clock.advance(1)  # the pause is over at paused_until, in every view, monitor or not
    assert broken.agent("ada").status is AgentStatus.WAITING
    assert broken.agent("ada").paused_until is None
    actions = Hub(broken).step().actions  # what `shoal monitor` runs and prints
    assert [a.data for a in actions if a.kind == "resumed"] == [{"agent": "ada"}]
    assert broken.agent("ada").status is AgentStatus.WAITING


def test_a_paused_agent_cannot_report_itself_back_to_work(broken: Fleet) -> None:
    for _ in range(5):
        fail_next(broken)
    before = snapshot(broken)
    for status in ("idle", "working", "waiting"):
        with pytest.raises(InvalidTransition, match="is paused -- by the circuit breaker"):
            broken.set_status("ada", status)
    with pytest.raises(BadInput, match="paused is set by a pause, not reported"):
        broken.set_status("bob", "paused")
    assert snapshot(broken) == before
    assert broken.set_status("ada", "terminated").status is AgentStatus.TERMINATED


def test_status_and_assess_show_the_paused_agent(broken: Fleet) -> None:
    for _ in range(5):
        fail_next(broken)
    status = broken.status()
    line = next(a for a in status.agents if a.agent.id == "ada")
    assert line.agent.status is AgentStatus.PAUSED
    assessment = broken.assess()
    assert "1 agent is paused" in assessment.reason and "shoal agent resume" in assessment.reason


def test_failure_streak_zero_turns_the_breaker_off(broken: Fleet) -> None:
    broken.configure(failure_streak=0)
    for _ in range(8):
        fail_next(broken)
    assert broken.agent("ada").status is not AgentStatus.PAUSED


# ---------------------------------------------------------------- idle while holding work


def test_an_agent_holding_tasks_is_not_set_idle_unless_it_releases_them(fleet: Fleet) -> None:
    fleet.register("ada", max_concurrent=2)
    post_many(fleet, 2)
    held = fleet.claim("ada", 2)
    before = snapshot(fleet)
    with pytest.raises(InvalidTransition, match=r"holds tasks 1, 2") as err:
        fleet.set_status("ada", "idle")
    assert "release" in (err.value.hint or "")
    assert snapshot(fleet) == before
    idle = fleet.set_status("ada", "idle", release=True)
    assert idle.status is AgentStatus.IDLE
    for lease in held.leases:
        task = fleet.get(lease.task_id)
        assert task.state is TaskState.PENDING and task.attempts == 0 and task.in_pool


def test_work_is_not_routed_to_a_paused_agent(broken: Fleet, clock: ManualClock) -> None:
    broken.register("cy", max_concurrent=2)
    broken.configure(failure_streak=1)
    held = broken.claim("cy", 2)
    broken.fail(held.leases[0], "no tool")  # paused, still holding the other task
    with pytest.raises(BadInput, match="agent 'cy' is paused; nothing would work its queue"):
        broken.post("for cy", to="cy")
    child = broken.post("child", parent=held.tasks[1].id, priority=1)
    assert child.in_pool  # not into the paused spawner's queue: others take it
    assert one(broken.claim("bob"))[0].id == child.id


def test_a_paused_agent_that_keeps_asking_is_not_taken_for_silent(
    broken: Fleet, clock: ManualClock
) -> None:
    broken.configure(pause_cooldown=300)
    for _ in range(5):
        fail_next(broken)
    for _ in range(29):
        clock.advance(10)
        assert broken.claim("ada").reason == "paused"  # but alive, and asking
    clock.advance(11)  # the pause is over; ada was last heard from 11 s ago
    report = broken.reap()
    assert "ada" not in report.offline and report.resumed == ("ada",)


def test_a_paused_agent_that_died_goes_offline(broken: Fleet, clock: ManualClock) -> None:
    for _ in range(5):
        fail_next(broken)
    clock.advance(91)  # heartbeat_timeout, and not a word from it
    assert "ada" in broken.reap().offline


def test_a_terminated_agent_is_not_resumed(broken: Fleet, clock: ManualClock) -> None:
    for _ in range(5):
        fail_next(broken)
    broken.set_status("ada", "terminated")
    clock.advance(601)
    assert broken.reap().resumed == ()
    assert "agent.resumed" not in kinds(broken, agent="ada")


def test_a_completion_while_paused_keeps_the_count(fleet: Fleet) -> None:
    fleet.configure(failure_streak=1)
    fleet.register("ada", max_concurrent=2)
    post_many(fleet, 2)
    held = fleet.claim("ada", 2)
    fleet.fail(held.leases[0], "no tool")
    fleet.complete(held.leases[1], "ok")  # the other task still finished
    ada = fleet.agent("ada")
    assert ada.status is AgentStatus.PAUSED and ada.failures == 1


def test_a_person_pauses_an_agent_and_its_work_in_hand_runs_on(
    fleet: Fleet, clock: ManualClock
) -> None:
    fleet.register("ann", max_concurrent=2)
    held = fleet.post("in hand", to="ann")
    lease = fleet.claim("ann").leases[0]
    assert lease.task_id == held.id
    queued = fleet.post("queued for ann", to="ann")
    paused = fleet.pause("ann", for_="30m")
    assert paused.paused_until == clock.now() + 1800
    assert fleet.get(queued.id).agent is None  # back to the pool
    refused = fleet.claim("ann")
    assert refused.reason == "paused" and refused.retry_at == clock.now() + 1800
    assert fleet.complete(lease).task.state == "done"  # work in hand still finishes
    (event,) = [e for e in fleet.events(agent="ann") if e.kind == "agent.paused"]
    assert event.data["by"] == "request"
    fleet.resume("ann")
    assert fleet.claim("ann").tasks[0].id == queued.id


def test_a_pause_ends_by_itself(fleet: Fleet, clock: ManualClock) -> None:
    fleet.register("ann")
    fleet.pause("ann", for_=60)
    fleet.post("later")
    assert fleet.claim("ann").reason == "paused"
    clock.advance(61)
    assert fleet.claim("ann").tasks[0].title == "later"


def test_a_bad_pause_is_refused_and_changes_nothing(fleet: Fleet) -> None:
    fleet.register("ann")
    before = snapshot(fleet)
    for bad in (0, -5, "soon", "20y"):
        with pytest.raises(BadInput):
            fleet.pause("ann", for_=bad)
    with pytest.raises(UnknownAgent):
        fleet.pause("nobody")
    assert snapshot(fleet) == before
