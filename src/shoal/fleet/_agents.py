"""The agents' side of the fleet: joining, saying how they are, staying alive.

``Fleet.register``, ``Fleet.set_status`` and ``Fleet.heartbeat`` check their input, open one
transaction and call these. Registration enforces ``max_agents`` over seats -- non-managers
neither offline nor terminated -- (invariant I3; ``_liveness``), as does every way back from
offline; a status change that takes an agent away sends its queue back to the pool; a
heartbeat renews every lease the agent holds, after expiring those already past due.
"""

from __future__ import annotations

import random

from shoal import policy
from shoal._values import replace
from shoal.errors import InvalidTransition
from shoal.fleet._liveness import SettleFirst, come_back, is_away, offline_silent, seat_refusal
from shoal.fleet._transitions import (
    agent_data,
    expire_due,
    live_agent,
    present_status,
    release_held,
    return_queue,
    terminate,
    wait_words,
    with_idle_since,
)
from shoal.limits import EXPIRE_PER_CLAIM
from shoal.model import Agent, Lease, Registration
from shoal.stores.base import StoreTx
from shoal.times import iso_time
from shoal.vocabulary import AgentStatus, EventKind

__all__ = ["heartbeat_in", "register_in", "set_status_in"]


def register_in(
    tx: StoreTx,
    now: float,
    agent_id: str,
    *,
    role: str,
    skill_names: tuple[str, ...],
    domain_names: tuple[str, ...],
    max_concurrent: int,
    manager: bool,
    ephemeral: bool,
) -> Registration:
    """Register ``agent_id`` (checked input), or update its registration.

    Seats first (``_liveness``): silent agents are marked offline, then a newcomer -- or an
    agent back from offline, or a terminated id starting a new incarnation -- needs a seat
    that no other non-manager neither offline nor terminated holds, else ``FleetFull``.
    A pause still running outlives a termination: the new incarnation is paused until the
    same moment (only a resume, by a manager or a person, ends it sooner).
    """
    settings = tx.load_settings()
    agents = tx.list_agents()
    offline_silent(tx, now, settings, agents, spare=agent_id)
    existing = next((a for a in agents if a.id == agent_id), None)
    seated = existing is not None and policy.holds_seat(existing, now, settings)
    if not manager and not seated:
        returning = existing is not None and existing.status is not AgentStatus.TERMINATED
        coming = "back" if returning else "registered"
        refusal = seat_refusal(agents, agent_id, now, settings, coming=coming)
        if refusal is not None:
            raise refusal
    if existing is not None and existing.status is not AgentStatus.TERMINATED:
        status: AgentStatus = existing.status
        if is_away(existing, now, settings):
            status = present_status(tx, existing, now)
        agent = replace(existing, status=status)
        kind = EventKind.AGENT_UPDATED
    else:
        agent = Agent(
            id=agent_id,
            status=AgentStatus.IDLE,
            idle_since=now,
            registered_at=now,
            incarnation=existing.incarnation + 1 if existing else 1,
        )
        if existing is not None and existing.paused(now):  # a pause outlives a termination
            agent = replace(
                agent,
                status=AgentStatus.PAUSED,
                idle_since=None,
                paused_until=existing.paused_until,
                failures=existing.failures,
            )
        kind = EventKind.AGENT_REGISTERED
    agent = replace(
        agent,
        role=role,
        skills=skill_names,
        domains=domain_names,
        max_concurrent=max_concurrent,
        manager=manager,
        ephemeral=ephemeral,
        last_seen=now,
    )
    if existing is not None and kind is EventKind.AGENT_UPDATED:
        agent = with_idle_since(agent, existing, now)
    tx.save_agent(agent)
    tx.append_event(now, kind, None, agent_id, agent_data(agent))
    created = kind is EventKind.AGENT_REGISTERED
    # Seats taken now: the others', and this one's unless it is a manager.
    others = sum(1 for a in agents if a.id != agent_id and policy.holds_seat(a, now, settings))
    live = others + (0 if manager else 1)
    saved = tx.get_agent(agent_id)
    assert saved is not None
    return Registration(saved, created, live, settings.max_agents)


