"""The reference and the real store must agree: random operation sequences, run on a memory
fleet and a SQLite fleet side by side, give the same results, errors, tasks, agents and
events -- and keep the invariants of docs/ARCHITECTURE.md ("Invariants") after every step.
Every claim is also checked against the steal and locality rules in force when it was
made."""

from __future__ import annotations

import functools
import random
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from shoal import Fleet, Lease, ManualClock, ShoalError, policy
from shoal.model import Agent, AgentStatus, Claim, TaskState
from shoal.vocabulary import ClaimSource, EventKind
from tests.soak import sized, soak

AGENTS = ["ada", "bob", "cy", "dee", "eve"]
SKILLS = ["py", "web"]
DOMAINS = ["code", "research"]
names = st.sampled_from(AGENTS)
skill_lists = st.lists(st.sampled_from(SKILLS), max_size=2, unique=True)
domain_or_none = st.none() | st.sampled_from(DOMAINS)


@functools.cache
def sqlite_template() -> str:
    """A new SQLite fleet's file, made once: each example's fleet starts as a copy of it
    (creating the schema for each of the 120 examples cost more than their steps)."""
    folder = tempfile.mkdtemp(prefix="shoal-stateful-template-")
    Fleet.open(f"sqlite://{folder}/fleet.db", create=True).close()
    return f"{folder}/fleet.db"


