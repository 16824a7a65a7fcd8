"""The claim cascade: how an agent that asks for work gets the best task it can do.

The problem
-----------
Several agents share a body of work. Each can do some of it (its skills) and is best at
some of it (its domains). Work arrives in bursts, often routed to one agent, and takes
wildly different times. We want three things at once: no agent idle while another has a
backlog it could help with; no task handed to two agents; and no task lost when an agent
dies holding it. And we want it with no central dispatcher in the loop: an agent asks for
work when it has room, and the answer is decided there and then, atomically, in the store.

Designs we did not take
-----------------------
* Push routing on a timer (a router hands out tasks every N minutes): agents sit idle
  between rounds while others are buried, and a task pushed to a busy agent stays there.
* One shared queue, first come first served: fair, but throws away affinity -- the agent
  that spawned a task, or the one that knows its domain, gets no preference.
* Per-agent queues with lock-free deques, as in a language runtime: our agents are
  processes on several hosts and our "deque" must survive them, so the store is the deque
  and one short transaction replaces the compare-and-swap.

The steps
---------
``claim_in`` runs inside one write transaction and takes the first step that yields work
(the steps have these names everywhere: here, in the store's queries and in the docs --
docs/ARCHITECTURE.md, "The claim", names the code and queries behind each). It reads as
the list below: each step is a function of its name under it (``_expire``,
``_capacity_paused`` and ``_capacity_busy``, the own queue's one look-up, ``_pool``,
``_Thief``, ``_joins``, ``_idle``), each asks ``policy`` for its decisions and the store for its
rows, and ``_lease`` hands out what they found:

* **expire** -- end the leases past their expiry. A lease past its expiry is lost even if
  no monitor has run; its task is pending again (or dead) before anyone looks for work
  (invariant I6: correctness never depends on the monitor).
* **capacity** -- an agent holding ``max_concurrent`` leases gets nothing: reason ``busy``.
  (An agent the circuit breaker paused gets nothing either: reason ``paused``.)
* **own queue**, from the head -- tasks routed or assigned to the agent, or spawned by it,
  highest priority first; among equals, its own work first and newest first, then the work
  others sent it in the order it came. Its own work is what it spawned from the task it
  holds -- LIFO: an agent finishes what it just spawned, depth-first -- and what it
  started and lost (a pinned task), back in front. Work sent to it is FIFO, because
  whoever posts "step 1" and then "step 2" to one agent means that order. Each queued task
  carries one number that says both (``policy.queue_place``), chosen where the task enters
  the queue. Its ready joins (below) are not read here.
* **pool**, best score -- tasks that belong to no one, ranked by priority, domain affinity
  and age (see ``policy``), over the tasks whose skills the agent has. Two indexed look-ups
  per skill set, whatever the size of the pool.
* **steal**, from the tail -- only when the own queue and the pool gave nothing: from the
  busiest victim at work (more than ``steal_threshold`` tasks queued -- 0 by default, so an
  agent that runs dry takes even a busy peer's only queued task; ties broken at random)
  take one task, the one the victim would reach last: the lowest priority, and within it
  the newest of the work sent to the victim -- or, when only its own work is left, its
  oldest child, the biggest piece of the tree it is working down. The anti-thrashing
  rules bound it: only priority numbers >= ``steal_min_priority``, never a task stolen
  before, never a pinned one, skills and domain must fit (or the task is simple: priority
  >= ``cross_domain_priority``, no skills), and at most ``max_steals_per_agent`` per thief
  and ``max_steals_per_cycle`` fleet-wide per ``rebalance_interval``.
* **joins** -- only when the steps above gave nothing: the agent's own ready joins (a task
  it deferred on its children, whose children are done; ``policy.join_place``), the first
  freed first; else, as a thief under the steal step's rules and caps, the ready join at
  the tail of the busiest queue at work. Last, because a join only closes a subtree: the
  work still to split is what the rest of a tree waits on, so a fleet that starts it first
  ends on joins side by side instead of on a chain of them (docs/scheduling.md, *The
  fork-join tree*: 1.052 of the bound against 1.074 with joins first). The steal step
  never takes a ready join, so a thief takes other work before one.
* **idle** -- nothing: the agent is marked ``idle`` (reason ``empty``). A caller may wait
  for a change in the fleet and ask again (``Fleet.claim(..., wait=seconds)``).

The pool and steal steps pass over work the locality rules keep for its own domain for a
while (``domain_wait``: an idle agent of that domain is about to take it;
``locality_wait``: delay scheduling), and say in the claim when the first of it is free to
take (``retry_at``). With ``order = longest_first`` every step ranks equal priorities
longest expected first.

The orderings that must hold: a task leaves ``pending`` only inside one write transaction
that also writes its lease and its event (so no task is handed out twice and every change
is logged); the owner takes from the head and thieves from the tail (so an owner and a
thief contend only when a queue is nearly empty); and stealing happens only when an agent
has nothing of its own and the pool is dry (so when the load is balanced, stealing costs
nothing).

On a store that can (PostgreSQL), the common case -- finish the leases given, then take
from the own queue and the pool -- runs as one server-side statement first
(``claim_direct``, ``Store.claim_directly``): the same steps, the same locks, the same
events, in one round trip. It refuses anything else (an expiry due, a pause, capacity, a
steal, a ready join, an idle claim, dependents to release) before anything is kept, and
the cascade above runs instead.

The hub's ``rebalance`` moves queued tasks to agents idle for a while with the same steal
routine (``steal_tails``), under the same caps; a moved task is work sent to its new agent,
behind what that agent has. It is never needed for correctness.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from shoal import policy
from shoal._values import replace
from shoal.fleet._liveness import SettleFirst, is_away
from shoal.fleet._transitions import end_streak, expire_due, live_agent, resume_agent, touch
from shoal.limits import EXPIRE_PER_CLAIM
from shoal.model import Agent, Candidate, Claim, Grant, Lease, Move, Task
from shoal.settings import Settings
from shoal.stores.base import ClaimContext, Finishing, LeaseGrant, Store, StoreTx
from shoal.vocabulary import AgentStatus, ClaimReason, ClaimSource, EventKind

__all__ = [
    "Holds",
    "claim_direct",
    "claim_in",
    "pool_candidates",
    "preview_in",
    "rebalance_in",
    "steal_tails",
]


def claim_in(
    tx: StoreTx,
    agent_id: str,
    n: int,
    now: float,
    *,
    strict: bool,
    rng: random.Random,
    token: Callable[[], str],
    completed: bool = False,
    settle: bool = True,
) -> Claim | None:
    """The cascade (module docstring), inside the caller's transaction.

    For an unknown or terminated agent: ``UnknownAgent`` if ``strict``, else None (a
    completion that also asked for more work must not fail because of it). ``completed``:
    the agent has just completed a task (which ends a failure streak). ``token`` makes each
    lease's fencing token.

    Liveness first (``_liveness``): if another agent is silent past heartbeat_timeout, or
    this one is coming back from offline, it raises ``SettleFirst`` before writing anything
    -- with ``settle`` -- for ``Fleet`` to settle that fleet-wide and run it again. Run again
    (``settle`` false) for an agent still away, which found no seat: None if not ``strict``
    (the completion stands; the agent stays offline and claims nothing).
    """
    context = _liveness_first(tx, agent_id, now, strict=strict, settle=settle)
    if context is None:
        return None
    settings = context.settings
    context = _expire(tx, agent_id, now, context, rng)
    agent = end_streak(tx, context.agent) if completed else context.agent
    agent, paused = _capacity_paused(tx, agent, now)
    if paused is not None:
        return paused
    room = policy.claim_room(context.held, agent.max_concurrent, n)
    if room == 0:
        return _capacity_busy(tx, agent, now)

    longest = policy.longest_first(settings)
    holds = Holds(tx, agent, settings, now, context.skillsets)
    # own queue, from the head
    own = holds.unfull(lambda full: tx.queue_head(agent.id, room, longest, now, full), agent)
    picked = [(t, ClaimSource.QUEUE) for t in own]
    if len(picked) < room:  # the pool, best score
        picked += _pool(tx, agent, room - len(picked), settings, holds, now)
    if not picked:  # steal, only when the own queue and the pool gave nothing
        thief = _Thief(tx, agent, now, settings, holds, rng)
        picked = [(t, ClaimSource.STEAL) for t in thief.steal_one(joins=False)]
        if not picked:  # joins: the agent's own ready joins, then another's -- after all else
            picked = _joins(tx, agent, room, now, settings, holds, thief)
    picked = holds.fit(picked)  # a concurrency group's room, across the steps
    if not picked:  # idle: nothing, until the first waiting task is due
        return _idle(tx, agent, holds, now)
    return _lease(tx, agent, picked, now, settings, token)


# The steps, in the order ``claim_in`` takes them -----------------------------------------


def _liveness_first(
    tx: StoreTx, agent_id: str, now: float, *, strict: bool, settle: bool
) -> ClaimContext | None:
    """What the claim starts from: the agent's context, if it is known and live and no
    liveness is left to settle first (``claim_in``'s docstring says when it raises
    ``SettleFirst`` and when it answers None)."""
    context = tx.claim_context(agent_id, now)
    if context is None or context.agent.status is AgentStatus.TERMINATED:
        if strict:
            live_agent(tx, agent_id)  # raises the right error
        return None
    settings = context.settings
    if context.silent_peers or is_away(context.agent, now, settings):
        if settle:
            raise SettleFirst(agent_id)
        if not strict and is_away(context.agent, now, settings):
            return None
    return context


def _expire(
    tx: StoreTx, agent_id: str, now: float, context: ClaimContext, rng: random.Random
) -> ClaimContext:
    """The expire step: end the leases past their expiry -- the monitor may not be
    running -- and read the agent's context again if any was."""
    if not context.leases_due:
        return context
    expire_due(tx, now, context.settings, EXPIRE_PER_CLAIM, rng)
    expired = tx.claim_context(agent_id, now)
    assert expired is not None
    return expired


