"""Claim throughput and latency of shoal against a queue made for one job, on one store:
huey on SQLite (the default) or pgqueuer on PostgreSQL (``--store postgres``).

Why this exists
---------------
A shoal claim is a richer transaction than a queue pop: it writes a lease with a token
and an expiry and an event, runs the claim cascade, and keeps the agent's status. The
question is what that costs against a queue built for one store and nothing else, on the
same store at the same durability, so every figure is printed next to the other system's
for the same no-op workload measured in the same run, and the verdicts are on ratios. On
SQLite a third system answers a second question: how much of the file's own speed shoal
uses, against a raw claim-and-ack loop with no shoal in it. The machine this runs on is
shared and noisy; absolute numbers drift between runs, ratios much less, and every
throughput is the median of three runs taken in turns, printed with their range.

How it is laid out
------------------
This file is the command line. ``_harness`` is the one harness both comparisons run on:
worker processes released together by a barrier, wall time from the release to the last
finish, the systems taking turns within each configuration, medians over ``--repeat``,
the table with a ratio next to every pair, the warnings, the target tally and ``--json``,
whose format and figure names are ``_results``'s (``table.py`` renders it as Markdown).
What differs by store is small modules: ``_sqlite_side`` (shoal on a SQLite file, the
enqueue and latency-versus-backlog measurements) with ``_huey_peer`` (huey, driven like
its consumer) and ``_raw_sqlite`` (the loop with no shoal in it), and ``_pg_side`` (shoal
in a fresh PostgreSQL schema, the idle-to-work latency) with ``_pgqueuer_peer``
(pgqueuer, driven by its own ``QueueManager``). ``_fleet_work`` is shoal's worker and its
exactly-once check, the same on every store.

Workers are spawned (never forked: each opens its own store), set up, and wait on a
barrier, so start-up is not measured. Every measurement starts from a fresh store, and
after each run both sides are checked: every task done, each claimed and completed
exactly once.

Run ``.venv/bin/python bench/claims.py --quick`` for a SQLite smoke run (about a minute
on 2 cores: small counts, still three runs of each) and ``make bench-pg`` or
``bench/claims.py --store postgres --quick`` for PostgreSQL; ``--repeat 1`` for one run
of each. Each side's module docstring says what it measures.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from _harness import run

DURABILITIES = ("normal", "full", "off")
DEFAULT_PG_URL = "postgresql://127.0.0.1:5432/test"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="shoal claim throughput and latency, compared with huey on SQLite "
        "at the same durability, or with pgqueuer on PostgreSQL (--store postgres).",
    )
    parser.add_argument(
        "--store",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="sqlite: against huey (default); postgres: against pgqueuer (see _pg_side.py)",
    )
    parser.add_argument(
        "--pg-url",
        default=DEFAULT_PG_URL,
        help=f"with --store postgres: the server and database (default {DEFAULT_PG_URL})",
    )
    parser.add_argument(
        "--durability",
        choices=DURABILITIES,
        default="normal",
        help="SQLite only: PRAGMA synchronous for both shoal and huey (default: normal)",
    )
    parser.add_argument(
        "--tasks",
        type=int,
        default=None,
        help="tasks per processing run (SQLite: default 20,000; 5,000 at full durability; "
        "--quick: 2,000. PostgreSQL: 10,000; --quick: 1,000)",
    )
    parser.add_argument(
        "--procs",
        default=None,
        help="worker process counts, comma-separated (default SQLite 1,4,16; "
        "PostgreSQL 1,8,64, --quick: 1,8)",
    )
    parser.add_argument(
        "--posts",
        type=int,
        default=None,
        help="PostgreSQL only: timed posts to waiting agents (default 200; --quick: 30)",
    )
    parser.add_argument(
        "--waiters",
        type=int,
        default=None,
        help="PostgreSQL only: agent processes waiting for those posts (default 4; --quick: 2)",
    )
    parser.add_argument(
        "--enqueue",
        type=int,
        default=None,
        help="single post/enqueue calls to time (default 5,000; 1,000 at "
        "full durability; --quick: 500)",
    )
    parser.add_argument(
        "--big",
        type=int,
        default=None,
        help="pending tasks for the big latency case (default 1,000,000; --quick: 100,000)",
    )
    parser.add_argument(
        "--cycles",
        type=int,
        default=None,
        help="timed claim cycles per latency-vs-pending case (default 2,000; --quick: 500)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="run each throughput measurement this many times, the systems taking turns, "
        "and report the median with the range (default 3, --quick too)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="small counts for a fast end-to-end smoke run"
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="folder for the temporary databases (default: system temp)",
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        help="also write every figure here, by name (docs/benchmarks.md; bench/table.py "
        "renders it)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.store == "postgres":
        import _pg_side  # pgqueuer and the PostgreSQL drivers, only when asked for

        return run(_pg_side.comparison(args), args.json)
    import _sqlite_side  # huey, only when asked for

    return run(_sqlite_side.comparison(args), args.json)


if __name__ == "__main__":
    sys.exit(main())
