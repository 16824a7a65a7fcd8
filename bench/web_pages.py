"""How long the web face's pages take on a large SQLite fleet: 1,000 agents, 100k tasks.

Run: ``make bench-web`` or ``.venv/bin/python bench/web_pages.py [--db PATH] [--json FILE]``
(a minute or two, most of it filling the fleet). Through FastAPI's TestClient, after 2,000
claims and 800 completions made once the server started, it times each page and route a
dashboard or a scraper asks for (the fleet page, its live lanes, health, the task list,
``/metrics``, ``/api/v1/status``) and, as the floor they all stand on, ``Fleet.status()``
alone: each figure is the median of ``--repeat`` requests, printed and written by name.
The issue's target: the fleet page under one second.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
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
ROUTES = ("/", "/lanes", "/health", "/tasks", "/metrics", "/api/v1/status")


def fill(path: Path) -> Fleet:
    fleet = Fleet.open(f"sqlite://{path}", clock=ManualClock(), rng=random.Random(1))
    fleet.configure(max_agents=AGENTS)
    agents = [f"agent-{i:04d}" for i in range(AGENTS)]
    for agent in agents:
        fleet.register(agent, max_concurrent=5, domains=f"d{len(agent) % 7}")
    for b in range(TASKS // BATCH):  # half in the pool, half in the agents' queues
        fleet.post_many(
            {"title": f"t{b}-{i}", "to": agents[i % AGENTS] if i % 2 else None}
            for i in range(BATCH)
        )
    return fleet


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, help="the fleet's file (default: a temporary one)")
    parser.add_argument("--repeat", type=int, default=7, help="requests per route")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        fleet = fill(args.db or Path(folder) / "fleet.db")
        exposure = Exposure("127.0.0.1", 8765, None, allowed_hosts("127.0.0.1", ["testserver"]))
        owner = "the-owners-sign-in-secret-for-the-bench"
        client = TestClient(create_app(fleet, exposure, local_secret=owner))
        client.headers["Authorization"] = f"Bearer {owner}"
        for agent in [a.id for a in fleet.agents()][:400]:
            claim = fleet.claim(agent, 5)
            for lease in claim.leases[:2]:
                fleet.complete(lease)
        figures: dict[str, float] = {}
        for route in ROUTES:
            took = []
            for _ in range(args.repeat + 1):
                started = time.perf_counter()
                answer = client.get(route)
                took.append(time.perf_counter() - started)
                assert answer.status_code == 200, (route, answer.status_code)
            name = route.strip("/").replace("/", "_") or "fleet"
            figures[f"web.{name}_first_s"] = round(took[0], 4)
            figures[f"web.{name}_median_s"] = round(statistics.median(took[1:]), 4)
        floor = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            fleet.status()
            floor.append(time.perf_counter() - started)
        figures["web.fleet_status_median_s"] = round(statistics.median(floor), 4)
        fleet.close()
    print(f"{AGENTS} agents, {TASKS:,} tasks (SQLite); median of {args.repeat} requests")
    for route in ROUTES:
        name = route.strip("/").replace("/", "_") or "fleet"
        median = figures[f"web.{name}_median_s"]
        ratio = median / figures["web.fleet_status_median_s"]
        print(f"  {route:<16} {median * 1000:8.1f} ms  ({ratio:4.1f}x Fleet.status)")
    print(f"  Fleet.status()   {figures['web.fleet_status_median_s'] * 1000:8.1f} ms")
    verdict = "pass" if figures["web.fleet_median_s"] < 1.0 else "miss"
    print(f"the fleet page under 1 s: {verdict}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