class MemoryAndSqliteAgree(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.folder = tempfile.mkdtemp(prefix="shoal-stateful-")
        shutil.copy2(sqlite_template(), f"{self.folder}/fleet.db")
        self.clock = ManualClock()
        self.fleets = [
            Fleet.open("memory://", clock=self.clock, rng=random.Random(7)),
            Fleet.open(f"sqlite://{self.folder}/fleet.db", clock=self.clock, rng=random.Random(7)),
        ]
        self.leases: list[list[Lease]] = []  # [memory lease, sqlite lease] per claim
        self.tasks = 0
        self.both(lambda f: f.configure(busy_threshold=2, max_agents=4, lease_ttl=300))

    def teardown(self) -> None:
        for fleet in self.fleets:
            fleet.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    # ------------------------------------------------------------------ helpers

    def both(self, call: Callable[[Fleet], Any]) -> list[Any]:
        """Run ``call`` on each fleet; both must succeed alike or fail with the same error."""
        outcomes: list[Any] = []
        for fleet in self.fleets:
            try:
                outcomes.append(("ok", call(fleet)))
            except ShoalError as exc:
                outcomes.append(("error", type(exc).__name__))
        (kind_m, value_m), (kind_s, value_s) = outcomes
        assert kind_m == kind_s, outcomes
        if kind_m == "error":
            return [None, None]
        assert normal(value_m) == normal(value_s)
        return [value_m, value_s]

    def lease_pair(self, index: int) -> list[Lease]:
        return self.leases[index % len(self.leases)]

    def with_leases(self, pair: list[Lease], call: Callable[[Fleet, Lease], Any]) -> list[Any]:
        it = iter(pair)
        return self.both(lambda f: call(f, next(it)))

    def remember(self, claims: list[Any]) -> None:
        if not claims[0]:  # an error (None) or an empty claim
            return
        for lease_m, lease_s in zip(claims[0].leases, claims[1].leases, strict=True):
            self.leases.append([lease_m, lease_s])

    # ------------------------------------------------------------------ rules

    @rule(
        agent=names,
        skills=skill_lists,
        domains=st.lists(st.sampled_from(DOMAINS), max_size=2, unique=True),
        max_concurrent=st.integers(1, 3),
        manager=st.booleans(),
        ephemeral=st.booleans(),
    )
    def register(
        self,
        agent: str,
        skills: list[str],
        domains: list[str],
        max_concurrent: int,
        manager: bool,
        ephemeral: bool,
    ) -> None:
        self.both(
            lambda f: f.register(
                agent,
                skills=skills,
                domains=domains,
                max_concurrent=max_concurrent,
                manager=manager,
                ephemeral=ephemeral,
            )
        )

    @rule(
        priority=st.integers(1, 9),
        skills=skill_lists,
        domain=domain_or_none,
        to=st.none() | names,
        pinned=st.booleans(),
        after=st.lists(st.integers(1, 30), max_size=2),
        parent=st.none() | st.integers(1, 30),
        expected=st.none() | st.integers(1, 7200),
    )
    def post(
        self,
        priority: int,
        skills: list[str],
        domain: str | None,
        to: str | None,
        pinned: bool,
        after: list[int],
        parent: int | None,
        expected: int | None,
    ) -> None:
        results = self.both(
            lambda f: f.post(
                f"task {self.tasks}",
                priority=priority,
                skills=skills,
                domain=domain,
                to=to,
                pinned=pinned and to is not None,
                after=after,
                parent=parent,
                expected_duration=expected,
            )
        )
        if results[0] is not None:
            self.tasks += 1

    @rule(count=st.integers(2, 6), priority=st.integers(5, 9), to=names, domain=domain_or_none)
    def post_a_backlog(self, count: int, priority: int, to: str, domain: str | None) -> None:
        specs = [
            {"title": f"bulk {i}", "priority": priority, "to": to, "domain": domain}
            for i in range(count)
        ]
        self.both(lambda f: f.post_many(specs))

    @rule(
        steal_threshold=st.integers(0, 3),
        domain_wait=st.sampled_from([0, 60, 120]),
        locality_wait=st.sampled_from([0, 30, 300]),
        order=st.sampled_from(["priority", "longest_first"]),
    )
    def tune_the_claim(
        self, steal_threshold: int, domain_wait: int, locality_wait: int, order: str
    ) -> None:
        self.both(
            lambda f: f.configure(
                steal_threshold=steal_threshold,
                domain_wait=domain_wait,
                locality_wait=locality_wait,
                order=order,
            )
        )

    @rule(victim=names, thief=names, count=st.integers(3, 6), priority=st.integers(5, 9))
    def a_backlog_and_a_thief(self, victim: str, thief: str, count: int, priority: int) -> None:
        """Make steals likely: a queue deeper than busy_threshold, then another agent claims."""
        specs = [
            {"title": f"backlog {i}", "priority": priority, "to": victim} for i in range(count)
        ]
        self.both(lambda f: f.post_many(specs))
        self.claim(thief, 1)

    @rule(domain=st.sampled_from(DOMAINS), agent=names, to=st.none() | names)
    def domain_work_and_a_claim(self, domain: str, agent: str, to: str | None) -> None:
        """Make the locality rules matter: new work of one domain, then anyone claims."""
        self.both(lambda f: f.post("domain work", domain=domain, to=to, priority=8))
        self.claim(agent, 1)

    @rule(agent=names, n=st.integers(1, 3))
    def claim(self, agent: str, n: int) -> None:
        fleet = self.fleets[1]
        before = {a.id: a for a in fleet.agents()}
        claims = self.both(lambda f: f.claim(agent, n))
        self.remember(claims)
        if claims[1]:  # I3: a claim never takes an agent past its max_concurrent
            held = fleet.tasks(state="claimed", agent=agent, limit=1000)
            assert len(held) <= fleet.agent(agent).max_concurrent
            self.obeys_the_claim_rules(claims[1], before[agent], before)

    def obeys_the_claim_rules(self, claim: Claim, thief: Agent, before: dict[str, Agent]) -> None:
        """Every task a claim took from the pool or by a steal was one the rules allowed:
        one steal at most, from an agent at work with more than steal_threshold queued, of a
        task never stolen before, not pinned, and one the locality rules did not hold."""
        fleet, now = self.fleets[1], self.clock.now()
        settings = fleet.settings()
        assert claim.sources.count(ClaimSource.STEAL) <= 1
        idle = [a for a in before.values() if a.status is AgentStatus.IDLE and a.id != thief.id]
        for grant in claim.grants:
            task, source, origin = grant.task, grant.source, grant.origin
            if source is ClaimSource.QUEUE:
                continue
            if source is ClaimSource.STEAL:
                assert origin is not None and before[origin].status is AgentStatus.WORKING
                depth_then = fleet.agent(origin).queued + 1  # what it had before this steal
                assert depth_then > settings.steal_threshold
                assert not task.pinned and task.priority >= settings.steal_min_priority
                stolen = [e for e in fleet.events(task=task.id) if e.kind == EventKind.STOLEN]
                assert len(stolen) == 1  # I4: this was its first steal
            if task.domain is None or task.domain in thief.domains:
                continue
            ready = policy.ready_time(task.ready_at, task.created_at)
            if settings.locality_wait > 0:
                assert ready <= now - settings.locality_wait, "taken inside locality_wait"
            if settings.domain_wait > 0 and ready > now - settings.domain_wait:
                waiting_for_it = [
                    a.id
                    for a in idle
                    if task.domain in a.domains and policy.can_do(a.skills, task.skills)
                ]
                assert not waiting_for_it, f"taken from idle {waiting_for_it} within domain_wait"

    @precondition(lambda self: self.leases)
    @rule(index=st.integers(0, 10_000), then_claim=st.integers(0, 2))
    def complete(self, index: int, then_claim: int) -> None:
        pair = self.lease_pair(index)
        done = self.with_leases(
            pair, lambda f, lease: f.complete(lease, {"i": index}, then_claim=then_claim)
        )
        if done[0] is not None and done[0].next is not None:
            self.remember([done[0].next, done[1].next])

    @precondition(lambda self: len(self.leases) >= 2)
    @rule(first=st.integers(0, 10_000), second=st.integers(0, 10_000), then_claim=st.integers(0, 2))
    def complete_many(self, first: int, second: int, then_claim: int) -> None:
        pairs = [self.lease_pair(first), self.lease_pair(second)]
        if pairs[0][0].agent != pairs[1][0].agent:
            pairs = pairs[:1]
        results = self.both(
            lambda f: f.complete_many(
                [(p[self.fleets.index(f)], None) for p in pairs], then_claim=then_claim
            )
        )
        if results[0] is not None and results[0].next:
            self.remember([results[0].next, results[1].next])

    @precondition(lambda self: self.leases)
    @rule(index=st.integers(0, 10_000), retry=st.booleans())
    def fail(self, index: int, retry: bool) -> None:
        self.with_leases(
            self.lease_pair(index), lambda f, lease: f.fail(lease, "boom", retry=retry)
        )

    @precondition(lambda self: self.leases)
    @rule(index=st.integers(0, 10_000))
    def release(self, index: int) -> None:
        self.with_leases(self.lease_pair(index), lambda f, lease: f.release(lease))

    @precondition(lambda self: self.leases)
    @rule(index=st.integers(0, 10_000), after=st.lists(st.integers(1, 30), min_size=1, max_size=2))
    def defer(self, index: int, after: list[int]) -> None:
        self.with_leases(self.lease_pair(index), lambda f, lease: f.defer(lease, after))

    @rule(agent=names)
    def heartbeat(self, agent: str) -> None:
        self.both(lambda f: f.heartbeat(agent))

    @rule(
        agent=names, status=st.sampled_from(["idle", "working", "waiting", "offline", "terminated"])
    )
    def set_status(self, agent: str, status: str) -> None:
        self.both(lambda f: f.set_status(agent, status))

    @rule(task=st.integers(1, 30))
    def cancel(self, task: int) -> None:
        self.both(lambda f: f.cancel(task))

    @rule(task=st.integers(1, 30))
    def retry(self, task: int) -> None:
        self.both(lambda f: f.retry(task))

    @rule(seconds=st.sampled_from([1, 30, 61, 91, 121, 301]))
    def time_passes(self, seconds: int) -> None:
        self.clock.advance(seconds)

    @rule()
    def reap(self) -> None:
        self.both(lambda f: f.reap())

    @rule(dry_run=st.booleans())
    def rebalance(self, dry_run: bool) -> None:
        self.both(lambda f: f.rebalance(dry_run=dry_run))

    @rule()
    def assess(self) -> None:
        self.both(lambda f: f.assess())

    @rule(
        later=st.sampled_from([0, 900]),
        older_than=st.sampled_from([1, 600]),
        batch=st.integers(1, 3),
        dry=st.booleans(),
    )
    def prune(self, later: int, older_than: int, batch: int, dry: bool) -> None:
        self.clock.advance(later)  # history is older than the steal window only after a while
        self.both(lambda f: f.prune(older_than, batch=batch, dry_run=dry))

    # ------------------------------------------------------------------ invariants

    @invariant()
    def the_stores_agree_and_the_invariants_hold(self) -> None:
        views = [view(f) for f in self.fleets]
        assert views[0] == views[1]
        fleet = self.fleets[1]
        tasks = fleet.tasks(limit=100_000)
        agents = {a.id: a for a in fleet.agents()}
        status = fleet.status()
        # A lease that ran out is not running: listed as expired, not counted as claimed.
        expired = {t.id for t in status.expired}
        assert expired == {t.id for t in tasks if policy.lease_due(t, status.at)}
        counts = Counter(t.state.value for t in tasks if t.id not in expired)
        # I2: every task in exactly one state; the counters agree with the tasks.
        assert {k: v for k, v in status.counts.items() if v} == dict(counts)
        # I1: each claimed task has one known holder. (I3 is checked at each claim: lowering
        # an agent's max_concurrent does not revoke the leases it already holds.)
        holders = {t.agent for t in tasks if t.state is TaskState.CLAIMED}
        assert holders <= set(agents)
        live = [a for a in agents.values() if a.status.live and not a.manager]
        assert len(live) <= fleet.settings().max_agents
        # Queue depths are what the tasks say.
        for agent in agents.values():
            queued = sum(1 for t in tasks if t.state is TaskState.PENDING and t.agent == agent.id)
            assert agent.queued == queued
        # I4: a task is stolen at most once, and a pinned task never.
        steals = Counter(e.task_id for e in fleet.events(limit=1_000_000) if e.kind == "stolen")
        assert all(n == 1 for n in steals.values())
        assert not any(t.pinned and t.stolen for t in tasks)
        # I5: completions are logged exactly once per done task.
        completed = Counter(
            e.task_id for e in fleet.events(limit=1_000_000) if e.kind == "completed"
        )
        for t in tasks:
            if t.state is TaskState.DONE:
                assert completed[t.id] >= 1
        assert all(a.idle_since is None or a.status is AgentStatus.IDLE for a in agents.values())


def view(fleet: Fleet) -> dict[str, Any]:
    return {
        "tasks": [t.to_dict() for t in fleet.tasks(limit=100_000)],
        "agents": [a.to_dict() for a in fleet.agents()],
        "events": [
            (e.kind, e.task_id, e.agent, dict(e.data)) for e in fleet.events(limit=1_000_000)
        ],
        "status": {k: v for k, v in fleet.status().to_dict().items() if k != "at"},
    }


def normal(value: Any) -> Any:
    """A result with the lease tokens (random by design) taken out."""
    if hasattr(value, "to_dict"):
        value = value.to_dict()
    if isinstance(value, dict):
        return {k: normal(v) for k, v in value.items() if k != "token"}
    if isinstance(value, list | tuple):
        return [normal(v) for v in value]
    return value


#: `make test` runs 40 random histories of 50 steps; `make soak` runs 120, as `make test`
#: did until the suite had to fit in eight minutes (tests/soak.py).
MemoryAndSqliteAgree.TestCase.settings = settings(
    max_examples=sized(40, 120),
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestMemoryAndSqliteAgree = soak(MemoryAndSqliteAgree.TestCase)