def _capacity_paused(tx: StoreTx, agent: Agent, now: float) -> tuple[Agent, Claim | None]:
    """The capacity step, its pause: an agent held by the circuit breaker or a person gets
    nothing (reason ``paused``) until the pause is over, when it is resumed."""
    if agent.paused_until is None:
        return agent, None
    if agent.paused(now):
        touch(tx, agent, now, AgentStatus.PAUSED)  # alive, and asking
        return agent, Claim(reason=ClaimReason.PAUSED, retry_at=agent.paused_until)
    return resume_agent(tx, agent, now, "cooldown"), None


def _capacity_busy(tx: StoreTx, agent: Agent, now: float) -> Claim:
    """The capacity step, its room: an agent holding ``max_concurrent`` leases gets nothing
    (reason ``busy``)."""
    touch(tx, agent, now, AgentStatus.WORKING)
    return Claim(reason=ClaimReason.BUSY)


def _pool(
    tx: StoreTx, agent: Agent, want: int, settings: Settings, holds: Holds, now: float
) -> list[tuple[Candidate, ClaimSource]]:
    """The pool step: up to ``want`` tasks of the pool, best score first, among those whose
    skills the agent has (``pool_candidates``, ranked by ``policy.rank_pool``)."""
    eligible = policy.eligible_skillsets(holds.skillsets, agent.skills)
    if not eligible:
        return []
    longest = policy.longest_first(settings)
    candidates = holds.pick(
        lambda held: pool_candidates(tx, agent.domains, eligible, want, longest, held, now)
    )
    if len(candidates) > 1:  # one candidate is its own ranking (most batch-1 claims)
        candidates = policy.rank_pool(candidates, agent.domains, settings.aging, want, longest)
    return [(t, ClaimSource.POOL) for t in candidates]


