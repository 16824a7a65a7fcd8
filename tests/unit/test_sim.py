"""The scheduling simulator: the seed document's overnight account, fork-join within its
bound, runs that repeat for their seed. (The `shoal sim` command: tests/faces/test_cli_sim.py.)"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from shoal import BadInput, InvalidSetting, sim
from shoal.sim.engine import Segment, Trace
from shoal.sim.metrics import summarize
from shoal.sim.workloads import build

REBALANCE, IDLE_MIN = 300.0, 120.0  # the defaults: rebalance_interval, idle_min_for_rebalance


def runs_of(trace: Trace, agent: str) -> list[Segment]:
    return sorted((s for s in trace.segments if s.agent == agent), key=lambda s: s.start)


def dry_moment(trace: Trace, agent: str) -> float:
    """When ``agent`` finished the CI backlog it held at 02:00 (and whatever the router gave
    it before then): the end of its first run that no other run follows at once."""
    runs = runs_of(trace, agent)
    backlog_end = max(s.end for s in runs if s.title.startswith("ci backlog"))
    for here, after in itertools.pairwise(runs):
        if here.end >= backlog_end and after.start > here.end:
            return here.end
    return runs[-1].end


def test_push_with_rebalance_feeds_the_idle_agent_within_the_interval_and_idle_minimum() -> None:
    before = sim.simulate("overnight", "push", seed=0).trace
    after = sim.simulate("overnight", "push+rebalance", seed=0).trace
    dry = dry_moment(after, "loom")
    assert dry == pytest.approx(dry_moment(before, "loom"))  # the same night up to then
    # Before: nothing moves; loom waits for the router's next round with work still queued.
    assert not before.moves
    next_run = next(s for s in runs_of(before, "loom") if s.start >= dry)
    assert next_run.start - dry > REBALANCE + IDLE_MIN
    # After: tasks moved from the buried queue reach loom within 5 + 2 minutes.
    fed = [m for m in after.moves if m.move.to_agent == "loom" and m.at >= dry]
    assert fed, "the rebalance never fed the idle agent"
    assert fed[0].at - dry <= REBALANCE + IDLE_MIN
    assert {m.move.from_agent for m in fed} == {"iris"}
    first_moved = next(s for s in runs_of(after, "loom") if s.start >= dry)
    assert first_moved.moved and first_moved.start == fed[0].at
    # The safeguards: at most 3 per idle agent and 10 in all per cycle; nothing moves twice.
    per_agent = Counter((m.at, m.move.to_agent) for m in after.moves)
    per_cycle = Counter(m.at for m in after.moves)
    assert max(per_agent.values()) <= 3
    assert max(per_cycle.values()) <= 10
    assert len({m.move.task_id for m in after.moves}) == len(after.moves)
    assert all(m.move.priority >= 8 for m in after.moves)  # cross-domain: simple work only


def test_shoal_gives_the_agent_that_runs_dry_work_at_that_moment() -> None:
    trace = sim.simulate("overnight", "shoal", seed=0).trace
    loom = runs_of(trace, "loom")
    backlog_end = max(s.end for s in loom if s.title.startswith("ci backlog"))
    following = [s for s in loom if s.start >= backlog_end]
    assert following and following[0].start == backlog_end
    assert following[0].source in ("pool", "steal")


def test_fork_join_finishes_within_work_over_agents_plus_critical_path() -> None:
    """With the defaults: a dry agent steals even one queued child (steal_threshold 0)."""
    ratios = []
    for seed in range(10):
        workload = build("forkjoin", seed)
        bound = workload.work / len(workload.agents) + workload.span
        metrics = sim.run(workload, "shoal", seed)
        assert metrics.tasks == len(workload.tasks)
        assert metrics.makespan <= bound, seed
        assert metrics.steals > 0
        ratios.append(metrics.ratio)
    assert sum(ratios) / len(ratios) <= 1.10


def test_overnight_no_agent_sits_idle_next_to_work_it_could_take() -> None:
    for seed in range(10):
        m = sim.run("overnight", "shoal", seed)
        assert m.eligible_idle_while_waiting <= 0.01, seed
        assert m.eligible_idle_to_work_p99 <= 60, seed


def test_the_causes_of_idleness_are_named_and_add_up() -> None:
    push = sim.run("overnight", "push", 0)
    assert push.held_by["caps"] > 0  # push never steals: its caps are 0
    assert push.held_by["threshold"] > 0  # ... and short queues are kept (busy_threshold)
    pull = sim.run("overnight", "pull", 0)
    assert pull.held_by["latency"] > 0  # pull's agents only notice work when they poll
    assert pull.held_by["caps"] == pull.held_by["threshold"] == 0
    for m in (push, pull):
        assert sum(m.held_by.values()) == pytest.approx(m.eligible_idle_while_waiting)
        assert m.eligible_idle_while_waiting <= m.idle_while_waiting + 1e-9
    held = sim.run("affinity", "shoal", 0, settings={"locality_wait": "20m"})
    assert held.held_by["locality_wait"] > 0  # delay scheduling idles agents on purpose
    assert held.own_domain is not None and held.own_domain >= 0.85


def test_longest_first_with_rough_estimates_beats_a_shared_queue() -> None:
    for workload in ("lognormal", "pareto"):
        runs = sim.compare([workload], ["pull+wake", "shoal"], range(10),
                           settings={"order": "longest_first"})  # fmt: skip
        (pool, shoal) = summarize(runs)
        assert pool["beat_reference"] is None  # pull+wake is the yardstick
        assert shoal["policy"] == "shoal" and shoal["ratio"] <= 1.02
        assert shoal["beat_reference"] >= 9 and shoal["paired_with_reference"] == 10


def test_settings_given_to_a_run_tune_shoal_only() -> None:
    plain = sim.run("lognormal", "pull", 1, agents=4, tasks=60)
    asked = sim.run("lognormal", "pull", 1, agents=4, tasks=60,
                    settings={"order": "longest_first", "steal_threshold": 3})  # fmt: skip
    assert {**plain.to_dict(), "wall_seconds": 0} == {**asked.to_dict(), "wall_seconds": 0}
    with pytest.raises(InvalidSetting, match="order must be one of"):
        sim.run("lognormal", "pull", 1, agents=4, tasks=60, settings={"order": "fastest"})


def test_a_run_is_the_same_for_the_same_seed_and_differs_for_another() -> None:
    first = sim.simulate("pareto", "shoal", seed=3, agents=6, tasks=120)
    again = sim.simulate("pareto", "shoal", seed=3, agents=6, tasks=120)
    other = sim.simulate("pareto", "shoal", seed=4, agents=6, tasks=120)
    assert first.trace.segments == again.trace.segments
    strip = {"wall_seconds": 0}
    assert {**first.metrics.to_dict(), **strip} == {**again.metrics.to_dict(), **strip}
    assert first.trace.segments != other.trace.segments


def test_every_policy_finishes_every_task_of_every_workload() -> None:
    for name in sim.WORKLOADS:
        sizes = {} if name == "overnight" else {"agents": 4, "tasks": 30}
        for baseline in sim.BASELINES:
            result = sim.simulate(name, baseline, seed=1, **sizes)  # type: ignore[arg-type]
            m = result.metrics
            ran = Counter(s.task_id for s in result.trace.segments if not s.join)
            assert len(ran) == m.tasks, (name, baseline)
            forks = sum(1 for t in result.trace.workload.tasks if t.children)
            assert sum(1 for s in result.trace.segments if s.join) == forks, (name, baseline)
            assert m.makespan >= m.lower_bound * (1 - 1e-9), (name, baseline)
            if baseline.startswith("push"):
                assert m.steals == 0  # push agents never take work outside their queue
            if baseline != "push+rebalance":
                assert m.moved == 0


def test_pull_wake_starts_new_work_at_once_where_pull_waits_for_its_next_poll() -> None:
    """The baseline every table pairs with: one shared pool, no steals, no locality rules,
    and idle agents that wake when work appears -- so none of its idleness is latency."""
    polled = sim.simulate("overnight", "pull", seed=0)
    woken = sim.simulate("overnight", "pull+wake", seed=0)
    assert polled.metrics.held_by["latency"] > 0.05  # pull: work waits for the next poll
    assert woken.metrics.eligible_idle_while_waiting == 0
    assert woken.metrics.makespan < polled.metrics.makespan
    for result in (polled, woken):
        assert result.metrics.steals == 0 and result.metrics.moved == 0
        assert {s.source for s in result.trace.segments} == {"pool"}  # nothing is queued
    # shoal keeps more work in its domain: domain_wait leaves new work to its idle agents.
    shoal = sim.run("overnight", "shoal", seed=0)
    assert shoal.own_domain is not None and woken.metrics.own_domain is not None
    assert shoal.own_domain > woken.metrics.own_domain


def test_runs_are_paired_with_pull_wake() -> None:
    runs = sim.compare(["forkjoin"], ["pull", "pull+wake", "shoal"], range(2), tasks=40)
    rows = {r["policy"]: r for r in summarize(runs)}
    assert rows["pull+wake"]["beat_reference"] is None  # the yardstick
    for policy in ("pull", "shoal"):
        assert rows[policy]["paired_with_reference"] == 2
        ref = {m.seed: m.ratio for m in runs if m.policy == "pull+wake"}
        wins = sum(1 for m in runs if m.policy == policy and m.ratio < ref[m.seed] - 1e-9)
        assert rows[policy]["beat_reference"] == wins


def test_a_cold_start_lengthens_each_run_outside_its_domain_under_every_policy() -> None:
    warm_up, factor = 5 * 60.0, 0.25  # affinity's fixed warm-up, and the cold start
    for policy in ("pull+wake", "shoal"):
        plain = sim.simulate("affinity", policy, seed=2, agents=4, tasks=40)
        cold = sim.simulate("affinity", policy, seed=2, agents=4, tasks=40,
                            settings={"cold_start": "25%"})  # fmt: skip
        specs = {t.title: t for t in cold.trace.workload.tasks}
        off = [s for s in cold.trace.segments if s.in_domain is False]
        assert off, policy
        for s in cold.trace.segments:
            length = specs[s.title].duration
            extra = warm_up + factor * length if s.in_domain is False else 0.0
            assert s.warmup == pytest.approx(extra)
            assert s.end - s.start == pytest.approx(length + extra)
        assert cold.metrics.cold_time == pytest.approx(sum(s.warmup for s in off))
        assert cold.metrics.cold_time > plain.metrics.cold_time
        assert cold.metrics.lower_bound == plain.metrics.lower_bound  # the work is the same
    # Work without a domain runs as long on any agent: a batch does not change.
    batch = sim.run("pareto", "shoal", 1, agents=4, tasks=40, settings={"cold_start": 0.25})
    same = sim.run("pareto", "shoal", 1, agents=4, tasks=40)
    assert {**batch.to_dict(), "wall_seconds": 0} == {**same.to_dict(), "wall_seconds": 0}


def test_a_cold_start_that_means_nothing_is_refused() -> None:
    for value in ("-5%", "fast", "11", "nan"):
        with pytest.raises(BadInput, match="cold_start must be a fraction"):
            sim.run("affinity", "pull+wake", 0, agents=4, tasks=10, settings={"cold_start": value})


def test_with_a_cold_start_shoal_finishes_the_night_before_pull_wake() -> None:
    """Locality pays: shoal runs more of the night in its domains, so with a cold start
    outside them its makespan is shorter than the shared pool's on every seed."""
    for seed in range(5):
        work = build("overnight", seed)
        cold = {"cold_start": 0.10}
        shoal = sim.run(work, "shoal", seed, settings=cold)
        pool = sim.run(work, "pull+wake", seed, settings=cold)
        assert shoal.makespan < pool.makespan, seed
        assert shoal.cold_time < pool.cold_time, seed


