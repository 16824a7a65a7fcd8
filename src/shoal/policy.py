"""The fleet's decisions, as pure functions: no I/O, no clock, no store.

``Fleet`` gathers facts inside a transaction and asks this module what to do with them:
which pool task scores best for an agent, whether a task may be stolen and by whom, which
victim to rob first, how many steals are left in the window, when a lease expires, what a
failed task becomes, whether an agent has gone silent, how long a polling agent should
wait. Every store and the simulator share this one brain, and the tests check its promises
with Hypothesis. (What the workload calls for -- more agents or fewer -- is ``sizing``'s.)

Scoring and its static key
--------------------------
A pool task's score for an agent is::

    score = 10 * (10 - priority) + 15 * [task.domain in agent.domains] + aging * age_minutes

The age term grows with time, so a stored score would go stale. But with ``aging > 0`` the
order by score equals the order by a key that never changes::

    key = 10 * (10 - priority) * W - created_at        where W = 60 / aging seconds per point

since ``score * W = key + now`` and ``now`` is the same for every task at one moment. The
domain bonus is agent-dependent and adds ``15 * W`` to the key of tasks in the agent's
domains. So the best pool task is the better of two indexed look-ups: the top key overall,
and the top key among the agent's domains plus the bonus. With ``aging == 0`` W is made so
large that age only breaks ties (oldest first).

Orders
------
Where a task stands in an agent's queue (its place: own work newest first, work sent to it
in the order it came, joins after everything else) and the sort keys the owner, a thief and
the pool read it by, with ``order = longest_first`` too, are decided in ``_order``; this
module exports them with the rest.

Locality
--------
Two settings keep domain work with its domain's agents without leaving anyone idle for
long. ``domain_wait``: a task of another domain, ready for less than that, is passed over
while an idle agent of its domain could take it -- that agent is about to. ``locality_wait``
(delay scheduling, off by default): a task of another domain is passed over until it has
been ready that long, whoever is idle. Neither ever holds back a task without a domain or
one of the claimer's own domains. ``Locality`` carries the rule as data a store can query.

Agents and tasks over time -- present, silent, idle long enough, expired, zombie, stalled --
and the waits -- polling, a lost push's pause, a winner's turn -- are decided in
``_timing``; this module exports them with the rest, and that is where to find them.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from shoal._order import (
    JOIN_TOP,
    is_join_place,
    is_own_place,
    join_place,
    length_rank,
    longest_first,
    place_band,
    place_when_ready,
    pool_order,
    queue_order,
    queue_place,
    tail_order,
)
from shoal._timing import (
    BUSY_LATELY,
    HEARD_FROM,
    agent_as_of,
    doubling_delay,
    holds_seat,
    idle_expired,
    idle_long_enough,
    idle_since_after,
    is_present,
    is_silent,
    is_stalled,
    is_zombie,
    lease_due,
    lost_push_pause,
    poll_delay,
    turn_wait,
)
from shoal._values import value
from shoal.model import Agent, AgentStatus, QueueDepth, Task, TaskState
from shoal.settings import Settings

__all__ = [
    "BUSY_LATELY",
    "DOMAIN_BONUS",
    "HEARD_FROM",
    "JOIN_TOP",
    "NOTHING_HELD",
    "NO_AGING_SECONDS_PER_POINT",
    "ROUTING_FIELDS",
    "SEEN_RESOLUTION",
    "Locality",
    "Ranked",
    "StealFilter",
    "agent_as_of",
    "breaker_trips",
    "can_do",
    "claim_room",
    "claim_victims",
    "domain_bonus_key",
    "doubling_delay",
    "eligible_skillsets",
    "fit_groups",
    "group_room",
    "hold_window",
    "holds_seat",
    "idle_expired",
    "idle_long_enough",
    "idle_since_after",
    "is_join_place",
    "is_own_place",
    "is_present",
    "is_silent",
    "is_stalled",
    "is_zombie",
    "join_place",
    "lease_due",
    "lease_expiry",
    "length_rank",
    "locality",
    "longest_first",
    "lost_push_pause",
    "might_hold",
    "order_victims",
    "pause_over",
    "place_band",
    "place_when_ready",
    "poll_delay",
    "pool_key",
    "pool_order",
    "queue_order",
    "queue_place",
    "rank_pool",
    "ready_time",
    "reserved_for",
    "retry_backoff",
    "return_queue",
    "score",
    "seconds_per_point",
    "state_after_failure",
    "steal_budget",
    "steal_filter",
    "streak_ends",
    "tail_order",
    "task_max_attempts",
    "turn_wait",
]

#: Score points for a task in one of the agent's domains.
DOMAIN_BONUS = 15.0
#: Seconds: how stale an agent's ``last_seen`` may get before a claim rewrites it
#: (liveness is judged over minutes, so a busy agent need not pay a write per claim).
SEEN_RESOLUTION = 1.0
#: With aging off, a point is worth this many seconds: age then only breaks ties.
NO_AGING_SECONDS_PER_POINT = 1e9


# --- the pool: score and its static key ------------------------------------------------


def score(priority: int, in_domain: bool, age_seconds: float, aging: float) -> float:
    """The pool score of a task for an agent (higher is better)."""
    return 10.0 * (10 - priority) + (DOMAIN_BONUS if in_domain else 0.0) + aging * age_seconds / 60


def seconds_per_point(aging: float) -> float:
    """How many seconds of waiting are worth one score point."""
    return 60.0 / aging if aging > 0 else NO_AGING_SECONDS_PER_POINT


def pool_key(priority: int, created_at: float, aging: float) -> float:
    """The time-independent key whose order is the score order (see the module docstring)."""
    return 10.0 * (10 - priority) * seconds_per_point(aging) - created_at


def domain_bonus_key(aging: float) -> float:
    """The domain bonus in key units."""
    return DOMAIN_BONUS * seconds_per_point(aging)


class Ranked(Protocol):
    """What ranking needs of a task (a ``Task`` or a ``Candidate``)."""

    @property
    def id(self) -> int: ...
    @property
    def priority(self) -> int: ...
    @property
    def created_at(self) -> float: ...
    @property
    def domain(self) -> str | None: ...
    @property
    def expected_duration(self) -> float | None: ...


R = TypeVar("R", bound=Ranked)


def rank_pool(
    candidates: Iterable[R], domains: Sequence[str], aging: float, n: int, longest: bool = False
) -> list[R]:
    """The ``n`` best of ``candidates`` for an agent with ``domains``: by score, then by id
    (with ``longest``: by priority, then longest expected, then score)."""
    bonus = domain_bonus_key(aging)
    seen: dict[int, tuple[tuple[Any, ...], R]] = {}
    for task in candidates:
        if task.id in seen:
            continue
        key = pool_key(task.priority, task.created_at, aging)
        if task.domain is not None and task.domain in domains:
            key += bonus
        rank = pool_order(task.priority, task.expected_duration, key, task.id, longest)
        seen[task.id] = (rank, task)
    ranked = sorted(seen.values(), key=lambda rt: rt[0])
    return [task for _, task in ranked[:n]]


def can_do(agent_skills: Iterable[str], task_skills: Iterable[str]) -> bool:
    """An agent can take a task when it has every skill the task requires."""
    return set(task_skills) <= set(agent_skills)


def eligible_skillsets(
    skillsets: Mapping[int, tuple[str, ...]], agent_skills: Iterable[str]
) -> list[int]:
    """The ids of the skill sets an agent with ``agent_skills`` can do, in id order."""
    have = set(agent_skills)
    return sorted(sid for sid, need in skillsets.items() if have.issuperset(need))


# --- stealing --------------------------------------------------------------------------


@value
class StealFilter:
    """Which pending queued tasks one thief may steal, as data a store can turn into a query.

    Eligible: priority number >= ``min_priority``, never stolen, not pinned, the thief has
    the task's skills, and the thief has the task's domain -- or the task has priority >=
    ``cross_domain_priority`` and requires no skills (simple work anyone can do). A task
    without a domain belongs to every domain.

    ``skillsets`` repeats ``thief_skills`` as the ids of the skill sets the thief can do, for
    stores that index tasks by skill set; ``eligible_skillsets`` keeps the two in step.
    """

    min_priority: int
    cross_domain_priority: int
    thief_skills: frozenset[str]
    domains: tuple[str, ...]
    skillsets: tuple[int, ...]
    free_skillset: int | None  # id of the empty skill set, if it exists
    longest: bool = False  # the order setting: longest expected first among equals
    #: Read the join band (ready joins: the claim's last step) instead of the rest of the
    #: queue (``_order``, *An agent's queue*).
    joins: bool = False

    def matches(self, task: Task) -> bool:
        return self.refusal(task) is None

    def refusal(self, task: Task) -> str | None:
        """The first rule that keeps the thief from ``task`` (None: it may steal it) --
        the one reading of the rules for the steal and for ``shoal why``."""
        if task.state is not TaskState.PENDING or task.agent is None:
            return "not_queued"
        if task.pinned:
            return "pinned"
        if task.stolen:
            return "stolen_before"
        if task.priority < self.min_priority:
            return "steal_min_priority"
        if not self.thief_skills.issuperset(task.skills):
            return "skills"
        if task.domain is None or task.domain in self.domains:
            return None
        if task.priority >= self.cross_domain_priority and not task.skills:
            return None
        return "domain"


def steal_filter(
    thief: Agent, settings: Settings, skillsets: Mapping[int, tuple[str, ...]]
) -> StealFilter:
    """The steal rules of ``settings`` applied to ``thief``."""
    free = next((sid for sid, need in skillsets.items() if not need), None)
    return StealFilter(
        min_priority=settings.steal_min_priority,
        cross_domain_priority=settings.cross_domain_priority,
        thief_skills=frozenset(thief.skills),
        domains=thief.domains,
        skillsets=tuple(eligible_skillsets(skillsets, thief.skills)),
        free_skillset=free,
        longest=longest_first(settings),
    )


def claim_victims(
    depths: Iterable[QueueDepth], thief: str, settings: Settings, rng: random.Random
) -> list[str]:
    """The agents a claim may steal from, busiest first: at work (holding a lease) with more
    than ``steal_threshold`` tasks queued.

    An agent at work will not reach its queue's tail for a while, so even its only queued
    task is better started now by an agent that ran dry. An agent that is not at work (idle,
    or between tasks) is about to claim its own queue: taking from it would only race it.
    """
    working = [(q.agent, q.depth) for q in depths if q.status is AgentStatus.WORKING]
    return order_victims(working, thief, settings.steal_threshold, rng)


def order_victims(
    depths: Iterable[tuple[str, int]], thief: str, busy_threshold: int, rng: random.Random
) -> list[str]:
    """Agents worth robbing, busiest first: queue depth above ``busy_threshold``.

    Agents with equal depth come in random order, so no agent is always robbed first and
    nothing may depend on that order (the tests shuffle it on purpose).
    """
    busy = [(agent, depth) for agent, depth in depths if depth > busy_threshold and agent != thief]
    rng.shuffle(busy)
    busy.sort(key=lambda ad: -ad[1])  # stable: ties keep their shuffled order
    return [agent for agent, _ in busy]


# --- locality: domain first, delay scheduling ------------------------------------------


@value
class Locality:
    """Which tasks of other domains one claimer passes over for now (module docstring).

    A task is held when it has a domain that is not one of ``domains`` (the claimer's) and
    it became ready after ``local_since`` (``locality_wait`` ago), or after ``domain_since``
    (``domain_wait`` ago) while an idle agent of its domain can do it: ``reserved`` lists
    the (domain, skill set id) pairs idle agents can take. ``math.inf`` turns a rule off.
    """

    domains: tuple[str, ...]
    local_since: float = math.inf
    domain_since: float = math.inf
    reserved: frozenset[tuple[str, int]] = frozenset()
    locality_wait: float = 0.0
    domain_wait: float = 0.0
    #: Concurrency groups already holding their limit: their tasks are passed over too.
    full_groups: frozenset[str] = frozenset()

    def holds(self, domain: str | None, skillset: int, ready_at: float) -> bool:
        return self.free_at(domain, skillset, ready_at) is not None

    def free_at(self, domain: str | None, skillset: int, ready_at: float) -> float | None:
        """When a held task stops being held (None: it is not held)."""
        return max(self.holding(domain, skillset, ready_at).values(), default=None)

    def holding(self, domain: str | None, skillset: int, ready_at: float) -> dict[str, float]:
        """Which rule holds a task back (``locality_wait``, ``domain_wait``) and until when;
        empty when neither does."""
        ends: dict[str, float] = {}
        if domain is None or domain in self.domains:
            return ends
        if ready_at > self.local_since:
            ends["locality_wait"] = ready_at + self.locality_wait
        if ready_at > self.domain_since and (domain, skillset) in self.reserved:
            ends["domain_wait"] = ready_at + self.domain_wait
        return ends


def ready_time(ready_at: float | None, created_at: float) -> float:
    """When a pending task became ready (a task from before ``ready_at`` was kept: posted)."""
    return created_at if ready_at is None else ready_at


#: Holds nothing: for claims before anything is known to be held, and for previews.
NOTHING_HELD = Locality(())


def locality(
    agent: Agent,
    settings: Settings,
    now: float,
    reserved: frozenset[tuple[str, int]] = frozenset(),
) -> Locality:
    """The locality rules of ``settings`` for a claim by ``agent`` at ``now``."""
    local, domain = settings.locality_wait, settings.domain_wait
    return Locality(
        domains=agent.domains,
        local_since=now - local if local > 0 else math.inf,
        domain_since=now - domain if domain > 0 and reserved else math.inf,
        reserved=reserved,
        locality_wait=local,
        domain_wait=domain,
    )


def might_hold(
    domain: str | None, ready_at: float, agent: Agent, settings: Settings, now: float
) -> bool:
    """Could the locality rules hold this task back from ``agent``? (Cheap, before asking
    which agents are idle: only a task of another domain, ready for less than the longer
    wait, can be held.)"""
    if domain is None or domain in agent.domains:
        return False
    wait = hold_window(settings)
    return wait > 0 and ready_at > now - wait


def hold_window(settings: Settings) -> float:
    """How long after it became ready another domain's task may be held back from an agent
    (the longer of the two locality waits; 0 when both are off)."""
    return max(settings.locality_wait, settings.domain_wait)


def reserved_for(
    idle: Iterable[Agent], claimer: str, skillsets: Mapping[int, tuple[str, ...]]
) -> frozenset[tuple[str, int]]:
    """The (domain, skill set id) pairs some idle agent other than ``claimer`` could take:
    the work that domain first leaves to them."""
    pairs: set[tuple[str, int]] = set()
    for agent in idle:
        if agent.id == claimer or agent.status is not AgentStatus.IDLE or not agent.domains:
            continue
        for sid in eligible_skillsets(skillsets, agent.skills):
            pairs.update((domain, sid) for domain in agent.domains)
    return frozenset(pairs)


def steal_budget(window: Sequence[str], thief: str, settings: Settings) -> int:
    """How many more steals ``thief`` may make, given the thieves of the current window.

    ``window`` lists the thief of every steal (at claim time or by rebalance) in the last
    ``rebalance_interval``. Both caps of the anti-thrashing rules apply: per thief, and
    fleet-wide.
    """
    own = sum(1 for agent in window if agent == thief)
    return max(
        0, min(settings.max_steals_per_agent - own, settings.max_steals_per_cycle - len(window))
    )


# --- claims, leases and failures -------------------------------------------------------


def claim_room(held: int, max_concurrent: int, wanted: int) -> int:
    """How many tasks an agent holding ``held`` may claim now, of the ``wanted``."""
    return max(0, min(wanted, max_concurrent - held))


def lease_expiry(now: float, task_lease_ttl: float | None, settings: Settings) -> float:
    """When a lease taken (or renewed) at ``now`` runs out."""
    return now + (task_lease_ttl if task_lease_ttl is not None else settings.lease_ttl)


def task_max_attempts(task: Task, settings: Settings) -> int:
    """The attempts a task gets: its own limit, or the fleet's."""
    return task.max_attempts if task.max_attempts is not None else settings.max_attempts


def state_after_failure(task: Task, settings: Settings, retry: bool) -> TaskState:
    """A claimed task that failed (or whose lease expired): back to pending, or dead.

    ``task.attempts`` counts the claim that just failed.
    """
    if retry and task.attempts < task_max_attempts(task, settings):
        return TaskState.PENDING
    return TaskState.DEAD


def retry_backoff(
    attempt: int, task_delay: float | None, settings: Settings, rng: random.Random
) -> float:
    """How long a task that failed its ``attempt``-th claim waits before it is claimable
    again: exponential backoff with full jitter.

    The ceiling doubles with each attempt from the task's own ``retry_delay`` (or the
    fleet's) up to ``retry_delay_max``, and the wait is drawn uniformly below it. Doubling
    keeps a task that fails for a reason outside it (a service down) from being thrown at
    agents in a tight loop; the jitter spreads tasks that failed together so they do not
    all come back in the same instant.
    """
    base = settings.retry_delay if task_delay is None else task_delay
    ceiling = min(settings.retry_delay_max, base * 2.0 ** min(max(attempt - 1, 0), 64))
    return rng.uniform(0.0, ceiling) if ceiling > 0 else 0.0


def breaker_trips(failures: int, settings: Settings) -> bool:
    """The circuit breaker: an agent that failed ``failure_streak`` tasks in a row is more
    likely broken than its tasks are (a missing tool, a bad credential), so it is paused
    before it burns through every attempt of the backlog. 0 turns the breaker off."""
    return settings.failure_streak > 0 and failures >= settings.failure_streak


def streak_ends(agent: Agent) -> bool:
    """A completion ends an agent's failure streak -- unless the breaker has paused it:
    then the count stays until it is resumed (and says why it was paused meanwhile)."""
    return agent.failures > 0 and agent.paused_until is None


def pause_over(agent: Agent, now: float) -> bool:
    """An agent's pause whose time has run out (terminated agents keep theirs: a pause
    outlives a termination, so registering the id again does not escape it)."""
    return (
        agent.status is not AgentStatus.TERMINATED
        and agent.paused_until is not None
        and now >= agent.paused_until
    )


def return_queue(task: Task) -> str | None:
    """Where a task goes when its holder lets go: a pinned task to its agent, others to the pool."""
    return task.agent if task.pinned else None


# --- concurrency groups ----------------------------------------------------------------

_P = TypeVar("_P")


def group_room(limits: Mapping[str, int], held: Mapping[str, int]) -> dict[str, int]:
    """How many more tasks of each group with a limit may be held now (never below 0). A
    group without a limit is not in it: its tasks are never held back."""
    return {name: max(most - held.get(name, 0), 0) for name, most in limits.items()}


def fit_groups(
    picked: Sequence[_P], group_of: Callable[[_P], str | None], room: Mapping[str, int]
) -> list[_P]:
    """The picks a claim may lease, best first: each group's tasks only while it has room
    (``room``, from ``group_room``); tasks of no group, or of a group without a limit, all.
    A claim of several tasks may so get fewer than it could; never more than a group allows."""
    left = dict(room)
    kept = []
    for item in picked:
        group = group_of(item)
        if group is not None and group in left:
            if left[group] <= 0:
                continue
            left[group] -= 1
        kept.append(item)
    return kept


#: The fields of a task that decide which agents may hold it. A held (claimed) task keeps
#: them: its holder was chosen by them, and changing them under it would leave a task held
#: by an agent that could not have claimed it (``Fleet.edit`` refuses). What a task says
#: (title, body, labels) and how it ranks (priority, expected duration) may change while it
#: runs: no holder's right to it depends on them.
ROUTING_FIELDS = ("skills", "domain")