def _joins(
    tx: StoreTx,
    agent: Agent,
    room: int,
    now: float,
    settings: Settings,
    holds: Holds,
    thief: _Thief,
) -> list[tuple[Candidate, ClaimSource]]:
    """The joins step: the agent's own ready joins, the first freed first, else one ready
    join stolen from the tail of the busiest queue at work -- by the steal step's thief,
    under the same rules and caps. Last of all, because a join only closes a subtree: the
    work still to split is what the rest of a tree waits on (``policy``'s ``_order``, *An
    agent's queue*)."""
    longest = policy.longest_first(settings)
    own = holds.unfull(lambda full: tx.queue_head(agent.id, room, longest, now, full, True), agent)
    if own:
        return [(t, ClaimSource.QUEUE) for t in own]
    return [(t, ClaimSource.STEAL) for t in thief.steal_one(joins=True)]


def _idle(tx: StoreTx, agent: Agent, holds: Holds, now: float) -> Claim:
    """The idle step: nothing for the agent, marked ``idle`` (reason ``empty``), with
    ``retry_at`` when the first task it passed over is free to take."""
    touch(tx, agent, now, AgentStatus.IDLE)
    eligible = policy.eligible_skillsets(holds.skillsets, agent.skills)
    due = tx.next_ready(agent.id, eligible, now)
    retry_at = min((t for t in (holds.retry_at, due) if t is not None), default=None)
    return Claim(reason=ClaimReason.EMPTY, retry_at=retry_at)


