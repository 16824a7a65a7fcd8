"""One agent of a chaos run, through the Python API, in a process of its own (the driver
kills it with ``kill -9``, freezes it with SIGSTOP, and starts it again)::

    python -m tests.chaos.agent URL AGENT SEED

Its handler takes a few milliseconds of "work" (a wait its stop can cut short), fails one
task in twenty (a flaky task: retried), and returns who did what. It runs until SIGTERM.
"""

from __future__ import annotations

import random
import sys

from shoal import Fleet
from shoal.runtime import TaskContext, Worker

FLAKY = 0.05


def main(url: str, agent: str, seed: int) -> int:
    rng = random.Random(seed)
    fleet = Fleet.open(url, create=False)
    worker = Worker(fleet, agent, max_concurrent=2, drain=5)

    @worker.task
    def handle(ctx: TaskContext) -> object:
        ctx.stopped.wait(rng.uniform(0.0, 0.02))  # the work; a stop cuts it short
        if rng.random() < FLAKY:
            raise RuntimeError("a flaky task")
        return {"by": agent, "task": ctx.task.id}

    worker.run(handle_signals=True)
    fleet.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
