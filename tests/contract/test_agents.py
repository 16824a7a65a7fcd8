"""Registration, capacity, status bookkeeping and the monitor's agent rules -- on every store."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from shoal import AgentStatus, BadInput, Fleet, FleetFull, ManualClock, ShoalError, TaskState
from tests.helpers import kinds, one, post_many, snapshot


def test_registration_reports_capacity(fleet: Fleet) -> None:
    reg = fleet.register("ada", role="developer", skills=["python", "sql"], domains="code,data")
    assert reg.created and (reg.live, reg.max_agents) == (1, 4)
    assert reg.agent.skills == ("python", "sql") and reg.agent.domains == ("code", "data")
    assert reg.agent.status is AgentStatus.IDLE and reg.agent.incarnation == 1


def test_re_registering_a_live_agent_updates_it(fleet: Fleet) -> None:
    fleet.register("ada", skills=["python"])
    again = fleet.register("ada", skills=["python", "rust"], max_concurrent=3)
    assert not again.created and again.live == 1
    assert fleet.agent("ada").skills == ("python", "rust")
    assert kinds(fleet) == ["agent.registered", "agent.updated"]


def test_a_full_fleet_refuses_and_says_how_to_fix_it(fleet: Fleet) -> None:
    for name in ("d1", "d2", "d3", "d4"):
        fleet.register(name)
    before = snapshot(fleet)
    with pytest.raises(FleetFull) as err:
        fleet.register("d5")
    message = str(err.value)
    assert "4 of 4" in message and "max_agents" in message and "terminate" in message
    assert snapshot(fleet) == before
    fleet.register("d4", skills=["x"])  # a live agent may still re-register


def test_managers_are_always_admitted(fleet: Fleet) -> None:
    for name in ("d1", "d2", "d3", "d4"):
        fleet.register(name)
    reg = fleet.register("boss", manager=True)
    assert reg.created and reg.live == 4


def test_capacity_scenario_terminated_agents_free_a_place(fleet: Fleet) -> None:
    """The anti-idle document's scenario 3: a manager and three developers at 4/4."""
    fleet.configure(max_agents=3)
    fleet.register("manager", manager=True, role="bootstrap_manager")
    for name in ("dev-1", "dev-2", "dev-3"):
        fleet.register(name, role="developer")
    with pytest.raises(FleetFull):
        fleet.register("dev-4", role="developer")
    fleet.set_status("dev-1", "terminated")
    reg = fleet.register("dev-4", role="developer")
    assert reg.created and reg.live == 3


def test_raising_max_agents_admits_more(fleet: Fleet) -> None:
    for name in ("d1", "d2", "d3", "d4"):
        fleet.register(name)
    fleet.configure(max_agents=5)
    assert fleet.register("d5").live == 5


