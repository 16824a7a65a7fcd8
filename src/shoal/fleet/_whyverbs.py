"""``Fleet.why_task`` and ``Fleet.why_agent``: the facts a claim would read, read once.

Each verb is one read transaction: it reads what the claim cascade reads -- the agents as
the liveness rules make them now, the leases they hold, the skill sets, the queues a steal
could rob, the steal window -- and hands the facts to ``policy_why``, which asks the
claim's own rules about them. For an agent it runs the cascade's own candidate look-ups
(``_claiming``: the queue head, ``pool_candidates`` under ``Holds``, ``steal_tails``) in
the read transaction, so what it says the agent would take next is what its claim takes.

One limit, said where it shows: an agent silent past heartbeat_timeout but not yet written
down offline is offline here, as in every read; its queue goes back to the pool only when
the next claim settles it, and until then ``why`` shows its tasks in its queue.

Every read is bounded and indexed (docs/benchmarks.md, "Why at scale"): one task and its
dependencies, the agents, the claimed tasks, the queue depths -- never every pending task.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from shoal import policy
from shoal._values import replace
from shoal.fleet._claiming import Holds, pool_candidates, steal_tails
from shoal.fleet._transitions import live_agent, need_task
from shoal.fleet._verbbase import FleetBase
from shoal.model import Agent, Candidate, QueueDepth, Task
from shoal.stores.base import StoreTx
from shoal.validation import check_agent_id
from shoal.vocabulary import AgentStatus, ClaimSource, TaskState

if TYPE_CHECKING:  # policy_why is loaded by the first why: no other verb needs it
    from shoal.policy_why import AgentWhy, Facts, Reason, TaskWhy

__all__ = ["WhyVerbs", "facts_in", "why_agent_in", "why_task_in"]

#: How many of an agent's nearest misses (skill sets it lacks) ``why_agent`` names.
NEAREST_MISSES = 3
#: How many of the pool's best tasks it cannot do ``why_agent`` looks at to name them.
MISSES_LOOKED_AT = 100


class WhyVerbs(FleetBase):
    """The fleet explains itself: why a task waits, why an agent sits idle."""

    def why_task(self, task_id: int) -> TaskWhy:
        """Why task ``task_id`` is not running (or who runs it): every reason that holds it,
        in the order the claim applies them, each with when it ends, and the agents whose
        claim could take it now, likeliest first. Read only."""
        with self._store.read() as tx:
            return why_task_in(tx, self.clock.now(), task_id)

    def why_agent(self, agent_id: str) -> AgentWhy:
        """Why agent ``agent_id`` is idle or would get nothing from a claim now -- or the
        task its claim would take, and by which step. Read only: nothing is claimed."""
        check_agent_id(agent_id)
        with self._store.read() as tx:
            return why_agent_in(tx, self.clock.now(), agent_id, self.rng)


def facts_in(
    tx: StoreTx,
    now: float,
    *,
    agents: bool = True,
    about: str | None = None,
    group: str | None = None,
) -> Facts:
    """What the claim reads, as of ``now`` (``policy_why.Facts``); without ``agents``, only
    the settings (enough for a running or finished task). ``about``: only what that agent's
    claim reads of the agents -- itself, not all of them. ``group``: a task's concurrency
    group, whose limit is read -- as the claim reads the groups only for grouped work."""
    from shoal.policy_why import Facts

    settings = tx.load_settings()
    if not agents:
        return Facts(now, settings, (), {}, {})
    window = tx.window_thieves(now - settings.rebalance_interval)
    if about is not None:
        found = tx.get_agent(about)
        assert found is not None  # checked by the caller, in this transaction
        mine = [t for t, _ in tx.held_leases(about) if not policy.lease_due(t, now)]
        me = policy.agent_as_of(found, now, settings, holding=bool(mine))
        depths = tx.queue_depths()  # as the claim reads them
        return Facts(now, settings, [me], {about: mine}, tx.skillsets(), depths, window)
    held: dict[str, list[Task]] = {}
    for task in tx.claimed_tasks():
        if not policy.lease_due(task, now):  # the claim's expire step ends the others
            held.setdefault(task.agent or "", []).append(task)
    seen = [
        policy.agent_as_of(a, now, settings, holding=a.id in held)
        for a in tx.list_agents()
        if a.status is not AgentStatus.TERMINATED
    ]
    # The claim reads the queue depths as stored, once silent agents are settled offline
    # (a pause run out is still "paused" there: no victim until it claims again).
    gone = {a.id for a in seen if a.status is AgentStatus.OFFLINE}
    depths = [
        QueueDepth(q.agent, q.depth, AgentStatus.OFFLINE if q.agent in gone else q.status)
        for q in tx.queue_depths()
    ]
    limits = tx.group_limits() if group is not None else {}
    limit = {group: limits[group]} if group in limits else {}
    return Facts(now, settings, seen, held, tx.skillsets(), depths, window, limit)


def why_task_in(tx: StoreTx, now: float, task_id: int) -> TaskWhy:
    """``Fleet.why_task`` inside the caller's transaction."""
    from shoal.policy_why import explain_task

    task = need_task(tx, task_id)
    live = task.state in (TaskState.PENDING, TaskState.BLOCKED)
    group = task.group if task.state is TaskState.PENDING else None
    facts = facts_in(tx, now, agents=live, group=group)
    deps = tx.get_tasks(tx.deps_of(task.id)) if task.state is TaskState.BLOCKED else None
    return explain_task(task, facts, deps)


