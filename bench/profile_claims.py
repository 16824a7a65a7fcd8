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
* for scale, the same loop done by hand: one ``UPDATE ... RETURNING`` to claim and one
  ``UPDATE`` to ack per task, each its own transaction, same durability (``--raw``).

With ``--procs 4,16`` it also runs that many worker processes draining one fleet at batch
1 and says, per cycle, how long each waited for its turn in the writer queue, held it
(and how much of that was SQLite), and spent outside it, with context switches and the
time spent runnable but not running (``/proc/self/schedstat``) -- where throughput goes
when processes take turns on two cores.

The timing wrappers reach into the store's private connection and writer queue
(``Fleet._store._d``): this is a tool for reading shoal's insides, not an API. Their own
cost is kept out of the CPU figure (measured on a separate, unwrapped run).

Run ``.venv/bin/python bench/profile_claims.py`` (about 30 s here); ``--py-spy`` adds a
py-spy sampling profile of the batch-1 cycles (needs ``pip install py-spy`` and the right
to trace a child process).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import itertools
import multiprocessing as mp
import pstats
import re
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from shoal import Fleet
from shoal.model import Claim, Lease

PHASES = ("batch 1", "batch 10")
_EDGE_TURNS = 3  # turns at each end of a contended run left out of its steady state


# ---------------------------------------------------------------------- timing wrappers


class Meter:
    """Seconds and calls spent in SQLite and in the writer queue, statements by name."""

    def __init__(self) -> None:
        self.sqlite = 0.0
        self.queue_wait = 0.0
        self.held = 0.0
        self.holds: list[float] = []
        self.waits: list[float] = []
        self.turns: list[float] = []  # when each turn began and ended (perf_counter)
        self.calls: Counter[str] = Counter()
        self.traced: Counter[str] = Counter()
        self.spent: dict[str, float] = {}
        self._names: dict[str, str] = {}
        self._current = "?"
        self._since = 0.0
        self._cpu_since = 0.0
        self.held_cpu = 0.0
        self.tracing: Callable[[bool], None] = lambda on: None

    def reset(self) -> None:
        self.sqlite = self.queue_wait = self.held = self.held_cpu = 0.0
        self.holds.clear()
        self.waits.clear()
        self.turns.clear()
        self.calls.clear()
        self.traced.clear()
        self.spent.clear()

    def name_of(self, sql: str) -> str:
        name = self._names.get(sql) or self._names.get(_shape(sql))
        if name is None:
            name = " ".join(sql.split())[:40]
        self._current = name
        return name

    def trace(self, _text: str) -> None:
        """SQLite's own count: every statement it starts, each row of an executemany and
        each trigger program an UPDATE enters (Python reports those under the statement's
        own text) included."""
        self.traced[self._current] += 1

    def took(self, seconds: float) -> None:
        self.sqlite += seconds
        self.spent[self._current] = self.spent.get(self._current, 0.0) + seconds


def _shape(sql: str) -> str:
    """A statement with its parameters blanked, so a named statement the store binds by
    position (``:name`` turned into ``?N``) is still known by its name."""
    return re.sub(r"\?\d+|(?<!:):[a-z_]+", "?", sql)


class TimedCursor:
    """A cursor whose fetches count as time in SQLite (they step the statement)."""

    def __init__(self, cursor: sqlite3.Cursor, meter: Meter) -> None:
        self._cursor, self._meter = cursor, meter

    def fetchone(self) -> Any:
        began = time.perf_counter()
        row = self._cursor.fetchone()
        self._meter.took(time.perf_counter() - began)
        return row

    def fetchall(self) -> list[Any]:
        began = time.perf_counter()
        rows = self._cursor.fetchall()
        self._meter.took(time.perf_counter() - began)
        return rows


class TimedConnection:
    """The store's connection with every call into SQLite timed and named."""

    def __init__(self, conn: sqlite3.Connection, meter: Meter, names: dict[str, str]) -> None:
        self._conn, self._meter = conn, meter
        meter._names = {sql: name for name, sql in names.items()}
        meter._names.update({_shape(sql): name for name, sql in names.items()})
        meter.tracing = lambda on: conn.set_trace_callback(meter.trace if on else None)

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction

    def execute(self, sql: str, params: Any = ()) -> TimedCursor:
        meter = self._meter
        meter.calls[meter.name_of(sql)] += 1
        began = time.perf_counter()
        cursor = self._conn.execute(sql, params)
        meter.took(time.perf_counter() - began)
        return TimedCursor(cursor, meter)

    def executemany(self, sql: str, rows: Any) -> sqlite3.Cursor:
        meter = self._meter
        rows = list(rows)
        meter.calls[meter.name_of(sql)] += 1
        began = time.perf_counter()
        cursor = self._conn.executemany(sql, rows)
        meter.took(time.perf_counter() - began)
        return cursor

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


