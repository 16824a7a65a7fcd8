"""Properties of the pure decisions in shoal.policy, checked with Hypothesis."""

from __future__ import annotations

import random

from hypothesis import assume, given
from hypothesis import strategies as st

from shoal import policy, sizing
from shoal.model import Agent, AgentStatus, Task, TaskState
from shoal.settings import Settings

NOW = 1_800_000_000.0
priorities = st.integers(min_value=1, max_value=9)
ages = st.floats(min_value=0, max_value=30 * 86400, allow_nan=False)
agings = st.floats(min_value=0.01, max_value=100, allow_nan=False)
skill_names = st.sampled_from(["py", "rust", "web", "gpu", "sql"])
skill_sets = st.frozensets(skill_names, max_size=3).map(lambda s: tuple(sorted(s)))
domains = st.sampled_from([None, "code", "research", "ci"])


def task(
    i: int,
    priority: int = 5,
    age: float = 0.0,
    domain: str | None = None,
    skills: tuple[str, ...] = (),
    *,
    agent: str | None = None,
    stolen: bool = False,
    pinned: bool = False,
) -> Task:
    return Task(
        id=i,
        title=f"t{i}",
        state=TaskState.PENDING,
        priority=priority,
        domain=domain,
        skills=skills,
        agent=agent,
        stolen=stolen,
        pinned=pinned,
        created_at=NOW - age,
    )


@given(priorities, priorities, ages, ages, st.booleans(), st.booleans(), agings)
def test_the_static_key_orders_like_the_score(
    p1: int, p2: int, a1: float, a2: float, d1: bool, d2: bool, aging: float
) -> None:
    """Comparing keys (plus the domain bonus) gives the score comparison at any moment."""
    s1 = policy.score(p1, d1, a1, aging)
    s2 = policy.score(p2, d2, a2, aging)
    k1 = policy.pool_key(p1, NOW - a1, aging) + (policy.domain_bonus_key(aging) if d1 else 0)
    k2 = policy.pool_key(p2, NOW - a2, aging) + (policy.domain_bonus_key(aging) if d2 else 0)
    assume(abs(s1 - s2) > 1e-6)  # float noise at exact ties is not a decision
    assert (s1 > s2) == (k1 > k2)


@given(priorities, priorities, ages, ages)
def test_without_aging_priority_decides_and_age_breaks_ties(
    p1: int, p2: int, a1: float, a2: float
) -> None:
    k1, k2 = policy.pool_key(p1, NOW - a1, 0), policy.pool_key(p2, NOW - a2, 0)
    if p1 != p2:
        assert (k1 > k2) == (p1 < p2)
    elif abs(a1 - a2) > 1e-3:  # clocks do not tell apart ages closer than this anyway
        assert (k1 > k2) == (a1 > a2)


@given(
    st.lists(st.tuples(priorities, ages, domains), min_size=1, max_size=30),
    st.lists(st.sampled_from(["code", "research", "ci"]), max_size=2, unique=True),
    agings,
    st.integers(min_value=1, max_value=10),
)
def test_rank_pool_takes_the_n_best_scores(
    specs: list[tuple[int, float, str | None]], my_domains: list[str], aging: float, n: int
) -> None:
    tasks = [task(i, p, a, d) for i, (p, a, d) in enumerate(specs, start=1)]
    best = policy.rank_pool(tasks + tasks[:3], my_domains, aging, n)  # duplicates are ignored
    assert len(best) == min(n, len(tasks)) and len({t.id for t in best}) == len(best)

    def points(t: Task) -> float:
        return policy.score(t.priority, t.domain in my_domains, NOW - t.created_at, aging)

    chosen = {t.id for t in best}
    worst_chosen = min(points(t) for t in best)
    for t in tasks:
        if t.id not in chosen:
            assert points(t) <= worst_chosen + 1e-6


@given(skill_sets, st.dictionaries(st.integers(1, 20), skill_sets, max_size=8))
def test_eligible_skillsets_are_exactly_the_subsets(
    have: tuple[str, ...], sets: dict[int, tuple[str, ...]]
) -> None:
    eligible = policy.eligible_skillsets(sets, have)
    assert eligible == sorted(sid for sid, need in sets.items() if set(need) <= set(have))


thieves = st.builds(
    lambda skills, doms: Agent(id="thief", skills=skills, domains=tuple(sorted(doms))),
    skill_sets,
    st.frozensets(st.sampled_from(["code", "research", "ci"]), max_size=2),
)
victim_tasks = st.builds(
    lambda p, d, s, stolen, pinned: task(
        1, p, 0, d, s, agent="victim", stolen=stolen, pinned=pinned
    ),
    priorities,
    domains,
    skill_sets,
    st.booleans(),
    st.booleans(),
)


@given(thieves, victim_tasks)
def test_steal_eligibility_follows_the_rules(thief: Agent, t: Task) -> None:
    settings = Settings()
    rules = policy.steal_filter(thief, settings, {1: t.skills})
    allowed = rules.matches(t)
    if t.stolen or t.pinned or t.priority < settings.steal_min_priority:
        assert not allowed  # anti-thrashing and "urgent work stays put"
    elif not set(t.skills) <= set(thief.skills):
        assert not allowed  # a thief must be able to do the task
    elif t.domain is None or t.domain in thief.domains:
        assert allowed
    else:  # another domain: only simple work (high priority number, no skills)
        assert allowed == (t.priority >= settings.cross_domain_priority and not t.skills)


