"""The claim cascade -- capacity, own queue, pool score, steal rules and caps -- on every store."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from shoal import AgentStatus, BadInput, Fleet, LeaseLost, ManualClock, TaskState, UnknownAgent
from tests.helpers import kinds, one, post_many, snapshot


def test_an_unknown_or_terminated_agent_cannot_claim(fleet: Fleet) -> None:
    fleet.post("t")
    with pytest.raises(UnknownAgent, match="register it first"):
        fleet.claim("ghost")
    fleet.register("ada")
    fleet.set_status("ada", "terminated")
    with pytest.raises(UnknownAgent, match="terminated"):
        fleet.claim("ada")
    assert fleet.get(1).state is TaskState.PENDING


@pytest.mark.parametrize("n", [0, -1, 1001, True, "3"])
def test_a_bad_batch_size_is_refused(fleet: Fleet, n: object) -> None:
    fleet.register("ada")
    with pytest.raises(BadInput, match="n must be"):
        fleet.claim("ada", n)  # type: ignore[arg-type]


def test_capacity_caps_a_claim_and_then_says_busy(fleet: Fleet) -> None:
    fleet.register("ada", max_concurrent=2)
    post_many(fleet, 5)
    claim = fleet.claim("ada", 5)
    assert len(claim.leases) == 2 and claim.reason is None
    busy = fleet.claim("ada")
    assert not busy and busy.reason == "busy"
    assert len(fleet.tasks(state="claimed")) == 2


def test_nothing_to_do_marks_the_agent_idle_once(fleet: Fleet, clock: ManualClock) -> None:
    fleet.register("ada")
    fleet.post("t")
    fleet.complete(one(fleet.claim("ada"))[1])
    assert fleet.agent("ada").status is AgentStatus.WAITING
    clock.advance(5)
    empty = fleet.claim("ada")
    assert empty.reason == "empty"
    agent = fleet.agent("ada")
    assert agent.status is AgentStatus.IDLE and agent.idle_since == clock.now()
    clock.advance(5)
    fleet.claim("ada")
    assert fleet.agent("ada").idle_since == clock.now() - 5  # still idle since the first
    assert kinds(fleet, agent="ada").count("agent.idle") == 1


def test_claiming_makes_the_agent_working(fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.post("t")
    fleet.claim("ada")
    agent = fleet.agent("ada")
    assert agent.status is AgentStatus.WORKING and agent.idle_since is None


def test_own_queue_comes_before_the_pool(fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.post("urgent pool work", priority=1)
    mine = fleet.post("my routine work", priority=9, to="ada")
    task, _ = one(fleet.claim("ada"))
    assert task.id == mine.id


def test_own_queue_is_priority_then_posting_order(fleet: Fleet) -> None:
    fleet.register("ada", max_concurrent=10)
    old5 = fleet.post("old p5", to="ada", priority=5).id
    new5 = fleet.post("new p5", to="ada", priority=5).id
    p2 = fleet.post("p2", to="ada", priority=2).id
    p8 = fleet.post("p8", to="ada", priority=8).id
    claim = fleet.claim("ada", 10)
    assert [t.id for t in claim.tasks] == [p2, old5, new5, p8]


def test_pool_score_priority_domain_bonus(fleet: Fleet) -> None:
    fleet.register("ada", domains=["web"])
    p4 = fleet.post("p4 elsewhere", priority=4).id  # 60 points
    p5_web = fleet.post("p5 in my domain", priority=5, domain="web").id  # 50 + 15 = 65
    p3 = fleet.post("p3 elsewhere", priority=3).id  # 70
    fleet.register("ada", domains=["web"], max_concurrent=3)
    assert [t.id for t in fleet.claim("ada", 3).tasks] == [p3, p5_web, p4]


def test_pool_age_lets_old_work_overtake(fleet: Fleet, clock: ManualClock) -> None:
    fleet.register("ada", max_concurrent=2)
    old = fleet.post("old p6", priority=6).id  # 40 points + 1 per minute
    clock.advance(41 * 60)
    fresh = fleet.post("fresh p2", priority=2).id  # 80 points
    assert [t.id for t in fleet.claim("ada", 2).tasks] == [old, fresh]


def test_without_aging_priority_rules_and_age_breaks_ties(fleet: Fleet, clock: ManualClock) -> None:
    fleet.configure(aging=0)
    fleet.register("ada", max_concurrent=3)
    old = fleet.post("old p6", priority=6).id
    clock.advance(10_000)
    newer = fleet.post("newer p6", priority=6).id
    fresh = fleet.post("fresh p5", priority=5).id
    assert [t.id for t in fleet.claim("ada", 3).tasks] == [fresh, old, newer]


def test_changing_aging_reorders_the_waiting_pool(fleet: Fleet, clock: ManualClock) -> None:
    fleet.register("ada")
    old = fleet.post("old p6", priority=6).id
    clock.advance(30 * 60)
    fresh = fleet.post("fresh p5", priority=5).id  # 50 vs 40 + 30 = 70: old wins at aging 1
    assert fleet.ready("ada")[0].id == old
    fleet.configure(aging=0)
    assert one(fleet.claim("ada"))[0].id == fresh


def test_the_pool_only_offers_tasks_whose_skills_the_agent_has(fleet: Fleet) -> None:
    fleet.register("ada", skills=["python"], max_concurrent=5)
    fleet.register("bob", skills=["python", "rust"], max_concurrent=5)
    needs_rust = fleet.post("rust job", skills=["rust"], priority=1).id
    both = fleet.post("ffi job", skills=["python", "rust"]).id
    py = fleet.post("py job", skills=["python"]).id
    anyone = fleet.post("anyone").id
    assert sorted(t.id for t in fleet.claim("ada", 5).tasks) == sorted([py, anyone])
    assert sorted(t.id for t in fleet.claim("bob", 5).tasks) == sorted([needs_rust, both])


def test_an_expired_lease_is_claimable_without_any_monitor(
    fleet: Fleet, clock: ManualClock
) -> None:
    fleet.register("ada")
    fleet.register("bob")
    task = fleet.post("t")
    _, ada_lease = one(fleet.claim("ada"))
    clock.advance(599)
    assert fleet.claim("bob").reason == "empty"  # still ada's
    clock.advance(2)
    again, bob_lease = one(fleet.claim("bob"))
    assert again.id == task.id and again.attempts == 2
    with pytest.raises(LeaseLost, match="not held under that token"):
        fleet.complete(ada_lease)
    assert fleet.complete(bob_lease).task.state is TaskState.DONE
    assert kinds(fleet, task=task.id) == ["posted", "claimed", "expired", "claimed", "completed"]


def test_a_task_whose_last_attempt_expires_is_dead(fleet: Fleet, clock: ManualClock) -> None:
    fleet.register("ada")
    fleet.post("t", max_attempts=2, lease_ttl=10)
    for _ in range(2):
        one(fleet.claim("ada"))
        clock.advance(11)
    assert fleet.claim("ada").reason == "empty"
    dead = fleet.get(1)
    assert dead.state is TaskState.DEAD and "lease expired" in (dead.error or "")


def test_claim_many_fills_from_queue_then_pool(fleet: Fleet) -> None:
    fleet.register("ada", max_concurrent=4)
    mine = fleet.post("mine", to="ada").id
    pool = post_many(fleet, 5)
    claim = fleet.claim("ada", 4)
    assert [t.id for t in claim.tasks] == [mine, *pool[:3]]
    assert claim.sources == ("queue", "pool", "pool", "pool")
    assert len({lease.token for lease in claim.leases}) == 4


# --------------------------------------------------------------------------- stealing


@pytest.fixture
def crew(fleet: Fleet) -> Fleet:
    """victim 'iris' (research, at work) and thieves in several domains, all with room."""
    fleet.register("iris", domains=["research"], skills=["web"], max_concurrent=1)
    fleet.register("loom", domains=["ci"], skills=["shell"], max_concurrent=5)
    fleet.register("spark", domains=["research", "code"], skills=["web"], max_concurrent=5)
    fleet.set_status("iris", "working")
    return fleet


def test_a_dry_agent_steals_even_a_single_queued_task(crew: Fleet) -> None:
    """steal_threshold 0: iris is at work, so her one queued task is better started now."""
    only = crew.post("only", to="iris", priority=9, domain="research").id
    task, _ = one(crew.claim("spark"))
    assert task.id == only and task.stolen and task.agent == "spark"
    assert crew.events(task=only)[-1].data == {"source": "steal", "attempt": 1, "from": "iris"}
    assert crew.agent("iris").queued == 0


def test_steal_threshold_keeps_short_queues_to_their_owner(crew: Fleet) -> None:
    crew.configure(steal_threshold=5)
    post_many(crew, 5, to="iris", priority=9, domain="research")
    assert crew.claim("spark").reason == "empty"  # 5 is not more than steal_threshold
    crew.post("one more", to="iris", priority=9, domain="research")
    task, _ = one(crew.claim("spark"))
    assert task.stolen and task.agent == "spark"
    assert crew.claim("spark", 1).reason == "empty"  # back at 5: stop


def test_busy_threshold_is_for_the_rebalance_only(crew: Fleet) -> None:
    crew.configure(busy_threshold=50)
    crew.post("only", to="iris", priority=9, domain="research")
    assert crew.claim("spark").sources == ("steal",)


def test_an_owner_that_is_not_at_work_is_not_robbed(crew: Fleet) -> None:
    """An idle (or waiting) owner is about to claim its queue itself: a thief would only race
    it for a task routed to it."""
    routed = crew.post("for iris", to="iris", priority=9, domain="research").id
    for status in ("idle", "waiting"):
        crew.set_status("iris", status)
        assert crew.claim("spark").reason == "empty"
    assert one(crew.claim("iris"))[0].id == routed


def test_a_steal_takes_one_task_from_the_tail_lowest_priority_last_posted(crew: Fleet) -> None:
    """The tail is the end the owner reaches last: iris takes what was sent to her in the
    order it came, so a thief takes the newest of her lowest priority."""
    crew.post("p5", to="iris", priority=5, domain="research")
    crew.post("old p9", to="iris", priority=9, domain="research")
    new9 = crew.post("new p9", to="iris", priority=9, domain="research").id
    post_many(crew, 4, to="iris", priority=7, domain="research")
    claim = crew.claim("spark", 5)
    assert [t.id for t in claim.tasks] == [new9]  # one task per claim, whatever room it has
    assert crew.events(task=new9)[-1].data["from"] == "iris"
    assert crew.claim("spark").sources == ("steal",)


def test_steal_happens_only_when_own_queue_and_pool_are_empty(crew: Fleet) -> None:
    post_many(crew, 8, to="iris", priority=9, domain="research")
    pool = crew.post("pool work", priority=9).id
    assert one(crew.claim("spark"))[0].id == pool
    assert crew.claim("spark").sources == ("steal",)


def test_urgent_tasks_are_never_stolen(crew: Fleet) -> None:
    post_many(crew, 8, to="iris", priority=4, domain="research")
    assert crew.claim("spark").reason == "empty"


def test_pinned_tasks_are_never_stolen(crew: Fleet) -> None:
    post_many(crew, 8, to="iris", priority=9, domain="research", pinned=True)
    assert crew.claim("spark").reason == "empty"


def test_a_thief_needs_the_skills(crew: Fleet) -> None:
    post_many(crew, 8, to="iris", priority=9, domain="research", skills=["web"])
    assert crew.claim("loom").reason == "empty"  # no web skill (and not its domain)
    assert crew.claim("spark").sources == ("steal",)


def test_domain_affinity_with_the_cross_domain_exception(crew: Fleet) -> None:
    crew.set_status("spark", "working")  # no idle research agent to leave them to
    post_many(crew, 4, to="iris", priority=6, domain="research")  # domain work
    simple = post_many(crew, 3, to="iris", priority=8, domain="research")  # simple
    assert crew.claim("loom").tasks[0].id == simple[2]  # ci agent: only simple work
    assert crew.claim("loom").tasks[0].id == simple[1]
    assert crew.claim("loom").tasks[0].id == simple[0]
    assert crew.claim("loom").reason == "empty"  # the cap: 3 steals per thief per window
    assert crew.agent("iris").queued == 4  # research work, for research agents only


def test_cross_domain_needs_no_skills(crew: Fleet) -> None:
    crew.register("iris", domains=["research"], skills=["web", "shell"])
    post_many(crew, 8, to="iris", priority=9, domain="research", skills=["shell"])
    assert crew.claim("loom").reason == "empty"  # simple, but needs a skill: domain rules
    assert crew.claim("spark").reason == "empty"  # its domain, but lacks the skill


def test_tasks_without_a_domain_are_anyones(crew: Fleet) -> None:
    post_many(crew, 8, to="iris", priority=6)
    assert crew.claim("loom").sources == ("steal",)


def test_a_stolen_task_is_never_stolen_again(crew: Fleet) -> None:
    crew.post("only", to="iris", priority=9, domain="research")
    task, lease = one(crew.claim("spark"))
    crew.defer(lease, [crew.post("blocker").id])  # back to spark's queue, later
    crew.complete(one(crew.claim("spark"))[1])
    assert crew.get(task.id).agent == "spark" and crew.get(task.id).stolen
    crew.set_status("spark", "working")
    crew.register("loom2", domains=["research"], max_concurrent=5)
    assert crew.claim("loom2").reason == "empty"  # spark has it queued, but it was stolen


def test_steal_caps_per_thief_per_window(crew: Fleet, clock: ManualClock) -> None:
    crew.configure(
        heartbeat_timeout=3600
    )  # alive all along: time passes here for the steal window only
    post_many(crew, 20, to="iris", priority=9, domain="research")
    got = [crew.claim("spark").sources for _ in range(3)]
    assert got == [("steal",)] * 3
    assert crew.claim("spark").reason == "empty"  # max_steals_per_agent = 3
    clock.advance(301)  # the window (rebalance_interval) has passed
    assert crew.claim("spark").sources == ("steal",)


def test_steal_caps_fleet_wide(open_fleet: Callable[..., Fleet]) -> None:
    fleet = open_fleet()
    fleet.configure(max_agents=20, max_steals_per_cycle=4)
    fleet.register("iris", domains=["research"])
    fleet.set_status("iris", "working")
    post_many(fleet, 30, to="iris", priority=9, domain="research")
    thieves = [f"t{i}" for i in range(5)]
    for name in thieves:
        fleet.register(name, domains=["research"], max_concurrent=5)
    results = [fleet.claim(name).reason for name in thieves]
    assert results == [None, None, None, None, "empty"]


def test_the_busiest_victim_is_robbed_first(crew: Fleet) -> None:
    crew.register("forge", domains=["research"], max_concurrent=1)
    crew.set_status("forge", "working")
    post_many(crew, 2, to="iris", priority=9, domain="research")
    post_many(crew, 4, to="forge", priority=9, domain="research")
    origins = [crew.claim("spark").grants[0].origin for _ in range(2)]
    assert origins == ["forge", "forge"]  # 4 > 2, then 3 > 2
    assert crew.agent("forge").queued == crew.agent("iris").queued == 2


def test_equal_victims_are_chosen_at_random(
    open_fleet: Callable[..., Fleet], clock: ManualClock
) -> None:
    victims = set()
    for seed in range(12):  # both seen within 12 rounds, or the choice is not at random
        if victims == {"a", "b"}:
            break  # seen: more rounds cannot change the outcome (on git each costs seconds)
        clock.advance(301)  # a fresh steal window each round
        fleet = open_fleet(seed)
        prefix = f"s{seed}-"  # one fleet, a separate domain per round
        fleet.configure(max_agents=100, heartbeat_timeout=86400)  # earlier rounds' agents live
        for v in ("a", "b"):
            fleet.register(prefix + v, domains=[prefix + "x"])
            fleet.set_status(prefix + v, "working")
            post_many(fleet, 6, to=prefix + v, priority=6, domain=prefix + "x")
        fleet.register(prefix + "thief", domains=[prefix + "x"])
        task, lease = one(fleet.claim(prefix + "thief"))
        victims.add(fleet.events(task=task.id)[-1].data["from"][len(prefix) :])
        fleet.complete(lease)
    assert victims == {"a", "b"}


def test_a_refused_claim_changes_nothing(fleet: Fleet) -> None:
    fleet.post("t")
    before = snapshot(fleet)
    with pytest.raises(UnknownAgent):
        fleet.claim("nobody")
    assert snapshot(fleet) == before
