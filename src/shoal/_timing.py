"""The fleet's decisions about time, as pure functions: when an agent is present, silent,
idle long enough to be given work, or gone for good; when a task has stalled; and how long
a polling agent, a writer that lost a race and a writer that won one wait.

They are ``shoal.policy``'s (it exports them, and callers use them from there): pure like
the rest of it -- time is an argument, never read -- and kept here so policy stays a
reading.
"""

from __future__ import annotations

import random

from shoal._values import replace
from shoal.model import Agent, AgentStatus, Task, TaskState
from shoal.settings import Settings

__all__ = [
    "BUSY_LATELY",
    "agent_as_of",
    "doubling_delay",
    "holds_seat",
    "idle_expired",
    "idle_long_enough",
    "idle_since_after",
    "is_present",
    "is_silent",
    "is_stalled",
    "is_zombie",
    "lease_due",
    "lost_push_pause",
    "poll_delay",
    "turn_wait",
]


# --- agents and tasks over time ----------------------------------------------------------


def idle_since_after(
    before: AgentStatus, since: float | None, after: AgentStatus, now: float
) -> float | None:
    """``idle_since`` is stamped on entering idle, kept while idle, cleared on leaving it."""
    if after is not AgentStatus.IDLE:
        return None
    if before is AgentStatus.IDLE and since is not None:
        return since
    return now


def is_present(agent: Agent) -> bool:
    """Around to take work from its queue: not offline, not paused, not terminated. Work
    bound for an agent that is not present goes to the pool instead (unless pinned to it)."""
    return agent.status not in (
        AgentStatus.OFFLINE,
        AgentStatus.PAUSED,
        AgentStatus.TERMINATED,
    )


#: The statuses of an agent that is expected to be heard from: silence in one of them past
#: heartbeat_timeout makes it offline. (A paused agent still heartbeats while it waits.)
HEARD_FROM = (AgentStatus.IDLE, AgentStatus.WORKING, AgentStatus.WAITING, AgentStatus.PAUSED)


def is_silent(agent: Agent, now: float, settings: Settings) -> bool:
    """An agent not heard from for longer than heartbeat_timeout is offline -- from that
    moment, whether or not anyone has written it down yet (``agent_as_of``)."""
    return agent.status in HEARD_FROM and now - agent.last_seen > settings.heartbeat_timeout


def agent_as_of(agent: Agent, now: float, settings: Settings, *, holding: bool) -> Agent:
    """The agent as the liveness rules make it at ``now``, written down or not: silent past
    heartbeat_timeout, it is offline; its pause over, it is paused no longer (working if it
    is ``holding`` a lease that has not run out, else waiting). It is exactly what the
    reaper would write, so every read -- status, agents, the dashboard, the metrics, MCP --
    shows the fleet as it is without anyone running a monitor
    (docs/ARCHITECTURE.md, "Liveness and seats")."""
    seen = agent
    if is_silent(seen, now, settings):
        seen = replace(seen, status=AgentStatus.OFFLINE, idle_since=None)
    if seen.paused_until is not None and now >= seen.paused_until:
        status = seen.status
        if status is AgentStatus.PAUSED:
            status = AgentStatus.WORKING if holding else AgentStatus.WAITING
        seen = replace(seen, status=status, paused_until=None, failures=0)
    return seen


def holds_seat(agent: Agent, now: float, settings: Settings) -> bool:
    """Counts against max_agents at ``now``: a non-manager that is neither offline nor
    terminated -- nor silent past heartbeat_timeout, offline in all but the writing."""
    return not agent.manager and agent.status.live and not is_silent(agent, now, settings)


def lease_due(task: Task, now: float) -> bool:
    """A claimed task whose lease has run out: nobody may finish it under that lease, and
    the next claim anywhere takes it back (invariant I6). It is not running any more, though
    the store still says ``claimed`` until then."""
    return (
        task.state is TaskState.CLAIMED
        and task.lease_expires is not None
        and task.lease_expires <= now
    )