def claim_direct(
    store: Store,
    agent_id: str,
    n: int,
    now: float,
    token: Callable[[], str],
    finishing: Sequence[Finishing] = (),
) -> tuple[tuple[Task, ...], Claim] | None:
    """Finish ``finishing`` and claim up to ``n`` tasks for ``agent_id`` in one step, where
    the store can (module docstring): the finished tasks and the claim, or None when this
    case needs the general path (nothing was changed). With ``n`` = 0 it only finishes."""
    if not store.capabilities.direct_claims or not agent_id or (n == 0 and not finishing):
        return None
    outcome = store.claim_directly(agent_id, n, now, [token() for _ in range(n)], finishing)
    if outcome is None:
        return None
    grants = []
    for task, lease_token, source, origin in outcome.granted:
        assert task.lease_expires is not None  # a granted task is claimed
        lease = Lease(task.id, agent_id, lease_token, task.lease_expires)
        grants.append(Grant(task, lease, ClaimSource(source), origin))
    return outcome.finished, Claim(tuple(grants))


def preview_in(tx: StoreTx, now: float, agent_id: str | None, limit: int) -> list[Task]:
    """Pending tasks in the order a claim would take them (``Fleet.ready``): for an agent,
    its own queue head, then the pool tasks it can do by score, then its ready joins
    (steals are not previewed);
    without one, the pool by score, then every agent's queue. Tasks of a full group are
    left out."""
    settings = tx.load_settings()
    skillsets = tx.skillsets()
    longest = policy.longest_first(settings)
    limits = tx.group_limits()  # a full group's tasks are passed over, as a claim does
    room = policy.group_room(limits, tx.held_by_group(now) if limits else {})
    held = policy.Locality((), full_groups=frozenset(g for g, n in room.items() if n <= 0))
    full = held.full_groups
    if agent_id is not None:
        agent = live_agent(tx, agent_id)
        own = tx.queue_head(agent.id, limit, longest, now, full)
        eligible = policy.eligible_skillsets(skillsets, agent.skills)
        pool = pool_candidates(tx, agent.domains, eligible, limit, longest, held, now)
        order = own + policy.rank_pool(pool, agent.domains, settings.aging, limit, longest)
        order += tx.queue_head(agent.id, limit, longest, now, full, True)  # its ready joins
    else:
        every = sorted(skillsets)
        pool = pool_candidates(tx, (), every, limit, longest, held, now)
        order = policy.rank_pool(pool, (), settings.aging, limit, longest)
        for queue in tx.queue_depths():
            if len(order) >= limit:
                break
            order += tx.queue_head(queue.agent, limit - len(order), longest, now, full)
            order += tx.queue_head(queue.agent, limit - len(order), longest, now, full, True)
    ids = [c.id for c in order[:limit]]
    found = tx.listed_tasks(ids)  # a listing: no payload or result
    return [found[i] for i in ids]


def _lease(
    tx: StoreTx,
    agent: Agent,
    picked: Sequence[tuple[Candidate, ClaimSource]],
    now: float,
    settings: Settings,
    token: Callable[[], str],
) -> Claim:
    """Give ``agent`` a lease on each picked task, with one event each."""
    leases = {}
    for chosen, _ in picked:
        expires = policy.lease_expiry(now, chosen.lease_ttl, settings)
        leases[chosen.id] = Lease(chosen.id, agent.id, token(), expires)
    grants = [
        LeaseGrant(c.id, leases[c.id].token, leases[c.id].expires, s is ClaimSource.STEAL)
        for c, s in picked
    ]
    tasks = {t.id: t for t in tx.lease_tasks(agent.id, grants, now)}
    granted = []
    for chosen, source in picked:
        task = tasks[chosen.id]
        data: dict[str, Any] = {"source": source, "attempt": task.attempts}
        if source is ClaimSource.STEAL:
            data["from"] = chosen.agent
            tx.append_event(now, EventKind.STOLEN, task.id, agent.id, data)
        else:
            tx.append_event(now, EventKind.CLAIMED, task.id, agent.id, data)
        granted.append(Grant(task, leases[task.id], source, chosen.agent))
    touch(tx, agent, now, AgentStatus.WORKING)
    return Claim(tuple(granted))