def why_agent_in(tx: StoreTx, now: float, agent_id: str, rng: random.Random) -> AgentWhy:
    """``Fleet.why_agent`` inside the caller's transaction: the claim's steps, read only."""
    from shoal.policy_why import AgentWhy, Reason

    live_agent(tx, agent_id)  # unknown or terminated: the usual refusal
    facts = facts_in(tx, now, about=agent_id)
    agent = next(a for a in facts.agents if a.id == agent_id)
    settings = facts.settings

    def answer(*reasons: Reason) -> AgentWhy:
        return AgentWhy(agent.id, agent.status, now, reasons)

    if agent.status is AgentStatus.OFFLINE:
        text = (
            "offline: silent past heartbeat_timeout; it takes work again once it is heard "
            "from and a seat is free"
        )
        return answer(Reason("offline", text, since=agent.last_seen))
    if agent.paused(now):
        text = "paused: its claims get nothing until the pause ends (`shoal agent resume`)"
        if policy.breaker_trips(agent.failures, settings):
            text = f"paused by the circuit breaker after {agent.failures} failures in a row"
        return answer(Reason("paused", text, agent.paused_until))
    held = facts.held.get(agent.id, ())
    if policy.claim_room(len(held), agent.max_concurrent, 1) == 0:
        text = f"at capacity: holds {len(held)} lease(s), max_concurrent {agent.max_concurrent}"
        ends = min((t.lease_expires or now for t in held), default=None)
        return answer(Reason("capacity", text, ends, tasks=tuple(t.id for t in held)))
    longest = policy.longest_first(settings)
    holds = Holds(tx, agent, settings, now, facts.skillsets)
    # own queue, from the head
    own = holds.unfull(lambda full: tx.queue_head(agent.id, 1, longest, now, full), agent)
    picked: list[tuple[Candidate, ClaimSource]] = [(c, ClaimSource.QUEUE) for c in own]
    eligible = policy.eligible_skillsets(facts.skillsets, agent.skills)
    if not picked and eligible:  # the pool, best score

        def fetch(held: policy.Locality) -> list[Candidate]:
            return pool_candidates(tx, agent.domains, eligible, 1, longest, held, now)

        best = policy.rank_pool(holds.pick(fetch), agent.domains, settings.aging, 1, longest)
        picked = [(c, ClaimSource.POOL) for c in best]
    reasons: list[Reason] = []
    if not picked:  # steal
        stolen, reasons = _steal_preview(tx, agent, facts, holds, rng)
        picked = [(c, ClaimSource.STEAL) for c in stolen]
    if not picked:  # joins: its own ready joins, then another's
        own = holds.unfull(lambda full: tx.queue_head(agent.id, 1, longest, now, full, True), agent)
        picked = [(c, ClaimSource.QUEUE) for c in own]
        if not picked:
            stolen, _ = _steal_preview(tx, agent, facts, holds, rng, joins=True)
            picked = [(c, ClaimSource.STEAL) for c in stolen]
    picked = holds.fit(picked)  # a concurrency group's room, as the claim
    if picked:
        chosen, step = picked[0]
        return AgentWhy(agent.id, agent.status, now, (), chosen.id, step)
    reasons = _full_groups(tx, agent, facts, eligible) + reasons
    return answer(*_idle_reasons(tx, agent, facts, holds, eligible, reasons))


def _steal_preview(
    tx: StoreTx,
    agent: Agent,
    facts: Facts,
    holds: Holds,
    rng: random.Random,
    *,
    joins: bool = False,
) -> tuple[list[Candidate], list[Reason]]:
    """The claim's steal step (``_claiming._Thief``), read only, with why it gave
    nothing; with ``joins``, of the victims' ready joins (the joins step)."""
    from shoal.policy_why import Reason

    settings = facts.settings
    rules = policy.steal_filter(agent, settings, facts.skillsets)
    if joins:
        rules = replace(rules, joins=True)
    victims = policy.claim_victims(facts.depths, agent.id, settings, rng)
    if not rules.skillsets or not victims:
        return [], []
    holds.before_steal()  # as the claim: the groups read before the steal
    if policy.steal_budget(facts.window, agent.id, settings) <= 0:
        text = (
            f"steal caps reached: max_steals_per_agent {settings.max_steals_per_agent}, "
            f"max_steals_per_cycle {settings.max_steals_per_cycle} per rebalance_interval"
        )
        return [], [Reason("steal_caps", text, agents=tuple(victims))]
    taken = steal_tails(tx, rules, ((v, 1) for v in victims), 1, facts.now, holds)
    if taken:
        return [c for c, _ in taken], []
    text = "the queues of agents at work hold nothing it may steal (the steal rules)"
    return [], [Reason("nothing_to_steal", text, agents=tuple(victims))]