def idle_long_enough(agent: Agent, now: float, settings: Settings) -> bool:
    """Idle for at least idle_min_for_rebalance: a real lack of work, not a gap between tasks."""
    return (
        agent.status is AgentStatus.IDLE
        and agent.idle_since is not None
        and now - agent.idle_since >= settings.idle_min_for_rebalance
    )


def idle_expired(agent: Agent, now: float, settings: Settings) -> bool:
    """An ephemeral, non-manager agent idle longer than idle_timeout is terminated."""
    return (
        agent.ephemeral
        and not agent.manager
        and agent.status is AgentStatus.IDLE
        and agent.idle_since is not None
        and now - agent.idle_since > settings.idle_timeout
    )


def is_zombie(agent: Agent, now: float, settings: Settings) -> bool:
    """An ephemeral, non-manager agent that went offline and stayed away past its idle
    timeout is not coming back: it is terminated and frees its place under max_agents.
    (A persistent agent keeps its place while offline; it may come back.)"""
    return (
        agent.ephemeral
        and not agent.manager
        and agent.status is AgentStatus.OFFLINE
        and now - agent.last_seen > settings.heartbeat_timeout + settings.idle_timeout
    )


def is_stalled(task: Task, now: float, settings: Settings) -> bool:
    """A claimed task running longer than stall_factor x its expected duration."""
    return (
        task.state is TaskState.CLAIMED
        and task.stalled_at is None
        and task.expected_duration is not None
        and task.claimed_at is not None
        and now - task.claimed_at > settings.stall_factor * task.expected_duration
    )


# --- waiting -----------------------------------------------------------------------------


#: Another writer raced for the branch within this many seconds: a winner takes turns.
BUSY_LATELY = 5.0


def poll_delay(empty_polls: int, settings: Settings) -> float:
    """How long a polling agent waits after ``empty_polls`` empty polls in a row.

    The base interval for the first ``poll_backoff_after`` empty polls, then doubling each
    time up to ``poll_max``. Zero empty polls (work was just found or finished): poll at once.
    """
    return doubling_delay(
        empty_polls, settings.poll_base, settings.poll_max, settings.poll_backoff_after
    )


def doubling_delay(empty_polls: int, base: float, cap: float, after: int) -> float:
    """The wait after ``empty_polls`` looks in a row that found nothing new: none before
    the first, ``base`` for the first ``after``, then doubling with each up to ``cap`` --
    quick to notice a change that comes soon, cheap while nothing happens."""
    if empty_polls <= 0:
        return 0.0
    if empty_polls <= after:
        return base
    doublings = min(empty_polls - after, 64)
    return float(min(cap, base * 2.0**doublings))


def lost_push_pause(lost: int, write_time: float, rng: random.Random) -> float:
    """How long a writer that lost ``lost`` races for one branch in a row (a git push
    turned away) pauses before running its operation again: a random part of a write's
    time, shorter the more often it lost. The usual growing backoff would let fresh writers
    win over and over while the unlucky one waits longer each time; a shrinking one
    favours whoever has waited longest, so a wait is bounded by its turn, not by luck."""
    return rng.uniform(0.0, 2.0 * write_time / max(lost, 1))


def turn_wait(since_won: float, since_others: float, took: float, rng: random.Random) -> float:
    """How long a writer that won the last race for one branch ``since_won`` seconds ago
    waits before its next write, when others wrote ``since_others`` seconds ago: if it
    comes straight back (within one write's time, ``took``) while others are busy (within
    ``BUSY_LATELY``), about one write -- half to one and a half of ``took``, at random --
    the time for one it beat to land theirs. Never pausing, the winner would win race
    after race while its losers pause. Alone, or after real work in between: no wait."""
    if since_others < BUSY_LATELY and since_won < took:
        return rng.uniform(0.5 * took, 1.5 * took)
    return 0.0
