"""The PostgreSQL comparison: shoal against pgqueuer (``_pgqueuer_peer``) on the same
server and database, each in a fresh schema of its own per measurement.

Why this exists
---------------
On PostgreSQL a fleet spans hosts: every agent is a process with its own connection, and
a claim is a round trip (or several) to a shared server. The question is what shoal's
richer claim (a lease with a token and an expiry, the agent's status, an event per change,
the claim cascade) costs there against a queue built for PostgreSQL and nothing else, so
every figure is printed next to pgqueuer's for the same no-op workload, on the same
server, in the same run, and the verdicts are on ratios. The machine is shared and noisy;
absolute numbers drift between runs, ratios much less.

What is measured
----------------
* Processing throughput: N tasks already posted, then claimed and completed by 1, 8 and
  64 worker processes, each with its own connection (as separate hosts would have).
  shoal at batch 1 (``complete(lease, then_claim=1)``) and batch 10
  (``complete_many(..., then_claim=10)``), see ``_fleet_work``. pgqueuer the way its own
  worker runs, see ``_pgqueuer_peer``. Both sides
  keep PostgreSQL's default durability (``synchronous_commit`` as the server sets it;
  neither side changes it), both have their tables LOGGED (pgqueuer's ``durable``
  default), both pre-filled with N tasks, then ANALYZEd and CHECKPOINTed so the timed
  part neither plans blind nor flushes the pre-fill. Wall time runs from the start
  barrier to the last worker's return (for pgqueuer that includes flushing its last
  completions). The systems alternate within each configuration. Each worker also
  reports the CPU time it used, so the table shows the client's CPU per task: on a
  machine whose cores are busy, CPU per task (the client's and the server's) is what
  sets throughput once commits are shared by many workers.
* Claim latency p50/p99/max at 64 processes: every ``claim``/``complete_many`` call of
  shoal's run; pgqueuer: every ``Queries.dequeue`` call its ``QueueManager`` makes (which
  can include waiting for its connection while a completion flush runs on it).
* Idle-to-work latency, with one agent process waiting for work and with a few (shoal: in
  ``Fleet.claim(agent, wait=...)``, woken by LISTEN/NOTIFY; pgqueuer: its worker waiting
  on its channel), this process posts one task at a time carrying ``time.time()`` in its
  payload, and the agent that gets it notes how long after the post started it held the
  lease (shoal: ``claim`` returned it; pgqueuer: the entrypoint was called). The next
  post comes a short random pause after the previous task was taken, so agents are idle
  again. One host, one clock. A single waiter shows what a missed wake-up costs, since
  no other waiter can catch it.

Every measurement uses fresh PostgreSQL schemas (``bench_<pid>_<n>_shoal`` /
``_pgqueuer``), dropped afterwards (and leftovers of killed runs dropped at the start).
After each run both sides are checked: all N tasks done, each claimed and completed
exactly once (shoal: worker reports, state counts and the event log; pgqueuer: worker
reports, an empty queue table and its log table's ``picked``/``successful`` rows).

Run ``make bench-pg`` (= ``.venv/bin/python bench/claims.py --store postgres``) or add
``--quick`` for a smoke run of about two minutes (three rounds of small counts); a full
round took about ten minutes on 2 cores, most of it in the batch-1 runs, and the default
is three rounds (``--repeat 1`` for one).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import itertools
import multiprocessing as mp
import os
import random
import time
import traceback
from collections.abc import Callable, Iterator
from importlib.metadata import version
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg
import psycopg

from _fleet_work import fill_shoal, work_down
from _harness import (
    Comparison,
    Processing,
    Row,
    Table,
    check_tasks,
    interleaved,
    latency_procs,
    meta,
    process_counts,
    processing_of,
    put_latency,
    put_rate,
    rate_row,
    run_workers,
    say,
)
from _pgqueuer_peer import (
    install_and_fill_pgqueuer,
    pgqueuer_poster,
    pgqueuer_waiter,
    pgqueuer_worker,
    verify_pgqueuer,
)
from _results import Figures, figure_name
from shoal import Fleet

STORE = "postgres"
SCHEMA_PREFIX = "bench_"
BATCHES = (1, 10)
LATENCY_PROCS = 64
WAIT = 2.0  # seconds an idle shoal agent waits in one claim before checking for the end
IDLE_GAP = (0.02, 0.05)  # seconds between a task being taken and the next post
IDLE_WARMUP = 10  # untimed posts before the idle-to-work measurement

# The targets of the issue, each on the figure it names.
TARGET_RATIO = 1.2  # x pgqueuer throughput, at batch 1 and at batch 10
TARGET_IDLE_P99_MS = 50  # from post to a waiting agent holding the lease


# ---------------------------------------------------------------------- the plan


@dataclasses.dataclass(frozen=True)
class PgPlan:
    """Everything a run does, decided once from the command line and printed at the top."""

    url: str  # the server and database, without a schema
    tasks: int  # tasks per processing-throughput measurement
    procs: tuple[int, ...]
    posts: int  # timed posts for the idle-to-work latency
    waiters: int  # agent processes waiting for those posts
    repeat: int


def make_pg_plan(args: argparse.Namespace) -> PgPlan:
    if args.quick:
        tasks, procs, posts, waiters = 1_000, "1,8", 30, 2
    else:
        tasks, procs, posts, waiters = 10_000, "1,8,64", 200, 4
    plan = PgPlan(
        url=without_schema(args.pg_url),
        tasks=args.tasks or tasks,
        procs=process_counts(args.procs or procs, "1,8,64"),
        posts=args.posts or posts,
        waiters=args.waiters or waiters,
        repeat=max(1, args.repeat),
    )
    check_tasks(plan.tasks, plan.procs)
    return plan


# ---------------------------------------------------------------------- schemas


def without_schema(url: str) -> str:
    """The URL libpq and asyncpg understand: shoal's ``schema`` option taken out."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise SystemExit(f"--pg-url must be a postgresql:// URL, not {url!r}")
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "schema"]
    return urlunsplit(parts._replace(query=urlencode(query)))