@given(thieves, victim_tasks)
def test_the_filters_skill_set_ids_agree_with_its_skills(thief: Agent, t: Task) -> None:
    sets = {1: t.skills, 2: (), 3: ("py", "web")}
    rules = policy.steal_filter(thief, Settings(), sets)
    assert (1 in rules.skillsets) == set(t.skills).issubset(thief.skills)
    assert rules.free_skillset == (1 if not t.skills else 2)


@given(
    st.lists(st.sampled_from(["a", "b", "c", "thief"]), max_size=15),
    st.integers(0, 5),
    st.integers(0, 12),
)
def test_steal_budget_respects_both_caps(window: list[str], per_agent: int, per_cycle: int) -> None:
    settings = Settings(max_steals_per_agent=per_agent, max_steals_per_cycle=per_cycle)
    budget = policy.steal_budget(window, "thief", settings)
    assert budget >= 0
    assert window.count("thief") + budget <= max(per_agent, window.count("thief"))
    assert len(window) + budget <= max(per_cycle, len(window))


@given(
    st.dictionaries(st.sampled_from(list("abcdefg")), st.integers(0, 12), max_size=7),
    st.integers(0, 8),
    st.integers(0, 2**32),
)
def test_victims_are_the_deep_queues_busiest_first(
    depths: dict[str, int], threshold: int, seed: int
) -> None:
    order = policy.order_victims(depths.items(), "a", threshold, random.Random(seed))
    assert sorted(order) == sorted(v for v, d in depths.items() if d > threshold and v != "a")
    assert [depths[v] for v in order] == sorted((depths[v] for v in order), reverse=True)


@given(st.integers(0, 50))
def test_polling_backs_off_then_caps(empty_polls: int) -> None:
    s = Settings(poll_base=1, poll_max=60, poll_backoff_after=3)
    delay = policy.poll_delay(empty_polls, s)
    assert delay == 0 if empty_polls == 0 else 1 <= delay <= 60
    assert policy.poll_delay(empty_polls + 1, s) >= delay or empty_polls == 0
    if 1 <= empty_polls <= 3:
        assert delay == 1
    if empty_polls == 4:
        assert delay == 2


@given(st.integers(1, 10), st.integers(1, 10), st.booleans(), st.none() | st.integers(1, 10))
def test_a_failure_is_retried_while_attempts_remain(
    attempts: int, fleet_max: int, retry: bool, own_max: int | None
) -> None:
    t = Task(
        id=1,
        title="t",
        state=TaskState.CLAIMED,
        priority=5,
        attempts=attempts,
        max_attempts=own_max,
    )
    limit = own_max if own_max is not None else fleet_max
    state = policy.state_after_failure(t, Settings(max_attempts=fleet_max), retry)
    assert (state is TaskState.PENDING) == (retry and attempts < limit)


agents_strategy = st.lists(
    st.builds(
        lambda i, status, manager, skills: Agent(
            id=f"a{i}", status=status, manager=manager, skills=skills
        ),
        st.integers(0, 1000),
        st.sampled_from(list(AgentStatus)),
        st.booleans(),
        skill_sets,
    ),
    max_size=8,
    unique_by=lambda a: a.id,
)


@given(
    st.integers(0, 20),
    st.integers(0, 10),
    agents_strategy,
    st.dictionaries(skill_sets, st.integers(1, 5), max_size=3),
    st.integers(1, 6),
)
def test_assess_never_recommends_what_it_cannot_do(
    pending: int,
    in_progress: int,
    agents: list[Agent],
    demand: dict[tuple[str, ...], int],
    max_agents: int,
) -> None:
    settings = Settings(max_agents=max_agents)
    a = sizing.assess(
        pending=pending,
        in_progress=in_progress,
        blocked=0,
        agents=agents,
        demand=demand if pending else {},
        settings=settings,
        now=NOW,
    )
    workers = [x for x in agents if x.status.live and not x.manager]
    assert a.live_agents == len(workers)
    if a.recommendation == "spawn":
        assert len(workers) < max_agents and a.workload == "overloaded"
    if a.recommendation == "terminate_idle":
        assert a.workload == "idle" or a.idle_agents > 0
    if pending == 0 and in_progress == 0:
        assert (a.workload, a.recommendation) == ("idle", "terminate_idle")
    away = (AgentStatus.OFFLINE, AgentStatus.PAUSED)  # paused agents take no work
    have = {s for x in agents if x.status.live and x.status not in away for s in x.skills}
    assert set(a.missing_skills) == {s for need in a_demand(demand, pending) for s in need} - have


def a_demand(demand: dict[tuple[str, ...], int], pending: int) -> dict[tuple[str, ...], int]:
    return demand if pending else {}


def test_a_writer_that_lost_more_often_pauses_less_before_its_next_try() -> None:
    rng = random.Random(3)
    pauses = {lost: [policy.lost_push_pause(lost, 0.1, rng) for _ in range(200)] for lost in (1, 4)}
    assert all(0 <= p <= 0.2 for p in pauses[1]) and all(0 <= p <= 0.05 for p in pauses[4])
    assert max(pauses[1]) > 0.15  # the first pause may run up to two writes


def test_a_winner_waits_its_turn_only_when_it_comes_straight_back_among_busy_rivals() -> None:
    rng = random.Random(5)
    rivals_busy = policy.turn_wait(since_won=0.01, since_others=0.5, took=0.1, rng=rng)
    assert 0.05 <= rivals_busy <= 0.15
    assert policy.turn_wait(0.01, policy.BUSY_LATELY + 1, 0.1, rng) == 0.0  # alone lately
    assert policy.turn_wait(0.5, 0.5, 0.1, rng) == 0.0  # it did real work in between
