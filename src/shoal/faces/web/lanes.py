"""The fleet page's picture: each agent a lane drawn as its deque, and the pool.

An agent's lane is the work-stealing deque of the design (docs/ARCHITECTURE.md): at the head
the tasks it runs now (held under leases), behind them its queue in the order its own claims
will take it (``Fleet.ready``: highest priority first; among equals, what it spawned newest
first, then what was sent to it oldest first), and at the far end the tail, where a thief
takes from. The pool is a lane of its own, in the order the
claim's pool step ranks it.

Bounded, so a fleet of 1,000 agents and 100k tasks draws in well under a second:

- one ``Fleet.status()`` gives every agent, its load and the tasks it holds;
- a lane draws at most ``PER_LANE`` queued tasks ("and N more" says the rest);
- the queue preview costs one read per agent, so only the first ``FULL_LANES`` lanes with a
  queue draw it; the others show their depth and link to their queue in the task list
  (a filter on the page narrows the lanes to the agents one wants to see in full).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from shoal.fleet import Fleet
from shoal.model import Agent, Task
from shoal.vocabulary import AgentStatus

__all__ = ["FULL_LANES", "PER_LANE", "Lane", "LaneCache", "Lanes", "lanes_of"]

#: Queued tasks a lane draws at most.
PER_LANE = 20
#: Lanes (with a queue) whose queue is read and drawn; the rest show only its depth.
FULL_LANES = 100
#: Seconds a task stays marked as just changed (the page highlights it as it arrives).
RECENT = 3.0
#: Seconds a snapshot of the lanes is shared at most (the ages it shows stay this fresh).
SHARED_FOR = 2.0


@dataclass(frozen=True)
class Lane:
    """One agent's deque (``agent`` None: the pool)."""

    agent: Agent | None
    held: tuple[Task, ...]  # the head: what it runs now
    queued: tuple[Task, ...]  # its queue from the head, at most PER_LANE
    depth: int  # pending tasks in the queue, all of them
    drawn: bool  # whether the queue was read (False: only its depth is known)
    idle_for: float | None = None
    heartbeat_age: float | None = None
    paused: bool = False
    expired: tuple[Task, ...] = ()  # held once, the lease ran out: not running any more

    @property
    def key(self) -> str:
        return self.agent.id if self.agent is not None else "pool"

    @property
    def more(self) -> int:
        """Queued tasks not drawn."""
        return max(0, self.depth - len(self.queued)) if self.drawn else self.depth


@dataclass(frozen=True)
class Lanes:
    """What the lanes region draws, and what it left out."""

    at: float
    pool: Lane
    agents: tuple[Lane, ...]
    counts: dict[str, int]
    hidden: int = 0  # agents left out by the filter or for being terminated
    terminated: int = 0
    matched: int = 0
    recent: frozenset[int] = field(default_factory=frozenset)


def _shown(agent: Agent, wanted: str) -> bool:
    if agent.status is AgentStatus.TERMINATED:
        return False
    if not wanted:
        return True
    text = wanted.lower()
    return text in agent.id.lower() or any(text in d.lower() for d in agent.domains)


def lanes_of(fleet: Fleet, wanted: str = "") -> Lanes:
    """The lanes of ``fleet``, for the agents whose id or domain contains ``wanted``."""
    status = fleet.status()
    now = status.at
    shown = [load for load in status.agents if _shown(load.agent, wanted)]
    terminated = sum(1 for load in status.agents if load.agent.status is AgentStatus.TERMINATED)
    expired: dict[str, list[Task]] = {}
    for task in status.expired:
        expired.setdefault(task.agent or "", []).append(task)
    lanes = []
    full = 0
    recent: set[int] = set()
    for load in shown:
        agent = load.agent
        queued: list[Task] = []
        drawn = agent.queued == 0
        if agent.queued and full < FULL_LANES:
            full += 1
            drawn = True
            # Own queue first, then pool tasks it could take: keep only its own.
            ahead = fleet.ready(agent.id, limit=PER_LANE)
            queued = [t for t in ahead if t.agent == agent.id]
        for task in (*load.held, *queued):
            if now - task.updated_at < RECENT:
                recent.add(task.id)
        lanes.append(
            Lane(
                agent=agent,
                held=load.held,
                queued=tuple(queued),
                depth=agent.queued,
                drawn=drawn,
                idle_for=(now - agent.idle_since) if agent.idle_since is not None else None,
                heartbeat_age=max(0.0, now - agent.last_seen),
                paused=agent.paused(now),
                expired=tuple(expired.get(agent.id, ())),
            )
        )
    pool_tasks = tuple(t for t in fleet.ready(None, limit=PER_LANE) if t.agent is None)
    recent.update(t.id for t in pool_tasks if now - t.updated_at < RECENT)
    pool = Lane(None, (), pool_tasks, status.pool, True)
    return Lanes(
        at=now,
        pool=pool,
        agents=tuple(lanes),
        counts=dict(status.counts),
        hidden=len(status.agents) - len(shown),
        terminated=terminated,
        matched=len(shown),
        recent=frozenset(recent),
    )


class LaneCache:
    """One read of the lanes per change, shared by every page that reloads them.

    Every open fleet page reloads its lanes when the live stream says the fleet changed, so
    fifty pages would read the fleet fifty times per change. A snapshot is kept under the
    live feed's cursor (the last event the feed has read): a page reloading for event N
    finds the feed at N or later, and a snapshot taken at that cursor was read after N was
    committed, so it shows the change. Without a cursor (nobody watching live) or after
    ``SHARED_FOR`` seconds, the lanes are read afresh. One read at a time: pages that ask
    together wait for the first and share what it read.
    """

    def __init__(self, shared_for: float = SHARED_FOR) -> None:
        self.shared_for = shared_for
        self.reads = 0  # reads of the fleet, for tests
        self._lock = threading.Lock()
        self._kept: dict[str, tuple[int, float, Lanes]] = {}

    def lanes(self, fleet: Fleet, wanted: str, cursor: int | None) -> Lanes:
        if cursor is None:
            self.reads += 1
            return lanes_of(fleet, wanted)
        with self._lock:
            kept = self._kept.get(wanted)
            if (
                kept is not None
                and kept[0] == cursor
                and time.monotonic() - kept[1] < self.shared_for
            ):
                return kept[2]
            read = lanes_of(fleet, wanted)
            self.reads += 1
            if len(self._kept) >= 64:  # a few filters in use at once; never grows unbounded
                self._kept.clear()
            self._kept[wanted] = (cursor, time.monotonic(), read)
            return read