def set_status_in(
    tx: StoreTx,
    now: float,
    agent_id: str,
    new_status: AgentStatus,
    reason: str | None,
    release: bool,
) -> Agent:
    """Apply a status an agent reports (``Fleet.set_status``), with what follows from it."""
    agent = live_agent(tx, agent_id)
    going = new_status in (AgentStatus.OFFLINE, AgentStatus.TERMINATED)
    if agent.paused(now) and not going:
        raise InvalidTransition(
            f"agent {agent_id!r} is paused -- by the circuit breaker after failing task "
            "after task, or by `shoal agent pause` -- for "
            f"{wait_words((agent.paused_until or now) - now)} more",
            hint=f"fix what makes its tasks fail, then `shoal agent resume {agent_id}`",
        )
    settings = tx.load_settings()
    if new_status.live and not agent.manager and is_away(agent, now, settings):
        agents = tx.list_agents()  # back from offline: a seat, as for a newcomer
        offline_silent(tx, now, settings, agents, spare=agent_id)
        refusal = seat_refusal(agents, agent_id, now, settings, coming="back")
        if refusal is not None:
            raise refusal
    if new_status is AgentStatus.IDLE and not release:
        held = [task.id for task, _ in tx.held_leases(agent_id)]
        if held:
            raise InvalidTransition(
                f"agent {agent_id!r} holds tasks {', '.join(map(str, held))}; an agent "
                "that holds work is not idle",
                hint="complete, fail or release them first, or pass --release "
                "(release=True) to give them back untouched",
            )
    if release:
        release_held(tx, agent_id, now, f"agent set {new_status.value}")
    if new_status is AgentStatus.TERMINATED:
        terminate(tx, agent, now, reason or "terminated by request")
    else:
        updated = with_idle_since(replace(agent, status=new_status, last_seen=now), agent, now)
        tx.save_agent(updated)
        if new_status is not agent.status:
            data = {"from": agent.status.value, "to": new_status.value}
            tx.append_event(now, EventKind.AGENT_STATUS, None, agent_id, data)
            if new_status is AgentStatus.OFFLINE:
                return_queue(tx, agent, now, "agent offline")
    saved = tx.get_agent(agent_id)
    assert saved is not None
    return saved


def heartbeat_in(
    tx: StoreTx, now: float, agent_id: str, rng: random.Random, *, settle: bool = True
) -> list[Lease]:
    """The agent is alive: note it, and renew every lease it holds that has not expired.

    An agent coming back from offline (or silent past heartbeat_timeout) needs a seat:
    with ``settle`` that is ``SettleFirst``, and the transaction rolls back (``Fleet``
    finds it a seat, or refuses ``FleetFull``, and runs this again)."""
    settings = tx.load_settings()
    expire_due(tx, now, settings, EXPIRE_PER_CLAIM, rng)
    agent = live_agent(tx, agent_id, lock=True)
    away = is_away(agent, now, settings)
    if away and settle:
        raise SettleFirst(agent_id)
    if away:  # a seat was found for it just now (a race is the only way here)
        come_back(tx, agent, now)
    else:
        tx.save_agent(replace(agent, last_seen=now))
    leases = []
    for task, token in tx.held_leases(agent_id, lock=True):
        expires = policy.lease_expiry(now, task.lease_ttl, settings)
        tx.set_lease_expiry(task.id, expires)
        leases.append(Lease(task.id, agent_id, token, expires))
    return leases


def pause_in(tx: StoreTx, now: float, agent_id: str, seconds: float) -> Agent:
    """A person's pause (``Fleet.pause``): the circuit breaker's hold, asked for. The agent
    claims nothing until ``now + seconds`` or a resume; its queue goes back to the pool (but
    for pinned work); the leases it holds run on, so work in hand can still be finished."""
    agent = live_agent(tx, agent_id)
    until = now + seconds
    # An offline agent stays offline (it holds no seat), paused for when it comes back.
    status = AgentStatus.OFFLINE if agent.status is AgentStatus.OFFLINE else AgentStatus.PAUSED
    paused = replace(agent, status=status, paused_until=until, idle_since=None)
    tx.save_agent(paused)
    data = {"by": "request", "until": iso_time(until), "from": agent.status.value}
    tx.append_event(now, EventKind.AGENT_PAUSED, None, agent_id, data)
    return_queue(tx, agent, now, "agent paused")
    return paused
