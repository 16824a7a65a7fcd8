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

``--statements`` also times each step inside the direct claim's function: the bench's
schema gets a copy of the function that reads ``clock_timestamp()`` between its statements
and reports the differences with each call (a NOTICE), and the direct path runs again on
it. Each step's time includes what the server does to start and end its statements (plan
cache, executor start, triggers), which neither ``EXPLAIN ANALYZE`` nor auto_explain's
durations count. The copy is made from the migration's text at the places ``STEPS`` names;
when the function changes, the bench says which place it no longer finds.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
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
from shoal.stores._sql import load_migrations

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
    parser.add_argument(
        "--statements", action="store_true", help="also time each step of the direct claim"
    )
    return parser.parse_args(argv)


#: The direct claim's steps, each named by the text that begins the statement after it
#: (so its time runs from the end of the step before); the last runs to the function's end.
#: A row count is read right after the statement it counts, so no timing goes in between.
STEPS = (
    ("silent", "    PERFORM pg_advisory_xact_lock_shared(p_fleet_lock);\n"),
    ("lock", "    IF (SELECT value FROM meta WHERE key = 'settings')"),
    ("settings", "    -- finish, under the leases given\n"),
    ("finish", "        IF v_finished <> cardinality(p_finish_ids)"),
    ("finish_check", "    -- the agent, after its lock\n"),
    ("agent_lock", "    IF NOT FOUND OR v_agent.status IN"),
    ("expiry_check", "    SELECT count(*) INTO v_held"),
    ("held_count", "    IF p_n > 0 THEN\n"),
    ("own_queue", "        -- the pool, best score\n"),
    ("skills_domains", "            v_eligible := ARRAY(\n"),
    ("eligible", "            IF cardinality(v_eligible) > 0 THEN\n"),
    ("pool", "                v_pool := coalesce(v_pool, '{}');\n"),
    ("pool_tail", "        -- (versions 11 and 13)"),
    ("group_join_check", "        -- lease, log, and the agent is working\n"),
    ("lease", "        IF v_count <> cardinality(v_ids)"),
    ("lease_tail", "    INSERT INTO events (at, kind, task_id, agent_id, data)\n"),
    ("events", "    UPDATE agents SET\n"),
)
_MARK = (
    "    t_mark := clock_timestamp(); t_steps := t_steps || ' {name}=' || "
    "round(extract(epoch from t_mark - t_last) * 1e6); t_last := t_mark;\n"
)


def timed_function() -> str:
    """The direct claim's function as the newest migration defines it, with a timing read
    before each place of ``STEPS`` and a NOTICE of them all at its end."""
    text = next(sql for _, _, sql in reversed(load_migrations("postgres"))
                if "CREATE FUNCTION direct_claim(" in sql)  # fmt: skip
    body = text[text.index("CREATE FUNCTION direct_claim(") :]
    body = body.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)
    declare = "    c record;\nBEGIN\n"
    places = [("declare", declare), *STEPS, ("end", "\nEND;\n$$;")]
    if missing := [name for name, place in places if body.count(place) != 1]:
        raise SystemExit(f"--statements: the function changed; update STEPS for {missing}")
    body = body.replace(
        declare,
        "    c record;\n    t_last timestamptz := clock_timestamp();\n"
        "    t_mark timestamptz;\n    t_steps text := '';\nBEGIN\n",
    )
    for name, place in STEPS:
        body = body.replace(place, _MARK.format(name=name) + place)
    return body.replace(
        "\nEND;\n$$;",
        "\n" + _MARK.format(name="agent_update") + "    RAISE NOTICE 'steps%', t_steps;\nEND;\n$$;",
    )


def measure_steps(base: str, batch: int, cycles: int, no_sync: bool) -> dict[str, float]:
    """Median microseconds of each step of the direct claim over ``cycles`` cycles."""
    _drop(base)
    fleet = Fleet.open(f"{base}?schema={SCHEMA}&pool_size=1", create=True)
    try:
        pool = fleet._store._d._pool  # type: ignore[attr-defined]
        notes: list[str] = []
        with pool.connection() as conn:
            conn.execute(timed_function())
            conn.add_notice_handler(lambda notice: notes.append(notice.message_primary or ""))
            if no_sync:
                conn.execute("SET synchronous_commit = off")
        fleet.register("w", max_concurrent=batch)
        total = (cycles + 30) * batch + batch
        for start in range(0, total, 5000):
            fleet.post_many([{"title": f"t{i}"} for i in range(start, min(total, start + 5000))])
        cycler = Cycler(fleet, batch)
        for _ in range(30):
            cycler.cycle()
        notes.clear()
        for _ in range(cycles):
            cycler.cycle()
        times: dict[str, list[int]] = {}
        for note in notes:
            for name, value in re.findall(r"(\w+)=(\d+)", note):
                times.setdefault(name, []).append(int(value))
        return {name: statistics.median(values) for name, values in times.items()}
    finally:
        fleet.close()
        _drop(base)


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
    if args.statements:
        for batch in batches:
            print(f"\nbatch {batch}, the direct claim's steps (median us per cycle) ...")
            steps = measure_steps(args.pg_url, batch, args.cycles, args.no_sync)
            for name, value in steps.items():
                print(f"  {name:<18}{value:>8,.0f}")
                quantity = f"step_{name}_us"
                figures.put(
                    figure_name("postgres", "cycle_direct", batch=batch, quantity=quantity), value
                )
            print(f"  {'sum of medians':<18}{sum(steps.values()):>8,.0f}")
    if args.json:
        write_results(args.json, header, figures)
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
