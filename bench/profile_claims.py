"""Where a claim's time goes on SQLite: statements, CPU inside and outside SQLite, and the
writer queue under contention.

Why this exists
---------------
``bench/claims.py`` says how fast shoal claims against huey; this says why. It runs the
two calls a busy worker makes -- ``complete(lease, then_claim=1)`` (batch 1) and
``complete_many(leases, then_claim=10)`` (batch 10) -- on a fresh SQLite fleet and prints,
for each:

* the statements one cycle runs, by name (``queries.sql``), counted twice: by the store's
  own calls and by SQLite's trace hook (``set_trace_callback``), which also sees the rows
  of an ``executemany`` and the triggers;
* microseconds per cycle of CPU (``time.process_time``, one process, no profiler), split
  into inside SQLite (every call into the driver, timed), the writer queue (taking and
  giving its turn) and Python (the rest);
* the top of a cProfile of the same cycles, by cumulative and by own time;
* for scale, the same loop done by hand, as the benchmark's raw ceiling does it: one
  transaction per task that acks with an ``UPDATE`` and claims with an
  ``UPDATE ... RETURNING``, same durability (``--raw``).

With ``--procs 4,16`` it also runs that many worker processes draining one fleet at batch
1 and says, per cycle, how long each waited for its turn in the writer queue, held it
(on a CPU, in SQLite), and spent outside it, the hand-off between turns, context switches
and the time spent runnable but not running -- where throughput goes when processes take
turns on two cores (``_profile_procs``). ``--instructions`` counts the instructions of a
cycle under callgrind, the one figure a noisy machine does not move
(``_profile_instructions``); ``--pages`` lists the pages each commit writes, by the table
or index they belong to (``_profile_pages``); ``--py-spy`` adds a py-spy sampling profile
of the batch-1 cycles (``pip install py-spy``; it needs the right to trace a child
process).

The timing wrappers (``_profile_meter``) reach into the store's private connection and
writer queue (``Fleet._store._d``): this is a tool for reading shoal's insides, not an API.
Their own cost is kept out of the CPU figure (measured on a separate, unwrapped run).

Run ``.venv/bin/python bench/profile_claims.py`` (about 30 s here); with
``PYTHONPATH=<another checkout>/src`` it profiles that checkout's shoal with the same tool.
``--only`` leaves out the one-process part, for the other figures alone.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from _profile_instructions import instructions, steps
from _profile_meter import Meter, instrument
from _profile_pages import pages
from _profile_procs import contention
from shoal import Fleet
from shoal.model import Claim, Lease

PHASES = ("batch 1", "batch 10")


# ---------------------------------------------------------------------- the cycles


def url_of(folder: Path, durability: str) -> str:
    return f"sqlite://{(folder / 'fleet.db').resolve()}?synchronous={durability}"


@contextmanager
def fresh_fleet(root: Path | None, durability: str, tasks: int) -> Iterator[Fleet]:
    """A new fleet in a temporary folder with ``tasks`` pool tasks and one agent, "solo",
    that may hold ten leases."""
    folder = Path(tempfile.mkdtemp(prefix="shoal-profile-", dir=root))
    try:
        fleet = Fleet.open(url_of(folder, durability))
        fleet.configure(max_agents=64)
        posted = 0
        while posted < tasks:
            chunk = min(1000, tasks - posted)
            fleet.post_many([{"title": f"t{posted + i}"} for i in range(chunk)])
            posted += chunk
        fleet.register("solo", max_concurrent=10)
        try:
            yield fleet
        finally:
            fleet.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class Cycles:
    """A worker's loop, one cycle per call: batch 1 completes its lease and claims the
    next in the same transaction; batch 10 completes ten and claims ten."""

    def __init__(self, fleet: Fleet, batch: int) -> None:
        self.fleet, self.batch = fleet, batch
        self.leases: list[Lease] = list(fleet.claim("solo", n=batch).leases)

    def run(self, count: int) -> None:
        fleet, batch = self.fleet, self.batch
        for _ in range(count):
            nxt: Claim | None
            if batch == 1:
                nxt = fleet.complete(self.leases[0], None, then_claim=1).next
            else:
                nxt = fleet.complete_many([(x, None) for x in self.leases], then_claim=batch).next
            if nxt is None or len(nxt.leases) != batch:
                raise RuntimeError("the fleet ran out of tasks: raise the pre-fill")
            self.leases = list(nxt.leases)


def cpu_per_cycle(run: Callable[[int], None], cycles: int) -> float:
    """Microseconds of this process's CPU per cycle, best of three rounds (the machine is
    shared; the least disturbed round is the closest to the cost)."""
    best = float("inf")
    for _ in range(3):
        began = time.process_time()
        run(cycles)
        best = min(best, (time.process_time() - began) / cycles * 1e6)
    return best


def profile_top(run: Callable[[int], None], cycles: int, top: int) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    run(cycles)
    profiler.disable()
    out = io.StringIO()
    for order in ("cumulative", "tottime"):
        out.write(f"--- sorted by {order} (cProfile, {cycles} cycles) ---\n")
        stats = pstats.Stats(profiler, stream=out).strip_dirs().sort_stats(order)
        stats.print_stats(top)
    return _trim(out.getvalue())


def _trim(report: str) -> str:
    """pstats' report without its blank lines and preamble noise."""
    keep = []
    for line in report.splitlines():
        if not line.strip() or line.strip().startswith(("Ordered by", "List reduced")):
            continue
        keep.append(line.rstrip())
    return "\n".join(keep)