def test_registering_a_terminated_id_starts_a_new_incarnation(fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.set_status("ada", "terminated")
    reg = fleet.register("ada")
    assert reg.created and reg.agent.incarnation == 2 and reg.agent.status is AgentStatus.IDLE


def test_a_termination_says_why_in_its_event(fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.register("bob")
    fleet.set_status("ada", "terminated", why="idle past idle_timeout; left by itself")
    fleet.set_status("bob", "terminated")
    why = {e.agent: e.data["why"] for e in fleet.events() if e.kind == "agent.terminated"}
    assert why == {"ada": "idle past idle_timeout; left by itself", "bob": "terminated by request"}


def test_offline_agents_hold_no_seat(fleet: Fleet, clock: ManualClock) -> None:
    """max_agents counts agents neither offline nor terminated: four that went offline
    leave four seats, with or without anyone having written it down."""
    for name in ("d1", "d2", "d3", "d4"):
        fleet.register(name)
    clock.advance(91)
    assert set(fleet.reap().offline) == {"d1", "d2", "d3", "d4"}
    for name in ("d5", "d6", "d7", "d8"):
        assert fleet.register(name).live == int(name[1]) - 4
    with pytest.raises(FleetFull, match="4 of 4 seats are taken") as refused:
        fleet.register("d9")
    assert "agent 'd9' was not registered" in refused.value.message
    assert {a.id for a in fleet.agents() if a.status is AgentStatus.OFFLINE} == {
        "d1",
        "d2",
        "d3",
        "d4",
    }


def test_concurrent_registration_admits_exactly_one(open_fleet: Callable[..., Fleet]) -> None:
    first = open_fleet()
    for name in ("d1", "d2", "d3"):
        first.register(name)
    handles = [open_fleet(seed) for seed in range(8)]
    barrier = threading.Barrier(len(handles))
    outcomes: list[str] = []

    def race(i: int) -> None:
        barrier.wait()
        try:
            handles[i].register(f"new-{i}")
            outcomes.append("ok")
        except FleetFull:
            outcomes.append("full")

    threads = [threading.Thread(target=race, args=(i,)) for i in range(len(handles))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["full"] * 7 + ["ok"]
    assert sum(1 for a in first.agents() if a.status.live) == 4


@pytest.mark.parametrize(
    ("agent_id", "kwargs"),
    [
        ("", {}),
        ("has space", {}),
        ("-dash-first", {}),
        ("x" * 200, {}),
        ("ok", {"max_concurrent": 0}),
        ("ok", {"max_concurrent": True}),
        ("ok", {"skills": ["bad skill"]}),
    ],
)
def test_bad_registrations_are_refused(
    fleet: Fleet, agent_id: str, kwargs: dict[str, object]
) -> None:
    with pytest.raises(BadInput):
        fleet.register(agent_id, **kwargs)  # type: ignore[arg-type]
    assert fleet.agents() == []


def test_idle_since_bookkeeping(fleet: Fleet, clock: ManualClock) -> None:
    fleet.register("ada")
    fleet.set_status("ada", "working")
    assert fleet.agent("ada").idle_since is None
    clock.advance(10)
    fleet.set_status("ada", "idle")
    assert fleet.agent("ada").idle_since == clock.now()
    clock.advance(10)
    fleet.set_status("ada", "idle")
    assert fleet.agent("ada").idle_since == clock.now() - 10
    fleet.set_status("ada", "waiting")
    assert fleet.agent("ada").idle_since is None
    with pytest.raises(BadInput, match="agent status"):
        fleet.set_status("ada", "napping")


def test_terminating_releases_work_but_keeps_pinned_tasks(fleet: Fleet) -> None:
    fleet.register("ada", max_concurrent=2)
    fleet.post("held")
    pinned = fleet.post("pinned", to="ada", pinned=True).id
    queued = fleet.post("queued", to="ada").id
    claim = fleet.claim("ada", 1)  # takes the queue head: pinned (posted first)
    assert claim.tasks[0].id == pinned
    fleet.claim("ada", 1)
    fleet.set_status("ada", "terminated")
    tasks = {t.title: t for t in fleet.tasks()}
    assert tasks["held"].in_pool and tasks["held"].attempts == 0
    assert tasks["queued"].in_pool and queued == tasks["queued"].id
    assert tasks["pinned"].agent == "ada" and tasks["pinned"].state is TaskState.PENDING


def test_silent_agents_go_offline_and_their_queue_returns_to_the_pool(
    fleet: Fleet, clock: ManualClock
) -> None:
    fleet.register("ada")
    fleet.register("bob")
    queued = post_many(fleet, 2, to="ada")
    pinned = fleet.post("pinned", to="ada", pinned=True).id
    clock.advance(60)
    fleet.heartbeat("bob")
    clock.advance(31)  # ada: 91 s of silence; bob: 31 s
    report = fleet.reap()
    assert report.offline == ("ada",) and sorted(report.returned) == queued
    assert fleet.agent("ada").status is AgentStatus.OFFLINE
    assert fleet.agent("bob").status is AgentStatus.IDLE
    assert fleet.get(pinned).agent == "ada"
    assert fleet.reap().offline == ()  # once
    fleet.heartbeat("ada")
    assert fleet.agent("ada").status is AgentStatus.WAITING


def test_ephemeral_idle_agents_are_terminated_but_not_managers(
    fleet: Fleet, clock: ManualClock
) -> None:
    fleet.register("temp", ephemeral=True)
    fleet.register("keeper")
    fleet.register("boss", manager=True, ephemeral=True)
    for name in ("temp", "keeper", "boss"):
        fleet.claim(name)  # nothing to do: idle
    clock.advance(60)
    assert fleet.reap().terminated == ()  # not *longer* than idle_timeout yet
    clock.advance(1)
    for name in ("keeper", "boss"):
        fleet.heartbeat(name)
    fleet.heartbeat("temp")
    assert fleet.reap().terminated == ("temp",)
    assert fleet.agent("temp").status is AgentStatus.TERMINATED
    assert fleet.agent("boss").status is AgentStatus.IDLE


def test_scale_down_scenario(fleet: Fleet, clock: ManualClock) -> None:
    """The anti-idle document's scenario 2: developers with no work left end one by one."""
    fleet.register("manager", manager=True)
    for name in ("dev-1", "dev-2", "dev-3"):
        fleet.register(name, ephemeral=True)
    post_many(fleet, 2)
    leases = {name: fleet.claim(name) for name in ("dev-1", "dev-2", "dev-3")}
    assert sum(bool(c) for c in leases.values()) == 2
    idle_one = next(name for name, c in leases.items() if not c)
    busy = [name for name, c in leases.items() if c]
    fleet.complete(leases[busy[0]].leases[0])
    assert fleet.claim(busy[0]).reason == "empty"
    clock.advance(61)
    for name in ("manager", *busy, idle_one):
        fleet.heartbeat(name)
    assert sorted(fleet.reap().terminated) == sorted([idle_one, busy[0]])
    live = [a.id for a in fleet.agents() if a.status.live]
    assert sorted(live) == sorted(["manager", busy[1]])  # the last one finishing its task


def test_stalled_tasks_are_flagged_once(fleet: Fleet, clock: ManualClock) -> None:
    fleet.register("ada")
    fleet.post("slow", expected_duration="5m")
    fleet.claim("ada")
    clock.advance(300)
    fleet.heartbeat("ada")
    clock.advance(300)
    assert fleet.reap().stalled == ()  # exactly 2x is not past it
    clock.advance(1)
    assert fleet.reap().stalled == (1,)
    assert fleet.reap().stalled == ()
    assert [t.id for t in fleet.status().stalled] == [1]
    assert fleet.get(1).stalled_at is not None


def test_an_unknown_agent_is_a_clear_error(fleet: Fleet) -> None:
    with pytest.raises(ShoalError, match="register it first"):
        fleet.heartbeat("ghost")
    with pytest.raises(ShoalError, match="register it first"):
        fleet.set_status("ghost", "idle")


def test_every_agent_change_is_one_event(fleet: Fleet, clock: ManualClock) -> None:
    fleet.register("ada", ephemeral=True)
    fleet.set_status("ada", "working")
    fleet.set_status("ada", "working")  # no change, no event
    fleet.claim("ada")
    clock.advance(61)
    fleet.heartbeat("ada")
    fleet.reap()
    assert kinds(fleet, agent="ada") == [
        "agent.registered",
        "agent.status",
        "agent.idle",
        "agent.terminated",
    ]


def test_work_bound_for_a_departed_agent_goes_back_to_the_pool(fleet: Fleet) -> None:
    fleet.register("a")
    fleet.register("b")
    dep = fleet.post("dependency", priority=1)
    waiting = fleet.post("for a, after the dependency", to="a", after=[dep.id])
    held = fleet.post("a's own work", to="a", priority=2)
    _, lease = one(fleet.claim("a"))  # a holds its own work
    continuation = fleet.defer(lease, [dep.id])  # and sets it aside: bound for a's queue
    assert continuation.agent == "a"
    fleet.set_status("a", "terminated")
    for task_id in (waiting.id, held.id):
        bound = fleet.get(task_id)
        assert bound.state is TaskState.BLOCKED and bound.agent is None
    fleet.complete(one(fleet.claim("b"))[1])  # the dependency finishes
    ready = [fleet.get(t) for t in (waiting.id, held.id)]
    assert all(t.state is TaskState.PENDING and t.in_pool for t in ready)
    assert sorted(t.id for t in fleet.ready("b")) == sorted([waiting.id, held.id])


def test_a_dependency_finishing_after_its_dependents_agent_left(fleet: Fleet) -> None:
    fleet.register("a")
    fleet.register("b")
    dep = fleet.post("dependency")
    waiting = fleet.post("for a", to="a", after=[dep.id])
    pinned = fleet.post("only a", to="a", pinned=True, after=[dep.id])
    _, lease = one(fleet.claim("b"))
    fleet.set_status("a", "offline")
    fleet.complete(lease)
    assert fleet.get(waiting.id).in_pool  # a is away: the pool takes it
    assert fleet.get(pinned.id).agent == "a"  # pinned work waits for a


def test_marking_an_agent_offline_returns_its_queue(fleet: Fleet) -> None:
    fleet.register("a")
    queued = post_many(fleet, 3, to="a")
    fleet.set_status("a", "offline")
    assert all(fleet.get(t).in_pool for t in queued)
    with pytest.raises(BadInput, match="offline"):
        fleet.post("more for a", to="a")
    assert fleet.post("pinned for a", to="a", pinned=True).agent == "a"


def test_a_departing_agents_whole_queue_returns_past_pinned_tasks(fleet: Fleet) -> None:
    fleet.register("a")
    fleet.post("pinned", to="a", pinned=True, priority=1)  # at the head of the queue
    fleet.post_many([{"title": f"t{i}", "to": "a"} for i in range(600)])
    fleet.set_status("a", "terminated")
    assert fleet.status().pool == 600
    assert fleet.agent("a").queued == 1


def test_a_child_goes_to_its_spawners_queue_only_if_it_can_do_it(fleet: Fleet) -> None:
    fleet.register("ada", skills=["python"], max_concurrent=2)
    parent = fleet.post("parent", skills=["python"])
    one(fleet.claim("ada"))
    can = fleet.post("python child", skills=["python"], parent=parent.id)
    cannot = fleet.post("gpu child", skills=["gpu"], parent=parent.id)
    assert can.agent == "ada"
    assert cannot.in_pool


def test_an_ephemeral_agent_that_dies_frees_its_place(fleet: Fleet, clock: ManualClock) -> None:
    fleet.configure(max_agents=2)
    fleet.register("temp", ephemeral=True)
    fleet.register("keeper")
    fleet.post("t")
    fleet.claim("temp")  # it works, then dies without a word
    clock.advance(91)
    fleet.heartbeat("keeper")  # keeper is back; temp, silent, is written down offline
    assert [e.agent for e in fleet.events() if e.kind == "agent.offline"] == ["temp"]
    assert fleet.register("fresh").created  # its seat is free at once
    clock.advance(60)
    for alive in ("keeper", "fresh"):
        fleet.heartbeat(alive)
    assert fleet.reap().terminated == ("temp",)  # offline past idle_timeout: a zombie
    assert fleet.agent("keeper").status is not AgentStatus.TERMINATED


def test_an_offline_agent_that_calls_again_is_back(fleet: Fleet, clock: ManualClock) -> None:
    fleet.register("ada", max_concurrent=2)
    fleet.post("a")
    _, lease = one(fleet.claim("ada"))
    clock.advance(91)
    assert fleet.reap().offline == ("ada",)
    fleet.complete(lease)  # its lease is still good: it was only quiet
    assert fleet.agent("ada").status is AgentStatus.OFFLINE  # a completion is not a return
    fleet.heartbeat("ada")  # this is: it takes a free seat
    assert fleet.agent("ada").status is AgentStatus.WAITING
    assert fleet.events(agent="ada")[-1].data == {"from": "offline", "to": "waiting"}
