"""Real processes claiming at the same tick of a schedule, on a SQLite file and on
PostgreSQL, with no monitor: each tick's occurrence is posted once, by whichever claim
looks first, and done once."""

from __future__ import annotations

import time
from collections import Counter
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier

from shoal import Fleet, ManualClock
from tests import procs

WORKERS = 6
TICKS = 5
EVERY = 60.0


def claim_each_tick(url: str, agent: str, first: float, start: Barrier, out: Connection) -> None:
    """At each tick (a clock of its own, set to the same moment in every process), claim
    together with the others, complete what was claimed, and wait for the others."""
    clock = ManualClock(first)
    fleet = Fleet.open(url, create=False, clock=clock)
    done: list[int] = []
    for tick in range(1, TICKS + 1):
        clock.set(first + tick * EVERY)
        fleet.heartbeat(agent)
        start.wait()
        claim = fleet.claim(agent)
        for lease in claim.leases:
            fleet.complete(lease)
            done.append(lease.task_id)
        start.wait()  # every claim of this tick is over before the next tick
    fleet.close()
    out.send(done)


def test_claims_at_the_same_tick_post_its_occurrence_once(
    shared_store: tuple[str, str],
) -> None:
    _, url = shared_store
    first = time.time() - 3600
    with Fleet.open(url, clock=ManualClock(first)) as fleet:
        fleet.configure(max_agents=WORKERS)
        names = [f"w{i}" for i in range(WORKERS)]
        for name in names:
            fleet.register(name)
        sensor = fleet.schedule("sensor", every=EVERY)
        assert sensor.last_task is not None
        fleet.cancel(sensor.last_task)  # the tick at creation: out of the way

    reports = procs.race(claim_each_tick, [(url, name, first) for name in names])

    done = Counter(task for report in reports for task in report)
    with Fleet.open(url) as fleet:
        log = fleet.events(limit=100_000)
        posted = [e.task_id for e in log if e.kind == "posted" and e.data.get("schedule")]
        assert len(posted) == 1 + TICKS, "a tick posted twice, or not at all"
        assert set(done) == set(posted[1:]) and set(done.values()) == {1}
        kept = fleet.get_schedule(sensor.id)
        assert (kept.posted, kept.skipped) == (1 + TICKS, 0)
        assert kept.next_at == first + (TICKS + 1) * EVERY