def with_schema(url: str, schema: str) -> str:
    """shoal's URL for the fleet in ``schema``."""
    parts = urlsplit(url)
    query = [*parse_qsl(parts.query), ("schema", schema)]
    return urlunsplit(parts._replace(query=urlencode(query)))


_serial = itertools.count(1)


def admin(plan: PgPlan) -> psycopg.Connection[Any]:
    return psycopg.connect(plan.url, autocommit=True)


@contextlib.contextmanager
def fresh_schemas(plan: PgPlan) -> Iterator[tuple[str, str]]:
    """A new pair of schema names (shoal's, pgqueuer's), dropped afterwards."""
    base = f"{SCHEMA_PREFIX}{os.getpid()}_{next(_serial)}"
    names = (f"{base}_shoal", f"{base}_pgqueuer")
    try:
        yield names
    finally:
        with admin(plan) as conn:
            for name in names:
                conn.execute(f'drop schema if exists "{name}" cascade')


def drop_leftovers(plan: PgPlan) -> list[str]:
    """Drop the schemas of earlier runs that were killed before they could clean up."""
    dropped = []
    with admin(plan) as conn:
        rows = conn.execute(
            "select nspname from pg_namespace where nspname like %s", (SCHEMA_PREFIX + "%",)
        ).fetchall()
        for (name,) in rows:
            pid = name.removeprefix(SCHEMA_PREFIX).split("_", 1)[0]
            if pid.isdigit() and not _alive(int(pid)):
                conn.execute(f'drop schema if exists "{name}" cascade')
                dropped.append(name)
    return dropped


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def settle(plan: PgPlan, schema: str) -> None:
    """After a pre-fill, before the clock: statistics for the planner (what autovacuum
    would have gathered on a queue in service) and a checkpoint, so the timed part does
    not pay for writing out the pre-fill. The same for both sides."""
    with admin(plan) as conn:
        tables = conn.execute(
            "select tablename from pg_tables where schemaname = %s", (schema,)
        ).fetchall()
        for (table,) in tables:
            conn.execute(f'analyze "{schema}"."{table}"')
        with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
            conn.execute("checkpoint")