def test_a_pools_join_is_anyones_and_starts_cold_away_from_its_first_part() -> None:
    """A shared queue has no agent to resume a task on: the join of a fork is a task of its
    own, posted to the pool when the children are done (a chord's callback). Its context
    is with the agent that ran the first part, so with a cold start it runs longer
    anywhere else -- and shoal, which resumes the task on its spawner, rarely pays that."""
    cold = {"cold_start": 0.25}
    pool = sim.simulate("forkjoin", "pull+wake", seed=1, agents=4, tasks=40, settings=cold)
    mine = sim.simulate("forkjoin", "shoal", seed=1, agents=4, tasks=40, settings=cold)
    joins = [s for s in pool.trace.segments if s.join]
    assert joins and {s.source for s in joins} == {"pool"}
    firsts = {s.task_id for s in pool.trace.segments if not s.join}
    assert not firsts & {s.task_id for s in joins}  # a task of its own
    resumed = [s for s in mine.trace.segments if s.join]
    assert {s.task_id for s in resumed} <= {s.task_id for s in mine.trace.segments if not s.join}
    for result in (pool, mine):
        for s in result.trace.segments:
            run = s.end - s.start - s.warmup
            assert s.warmup == (pytest.approx(0.25 * run) if s.warmup else 0.0)
            assert s.join or s.warmup == 0  # first parts and leaves have no domain
    cold_joins = {
        r.metrics.policy: sum(1 for s in r.trace.segments if s.warmup) for r in (pool, mine)
    }
    assert cold_joins["shoal"] < cold_joins["pull+wake"]
    assert mine.metrics.cold_time < pool.metrics.cold_time
