"""The fleet's size, as pure functions: whether it needs more agents or fewer, and what a
supervisor does about it.

``assess`` reads the workload (pending, running and blocked tasks, the agents and what they
can do) and calls it idle, underutilized, balanced or overloaded, with a recommendation --
spawn, terminate_idle or maintain -- and the skills a new agent should bring.
``scale_decision`` turns that recommendation into starting or stopping local workers within
a supervisor's hard limits, one step per cooldown so a noisy assessment cannot make it
flap. Like ``policy``: no I/O, no clock, no store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from shoal import policy
from shoal._values import value
from shoal.model import Agent, AgentStatus, Assessment
from shoal.settings import Settings
from shoal.vocabulary import Recommendation, Workload

__all__ = [
    "ScaleDecision",
    "able_agents",
    "assess",
    "restart_delay",
    "scale_decision",
    "skills_missing",
    "spawn_room",
]


# --- the workload assessment ------------------------------------------------------------


def assess(
    *,
    pending: int,
    in_progress: int,
    blocked: int,
    agents: Sequence[Agent],
    demand: Mapping[tuple[str, ...], int],
    settings: Settings,
    now: float,
    stuck: int = 0,
) -> Assessment:
    """Idle / underutilized / balanced / overloaded, and spawn / terminate_idle / maintain.

    The anti-idle rules, in order, with their thresholds as settings:

    1. nothing pending and nothing in progress -> idle, terminate_idle;
    2. pending >= assess_spawn_pending, or pending work and no worker at all, or pending
       tasks that no live agent has the skills for -> overloaded; spawn if there is room
       under max_agents, else maintain (and say the fleet is full);
    3. pending <= assess_idle_pending, more than one worker, and someone idle ->
       underutilized, terminate_idle;
    4. otherwise balanced, maintain.

    ``demand`` counts pending tasks by required skill set; it yields ``missing_skills``
    (needed, held by no agent that is present) and ``unservable`` (tasks no single present
    agent can do). Only agents neither offline, paused nor terminated count as able, and
    only those neither offline nor terminated take a seat; managers are exempt from
    max_agents. ``stuck`` blocked tasks (waiting on dead or cancelled ones) are named in the
    reason: no agent can help them, only a retry.
    """
    present = able_agents(agents)
    paused = sum(1 for a in agents if a.status is AgentStatus.PAUSED)
    workers = [a for a in agents if a.status.live and not a.manager]  # the seats taken
    # Managers never auto-terminate, so only idle workers make a fleet underutilized.
    idle = sum(1 for a in present if a.status is AgentStatus.IDLE and not a.manager)
    working = sum(1 for a in present if a.status is AgentStatus.WORKING)
    missing = skills_missing(demand, present)
    unservable = sum(
        count
        for need, count in demand.items()
        if not any(policy.can_do(a.skills, need) for a in present)
    )
    room = spawn_room(agents, settings)

    def verdict(workload: Workload, recommendation: Recommendation, reason: str) -> Assessment:
        return Assessment(
            workload=workload,
            recommendation=recommendation,
            reason=reason,
            pending=pending,
            in_progress=in_progress,
            blocked=blocked,
            live_agents=len(workers),
            idle_agents=idle,
            working_agents=working,
            max_agents=settings.max_agents,
            missing_skills=tuple(missing),
            unservable=unservable,
            stuck=stuck,
            at=now,
        )

    def why(text: str) -> str:
        if paused:
            text += (
                f"; {paused} agent{' is' if paused == 1 else 's are'} paused after failing task "
                "after task (fix them, then `shoal agent resume AGENT`)"
            )
        if stuck:
            return f"{text}; {stuck} blocked tasks wait on dead or cancelled ones (retry those)"
        return text

    if pending == 0 and in_progress == 0:
        return verdict(
            Workload.IDLE, Recommendation.TERMINATE_IDLE, why("no pending or running tasks")
        )
    reasons = []
    if pending >= settings.assess_spawn_pending:
        reasons.append(f"{_tasks(pending)} pending (threshold {settings.assess_spawn_pending})")
    if pending > 0 and not workers and (present or not unservable):  # else said just below
        reasons.append("pending work and no worker agents")
    if unservable and not present:
        reasons.append(f"{_tasks(unservable)} pending and no agent present to take them")
    elif unservable:
        reasons.append(
            f"{_tasks(unservable)} pending need skills no present agent has: {', '.join(missing)}"
            if missing
            else f"{_tasks(unservable)} pending need a combination of skills no present agent has"
        )
    if reasons:
        if room:
            return verdict(Workload.OVERLOADED, Recommendation.SPAWN, why("; ".join(reasons)))
        full = f"at capacity ({len(workers)}/{settings.max_agents} agents)"
        return verdict(
            Workload.OVERLOADED, Recommendation.MAINTAIN, why("; ".join([*reasons, full]))
        )
    if pending <= settings.assess_idle_pending and len(workers) > 1 and idle > 0:
        return verdict(
            Workload.UNDERUTILIZED,
            Recommendation.TERMINATE_IDLE,
            why(f"{pending} pending, {idle} of {len(workers)} agents idle"),
        )
    return verdict(
        Workload.BALANCED,
        Recommendation.MAINTAIN,
        why(f"{pending} pending, {in_progress} in progress, {len(workers)} agents"),
    )


def able_agents(agents: Iterable[Agent]) -> list[Agent]:
    """The agents that count as able to take work: neither offline, paused nor terminated."""
    return [a for a in agents if a.status.live and a.status is not AgentStatus.PAUSED]


def skills_missing(needs: Iterable[Iterable[str]], able: Sequence[Agent]) -> list[str]:
    """The skills ``needs`` require that no agent of ``able`` has (``assess``'s skill gap,
    which ``shoal why`` names for one task)."""
    have: set[str] = set().union(*(a.skills for a in able))
    return sorted({s for need in needs for s in need} - have)


def spawn_room(agents: Iterable[Agent], settings: Settings) -> bool:
    """Whether a worker may be added under ``max_agents`` (managers take no seat)."""
    return sum(1 for a in agents if a.status.live and not a.manager) < settings.max_agents


# --- running agents: the supervisor's decisions ------------------------------------------


def restart_delay(crashes: int, base: float, cap: float) -> float:
    """How long a supervisor waits before restarting a worker that crashed ``crashes`` times
    in a row: ``base`` after the first crash, doubling with each one after, at most ``cap``.
    A worker that crashes at start-up (a typo in its command) then costs a restart every
    ``cap`` seconds, not a busy loop."""
    if crashes <= 0:
        return 0.0
    return float(min(cap, base * 2.0 ** min(crashes - 1, 64)))


@value
class ScaleDecision:
    """What a supervisor does now: start ``spawn`` workers, stop the workers in ``stop``."""

    spawn: int = 0
    stop: tuple[str, ...] = ()
    reason: str = ""

    def __bool__(self) -> bool:
        return bool(self.spawn or self.stop)


def scale_decision(
    *,
    recommendation: str,
    running: int,
    idle: Sequence[str],
    minimum: int,
    maximum: int,
    room: int,
    since_change: float,
    cooldown: float,
) -> ScaleDecision:
    """How many local workers to start or stop, following the assessment within hard limits.

    ``running`` counts the supervisor's workers (a crashed one waiting for its restart
    included: its place is taken); ``idle`` names those of them the fleet sees idle, longest
    idle first; ``room`` is how many more agents the fleet admits under max_agents;
    ``since_change`` is the time since the supervisor last started or stopped a worker.

    1. Below ``minimum``: start enough to reach it (within ``maximum`` and the fleet's room).
    2. Above ``maximum``: stop idle workers down to it.
    3. Within ``cooldown`` of the last change: nothing (no flapping on a noisy assessment).
    4. ``spawn`` recommended: start one, if under ``maximum`` and the fleet has room.
    5. ``terminate_idle`` recommended: stop the longest-idle worker, if above ``minimum``.
    One worker per cooldown keeps each step small enough to see its effect before the next.
    """
    headroom = max(0, min(maximum - running, room))
    if running < minimum:
        count = min(minimum - running, headroom)
        if count:
            return ScaleDecision(spawn=count, reason=f"below the minimum of {minimum}")
        return ScaleDecision(reason=f"below the minimum of {minimum}, but the fleet is full")
    if running > maximum:
        return ScaleDecision(
            stop=tuple(idle[: running - maximum]), reason=f"above the maximum of {maximum}"
        )
    if since_change < cooldown:
        return ScaleDecision(reason=f"cooling down ({cooldown - since_change:.1f}s left)")
    if recommendation == Recommendation.SPAWN:
        if headroom:
            return ScaleDecision(spawn=1, reason="the assessment asks for another agent")
        why = f"at the cap of {maximum}" if running >= maximum else "the fleet is full"
        return ScaleDecision(reason=f"the assessment asks for another agent, but {why}")
    if recommendation == Recommendation.TERMINATE_IDLE and running > minimum and idle:
        return ScaleDecision(stop=(idle[0],), reason="the assessment says agents sit idle")
    return ScaleDecision(reason=f"the assessment says {recommendation}")


def _tasks(count: int) -> str:
    """``1 task``, ``3 tasks``: the reasons are read by people."""
    return f"{count} task{'' if count == 1 else 's'}"