class TimedWriter:
    """The writer queue with the wait for a turn and the turn itself timed."""

    def __init__(self, writer: Any, meter: Meter) -> None:
        self._writer, self._meter = writer, meter
        self.fair = writer.fair

    def acquire(self, timeout: float) -> bool:
        began = time.perf_counter()
        got: bool = self._writer.acquire(timeout)
        now = time.perf_counter()
        self._meter.queue_wait += now - began
        self._meter.waits.append(now - began)
        self._meter._since = now
        self._meter._cpu_since = time.thread_time()
        self._meter.turns.append(now)
        return got

    def release(self) -> None:
        began = time.perf_counter()
        self._meter.held_cpu += time.thread_time() - self._meter._cpu_since
        self._writer.release()
        now = time.perf_counter()
        held = began - self._meter._since
        self._meter.turns.append(began)
        self._meter.held += held
        self._meter.holds.append(held)
        self._meter.queue_wait += now - began

    def __getattr__(self, name: str) -> Any:
        return getattr(self._writer, name)


def instrument(fleet: Fleet) -> Meter:
    """Wrap the fleet's connection and writer queue (private: see the module docstring)."""
    dialect = fleet._store._d  # type: ignore[attr-defined]
    meter = Meter()
    dialect.conn = TimedConnection(dialect.conn, meter, dict(dialect.queries))
    dialect.writer = TimedWriter(dialect.writer, meter)
    return meter


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
    """The same work by hand: claim (UPDATE ... RETURNING) and ack (UPDATE), each its own
    transaction, no shoal."""
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

        def run(count: int) -> None:
            for i in range(count):
                (task,) = conn.execute(_RAW_CLAIM, ("w", f"t{i}", 1e12)).fetchone()
                conn.execute(_RAW_ACK, (None, task, f"t{i}"))

        cpu = cpu_per_cycle(run, args.cycles)
        conn.close()
        print(
            f"\n=== raw SQLite: claim UPDATE ... RETURNING + ack UPDATE, each its own "
            f"transaction: {cpu:.0f} us CPU per task, one process ==="
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------------- contention


def _schedstat() -> tuple[int, int, int]:
    """(ns on a CPU, ns runnable but waiting for one, time slices) of this process."""
    try:
        with open("/proc/self/schedstat") as handle:
            run_ns, wait_ns, slices = handle.read().split()
        return int(run_ns), int(wait_ns), int(slices)
    except (OSError, ValueError):
        return 0, 0, 0


def contention_worker(url: str, agent: str, barrier: Any, results: Any) -> None:
    """One process draining the fleet at batch 1, its writer queue and SQLite timed."""
    try:
        fleet = Fleet.open(url, create=False)
        fleet.register(agent)
        meter = instrument(fleet)
        meter.reset()
        barrier.wait(120)
        usage0, sched0 = resource.getrusage(resource.RUSAGE_SELF), _schedstat()
        began, cpu0 = time.perf_counter(), time.process_time()
        claim: Claim | None = fleet.claim(agent)
        cycles = 1
        while claim is not None and claim.leases:
            claim = fleet.complete(claim.leases[0], None, then_claim=1).next
            cycles += 1
        wall, cpu = time.perf_counter() - began, time.process_time() - cpu0
        usage1, sched1 = resource.getrusage(resource.RUSAGE_SELF), _schedstat()
        fleet.close()
        results.put(
            {
                "cycles": cycles,
                "wall": wall,
                "cpu": cpu,
                "wait": meter.queue_wait,
                "held": meter.held,
                "held_cpu": meter.held_cpu,
                "sqlite": meter.sqlite,
                "waits": meter.waits,
                "turns": meter.turns,
                "voluntary": usage1.ru_nvcsw - usage0.ru_nvcsw,
                "involuntary": usage1.ru_nivcsw - usage0.ru_nivcsw,
                "runqueue": (sched1[1] - sched0[1]) / 1e9,
                "system": usage1.ru_stime - usage0.ru_stime,
            }
        )
    except BaseException as exc:
        barrier.abort()
        results.put({"error": repr(exc)})


def contention(args: argparse.Namespace, procs: int) -> None:
    ctx = mp.get_context("spawn")
    tasks = args.contended_tasks
    folder = Path(tempfile.mkdtemp(prefix="shoal-profile-procs-", dir=args.dir))
    try:
        url = url_of(folder, args.durability)
        with Fleet.open(url) as fleet:
            fleet.configure(max_agents=64)
            for start in range(0, tasks, 1000):
                fleet.post_many(
                    [{"title": f"t{i}"} for i in range(start, min(tasks, start + 1000))]
                )
        barrier, results = ctx.Barrier(procs + 1), ctx.Queue()
        children = [
            ctx.Process(target=contention_worker, args=(url, f"w{i}", barrier, results))
            for i in range(procs)
        ]
        for child in children:
            child.start()
        barrier.wait(120)
        began = time.perf_counter()
        reports = [results.get(timeout=600) for _ in children]
        wall = time.perf_counter() - began
        for child in children:
            child.join(60)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    errors = [r["error"] for r in reports if "error" in r]
    if errors:
        raise SystemExit(f"a worker failed: {errors[0]}")
    cycles: int = sum(r["cycles"] for r in reports)

    def per(key: str) -> float:
        return float(sum(r[key] for r in reports)) / cycles * 1e6

    waits = sorted(w for r in reports for w in r["waits"])
    # Turns of every process on one clock: the gap from one turn's end to the next one's
    # start is the hand-off (the next writer being woken and scheduled).
    turns = sorted(
        (r["turns"][i], r["turns"][i + 1])
        for r in reports
        for i in range(0, len(r["turns"]) - 1, 2)
    )
    gaps = sorted(max(0.0, b[0] - a[1]) for a, b in itertools.pairwise(turns))
    holds = sorted(end - start for start, end in turns)
    busy = sum(r["wall"] for r in reports) / cycles * 1e6
    print(
        f"\n=== {procs} processes draining {tasks} tasks at batch 1: "
        f"{tasks / wall:,.0f} tasks/s ({wall / tasks * 1e6:.0f} us of wall per task) ==="
    )
    print(
        f"per cycle, per process: wall {busy:.0f} us = waiting for the writer queue "
        f"{per('wait'):.0f} + holding it {per('held'):.0f} (on a CPU {per('held_cpu'):.0f}; "
        f"in SQLite {per('sqlite'):.0f}) + "
        f"outside it {busy - per('wait') - per('held'):.0f}"
    )
    print(
        f"    CPU {per('cpu'):.0f} us (in the kernel {per('system'):.0f}); "
        f"runnable but not running {per('runqueue'):.0f} us; "
        f"context switches {per('voluntary') / 1e6:.2f} voluntary, "
        f"{per('involuntary') / 1e6:.2f} involuntary"
    )
    print(
        f"    turns back to back: held p50 {statistics.median(holds) * 1e6:.0f} us, "
        f"mean {statistics.fmean(holds) * 1e6:.0f} us; hand-off p50 "
        f"{statistics.median(gaps) * 1e6:.0f} us, mean {statistics.fmean(gaps) * 1e6:.0f} us"
    )
    print(
        f"    writer queue wait p50 {statistics.median(waits) * 1e3:.2f} ms, "
        f"p99 {waits[int(len(waits) * 0.99)] * 1e3:.2f} ms, max {waits[-1] * 1e3:.1f} ms"
    )
    # A process's first turns prepare the claim's statements on a fresh connection, and its
    # last ones share the CPUs with the processes that finished and are exiting.
    steady = sorted(w for r in reports for w in r["waits"][_EDGE_TURNS:-_EDGE_TURNS])
    longest = sorted(
        ((w, turn - len(r["waits"])) for r in reports for turn, w in enumerate(r["waits"])),
        reverse=True,
    )[:5]
    print(
        f"    without each process's first and last {_EDGE_TURNS} turns: "
        f"p99 {steady[int(len(steady) * 0.99)] * 1e3:.2f} ms, max {steady[-1] * 1e3:.1f} ms; "
        "longest waits (ms, at turn from the end): "
        + ", ".join(f"{w * 1e3:.0f} at {turn}" for w, turn in longest)
    )


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
    parser.add_argument("--only-batch1", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, default=None, help="folder for temporary fleets")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    if args.only_batch1:
        only_batch1(args)
        return 0
    print(f"shoal on SQLite {sqlite3.sqlite_version}, synchronous={args.durability}")
    one_process(args)
    if args.raw:
        raw_loop(args)
    if args.py_spy:
        py_spy(args)
    for procs in (int(p) for p in args.procs.split(",") if p.strip()):
        contention(args, procs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
