"""Could that idle agent have been working? The simulator's account of *eligible* idleness.

An agent sitting free while work waits is not always a scheduling failure: the waiting work
may be another domain's that it may never take. What matters is time spent free while a task
*it could take* waited -- one in its own queue, in the pool, at the hub on its way to it, or
in another agent's queue that the steal rules let it have (priority, never stolen before, not
pinned, skills, domain or the simple-work exception). For that time the simulator also names
what held the work back, so a bad figure points at its setting:

* ``threshold`` -- the task sits in a queue no deeper than the threshold that guards it
  (``steal_threshold`` for a claim, ``busy_threshold`` for the rebalance);
* ``caps`` -- the steal caps of the current window are used up (or stealing is off);
* ``domain_wait`` / ``locality_wait`` -- the locality rules keep it for its domain's agents;
* ``latency`` -- nothing held it: the agent had not looked yet (it polls or waits for a
  wake-up), or the router or the rebalance had not come round.

A held task is free once its hold ends (a wait runs out, a steal leaves the window); from
then on it counts as ``latency``. When several eligible tasks wait, the cause charged is the
one that lets the agent work soonest.

The rules are the fleet's own (``shoal.policy``) applied to a snapshot taken between two
events. The simulated workloads require no skills, so every task has the one empty skill
set, here given the id 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from shoal import policy
from shoal.model import Agent, AgentStatus, Task
from shoal.settings import Settings

__all__ = ["CAUSES", "Held", "Snapshot", "classify"]

#: What held eligible work back, in the order ties between them are broken.
CAUSES = ("latency", "domain_wait", "locality_wait", "caps", "threshold")
_NO_SKILLS = 0  # the id of the empty skill set (see the module docstring)
_SKILLSETS: Mapping[int, tuple[str, ...]] = {_NO_SKILLS: ()}


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The fleet between two events, as far as eligibility goes (times are fleet time)."""

    now: float
    settings: Settings
    pending: Sequence[Task]  # in the pool and in queues
    depths: Mapping[str, int]  # pending tasks in each agent's queue
    hub: Sequence[str | None]  # the home agent of each task waiting at the hub
    agents: Mapping[str, Agent]
    steals: Sequence[tuple[float, str]]  # (when, thief) of every steal and move so far
    #: The agents only run their own queues; only the rebalance moves work to them.
    own_queue_only: bool

    def window(self) -> list[tuple[float, str]]:
        """The steals that count against the caps now (the last rebalance_interval)."""
        since = self.now - self.settings.rebalance_interval
        return [(at, thief) for at, thief in self.steals if at > since]


@dataclass(frozen=True, slots=True)
class Held:
    """Eligible work waited for a free agent: until ``until`` for ``cause``, then latency."""

    cause: str
    until: float

    def split(self, start: float, end: float) -> Iterator[tuple[str, float]]:
        """The stretch ``start``..``end`` as (cause, seconds) pieces."""
        edge = min(max(self.until, start), end)
        if edge > start:
            yield self.cause, edge - start
        if end > edge:
            yield "latency", end - edge


def classify(agent_id: str, snap: Snapshot) -> Held | None:
    """Why free agent ``agent_id`` holds no work although eligible work waits (None: no
    eligible work waits for it)."""
    agent = snap.agents[agent_id]
    best: Held | None = None
    for held in _reasons(agent, snap):
        if held.cause == "latency" or held.until <= snap.now:
            return Held("latency", snap.now)
        if best is None or (held.until, CAUSES.index(held.cause)) < (
            best.until,
            CAUSES.index(best.cause),
        ):
            best = held
    return best


def _reasons(agent: Agent, snap: Snapshot) -> Iterator[Held]:
    """One ``Held`` for each task ``agent`` could take."""
    now, settings = snap.now, snap.settings
    latency = Held("latency", now)
    if agent.id in snap.hub:
        yield latency  # on its way to this agent at the router's next round
    reserved = policy.reserved_for(snap.agents.values(), agent.id, _SKILLSETS)
    rules = policy.locality(agent, settings, now, reserved)
    steal_rules = policy.steal_filter(agent, settings, _SKILLSETS)
    caps = _caps(agent, snap)
    for task in snap.pending:
        if task.agent == agent.id:
            yield latency
        elif task.agent is None:
            if not policy.can_do(agent.skills, task.skills):
                continue
            if snap.own_queue_only:
                continue  # such agents never look in the pool (none of their work is there)
            yield _locality(task, rules, now)
        elif steal_rules.matches(task):
            yield _steal(task, agent, snap, snap.depths[task.agent], caps, rules)


def _locality(task: Task, rules: policy.Locality, now: float) -> Held:
    ready = policy.ready_time(task.ready_at, task.created_at)
    free = rules.free_at(task.domain, _NO_SKILLS, ready)
    if free is None:
        return Held("latency", now)
    local = ready > rules.local_since
    return Held("locality_wait" if local else "domain_wait", free)


def _caps(agent: Agent, snap: Snapshot) -> float | None:
    """When the steal caps let ``agent`` steal again (None: they let it now)."""
    window = snap.window()
    thieves = [thief for _, thief in window]
    if policy.steal_budget(thieves, agent.id, snap.settings) > 0:
        return None
    if not window or snap.settings.max_steals_per_agent == 0:
        return math.inf  # stealing is off
    return min(at for at, _ in window) + snap.settings.rebalance_interval


def _steal(
    task: Task,
    agent: Agent,
    snap: Snapshot,
    depth: int,
    caps: float | None,
    rules: policy.Locality,
) -> Held:
    """Why a task in another agent's queue, which the steal rules let ``agent`` have, is not
    running on it yet."""
    settings = snap.settings
    victim = snap.agents.get(task.agent or "")
    if snap.own_queue_only:  # only the rebalance moves work to such an agent
        if depth <= settings.busy_threshold:
            return Held("threshold", math.inf)
        if caps is not None:
            return Held("caps", caps)
        return Held("latency", snap.now)
    if victim is None or victim.status is not AgentStatus.WORKING:
        return Held("latency", snap.now)  # its owner is about to claim it
    if depth <= settings.steal_threshold:
        return Held("threshold", math.inf)
    if caps is not None:
        return Held("caps", caps)
    return _locality(task, rules, snap.now)