# ---------------------------------------------------------------------- processing


def new_pg_fleet(plan: PgPlan, schema: str, agents: int) -> Fleet:
    """A fresh fleet in ``schema`` that admits every worker (the default is 4 agents)."""
    fleet = Fleet.init(with_schema(plan.url, schema))
    fleet.configure(max_agents=max(agents, 4))
    return fleet


def process_shoal(plan: PgPlan, schema: str, procs: int, batch: int) -> Processing:
    with new_pg_fleet(plan, schema, procs) as fleet:
        fill_shoal(fleet, plan.tasks)
    settle(plan, schema)
    return work_down(with_schema(plan.url, schema), plan.tasks, procs, batch)


def process_pgqueuer(plan: PgPlan, schema: str, procs: int, batch: int) -> Processing:
    asyncio.run(install_and_fill_pgqueuer(plan.url, schema, plan.tasks))
    settle(plan, schema)
    wall, reports = run_workers(pgqueuer_worker, [(plan.url, schema, batch)] * procs)
    problems = verify_pgqueuer(plan.url, schema, plan.tasks, reports)
    return processing_of(plan.tasks, wall, reports, problems)


def process_fresh(plan: PgPlan, system: str, procs: int, batch: int) -> Processing:
    """One processing run of ``system`` in schemas of its own, dropped afterwards."""
    with fresh_schemas(plan) as (mine, theirs):
        if system == "shoal":
            return process_shoal(plan, mine, procs, batch)
        return process_pgqueuer(plan, theirs, procs, batch)


# ---------------------------------------------------------------------- idle to work


def shoal_waiter(
    url: str, agent_id: str, ready: Any, stop: Any, results: Any
) -> None:  # pragma: no cover - runs in a child process
    """An agent with nothing to do, waiting in ``claim(wait=...)`` until the end."""
    try:
        with Fleet.open(url, create=False) as fleet:
            fleet.register(agent_id)
            ready.put(agent_id)
            while not stop.is_set():
                claim = fleet.claim(agent_id, wait=WAIT)
                held = time.time()
                for lease, task in zip(claim.leases, claim.tasks, strict=True):
                    results.put({"seq": task.payload["seq"], "took": held - task.payload["at"]})
                    fleet.complete(lease, None)
    except BaseException:
        results.put({"error": f"shoal waiter {agent_id}:\n{traceback.format_exc()}"})


def idle_to_work(plan: PgPlan, system: str, schema: str, waiters: int) -> list[float]:
    """Post one task at a time to waiting agents; seconds from each post to its lease."""
    ctx = mp.get_context("spawn")
    ready, results, stop = ctx.Queue(), ctx.Queue(), ctx.Event()
    target: Callable[..., None]
    post: Callable[[int], None]
    close: Callable[[], None]
    if system == "shoal":
        url = with_schema(plan.url, schema)
        fleet = new_pg_fleet(plan, schema, waiters)
        args = [(url, f"idle{i}", ready, stop, results) for i in range(waiters)]
        target = shoal_waiter

        def post(seq: int) -> None:
            fleet.post(f"ping {seq}", payload={"seq": seq, "at": time.time()})

        close = fleet.close
    else:
        post, close = pgqueuer_poster(plan.url, schema)
        args = [(plan.url, schema, ready, stop, results) for _ in range(waiters)]
        target = pgqueuer_waiter

    procs = [ctx.Process(target=target, args=a, daemon=True) for a in args]
    for proc in procs:
        proc.start()
    rng = random.Random(7)
    took: list[float] = []
    try:
        for _ in procs:
            ready.get(timeout=120)
        time.sleep(0.5)  # every waiter past its first empty claim and listening
        for seq in range(IDLE_WARMUP + plan.posts):
            time.sleep(rng.uniform(*IDLE_GAP))
            post(seq)
            report = results.get(timeout=30)
            if "error" in report:
                raise RuntimeError(report["error"])
            if report["seq"] != seq:
                raise RuntimeError(f"{system}: task {seq} posted, {report['seq']} taken")
            if seq >= IDLE_WARMUP:
                took.append(report["took"])
    finally:
        stop.set()
        for proc in procs:
            proc.join(timeout=WAIT + 10)
            if proc.is_alive():
                proc.terminate()
        close()
    return took