class _Thief:
    """The steal step for one claim: the victims, the window and the rules are read once --
    the agent is the thief -- and a steal of other work (``steal_one``) and, in the joins
    step, of a ready join read them both."""

    def __init__(
        self,
        tx: StoreTx,
        agent: Agent,
        now: float,
        settings: Settings,
        holds: Holds,
        rng: random.Random,
    ) -> None:
        self.tx, self.now, self.holds = tx, now, holds
        self.rules = policy.steal_filter(agent, settings, holds.skillsets)
        self.victims: list[str] = []
        if not self.rules.skillsets:
            return
        victims = policy.claim_victims(tx.queue_depths(), agent.id, settings, rng)
        if not victims:
            return
        holds.before_steal()
        window = tx.window_thieves(now - settings.rebalance_interval)
        if policy.steal_budget(window, agent.id, settings) > 0:
            self.victims = victims

    def steal_one(self, *, joins: bool) -> list[Candidate]:
        """One tail task from the busiest eligible victim, within the caps: of the victims'
        ready joins with ``joins``, else of everything but them."""
        if not self.victims:
            return []
        rules = replace(self.rules, joins=joins)
        victims = ((victim, 1) for victim in self.victims)
        taken = steal_tails(self.tx, rules, victims, 1, self.now, self.holds)
        return [candidate for candidate, _ in taken]


def steal_tails(
    tx: StoreTx,
    rules: policy.StealFilter,
    victims: Iterable[tuple[str, int]],
    budget: int,
    now: float,
    holds: Holds | None = None,
) -> list[tuple[Candidate, str]]:
    """The one steal routine, for the claim's steal step and for rebalance: up to ``budget``
    tasks that ``rules`` let a thief take, from the tails of ``victims`` in order -- at most
    the given number from each -- with the victim each came from. With ``holds``, the
    locality rules pass over tasks kept for their own domain."""
    taken: list[tuple[Candidate, str]] = []
    for victim, most in victims:
        want = min(budget - len(taken), most)
        if want <= 0:
            continue
        fetch = functools.partial(tx.steal_tail, victim, rules, limit=want, now=now)
        found = fetch(policy.NOTHING_HELD) if holds is None else holds.pick(fetch)
        taken += [(candidate, victim) for candidate in found]
        if len(taken) >= budget:
            break
    return taken


def rebalance_in(tx: StoreTx, now: float, rng: random.Random) -> list[Move]:
    """Move queued tasks from deep queues to agents idle for a while (``Fleet.rebalance``),
    inside the caller's transaction."""
    settings = tx.load_settings()
    expire_due(tx, now, settings, EXPIRE_PER_CLAIM, rng)
    idle = sorted(
        (a for a in tx.list_agents() if policy.idle_long_enough(a, now, settings)),
        key=lambda a: (a.idle_since or now, a.id),
    )
    if not idle:
        return []
    window = tx.window_thieves(now - settings.rebalance_interval)
    depth = {queue.agent: queue.depth for queue in tx.queue_depths()}
    skillsets = tx.skillsets()
    moves: list[Move] = []
    for thief in idle:
        budget = policy.steal_budget(window, thief.id, settings)
        if budget <= 0:
            continue
        rules = policy.steal_filter(thief, settings, skillsets)
        order = policy.order_victims(depth.items(), thief.id, settings.busy_threshold, rng)
        victims = [(victim, depth[victim] - settings.busy_threshold) for victim in order]
        taken = steal_tails(tx, rules, victims, budget, now)
        # Work sent to the thief, behind what it has; taken tail first, so numbered from
        # the back to keep the order they had in the victim's queue.
        numbers = tx.next_seqs(len(taken))[::-1] if taken else []
        for (task, victim), number in zip(taken, numbers, strict=True):
            tx.move_task(task.id, thief.id, policy.queue_place(False, number), True, now)
            data = {"from": victim, "by": "rebalance"}
            tx.append_event(now, EventKind.STOLEN, task.id, thief.id, data)
            window.append(thief.id)
            depth[victim] -= 1
            depth[thief.id] = depth.get(thief.id, 0) + 1
            moves.append(Move(task.id, task.title, task.priority, victim, thief.id))
    return moves


