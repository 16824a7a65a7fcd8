"""How long ``shoal why`` takes on the scale fleet of ``bench/scale.py``: 1,000 agents and
100,000 pending tasks (70% in the pool, 30% in agents' queues, the thieves and victims).

Why this exists
---------------
``Fleet.why_task`` and ``why_agent`` read what a claim reads -- one task, the agents, the
claimed tasks, the queue depths, the steal window; an agent's candidate look-ups and the
pending tasks counted by skill set -- and never every pending task. This checks that the
answer stays under ``LIMIT_MS`` (100 ms) at that size, for a task in the pool, one in a
queue, one a thief could steal, one running, and for a working agent, a thief and an agent
with nothing to do. History (finished tasks) is not built: no read of ``why`` touches it
beyond the indexes ``bench/scale.py`` already shows history leaves alone.

Run ``.venv/bin/python bench/why.py`` (SQLite; ``--store postgres`` for PostgreSQL).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import scale
from shoal import Fleet

LIMIT_MS = 100.0
SAMPLES = 7


def median_ms(call: Callable[[], object]) -> float:
    times = []
    for _ in range(SAMPLES):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1e3


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="shoal why on the 100k-task scale fleet")
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--pg-url", default=scale.DEFAULT_PG_URL)
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--queued", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, default=None, help="SQLite: build here once, reuse")
    args = parser.parse_args(argv)
    schema = f"why_{uuid.uuid4().hex[:8]}"
    built = False
    if args.store == "sqlite":
        path = args.keep or Path(tempfile.mkdtemp(prefix="shoal-why-")) / "fleet.db"
        built = path.exists()
        url = f"sqlite://{path}"
    else:
        url = f"{args.pg_url}?schema={schema}"
    who = scale.layout(args.agents)
    began = time.perf_counter()
    with Fleet.open(url, create=True) as fleet:
        posted = 0
        if not built:
            posted = scale.build(fleet, who, args.queued)
            for agent in who.cyclers[:50]:  # some agents at work, as in a busy fleet
                fleet.claim(agent)
        fleet.register("lacks-all", skills=["zz"])  # nothing fits it: its nearest misses
        print(f"built {posted} tasks, {args.agents} agents in {time.perf_counter() - began:.0f}s")
        queued = next(t.id for t in fleet.tasks(state="pending", limit=5000) if t.agent)
        pool = next(t.id for t in fleet.tasks(state="pending", limit=100_000) if not t.agent)
        running = fleet.tasks(state="claimed", limit=1)[0].id
        rare = next(
            t.id for t in fleet.tasks(state="pending", limit=5000) if t.agent in who.victims
        )
        cases: dict[str, Callable[[], object]] = {
            "task in the pool": lambda: fleet.why_task(pool),
            "task in a queue": lambda: fleet.why_task(queued),
            "task a thief may steal": lambda: fleet.why_task(rare),
            "running task": lambda: fleet.why_task(running),
            "agent at work": lambda: fleet.why_agent(who.cyclers[0]),
            "idle agent with work": lambda: fleet.why_agent(who.cyclers[-1]),
            "thief": lambda: fleet.why_agent(who.thieves[0]),
            "agent nothing fits": lambda: fleet.why_agent("lacks-all"),
        }
        worst = 0.0
        for name, call in cases.items():
            ms = median_ms(call)
            worst = max(worst, ms)
            print(f"{name:24} {ms:7.2f} ms")
        verdict = "ok" if worst < LIMIT_MS else "SLOW"
        print(f"slowest {worst:.1f} ms (limit {LIMIT_MS:.0f} ms): {verdict}")
        print(f"{'for scale: status()':24} {median_ms(fleet.status):7.1f} ms")
    return 0 if worst < LIMIT_MS else 1


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    sys.exit(main())