# ---------------------------------------------------------------------- rows


def observed_durability(plan: PgPlan) -> str:
    """The server's settings both sides run at (neither changes them per session)."""
    with admin(plan) as conn:
        rows = conn.execute(
            "select name, setting from pg_settings where name = any(%s) order by name",
            (["fsync", "synchronous_commit", "wal_sync_method", "max_connections"],),
        ).fetchall()
        server = conn.execute("show server_version").fetchone()
    settings = " ".join(f"{name}={value}" for name, value in rows)
    return f"PostgreSQL {server[0] if server else '?'}; {settings}"


def run_name(system: str, batch: int, procs: int) -> str:
    """A processing run's name, as its progress line and warnings show it."""
    return f"{system}, batch {batch}, {procs} procs"


def processing_runs(plan: PgPlan) -> dict[str, Processing]:
    """shoal and pgqueuer taking turns at each process count and batch size."""
    return interleaved(
        (
            [
                (
                    run_name(system, batch, procs),
                    functools.partial(process_fresh, plan, system, procs, batch),
                )
                for system in ("shoal", "pgqueuer")
            ]
            for procs, batch in itertools.product(plan.procs, BATCHES)
        ),
        plan.repeat,
    )


def idle_samples(plan: PgPlan) -> dict[int, dict[str, list[float]]]:
    """Idle to work with one agent waiting (nobody else to catch a wake-up it misses) and
    with several (all woken, one wins): the samples by waiter count and system."""
    samples: dict[int, dict[str, list[float]]] = {}
    for waiters in sorted({1, plan.waiters}):
        for system in ("shoal", "pgqueuer"):
            say(f"idle to work: {system}, {waiters} waiting agents, {plan.posts} posts ...")
            with fresh_schemas(plan) as (for_shoal, for_pgqueuer):
                schema = for_shoal if system == "shoal" else for_pgqueuer
                samples.setdefault(waiters, {})[system] = idle_to_work(
                    plan, system, schema, waiters
                )
    return samples


def processing_rows(plan: PgPlan, processing: dict[str, Processing], figures: Figures) -> list[Row]:
    rows = []
    for batch, procs in itertools.product(BATCHES, plan.procs):
        at = functools.partial(figure_name, STORE, batch=batch, procs=procs)
        mine = processing[run_name("shoal", batch, procs)]
        theirs = processing[run_name("pgqueuer", batch, procs)]
        put_rate(figures, at, "shoal", mine)
        put_rate(figures, at, "pgqueuer", theirs)
        passed = figures.put(
            at(quantity="ratio_vs_pgqueuer"),
            mine.throughput / theirs.throughput,
            f">= {TARGET_RATIO:g}",
        )
        rows.append(
            rate_row(
                f"process, batch {batch}, {procs} procs",
                mine,
                theirs,
                f">= {TARGET_RATIO:g}x pgqueuer",
                passed,
            )
        )
    for batch, procs in itertools.product(BATCHES, plan.procs):
        rows.append(
            Row(
                f"worker CPU per task, batch {batch}, {procs} procs",
                processing[run_name("shoal", batch, procs)].cpu_per_task,
                processing[run_name("pgqueuer", batch, procs)].cpu_per_task,
                "ms",
                note="client side only",
            )
        )
    return rows


