"""The hub's jobs: the monitor's reap, the assessment, and the status snapshot.

None of these is needed for correctness (a claim expires due leases itself; invariant I6):
they make recovery timely -- silent agents' queues back in the pool, idle ephemeral agents
ended, stalled tasks flagged -- and tell the people running the fleet (and a supervisor)
whether it has the right number of agents.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace

from shoal import policy, sizing
from shoal._transitions import expire_due, resume_agent, return_queue, terminate
from shoal.limits import MAX_LISTED, SHOWN_STUCK
from shoal.model import AgentLoad, Assessment, FleetStatus, ReapReport, Task
from shoal.stores.base import StoreTx
from shoal.vocabulary import AgentStatus, EventKind

__all__ = ["assess_in", "reap_in", "status_in"]


def reap_in(tx: StoreTx, now: float, rng: random.Random) -> ReapReport:
    """One monitor pass (``Fleet.reap``), inside the caller's transaction."""
    settings = tx.load_settings()
    expired, dead = expire_due(tx, now, settings, None, rng)
    offline, returned, terminated, resumed = [], [], [], []
    for agent in tx.list_agents():
        if policy.is_silent(agent, now, settings):
            tx.save_agent(replace(agent, status=AgentStatus.OFFLINE, idle_since=None))
            silent = round(now - agent.last_seen, 3)
            tx.append_event(
                now,
                EventKind.AGENT_OFFLINE,
                None,
                agent.id,
                {"from": agent.status.value, "silent_for": silent},
            )
            offline.append(agent.id)
            returned += return_queue(tx, agent, now, "agent offline")
        elif policy.idle_expired(agent, now, settings):
            terminate(tx, agent, now, "idle past idle_timeout")
            terminated.append(agent.id)
        elif policy.is_zombie(agent, now, settings):
            terminate(tx, agent, now, "offline past idle_timeout")
            terminated.append(agent.id)
        elif policy.pause_over(agent, now):
            resume_agent(tx, agent, now, "cooldown")
            resumed.append(agent.id)
    stalled = []
    for task in tx.claimed_tasks():
        if policy.is_stalled(task, now, settings):
            tx.mark_stalled(task.id, now)
            running = round(now - (task.claimed_at or now), 3)
            tx.append_event(
                now,
                EventKind.STALLED,
                task.id,
                task.agent,
                {"running_for": running, "expected": task.expected_duration},
            )
            stalled.append(task.id)
    return ReapReport(
        tuple(expired),
        tuple(dead),
        tuple(offline),
        tuple(returned),
        tuple(terminated),
        tuple(stalled),
        tuple(resumed),
    )


def assess_in(tx: StoreTx, now: float) -> Assessment:
    """Assess the workload and keep the result as the fleet's last assessment."""
    settings = tx.load_settings()
    counts = tx.state_counts()
    result = sizing.assess(
        pending=counts.get("pending", 0),
        in_progress=counts.get("claimed", 0),
        blocked=counts.get("blocked", 0),
        agents=tx.list_agents(),
        demand=tx.pending_demand(),
        settings=settings,
        now=now,
        stuck=len(tx.stuck_tasks(MAX_LISTED)),
    )
    tx.set_meta("last_assessment", json.dumps(result.to_dict()))
    data = {"workload": result.workload, "recommendation": result.recommendation}
    tx.append_event(now, EventKind.ASSESSED, None, None, data)
    return result


def status_in(tx: StoreTx, now: float) -> FleetStatus:
    """The fleet at a glance (``Fleet.status``), from one read transaction."""
    settings = tx.load_settings()
    agents = tx.list_agents()
    claimed = tx.claimed_tasks()
    by_agent: dict[str, list[Task]] = {}
    for task in claimed:
        by_agent.setdefault(task.agent or "", []).append(task)
    raw = tx.get_meta("last_assessment")
    waiting, next_ready = tx.waiting_tasks(now)
    return FleetStatus(
        at=now,
        agents=tuple(AgentLoad(a, tuple(by_agent.get(a.id, ()))) for a in agents),
        counts=tx.state_counts(),
        pool=tx.pool_depth(),
        live=sum(1 for a in agents if a.status.live and not a.manager),
        max_agents=settings.max_agents,
        stalled=tuple(t for t in claimed if t.stalled_at is not None),
        assessment=Assessment.from_dict(json.loads(raw)) if raw else None,
        stuck=tuple(tx.stuck_tasks(SHOWN_STUCK)),
        waiting=waiting,
        next_ready=next_ready,
    )