class Holds:
    """The locality rules for one claim, worked out only when some candidate could be held.

    Most claims meet no task of another domain that is young enough to hold, and pay
    nothing: a candidate query runs with nothing held, and only if a candidate might be held
    are the rules made (asking the store which agents are idle, when ``domain_wait`` is on)
    and the query run again with them. ``retry_at`` remembers when the first task passed
    over is free to take.

    Concurrency groups the same way: only once a candidate has a group does the claim read
    every group's limit and held count (``group_limits(lock=True)``: on PostgreSQL it locks
    the groups' rows until the claim commits, so two claims cannot both take a group's last
    place), and only if a candidate's group is full is the query run again without it -- the
    next best comes up. A claim of tasks without a group never reads a group.
    """

    def __init__(
        self,
        tx: StoreTx,
        agent: Agent,
        settings: Settings,
        now: float,
        skillsets: Mapping[int, tuple[str, ...]],
    ) -> None:
        self.tx, self.agent, self.settings, self.now = tx, agent, settings, now
        self.skillsets = skillsets
        self.retry_at: float | None = None
        self._rules: policy.Locality | None = None
        self._room: dict[str, int] | None = None  # per group with a limit, once read
        self._full = policy.NOTHING_HELD  # holds only the full groups

    def _grouped(self, found: Sequence[Candidate]) -> bool:
        """Whether a full group holds back some of ``found`` (reading the groups the first
        time a candidate has one)."""
        if self._room is None:
            if all(c.group is None for c in found):
                return False
            self._learn_groups(self.tx.group_limits(lock=True))
        return any(c.group in self._full.full_groups for c in found)

    def _learn_groups(self, limits: Mapping[str, int]) -> None:
        self._room = policy.group_room(limits, self.tx.held_by_group(self.now) if limits else {})
        full = frozenset(name for name, left in self._room.items() if left <= 0)
        self._full = policy.Locality((), full_groups=full)

    def before_steal(self) -> None:
        """Where claims run side by side, a claim takes the groups' locks before the steal
        lock, never after (else one in its steal step and one that met grouped work in its
        pool step could wait on each other): so before stealing, a fleet with limits has
        them read, and locked, now."""
        if self._room is None and self.tx.group_limits():
            self._learn_groups(self.tx.group_limits(lock=True))

    def unfull(
        self, fetch: Callable[[frozenset[str]], list[Candidate]], agent: Agent
    ) -> list[Candidate]:
        """The own queue step's ``fetch(full groups)``, without the full groups' tasks."""
        if not agent.queued:
            return []
        found = fetch(self._full.full_groups)
        return fetch(self._full.full_groups) if self._grouped(found) else found

    def fit(
        self, picked: list[tuple[Candidate, ClaimSource]]
    ) -> list[tuple[Candidate, ClaimSource]]:
        """The picks within each group's room (``policy.fit_groups``)."""
        if self._room is None:
            return picked
        return policy.fit_groups(picked, lambda p: p[0].group, self._room)

    def _made(self) -> policy.Locality:
        if self._rules is None:
            settings, reserved = self.settings, frozenset[tuple[str, int]]()
            if settings.domain_wait > 0:
                idle = self.tx.idle_agents()
                reserved = policy.reserved_for(idle, self.agent.id, self.skillsets)
            self._rules = policy.locality(self.agent, settings, self.now, reserved)
        return self._rules

    def pick(self, fetch: Callable[[policy.Locality], list[Candidate]]) -> list[Candidate]:
        """``fetch(held)`` with the holds that apply to what it finds."""
        found = fetch(self._full)
        if self._grouped(found):
            found = fetch(self._full)
        agent, settings, now = self.agent, self.settings, self.now
        if not any(policy.might_hold(c.domain, _ready(c), agent, settings, now) for c in found):
            return found
        rules = self._made()
        if self._full.full_groups:
            rules = replace(rules, full_groups=self._full.full_groups)
        ends = (rules.free_at(c.domain, c.skillset, _ready(c)) for c in found)
        held = [end for end in ends if end is not None]
        if not held:
            return found
        first = min(held)
        self.retry_at = first if self.retry_at is None else min(self.retry_at, first)
        return fetch(rules)


def _ready(candidate: Candidate) -> float:
    return policy.ready_time(candidate.ready_at, candidate.created_at)


def pool_candidates(
    tx: StoreTx,
    domains: Sequence[str],
    eligible: Sequence[int],
    want: int,
    longest: bool,
    held: policy.Locality,
    now: float,
) -> list[Candidate]:
    """The pool step's look-ups: the top of the pool by static key among the skill sets the agent
    can do, then within each of its ``domains`` (for the domain bonus), and with ``longest``
    the top by priority and expected duration -- of the tasks ready by ``now``. Unranked;
    ``policy.rank_pool`` merges them."""
    found = tx.pool_best(eligible, None, want, held, now)
    if not found:  # nothing that is not held: the other look-ups are subsets of this one
        return found
    for domain in domains:
        found += tx.pool_best(eligible, domain, want, held, now)
    if longest:
        found += tx.pool_longest(eligible, want, held, now)
    return found