def one_process(args: argparse.Namespace) -> None:
    cycles = args.cycles
    for batch, phase in zip((1, 10), PHASES, strict=True):
        # CPU and timed: 3 rounds each; profiled and counted: 1 each; the first claim
        tasks = batch * cycles * 8 + batch * 2
        with fresh_fleet(args.dir, args.durability, tasks) as fleet:
            loop = Cycles(fleet, batch)
            cpu = cpu_per_cycle(loop.run, cycles)
            prof = profile_top(loop.run, cycles, args.top)
            meter = instrument(fleet)
            timed = _least_of_three(meter, loop, cycles)
            meter.tracing(True)
            loop.run(cycles)  # counted
        print(f"\n=== {phase}: {_call(batch)}, {cycles} cycles, one process ===")
        meter.sqlite, meter.queue_wait, meter.held = timed.sqlite, timed.queue_wait, timed.held
        meter.spent = timed.spent
        sqlite_us = meter.sqlite / cycles * 1e6
        queue_us = meter.queue_wait / cycles * 1e6
        print(
            f"CPU per cycle: {cpu:.0f} us = inside SQLite (the driver's calls) "
            f"{sqlite_us:.0f} us + writer queue {queue_us:.1f} us + Python "
            f"{cpu - sqlite_us - queue_us:.0f} us "
            f"(per task: {cpu / batch:.1f} us; checkpoints, on a connection of their own, "
            "are in the CPU but not in the statements)"
        )
        print(f"writer queue held per cycle: {meter.held / cycles * 1e6:.0f} us (wall)")
        _print_statements(meter, cycles)
        print(prof)


def _least_of_three(meter: Meter, loop: Cycles, cycles: int) -> Meter:
    """Three timed rounds without the trace hook (a call into Python per statement): the
    least time of each figure, for the least disturbed is the closest to the cost."""
    least = Meter()
    least.sqlite = least.queue_wait = least.held = float("inf")
    for _ in range(3):
        meter.reset()
        loop.run(cycles)
        least.sqlite = min(least.sqlite, meter.sqlite)
        least.queue_wait = min(least.queue_wait, meter.queue_wait)
        least.held = min(least.held, meter.held)
        for name, spent in meter.spent.items():
            least.spent[name] = min(least.spent.get(name, spent), spent)
    meter.reset()
    return least


def _call(batch: int) -> str:
    if batch == 1:
        return "complete(lease, then_claim=1)"
    return f"complete_many({batch} leases, then_claim={batch})"


def _print_statements(meter: Meter, cycles: int) -> None:
    calls = sum(meter.calls.values())
    traced = sum(meter.traced.values())
    print(
        f"statements per cycle: {calls / cycles:.2f} run by the store, {traced / cycles:.2f} "
        "started inside SQLite (executemany rows and trigger programs count)"
    )
    print("     calls  started  us (wall)  statement")
    for name in sorted(meter.calls, key=lambda n: -meter.spent.get(n, 0.0)):
        print(
            f"    {meter.calls[name] / cycles:6.2f}  {meter.traced[name] / cycles:7.2f}  "
            f"{meter.spent.get(name, 0.0) / cycles * 1e6:9.1f}  {name}"
        )


# ---------------------------------------------------------------------- raw SQLite


_RAW_SCHEMA = """
CREATE TABLE q (id INTEGER PRIMARY KEY, state TEXT NOT NULL, owner TEXT, token TEXT,
                expires REAL, result TEXT);
CREATE INDEX q_pending ON q (id) WHERE state = 'pending';
"""
_RAW_CLAIM = (
    "UPDATE q SET state = 'claimed', owner = ?, token = ?, expires = ? "
    "WHERE id = (SELECT id FROM q WHERE state = 'pending' ORDER BY id LIMIT 1) RETURNING id"
)
_RAW_ACK = "UPDATE q SET state = 'done', result = ? WHERE id = ? AND token = ?"


