"""Liveness and seats: who is offline, and who may come back, with or without a monitor.

The rules (docs/ARCHITECTURE.md, "Liveness and seats"):

* An agent silent past ``heartbeat_timeout`` is offline from that moment. Every read shows
  it so (``policy.agent_as_of``), written down or not. The writes catch up lazily: a claim
  that finds such an agent (``ClaimContext.silent_peers``, one index range in the claim's
  own statement) has ``Fleet`` mark every silent agent offline first, in a fleet-wide
  transaction of its own, which sends their queues back to the pool (pinned tasks
  excepted); registration does the same before it counts seats; the reaper of ``shoal
  monitor``, ``shoal serve`` and ``shoal mcp --transport http`` does it on its rounds.
* ``max_agents`` counts seats: non-managers neither offline nor terminated (nor silent,
  offline in all but the writing: ``policy.holds_seat``). An agent that comes back from
  offline -- its claim, its heartbeat, a registration or a status it reports -- takes a free
  seat, or is refused ``FleetFull`` like any newcomer and stays offline. Offline, it keeps
  its identity, queue rules, pinned tasks and history; only its seat is free.

The fleet-wide part runs exclusively (registration's rule: on PostgreSQL, two returning
agents must not both take the last seat, and a queue is moved while no claim takes from
it), so a claim or heartbeat that needs it raises ``SettleFirst`` before it has written
anything of its own; ``Fleet`` rolls it back, runs ``settle_in`` and runs the call again.
That happens once per agent that goes silent or comes back: the everyday claim pays only
the one index range that finds nobody.
"""

from __future__ import annotations

from collections.abc import Sequence

from shoal import policy
from shoal._values import replace
from shoal.errors import FleetFull
from shoal.fleet._transitions import present_status, return_queue, with_idle_since
from shoal.model import Agent
from shoal.settings import Settings
from shoal.stores.base import StoreTx
from shoal.times import iso_time
from shoal.vocabulary import AgentStatus, EventKind

__all__ = [
    "SettleFirst",
    "agents_as_of",
    "come_back",
    "go_offline",
    "is_away",
    "offline_silent",
    "seat_refusal",
    "settle_in",
]


class SettleFirst(Exception):
    """A claim or heartbeat needs the fleet-wide part first: silent agents to mark offline,
    or its own agent back from offline (a seat to find). Raised before the call wrote
    anything of its own; ``Fleet`` rolls the transaction back, runs ``settle_in`` in an
    exclusive one, and runs the call again. Never leaves ``Fleet``."""

    def __init__(self, agent_id: str) -> None:
        super().__init__(agent_id)
        self.agent_id = agent_id  # the agent the call is for (it may be coming back)


def agents_as_of(
    tx: StoreTx, now: float, settings: Settings, agents: Sequence[Agent]
) -> list[Agent]:
    """``agents`` as the liveness rules make them at ``now`` (``policy.agent_as_of``): what
    every read shows, without writing (reads are read transactions). Whether an agent whose
    pause ran out holds a lease -- which its status then says -- is read only for those."""
    seen = []
    for agent in agents:
        holding = policy.pause_over(agent, now) and any(
            not policy.lease_due(task, now) for task, _ in tx.held_leases(agent.id)
        )
        seen.append(policy.agent_as_of(agent, now, settings, holding=holding))
    return seen


def is_away(agent: Agent, now: float, settings: Settings) -> bool:
    """Offline, written down or not: coming back from here takes a seat."""
    return agent.status is AgentStatus.OFFLINE or policy.is_silent(agent, now, settings)


def go_offline(tx: StoreTx, agent: Agent, now: float) -> list[int]:
    """Write down that a silent agent is offline, and send its queue to the pool (but for
    pinned work). The event says how long it was silent and since when, so a jump of the
    clock that made every agent silent at once reads as one in the log."""
    tx.save_agent(replace(agent, status=AgentStatus.OFFLINE, idle_since=None))
    data = {
        "from": agent.status.value,
        "silent_for": round(now - agent.last_seen, 3),
        "last_seen": iso_time(agent.last_seen),
    }
    tx.append_event(now, EventKind.AGENT_OFFLINE, None, agent.id, data)
    return return_queue(tx, agent, now, "agent offline")


def offline_silent(
    tx: StoreTx,
    now: float,
    settings: Settings,
    agents: Sequence[Agent],
    *,
    spare: str | None = None,
) -> tuple[list[str], list[int]]:
    """Mark every silent agent of ``agents`` offline (but ``spare``, which is asking for
    something and so is not silent): the agents, and the tasks their queues gave back."""
    offline: list[str] = []
    returned: list[int] = []
    for agent in agents:
        if agent.id != spare and policy.is_silent(agent, now, settings):
            returned += go_offline(tx, agent, now)
            offline.append(agent.id)
    return offline, returned


def seat_refusal(
    agents: Sequence[Agent], agent_id: str, now: float, settings: Settings, *, coming: str
) -> FleetFull | None:
    """``FleetFull`` if every seat is taken by agents other than ``agent_id`` (``coming``
    says how it would join: "registered", "back"), else None. It counts exactly the seats
    it names: non-managers neither offline nor terminated nor silent."""
    taken = sum(1 for a in agents if a.id != agent_id and policy.holds_seat(a, now, settings))
    if taken < settings.max_agents:
        return None
    verb = "was not registered" if coming == "registered" else "stays offline"
    return FleetFull(
        f"fleet is full: {taken} of {settings.max_agents} seats are taken by agents that are "
        f"neither offline nor terminated (managers not counted); agent {agent_id!r} {verb}",
        hint=f"raise the limit (`shoal config set max_agents {settings.max_agents + 1}`) or "
        "terminate an agent (`shoal set-status AGENT terminated`); an agent that goes "
        "offline frees its seat",
    )


def come_back(tx: StoreTx, agent: Agent, now: float) -> Agent:
    """An away agent that has a seat is heard from again, seen now. Back from offline, it is
    working if it holds leases, else waiting (or still paused), and the log says so; silent
    but never written down offline, it is as it was, as if it had been heard in time."""
    if agent.status is not AgentStatus.OFFLINE:
        back = replace(agent, last_seen=now)
        tx.save_agent(back)
        return back
    status = present_status(tx, agent, now)
    back = with_idle_since(replace(agent, status=status, last_seen=now), agent, now)
    tx.save_agent(back)
    data = {"from": "offline", "to": status.value}
    tx.append_event(now, EventKind.AGENT_STATUS, None, agent.id, data)
    return back


def settle_in(tx: StoreTx, now: float, agent_id: str | None) -> FleetFull | None:
    """The fleet-wide part a claim or heartbeat asked for (``SettleFirst``), inside an
    exclusive transaction: every other silent agent offline, then ``agent_id`` back if it
    was away -- or, with no seat free, the refusal to raise once this commits (the others
    stay marked offline; it stays offline)."""
    settings = tx.load_settings()
    agents = tx.list_agents()
    offline_silent(tx, now, settings, agents, spare=agent_id)
    agent = next((a for a in agents if a.id == agent_id), None)
    if agent is None or not is_away(agent, now, settings):
        return None  # unknown, terminated or present: the call run again says which
    if not agent.manager:
        refusal = seat_refusal(agents, agent.id, now, settings, coming="back")
        if refusal is not None:
            return refusal
    come_back(tx, agent, now)
    return None
