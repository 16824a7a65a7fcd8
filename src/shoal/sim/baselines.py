"""Baselines: five ways to hand out the same work, all on the real ``Fleet`` -- four ways
of running a fleet that shoal is measured against, and shoal itself. (Called baselines, not
policies, so that they are never taken for ``shoal.policy``, the fleet's own rules; the
command line still calls them policies: ``shoal sim --policy``.)

* ``push`` -- the hub-and-spoke "before": new work waits at the hub until the router's
  next round (every ``router_interval``, 30 min), which posts each task to its home agent's
  queue (``post(to=...)``). Stealing is off (both steal caps are 0), and an agent only ever
  runs its own queue: when it is empty the agent says it is idle and waits for the router.
* ``push+rebalance`` -- the same, plus the hub's rebalance every 5 minutes
  (``Fleet.rebalance``) with its safeguards: only agents idle for 2 minutes receive, only
  from queues deeper than 5, at most 3 per idle agent and 10 per cycle, never a task moved
  before, and across domains only simple work (priority >= 8, no skills). An agent still
  never claims outside its own queue, so every move is the rebalance's.
* ``pull`` -- one shared pool as the polling design of the source documents runs it: every
  task is posted to the pool -- spawned children too, and a fork-join task's join, as a
  task of its own when its last child is done (a chord's callback in Celery) -- and
  agents poll for work by its adaptive rule (at once after a
  task, then every ``poll_base`` = 5 min, doubling after 3 empty polls up to 30 min). No
  queues, no steals, and no wake-up: an idle agent learns of new work at its next poll.
* ``pull+wake`` -- the same pool, and idle agents wake the moment work appears, as a queue
  on a database with change notifications does (pgqueuer or Oban on LISTEN/NOTIFY, Celery
  with a broker): the best shared queue, and what a fleet would run instead of shoal. Every
  comparison is made against it (``metrics.REFERENCE``). No queues, no steals, no locality
  rules.
* ``shoal`` -- the real claim: work goes where the workload puts it (dealt tasks to their
  agent's queue, domain work to the pool, children to their spawner's queue), and each
  claim takes the own queue's head, else the best pool task, else steals from the tail of
  the busiest queue within the default caps. An idle agent wakes the moment work appears
  (the store's change notification), and otherwise polls by the fleet's default backoff --
  or at the moment work it passed over for its own domain's agents is free to take.

The baselines are run as they are described here, whatever the run asks: fleet settings
given to a run (``shoal sim --set``) tune ``shoal`` only, so a tuned shoal is always
compared against the same push, rebalance and pulls. (The workload model's own settings,
such as ``cold_start``, are the work's, and apply to every baseline alike.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shoal.errors import BadInput

__all__ = ["BASELINES", "Baseline", "get"]


@dataclass(frozen=True, slots=True)
class Baseline:
    """How the simulated fleet hands out work (see the module docstring)."""

    name: str
    #: New work waits at the hub for the router's round, then goes to its home agent.
    routed: bool = False
    router_interval: float = 1800.0
    #: Run ``Fleet.rebalance`` this often (None: never).
    rebalance_interval: float | None = None
    #: Agents only run their own queue (they never ask the fleet when it is empty).
    own_queue_only: bool = False
    #: Every task goes to the pool, whatever the workload says: spawned children too, and a
    #: fork's join when its children are done (``engine.Simulation._fork``).
    pool_only: bool = False
    #: Dealt tasks go to their agent's queue and children to their spawner's.
    honours_queues: bool = False
    #: Idle agents wake when new work appears (else they only poll).
    wakes: bool = False
    #: Idle agents poll by ``shoal.policy.poll_delay`` with the fleet's poll settings.
    polls: bool = False
    #: Fleet settings for the run (on top of the simulator's own: long leases).
    settings: dict[str, Any] = field(default_factory=dict)
    #: Settings given to a run apply (only shoal: the baselines are not tuned).
    tunable: bool = False


_NO_STEALS = {"max_steals_per_agent": 0, "max_steals_per_cycle": 0}
#: The rebalance's caps are the steal caps, so push+rebalance keeps them and turns the
#: claim's steals off another way: no queue is deep enough to rob. (An agent that runs only
#: its own queue would otherwise steal when all it has left are ready joins, which a claim
#: takes after a steal.)
_NO_CLAIM_STEALS = {"steal_threshold": 1_000_000}
#: The baselines know nothing of shoal's locality rules.
_NO_LOCALITY = {"domain_wait": 0}

#: One shared pool: nothing is queued to an agent, so there is nothing to steal.
_POOL_ONLY = {**_NO_STEALS, **_NO_LOCALITY}
#: The polling design of the source documents: every 5 minutes, doubling after 3 empty
#: polls up to 30 minutes.
_SEED_POLLING = {"poll_base": 300, "poll_max": 1800, "poll_backoff_after": 3}

#: The baselines, in the order the standard comparison shows them.
BASELINES: dict[str, Baseline] = {
    p.name: p
    for p in (
        Baseline("push", routed=True, own_queue_only=True, settings={**_NO_STEALS, **_NO_LOCALITY}),
        Baseline(
            "push+rebalance",
            routed=True,
            own_queue_only=True,
            rebalance_interval=300.0,
            settings={**_NO_LOCALITY, **_NO_CLAIM_STEALS},
        ),
        Baseline("pull", pool_only=True, polls=True, settings={**_POOL_ONLY, **_SEED_POLLING}),
        Baseline("pull+wake", pool_only=True, wakes=True, polls=True, settings=_POOL_ONLY),
        Baseline("shoal", honours_queues=True, wakes=True, polls=True, tunable=True),
    )
}


def get(name: str) -> Baseline:
    """The baseline called ``name``, or a clear error listing the ones there are (the user
    calls them policies: ``shoal sim --policy NAME``)."""
    baseline = BASELINES.get(name)
    if baseline is None:
        raise BadInput(
            f"there is no policy called {name!r}", hint=f"pick one of: {', '.join(BASELINES)}"
        )
    return baseline
