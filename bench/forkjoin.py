"""Where the fork-join tree's time goes: shoal against pull+wake, and the same tree under
plain list schedulers.

shoal and pull+wake both keep every agent busy while any task it could take waits (0.0%
eligible idle), so the makespans differ only by the time agents are free because nothing
is ready -- before every agent first has work (the ramp), and after the last moment every
agent was busy (the drain). This prints that account from the simulator's trace, and then
runs the same trees (durations and all) under one shared list of ready tasks ordered five
ways, outside shoal, to show what the order alone is worth. Between the two it pairs shoal
with pull+wake over more seeds (``--paired-seeds``), as ``scheduling.paired`` does for
Pareto. docs/scheduling.md (*The fork-join tree*) quotes it. Usage::

    .venv/bin/python bench/forkjoin.py [--seeds 10] [--paired-seeds 40]
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import statistics
from collections.abc import Callable
from dataclasses import dataclass, fields

from scheduling import paired
from shoal import sim
from shoal.sim.metrics import REFERENCE
from shoal.sim.workloads import Workload, build

LEAVES = ("fib(0)", "fib(1)")


@dataclass(frozen=True, slots=True)
class Account:
    """One run's free agent-minutes by phase, and how its end went."""

    ratio: float
    ramp: float  # agent-minutes free before every agent first had work
    middle: float
    drain: float  # agent-minutes free after the last moment every agent was busy
    drain_minutes: float  # how long that last stretch lasted
    after_last_leaf: float  # minutes from the last leaf's end to the makespan
    stuck: float  # share of agent time free while only work it may not take waited


def account(policy: str, seed: int) -> Account:
    result = sim.simulate("forkjoin", policy, seed)
    trace, metrics = result.trace, result.metrics
    agents = len(trace.workload.agents)
    edges = sorted([(s.start, 1) for s in trace.segments] + [(s.end, -1) for s in trace.segments])
    spans: list[tuple[float, float, int]] = []  # (from, to, agents free)
    busy, since = 0, 0.0
    for at, change in edges:
        if at > since:
            spans.append((since, at, agents - busy))
        busy, since = busy + change, at
    full = [(a, b) for a, b, free in spans if free == 0]
    first, last = (full[0][0], full[-1][1]) if full else (0.0, 0.0)

    def free(keep: Callable[[float, float], bool]) -> float:
        return sum((b - a) * n for a, b, n in spans if keep(a, b)) / 60

    leaves = max(s.end for s in trace.segments if s.title in LEAVES)
    return Account(
        ratio=metrics.ratio,
        ramp=free(lambda a, b: b <= first),
        middle=free(lambda a, b: a >= first and b <= last),
        drain=free(lambda a, b: a >= last),
        drain_minutes=(trace.makespan - last) / 60,
        after_last_leaf=(trace.makespan - leaves) / 60,
        stuck=metrics.idle_while_waiting - metrics.eligible_idle_while_waiting,
    )


# --- the same tree under one shared list of ready tasks -------------------------------

#: How a free agent picks among ready parts: each key is (remaining path, order of becoming
#: ready, is a join) -> sort key, smallest first.
Order = Callable[[float, int, bool], tuple[float, ...]]
ORDERS: dict[str, Order] = {
    "ready first (a shared queue: pull+wake)": lambda rest, n, join: (n,),
    "newest first (depth-first)": lambda rest, n, join: (-n,),
    "joins first, then ready first": lambda rest, n, join: (0 if join else 1, n),
    "joins last, then ready first": lambda rest, n, join: (1 if join else 0, n),
    "longest path to the end first (knows every length)": lambda rest, n, join: (-rest, n),
}


def list_schedule(work: Workload, order: Order) -> float:
    """The makespan over the lower bound of ``work``'s tree when each free agent takes the
    first ready part by ``order``: no queues, no steals, no cold starts."""
    tasks = work.tasks
    parent = {c: i for i, t in enumerate(tasks) for c in t.children}
    below: dict[int, float] = {}

    def subtree(i: int) -> float:  # the longest path through task i and what it spawns
        if i not in below:
            t = tasks[i]
            below[i] = t.duration + max((subtree(c) for c in t.children), default=0.0) + t.join
        return below[i]

    def joins_above(i: int) -> float:
        total = 0.0
        while i in parent:
            i = parent[i]
            total += tasks[i].join
        return total

    counter = itertools.count()
    ready: list[tuple[tuple[float, ...], int, bool]] = []

    def make_ready(i: int, join: bool) -> None:
        rest = (tasks[i].join if join else subtree(i)) + joins_above(i)
        heapq.heappush(ready, (order(rest, next(counter), join), i, join))

    for root in work.roots:
        make_ready(root, False)
    running: list[tuple[float, int, int, bool]] = []
    waiting: dict[int, int] = {}
    free, now = len(work.agents), 0.0
    while ready or running:
        while free and ready:
            _, i, join = heapq.heappop(ready)
            length = tasks[i].join if join else tasks[i].duration
            heapq.heappush(running, (now + length, next(counter), i, join))
            free -= 1
        now, _, i, join = heapq.heappop(running)
        free += 1
        if not join and tasks[i].children:
            waiting[i] = len(tasks[i].children)
            for child in tasks[i].children:
                make_ready(child, False)
            continue
        if i in parent:  # done for good: the last child done makes its parent's join ready
            waiting[parent[i]] -= 1
            if not waiting[parent[i]]:
                make_ready(parent[i], True)
    return now / work.lower_bound()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--paired-seeds", type=int, default=40, help="shoal - pull+wake over")
    args = parser.parse_args()
    seeds = range(args.seeds)
    print(f"fork-join, seeds 0-{seeds[-1]}: agent-minutes free (means)\n")
    head = (
        f"{'policy':10} {'÷ bound':>7} {'ramp':>6} {'middle':>6} {'drain':>6} "
        f"{'drain min':>9} {'last leaf→end min':>17} {'free beside others work':>23}"
    )
    print(head + "\n" + "─" * len(head))
    for policy in (REFERENCE, "shoal"):
        runs = [account(policy, seed) for seed in seeds]
        m = {
            f.name: statistics.mean(float(getattr(r, f.name)) for r in runs)
            for f in fields(Account)
        }
        print(
            f"{policy:10} {m['ratio']:7.3f} {m['ramp']:6.1f} {m['middle']:6.1f} "
            f"{m['drain']:6.1f} {m['drain_minutes']:9.1f} "
            f"{m['after_last_leaf']:17.1f} {m['stuck']:23.2%}"
        )
    more = paired("forkjoin", range(args.paired_seeds))
    print(
        f"\nOver {more['seeds']} seeds: pull+wake {more['pull_wake']:.3f}, shoal "
        f"{more['shoal']:.3f}; shoal - pull+wake {more['difference']:+.4f} ± "
        f"{more['interval_95']:.4f} (95%), shoal shorter on {more['shoal_won']}"
    )
    agents = len(build("forkjoin", 0).agents)
    print(f"\nThe same trees, {agents} agents, one shared list of ready parts taken by:\n")
    works = [build("forkjoin", seed) for seed in seeds]
    for name, order in ORDERS.items():
        ratio = statistics.mean(list_schedule(w, order) for w in works)
        print(f"  {name:52} {ratio:.3f}")


if __name__ == "__main__":
    main()