def _full_groups(tx: StoreTx, agent: Agent, facts: Facts, eligible: Sequence[int]) -> list[Reason]:
    """Which full concurrency groups hold back work the claim would otherwise take: the
    steps' look-ups again, a few candidates each, with no group passed over and no
    locality rule, and the groups of what they find that ``policy.group_room`` says are
    full. Nothing is read unless some group has a limit."""
    from shoal.policy_why import Reason

    limits = tx.group_limits()
    if not limits:
        return []
    held = tx.held_by_group(facts.now)
    full = {name for name, left in policy.group_room(limits, held).items() if left <= 0}
    if not full:
        return []
    now, settings = facts.now, facts.settings
    longest = policy.longest_first(settings)
    found = tx.queue_head(agent.id, GROUP_LOOK, longest, now)
    if eligible:
        nothing = policy.NOTHING_HELD
        found += pool_candidates(tx, agent.domains, eligible, GROUP_LOOK, longest, nothing, now)
    rules = policy.steal_filter(agent, settings, facts.skillsets)
    victims = policy.claim_victims(facts.depths, agent.id, settings, random.Random(0))
    if rules.skillsets and victims:
        tails = steal_tails(tx, rules, ((v, GROUP_LOOK) for v in victims), GROUP_LOOK, now)
        found += [c for c, _ in tails]
    kept: dict[str, list[int]] = {}
    for candidate in found:
        group = candidate.group
        if group is not None and group in full and candidate.id not in kept.get(group, []):
            kept.setdefault(group, []).append(candidate.id)
    reasons = []
    for name, ids in sorted(kept.items())[:NEAREST_MISSES]:
        text = (
            f"concurrency group {name} is full ({held.get(name, 0)} held of max "
            f"{limits[name]}): its claim passes over {', '.join(f'#{i}' for i in ids)} "
            "until one of the group's held tasks finishes (`shoal why TASK` names them)"
        )
        reasons.append(Reason("group_full", text, tasks=tuple(ids)))
    return reasons


#: How many candidates of each step ``why_agent`` looks at to name the full groups.
GROUP_LOOK = 5


def _idle_reasons(
    tx: StoreTx,
    agent: Agent,
    facts: Facts,
    holds: Holds,
    eligible: Iterable[int],
    steal: list[Reason],
) -> list[Reason]:
    """Why a claim of ``agent``'s found nothing: the tasks its skills do not fit (nearest
    misses first), the work kept for other domains, the work not ready yet."""
    from shoal.policy_why import Reason

    reasons: list[Reason] = []
    # The nearest misses: the best ready pool tasks of the skill sets it cannot do -- a
    # bounded, indexed look-up (the pool step's own), not a count of every pending task.
    lacking_sets = sorted(set(facts.skillsets) - set(eligible))
    misses: dict[tuple[str, ...], int] = {}
    seen = tx.pool_best(lacking_sets, None, MISSES_LOOKED_AT, policy.NOTHING_HELD, facts.now)
    for candidate in seen if lacking_sets else []:
        need = facts.skillsets.get(candidate.skillset, ())
        lacking = tuple(sorted(set(need) - set(agent.skills)))
        misses[lacking] = misses.get(lacking, 0) + 1
    nearest = sorted(misses.items(), key=lambda mc: (len(mc[0]), -mc[1], mc[0]))
    some = "at least " if len(seen) >= MISSES_LOOKED_AT else ""
    for lacking, count in nearest[:NEAREST_MISSES]:
        text = f"{some}{count} task(s) in the pool need {' and '.join(lacking)}, which it lacks"
        reasons.append(Reason("no_skill_fit", text, skills=lacking))
    if holds.retry_at is not None:
        text = (
            "work of other domains is kept for those domains' agents (domain_wait, locality_wait)"
        )
        reasons.append(Reason("kept_for_domains", text, holds.retry_at))
    due = tx.next_ready(agent.id, list(eligible), facts.now)
    if due is not None:
        text = "the first task it could take waits out a not_before or a retry backoff"
        reasons.append(Reason("not_ready", text, due))
    reasons += steal
    if not reasons:
        reasons.append(Reason("no_work", "no pending task it can take: nothing to do"))
    return reasons