def contended_rows(plan: PgPlan, processing: dict[str, Processing], figures: Figures) -> list[Row]:
    """Claim latency under contention, from the processing runs at the most processes."""
    procs = latency_procs(LATENCY_PROCS, plan.procs)
    rows = []
    for batch in BATCHES:
        at = functools.partial(figure_name, STORE, "claim", batch=batch, procs=procs)
        mine = put_latency(figures, at, processing[run_name("shoal", batch, procs)].latencies)
        theirs = put_latency(
            figures, at, processing[run_name("pgqueuer", batch, procs)].latencies, "pgqueuer_"
        )
        for stat in ("p50", "p99", "max"):
            rows.append(
                Row(f"claim {stat}, batch {batch}, {procs} procs", mine[stat], theirs[stat], "ms")
            )
    return rows


def idle_rows(samples: dict[int, dict[str, list[float]]], figures: Figures) -> list[Row]:
    rows = []
    for waiters, by_system in samples.items():
        at = functools.partial(figure_name, STORE, "idle_to_work", waiters=waiters)
        bound = f"<= {TARGET_IDLE_P99_MS:g}"
        mine = put_latency(figures, at, by_system["shoal"], targets={"p99": bound})
        theirs = put_latency(figures, at, by_system["pgqueuer"], "pgqueuer_")
        where = f"{waiters} waiting"
        rows += [
            Row(f"idle to work p50, {where}", mine["p50"], theirs["p50"], "ms"),
            Row(
                f"idle to work p99, {where}",
                mine["p99"],
                theirs["p99"],
                "ms",
                f"<= {TARGET_IDLE_P99_MS:g} ms",
                figures.targets[at(quantity="p99_ms")]["pass"],
            ),
            Row(f"idle to work max, {where}", mine["max"], theirs["max"], "ms"),
        ]
    return rows


# ---------------------------------------------------------------------- the comparison


def report(
    plan: PgPlan,
    processing: dict[str, Processing],
    idle: dict[int, dict[str, list[float]]],
    figures: Figures,
) -> list[Table]:
    """Every figure under its name, and the printed table."""
    rows = processing_rows(plan, processing, figures)
    rows += contended_rows(plan, processing, figures)
    rows += idle_rows(idle, figures)
    return [("pgqueuer", rows)]


def measure(plan: PgPlan, figures: Figures) -> tuple[list[Table], dict[str, Processing]]:
    processing = processing_runs(plan)
    return report(plan, processing, idle_samples(plan), figures), processing


def comparison(args: argparse.Namespace) -> Comparison:
    """The PostgreSQL comparison for these arguments, once the server answers and the
    schemas of earlier killed runs are gone."""
    plan = make_pg_plan(args)
    try:
        dropped = drop_leftovers(plan)
    except psycopg.OperationalError as exc:
        raise SystemExit(f"cannot reach PostgreSQL at {plan.url}: {exc}") from exc
    header = meta(
        STORE,
        {
            "quick": bool(args.quick),
            "server": observed_durability(plan),
            "url": plan.url,
            "tasks_per_processing_run": plan.tasks,
            "procs": list(plan.procs),
            "batches": list(BATCHES),
            "idle_posts": plan.posts,
            "idle_waiters": plan.waiters,
            "repeat": plan.repeat,
        },
        {},
        {"pgqueuer": version("pgqueuer"), "asyncpg": asyncpg.__version__},
        {"psycopg": psycopg.__version__},
    )
    return Comparison(
        title="shoal claims benchmark, against pgqueuer on the same PostgreSQL",
        meta=header,
        notices=[f"dropped {len(dropped)} schemas left by earlier killed runs"] if dropped else [],
        measure=functools.partial(measure, plan),
        conditions="",
        footnotes=(
            "claim latency: every claim() / complete-and-claim call of shoal's run; pgqueuer: "
            "every dequeue() its QueueManager made",
            "idle to work: from just before post() / enqueue() to the waiting agent holding "
            "the task (shoal: claim(wait=...) returned it; pgqueuer: its entrypoint was called)",
            "worker CPU per task: the worker processes' own CPU time over the run / tasks "
            "(the server's share is not included)",
            "throughput: the median of the runs, their lowest-highest in parentheses",
        ),
        checked=(
            "shoal: worker reports, state counts and the event log; pgqueuer: worker reports, "
            "an empty queue table, and one 'picked' and one 'successful' log row per job"
        ),
        strict=True,
    )
