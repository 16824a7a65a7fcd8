"""CPU per worker cycle of two shoal checkouts, measured in turns: which one claims cheaper?

Why this exists
---------------
``bench/claims.py`` compares shoal with huey by throughput, and on a shared 2-core machine
huey's own rate moves by a factor of two between runs under other work, so a change of a
few percent in shoal cannot be read from its ratios. This measures only shoal's cycle --
``complete(lease, then_claim=1)`` at batch 1, ``complete_many(leases, then_claim=10)`` at
batch 10, one process, SQLite at ``synchronous=NORMAL`` -- as CPU time
(``time.process_time``, best of three rounds of ``--cycles``, as ``profile_claims.py``
does), in a fresh process per measurement, the two checkouts taking turns ``--rounds``
times, so both meet the same machine. It prints each round's figures and the median of
the rounds' ratios (B over A); the load average at the start and the end.

    .venv/bin/python bench/ab_cycle.py --a ../base/src --b src --rounds 7
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child(cycles: int) -> None:  # pragma: no cover - runs in a child process
    """One measurement: CPU microseconds per cycle at batch 1 and 10, as JSON."""
    sys.path.insert(0, str(HERE))
    from profile_claims import Cycles, cpu_per_cycle, fresh_fleet

    out = {}
    for batch in (1, 10):
        tasks = batch * cycles * 4 + batch * 2
        with fresh_fleet(None, "normal", tasks) as fleet:
            loop = Cycles(fleet, batch)
            loop.run(50)  # warm
            out[str(batch)] = cpu_per_cycle(loop.run, cycles)
    print(json.dumps(out))


def measure(src: str, cycles: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(Path(src).resolve())}
    done = subprocess.run(
        [sys.executable, __file__, "--child", "--cycles", str(cycles)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", default="", help="the first checkout's src folder")
    parser.add_argument("--b", default="", help="the second checkout's src folder")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.cycles)
        return 0
    if not args.a or not args.b:
        parser.error("--a and --b name the two checkouts' src folders")
    print(f"load average at the start: {os.getloadavg()}")
    ratios: dict[str, list[float]] = {"1": [], "10": []}
    for number in range(args.rounds):
        if number % 2:  # the other order every second round
            b = measure(args.b, args.cycles)
            a = measure(args.a, args.cycles)
        else:
            a = measure(args.a, args.cycles)
            b = measure(args.b, args.cycles)
        for batch, found in ratios.items():
            found.append(b[batch] / a[batch])
        print(
            f"round {number + 1}: batch 1 A {a['1']:.0f} us, B {b['1']:.0f} us; "
            f"batch 10 A {a['10']:.0f} us, B {b['10']:.0f} us"
        )
    for batch, found in ratios.items():
        print(
            f"batch {batch}: B / A CPU per cycle, median {statistics.median(found):.3f} "
            f"(rounds {', '.join(f'{r:.3f}' for r in found)})"
        )
    print(f"load average at the end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
