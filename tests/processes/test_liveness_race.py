"""Real processes claiming at once while an agent lies silent, on a SQLite file and on
PostgreSQL, with no monitor: its queue is written down back in the pool once, and every
task is done exactly once. The claimers were silent too when they started, so each first
claim brings its own agent back, taking a seat, while the others do the same."""

from __future__ import annotations

import time
from collections import Counter

from shoal import AgentStatus, Fleet, ManualClock
from tests import procs

WORKERS = 6
QUEUED = 300


def test_claimers_racing_past_a_silent_agent_do_every_task_once(
    shared_store: tuple[str, str],
) -> None:
    _, url = shared_store
    fleet = Fleet.open(url, clock=ManualClock(time.time() - 30))
    fleet.configure(max_agents=WORKERS + 1, heartbeat_timeout=5)
    fleet.register("iris")
    queued = set(fleet.post_many([{"title": f"q{i}", "to": "iris"} for i in range(QUEUED)]))
    pinned = fleet.post("iris only", to="iris", pinned=True).id
    names = [f"w{i}" for i in range(WORKERS)]
    for name in names:
        fleet.register(name)
    fleet.close()

    reports = procs.race(procs.drain_coming_back, [(url, name) for name in names])

    done = Counter(task for r in reports for task in r["done"])
    assert set(done) == queued and set(done.values()) == {1}, "a task lost or done twice"
    with Fleet.open(url) as fleet:
        log = fleet.events(limit=100_000)
        offline = [e for e in log if e.kind == "agent.offline" and e.agent == "iris"]
        assert len(offline) == 1, "iris written down offline more than once"
        returned = Counter(e.task_id for e in log if e.kind == "returned")
        assert set(returned) == queued and set(returned.values()) == {1}
        completed = Counter(e.task_id for e in log if e.kind == "completed")
        assert set(completed) == queued and set(completed.values()) == {1}
        assert fleet.agent("iris").status is AgentStatus.OFFLINE
        assert fleet.get(pinned).agent == "iris"  # pinned work waits for its agent
        assert fleet.status().counts["pending"] == 1
