"""How long ``GET /metrics`` takes on a large SQLite fleet: 1,000 agents, 100k tasks.

Run: ``.venv/bin/python bench/metrics_scrape.py [PATH.db]`` (about two minutes, most of it
filling the fleet). It scrapes through FastAPI's TestClient after 2,000 claims and 800
completions made once the server started, and prints the first scrape (which reads those
events) and the median of the next ones, beside ``Fleet.status()`` alone.
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient

from shoal import Fleet, ManualClock
from shoal.faces.exposure import Exposure, allowed_hosts
from shoal.faces.web.app import create_app

AGENTS = 1000
TASKS = 100_000
BATCH = 5000


def main(path: Path) -> None:
    fleet = Fleet.open(f"sqlite://{path}", clock=ManualClock(), rng=random.Random(1))
    fleet.configure(max_agents=AGENTS)
    agents = [f"agent-{i:04d}" for i in range(AGENTS)]
    for agent in agents:
        fleet.register(agent, max_concurrent=5)
    for b in range(TASKS // BATCH):  # half in the pool, half in the agents' queues
        fleet.post_many(
            {"title": f"t{b}-{i}", "to": agents[i % AGENTS] if i % 2 else None}
            for i in range(BATCH)
        )
    exposure = Exposure("127.0.0.1", 8765, None, allowed_hosts("127.0.0.1", ["testserver"]))
    client = TestClient(create_app(fleet, exposure))
    for agent in agents[:400]:
        claim = fleet.claim(agent, 5)
        for lease in claim.leases[:2]:
            fleet.complete(lease)
    took = []
    for _ in range(11):
        started = time.perf_counter()
        assert client.get("/metrics").status_code == 200
        took.append(time.perf_counter() - started)
    status = []
    for _ in range(10):
        started = time.perf_counter()
        fleet.status()
        status.append(time.perf_counter() - started)
    print(
        f"/metrics, {AGENTS} agents, {TASKS} tasks: first scrape {took[0]:.3f}s, "
        f"then median {statistics.median(took[1:]):.3f}s (min {min(took[1:]):.3f}s); "
        f"Fleet.status() alone: median {statistics.median(status):.3f}s"
    )


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(folder) / "fleet.db")