def raw_loop(args: argparse.Namespace) -> None:
    """The same work by hand, no shoal, as the benchmark's raw ceiling does it
    (``bench/_raw_sqlite.py``): one ``BEGIN IMMEDIATE`` transaction per task that acks the
    task held (an ``UPDATE`` matched by id and token) and claims the next (an
    ``UPDATE ... RETURNING``)."""
    folder = Path(tempfile.mkdtemp(prefix="shoal-profile-raw-", dir=args.dir))
    try:
        conn = sqlite3.connect(folder / "raw.db", isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {args.durability.upper()}")
        conn.executescript(_RAW_SCHEMA)
        cycles = args.cycles * 4
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO q (state) VALUES ('pending')", [() for _ in range(cycles + 10)]
        )
        conn.execute("COMMIT")
        held: list[int | str] = [0, ""]

        def run(count: int) -> None:
            for i in range(count):
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(_RAW_ACK, (None, held[0], held[1]))
                held[:] = [conn.execute(_RAW_CLAIM, ("w", f"t{i}", 1e12)).fetchone()[0], f"t{i}"]
                conn.execute("COMMIT")

        cpu = cpu_per_cycle(run, args.cycles)
        conn.close()
        print(
            "\n=== raw SQLite: ack (UPDATE) and claim (UPDATE ... RETURNING) in one "
            f"transaction: {cpu:.0f} us CPU per task, one process ==="
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------------- py-spy


def py_spy(args: argparse.Namespace) -> None:
    """A sampling profile of the batch-1 cycles, by py-spy (if it is here and may trace)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        print("\n(py-spy not found: pip install py-spy)")
        return
    out = Path(tempfile.mkdtemp(prefix="shoal-pyspy-")) / "profile.txt"
    command = [spy, "record", "--format", "raw", "--rate", "2000", "-o", str(out), "--"]
    command += [sys.executable, __file__, "--only-batch1", "--cycles", str(args.cycles * 20)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not out.exists():
        print(f"\n(py-spy could not run here: {done.stderr.strip()[-300:]})")
        return
    own: Counter[str] = Counter()
    total = 0
    for line in out.read_text().splitlines():
        stack, _, samples = line.rpartition(" ")
        frame = re.sub(r":\d+\)$", ")", stack.split(";")[-1])  # by function, not line
        total += int(samples)
        own[frame] += int(samples)
    print(f"\n=== py-spy: own time of the batch-1 cycles ({total} samples) ===")
    for frame, count in own.most_common(args.top):
        print(f"    {count / total:6.1%}  {frame}")
    shutil.rmtree(out.parent, ignore_errors=True)


def only_batch1(args: argparse.Namespace) -> None:
    with fresh_fleet(args.dir, args.durability, args.cycles + 2) as fleet:
        Cycles(fleet, 1).run(args.cycles)


# ---------------------------------------------------------------------- command line


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=1000, help="cycles per measurement")
    parser.add_argument("--top", type=int, default=25, help="profile lines to print")
    parser.add_argument(
        "--durability", choices=("normal", "full", "off"), default="normal", help="synchronous"
    )
    parser.add_argument(
        "--procs", default="", help="also run this many contending processes, e.g. 4,16"
    )
    parser.add_argument(
        "--contended-tasks", type=int, default=4000, help="tasks drained per --procs run"
    )
    parser.add_argument("--raw", action="store_true", help="also time the raw SQLite loop")
    parser.add_argument("--py-spy", action="store_true", help="also sample with py-spy")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count instructions per cycle under valgrind's callgrind (minutes)",
    )
    parser.add_argument(
        "--pages",
        action="store_true",
        help="also list the pages each commit writes, by table and index (WAL frames)",
    )
    parser.add_argument(
        "--only",
        action="store_true",
        help="only the figures asked for with --raw, --py-spy, --instructions, --pages and --procs",
    )
    parser.add_argument("--only-batch1", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, default=None, help="folder for temporary fleets")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    if args.only_batch1:
        only_batch1(args)
        return 0
    if args.steps:
        steps(*args.steps)
        return 0
    print(f"shoal on SQLite {sqlite3.sqlite_version}, synchronous={args.durability}")
    if not args.only:
        one_process(args)
    if args.raw:
        raw_loop(args)
    if args.py_spy:
        py_spy(args)
    if args.instructions:
        instructions(__file__)
    if args.pages:
        pages(args.durability)
    for procs in (int(p) for p in args.procs.split(",") if p.strip()):
        contention(args, procs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
