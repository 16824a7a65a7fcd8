"""One agent of a fork-join replay (``bench/replay.py forkjoin``): a real process running
shoal's ``Worker``, whose handler does what the simulator's fork-join agent does through
the same Fleet API -- sleep for a task's first part, post its children (each carrying its
own subtree in its payload) in one call and defer on them, and, when the task comes back
once they are done, sleep for its join. Usage (the replay starts one per agent)::

    python bench/_forkjoin_worker.py URL AGENT
"""

from __future__ import annotations

import sys
import time
from typing import Any

from shoal import Fleet
from shoal.runtime import TaskContext, Worker


def handle(ctx: TaskContext) -> Any:
    part = ctx.task.payload
    children = part.get("c") or []
    if children and ctx.after():  # it waited on its children: this is its join
        time.sleep(part["j"])
        return None
    time.sleep(part["s"])
    if not children:
        return None
    posts = [{"title": c["t"], "payload": c, "parent": ctx.task.id} for c in children]
    return ctx.defer(ctx.fleet.post_many(posts))  # one moment: taken in the listed order


def main() -> None:
    url, agent = sys.argv[1], sys.argv[2]
    Worker(Fleet.open(url), agent, handle, drain=0).run(handle_signals=True)


if __name__ == "__main__":
    main()
