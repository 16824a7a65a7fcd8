"""The hub's jobs: the monitor's reap, the assessment, and the status snapshot.

None of these is needed for correctness (a claim expires due leases itself; invariant I6):
they make recovery timely -- silent agents' queues back in the pool, idle ephemeral agents
ended, stalled tasks flagged -- and tell the people running the fleet (and a supervisor)
whether it has the right number of agents.
"""

from __future__ import annotations

import json
import random

from shoal import policy
from shoal.fleet._liveness import agents_as_of, go_offline
from shoal.fleet._transitions import expire_due, resume_agent, terminate
from shoal.limits import MAX_LISTED, SHOWN_STUCK
from shoal.model import AgentLoad, Assessment, FleetStatus, ReapReport, Task
from shoal.stores.base import StoreTx
from shoal.vocabulary import EventKind, TaskState

__all__ = ["assess_in", "reap_in", "status_in"]


def reap_in(tx: StoreTx, now: float, rng: random.Random) -> ReapReport:
    """One monitor pass (``Fleet.reap``), inside the caller's transaction."""
    settings = tx.load_settings()
    expired, dead = expire_due(tx, now, settings, None, rng)
    offline, returned, terminated, resumed = [], [], [], []
    for agent in tx.list_agents():
        if policy.is_silent(agent, now, settings):
            returned += go_offline(tx, agent, now)
            offline.append(agent.id)
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
    """Assess the workload and keep the result as the fleet's last assessment.

    The log gets an ``assessed`` event only when the verdict changes -- the workload, the
    recommendation or the skills missing -- so a supervisor assessing every few seconds
    writes one when there is news, not tens of thousands a day that say the same."""
    settings = tx.load_settings()
    counts = tx.state_counts()
    from shoal import sizing  # the assessment's rules: read by assess alone

    result = sizing.assess(
        pending=counts.get("pending", 0),
        in_progress=counts.get("claimed", 0),
        blocked=counts.get("blocked", 0),
        agents=agents_as_of(tx, now, settings, tx.list_agents()),
        demand=tx.pending_demand(),
        settings=settings,
        now=now,
        stuck=len(tx.stuck_tasks(MAX_LISTED)),
    )
    raw = tx.get_meta("last_assessment")
    before = Assessment.from_dict(json.loads(raw)) if raw else None
    tx.set_meta("last_assessment", json.dumps(result.to_dict()))
    if before is None or _verdict(before) != _verdict(result):
        data = {
            "workload": result.workload,
            "recommendation": result.recommendation,
            "missing_skills": list(result.missing_skills),
        }
        tx.append_event(now, EventKind.ASSESSED, None, None, data)
    return result


def _verdict(assessment: Assessment) -> tuple[str, str, tuple[str, ...]]:
    """What an assessment says, as far as the log is concerned."""
    return (
        str(assessment.workload),
        str(assessment.recommendation),
        tuple(assessment.missing_skills),
    )


def status_in(tx: StoreTx, now: float) -> FleetStatus:
    """The fleet at a glance (``Fleet.status``), from one read transaction, as the liveness
    rules make it at ``now`` whether or not anyone has written them down: silent agents
    offline, ended pauses over, and a lease that ran out not running -- its task is listed
    as ``expired`` (the next claim takes it back) and counted out of ``claimed``."""
    settings = tx.load_settings()
    claimed = tx.claimed_tasks()
    running: dict[str, list[Task]] = {}
    expired: list[Task] = []
    for task in claimed:
        if policy.lease_due(task, now):
            expired.append(task)
        else:
            running.setdefault(task.agent or "", []).append(task)
    agents = [
        policy.agent_as_of(a, now, settings, holding=a.id in running) for a in tx.list_agents()
    ]
    counts = dict(tx.state_counts())
    if expired:
        counts[TaskState.CLAIMED.value] = counts.get(TaskState.CLAIMED.value, 0) - len(expired)
    raw = tx.get_meta("last_assessment")
    waiting, next_ready = tx.waiting_tasks(now)
    return FleetStatus(
        at=now,
        agents=tuple(AgentLoad(a, tuple(running.get(a.id, ()))) for a in agents),
        counts=counts,
        pool=tx.pool_depth(),
        live=sum(1 for a in agents if policy.holds_seat(a, now, settings)),
        max_agents=settings.max_agents,
        stalled=tuple(
            t for t in claimed if t.stalled_at is not None and not policy.lease_due(t, now)
        ),
        assessment=Assessment.from_dict(json.loads(raw)) if raw else None,
        stuck=tuple(tx.stuck_tasks(SHOWN_STUCK)),
        waiting=waiting,
        next_ready=next_ready,
        expired=tuple(expired),
    )
