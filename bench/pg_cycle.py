"""What one worker cycle costs on PostgreSQL, by path: the one-statement direct claim
against the general path (the claim cascade as separate statements), in one process.

Why this exists
---------------
A worker's loop is "finish this task, take the next" (``complete(lease, then_claim=1)``,
or ``complete_many(..., then_claim=10)`` at batch 10). On PostgreSQL its cost is mostly
round trips and the work the server does per statement, neither of which a throughput
benchmark on a shared machine shows clearly. So this counts them: for each path and batch
size, per cycle, the statements sent and the round trips (libpq's protocol trace: each time
the client stops sending and waits for answers), the client's CPU time, the server
backend's CPU time (read from /proc when the server runs on this machine), and the wall
time. The general path is the same code with the direct claim switched off for the fleet
handle (``Capabilities.direct_claims``), so the two differ in nothing else.

Run ``.venv/bin/python bench/pg_cycle.py`` (about a minute) or with ``--json FILE``; the
figures are named ``postgres.cycle_direct.batch1.round_trips``,
``postgres.cycle_general.batch10.wall_us`` and so on (``_results.figure_name``). Commits are
synchronous, as in every shoal fleet; ``--no-sync`` turns them asynchronous for the run,
so that the server's CPU rather than the disk bounds the wall time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import psycopg

from _harness import meta
from _results import Figures, figure_name, write_results
from shoal import Fleet

DEFAULT_PG_URL = "postgresql://127.0.0.1:5432/test"
SCHEMA = "shoal_bench_cycle"
PATHS = ("general", "direct")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL, help=f"default {DEFAULT_PG_URL}")
    parser.add_argument("--cycles", type=int, default=2000, help="timed cycles per case")
    parser.add_argument("--batches", default="1,10", help="batch sizes, comma-separated")
    parser.add_argument("--no-sync", action="store_true", help="synchronous_commit off")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    return parser.parse_args(argv)


def _backend_cpu(pid: int) -> float | None:
    """Seconds of CPU the server process ``pid`` has used, if it runs on this machine."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _drop(base: str) -> None:
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


class Cycler:
    """One agent working a pre-filled fleet down, one cycle at a time."""

    def __init__(self, fleet: Fleet, batch: int) -> None:
        self.fleet, self.batch = fleet, batch
        self.claim = fleet.claim("w", n=batch)

    def cycle(self) -> None:
        leases = self.claim.leases
        if self.batch == 1:
            nxt = self.fleet.complete(leases[0], None, then_claim=1).next
        else:
            nxt = self.fleet.complete_many([(x, None) for x in leases], then_claim=self.batch).next
        if nxt is None or not nxt.leases:
            raise RuntimeError("the fleet ran dry: raise the pre-fill")
        self.claim = nxt


def _traffic(trace: str) -> tuple[int, int]:
    """(statements sent, round trips) in a libpq trace: a round trip is a run of client
    messages followed by the server's answers."""
    statements = trips = 0
    last = ""
    for line in trace.splitlines():
        side, _, rest = line.partition("\t")
        kind = rest.split("\t")[1] if "\t" in rest else ""
        if side == "F" and kind in ("Execute", "Query"):
            statements += 1
        if side == "B" and last == "F":
            trips += 1
        if side in ("F", "B"):
            last = side
    return statements, trips


def measure(base: str, path: str, batch: int, cycles: int, no_sync: bool) -> dict[str, float]:
    _drop(base)
    url = f"{base}?schema={SCHEMA}&pool_size=1"  # one connection: one backend to watch
    fleet = Fleet.open(url, create=True)
    try:
        store = fleet._store
        store.capabilities = replace(store.capabilities, direct_claims=path == "direct")
        fleet.register("w", max_concurrent=batch)
        traced = 20
        total = (cycles + traced + 30) * batch + batch
        for start in range(0, total, 5000):
            fleet.post_many([{"title": f"t{i}"} for i in range(start, min(total, start + 5000))])
        pool = fleet._store._d._pool  # type: ignore[attr-defined]
        with pool.connection() as conn:
            pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
            if no_sync:
                conn.execute("SET synchronous_commit = off")
        cycler = Cycler(fleet, batch)
        for _ in range(30):  # warm: plans made, statements prepared
            cycler.cycle()
        server0, client0, wall0 = _backend_cpu(pid), time.process_time(), time.perf_counter()
        for _ in range(cycles):
            cycler.cycle()
        wall = time.perf_counter() - wall0
        client = time.process_time() - client0
        server1 = _backend_cpu(pid)
        with pool.connection() as conn:  # the only one: every cycle below runs on it
            pgconn = conn.pgconn
        with tempfile.TemporaryFile("w+") as out:
            pgconn.trace(out.fileno())
            pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
            for _ in range(traced):
                cycler.cycle()
            pgconn.untrace()
            out.seek(0)
            statements, trips = _traffic(out.read())
        figures = {
            "statements": statements / traced,
            "round_trips": trips / traced,
            "client_cpu_us": client / cycles * 1e6,
            "wall_us": wall / cycles * 1e6,
        }
        if server0 is not None and server1 is not None:
            figures["server_cpu_us"] = (server1 - server0) / cycles * 1e6
        return figures
    finally:
        fleet.close()
        _drop(base)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    header = meta(
        "postgres",
        {"cycles": args.cycles, "batches": batches, "repeat": 1},
        {"synchronous_commit": "off" if args.no_sync else "on"},
        {},
        {"psycopg": psycopg.__version__},
    )
    measured: dict[tuple[int, str], dict[str, float]] = {}
    for batch in batches:
        for path in PATHS:
            print(f"batch {batch}, {path} path, {args.cycles} cycles ...", flush=True)
            measured[batch, path] = measure(args.pg_url, path, batch, args.cycles, args.no_sync)
    figures = Figures()
    names = ("statements", "round_trips", "client_cpu_us", "server_cpu_us", "wall_us")
    print(f"\n{'per cycle':<22}" + "".join(f"{n:>15}" for n in names))
    for (batch, path), values in measured.items():
        cells = "".join(
            f"{'-' if values.get(n) is None else f'{values[n]:,.1f}':>15}" for n in names
        )
        print(f"{f'batch {batch}, {path}':<22}{cells}")
        for n, value in values.items():
            figures.put(figure_name("postgres", f"cycle_{path}", batch=batch, quantity=n), value)
    for batch in batches:
        general, direct = measured[batch, "general"], measured[batch, "direct"]
        for n in ("wall", "client_cpu"):
            ratio = general[f"{n}_us"] / direct[f"{n}_us"]
            name = figure_name("postgres", "cycle", batch=batch, quantity=f"{n}_general_vs_direct")
            figures.put(name, ratio)
            print(f"{name}: {ratio:.2f}x")
    if args.json:
        write_results(args.json, header, figures)
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
