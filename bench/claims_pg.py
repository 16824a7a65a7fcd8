"""Claim throughput and latency of shoal on PostgreSQL, against pgqueuer on the same database.

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
  worker runs: one ``QueueManager`` per process on its own asyncpg connection,
  ``run(batch_size=1 or 10, mode=drain)`` with every other setting at its default
  (unlimited in-process concurrency; completions buffered and written up to batch_size
  at a time, or every 0.1 s). Both sides
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
``--quick`` for a smoke run of about two minutes; the full run takes about ten on 2 cores,
most of it in the batch-1 runs. ``--repeat 3`` reports medians when the machine is noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import itertools
import json
import os
import platform
import random
import shlex
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from datetime import timedelta
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg
import psycopg
from pgqueuer.adapters.drivers.asyncpg import AsyncpgDriver
from pgqueuer.adapters.drivers.psycopg import SyncPsycopgDriver
from pgqueuer.adapters.persistence import qb
from pgqueuer.adapters.persistence.queries import Queries, SyncQueries
from pgqueuer.core.qm import QueueManager
from pgqueuer.domain.errors import FailingListenerError
from pgqueuer.domain.models import Job
from pgqueuer.domain.settings import DBSettings
from pgqueuer.domain.types import Channel, QueueEntrypoint, QueueExecutionMode, QueueManagerId
from pgqueuer.ports.repository import EntrypointExecutionParameter

import shoal
from _fleet_work import fill_shoal, shoal_worker, verify_shoal
from _harness import (
    BARRIER_TIMEOUT,
    Processing,
    Row,
    close_report,
    git_state,
    median_run,
    print_table,
    run_workers,
    say,
    summary,
)
from shoal import Fleet

SCHEMA_PREFIX = "bench_"
ENTRYPOINT = "noop"
PGQ_FILL_CHUNK = 1_000  # jobs per enqueue call when pre-filling pgqueuer
BATCHES = (1, 10)
LATENCY_PROCS = 64
WAIT = 2.0  # seconds an idle shoal agent waits in one claim before checking for the end
IDLE_GAP = (0.02, 0.05)  # seconds between a task being taken and the next post
IDLE_WARMUP = 10  # untimed posts before the idle-to-work measurement

# The targets of the issue.
TARGET_RATIO = 1.2  # x pgqueuer throughput, at batch 1 and at batch 10
TARGET_IDLE_P99 = 0.050  # seconds from post to a waiting agent holding the lease


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
    counts = tuple(sorted({int(p) for p in (args.procs or procs).split(",") if p.strip()}))
    if not counts or min(counts) < 1:
        raise SystemExit("--procs needs positive process counts, e.g. 1,8,64")
    plan = PgPlan(
        url=without_schema(args.pg_url),
        tasks=args.tasks or tasks,
        procs=counts,
        posts=args.posts or posts,
        waiters=args.waiters or waiters,
        repeat=max(1, args.repeat),
    )
    if plan.tasks < max(plan.procs) * 10:
        raise SystemExit("--tasks must give every worker at least a few batches")
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


# ---------------------------------------------------------------------- shoal


def new_pg_fleet(plan: PgPlan, schema: str, agents: int) -> Fleet:
    """A fresh fleet in ``schema`` that admits every worker (the default is 4 agents)."""
    fleet = Fleet.init(with_schema(plan.url, schema))
    fleet.configure(max_agents=max(agents, 4))
    return fleet


def process_shoal(plan: PgPlan, schema: str, procs: int, batch: int) -> Processing:
    url = with_schema(plan.url, schema)
    with new_pg_fleet(plan, schema, procs) as fleet:
        fill_shoal(fleet, plan.tasks)
    settle(plan, schema)
    wall, reports = run_workers(shoal_worker, [(url, f"w{i}", batch) for i in range(procs)])
    problems = verify_shoal(url, plan.tasks, reports)
    latencies = [x for r in reports for x in r["latencies"]]
    cpu = sum(r["cpu"] for r in reports) / plan.tasks
    return Processing(plan.tasks / wall, wall, latencies, 0, problems, cpu)


# ---------------------------------------------------------------------- pgqueuer


def pgq_settings(schema: str) -> DBSettings:
    """pgqueuer's objects in their own schema, on their own NOTIFY channel (channels are
    database-wide, so one per run keeps runs from waking each other)."""
    return DBSettings(db_schema=schema, channel=Channel(f"{schema}_ch"))


def pgq_queries(conn: asyncpg.Connection, schema: str) -> TimedQueries:
    settings = pgq_settings(schema)
    return TimedQueries(
        AsyncpgDriver(conn),
        qbe=qb.QueryBuilderEnvironment(settings=settings),
        qbq=qb.QueryQueueBuilder(settings=settings),
        qbs=qb.QuerySchedulerBuilder(settings=settings),
    )


@dataclasses.dataclass
class TimedQueries(Queries):
    """pgqueuer's own queries, timing each ``dequeue``: its claim."""

    dequeue_latencies: list[float] = dataclasses.field(default_factory=list)

    async def dequeue(
        self,
        batch_size: int,
        entrypoints: dict[QueueEntrypoint, EntrypointExecutionParameter],
        queue_manager_id: QueueManagerId,
        global_concurrency_limit: int | None,
        heartbeat_timeout: timedelta,
    ) -> list[Job]:
        began = time.perf_counter()
        try:
            return await super().dequeue(
                batch_size,
                entrypoints,
                queue_manager_id,
                global_concurrency_limit,
                heartbeat_timeout,
            )
        finally:
            self.dequeue_latencies.append(time.perf_counter() - began)


async def install_and_fill_pgqueuer(plan: PgPlan, schema: str, count: int) -> None:
    """``pgq install`` into ``schema``, then ``count`` no-op jobs, a chunk per enqueue."""
    conn = await asyncpg.connect(plan.url)
    try:
        queries = pgq_queries(conn, schema)
        await queries.install()
        filled = 0
        while filled < count:
            chunk = min(PGQ_FILL_CHUNK, count - filled)
            await queries.enqueue([ENTRYPOINT] * chunk, [None] * chunk, [0] * chunk)
            filled += chunk
    finally:
        await conn.close()


def pgqueuer_worker(
    url: str, schema: str, batch: int, barrier: Any, results: Any
) -> None:  # pragma: no cover - runs in a child process
    """One worker process: its own connection and QueueManager, run until drained."""
    try:
        results.put(asyncio.run(_pgqueuer_work(url, schema, batch, barrier)))
    except BaseException:
        barrier.abort()
        results.put({"error": f"pgqueuer worker:\n{traceback.format_exc()}"})


async def _pgqueuer_work(url: str, schema: str, batch: int, barrier: Any) -> dict[str, Any]:
    conn = await asyncpg.connect(url)
    try:
        queries = pgq_queries(conn, schema)
        manager = QueueManager(queries, channel=Channel(pgq_settings(schema).channel))
        done: list[int] = []

        @manager.entrypoint(ENTRYPOINT)
        async def noop(job: Job) -> None:
            """The work: nothing, like shoal's ``run_task``."""
            done.append(job.id)

        await manager.verify_structure()  # warm the catalog look-ups run() repeats
        barrier.wait(BARRIER_TIMEOUT)
        start, cpu = time.monotonic(), time.process_time()
        await manager.run(batch_size=batch, mode=QueueExecutionMode.drain)
        end, cpu = time.monotonic(), time.process_time() - cpu
    finally:
        await conn.close()
    return {
        "start": start,
        "cpu": cpu,
        "end": end,
        "latencies": queries.dequeue_latencies,
        "done": done,
        "anomalies": [],
        "errors": 0,
    }


def verify_pgqueuer(
    plan: PgPlan, schema: str, expected: int, reports: Sequence[dict[str, Any]]
) -> list[str]:
    """Every job run once by the workers, none left, picked once and logged done once."""
    problems = []
    done = [t for r in reports for t in r["done"]]
    if len(done) != expected or len(set(done)) != expected:
        problems.append(
            f"pgqueuer workers ran {len(done)} jobs ({len(set(done))} distinct), "
            f"expected {expected}"
        )
    settings = pgq_settings(schema)
    with admin(plan) as conn:
        left = conn.execute(f"select count(*) from {settings.qualify(settings.queue_table)}")
        if (remaining := left.fetchone()) is None or remaining[0] != 0:
            problems.append(f"pgqueuer queue table still holds {remaining} jobs")
        log = conn.execute(
            f"select status::text, count(*), count(distinct job_id) "
            f"from {settings.qualify(settings.queue_table_log)} group by status"
        ).fetchall()
    logged = {status: (n, distinct) for status, n, distinct in log}
    for status in ("picked", "successful"):
        if logged.get(status) != (expected, expected):
            problems.append(
                f"pgqueuer log: {status!r} rows (rows, distinct jobs) {logged.get(status)}, "
                f"expected {expected} once each"
            )
    return problems


def process_pgqueuer(plan: PgPlan, schema: str, procs: int, batch: int) -> Processing:
    asyncio.run(install_and_fill_pgqueuer(plan, schema, plan.tasks))
    settle(plan, schema)
    wall, reports = run_workers(pgqueuer_worker, [(plan.url, schema, batch)] * procs)
    problems = verify_pgqueuer(plan, schema, plan.tasks, reports)
    latencies = [x for r in reports for x in r["latencies"]]
    cpu = sum(r["cpu"] for r in reports) / plan.tasks
    return Processing(plan.tasks / wall, wall, latencies, 0, problems, cpu)


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


def pgqueuer_waiter(
    url: str, schema: str, ready: Any, stop: Any, results: Any
) -> None:  # pragma: no cover - runs in a child process
    """A pgqueuer worker with nothing to do, waiting on its channel until the end."""
    try:
        asyncio.run(_pgqueuer_wait(url, schema, ready, stop, results))
    except BaseException:
        results.put({"error": f"pgqueuer waiter:\n{traceback.format_exc()}"})


async def _pgqueuer_wait(url: str, schema: str, ready: Any, stop: Any, results: Any) -> None:
    conn = await asyncpg.connect(url)
    try:
        manager = QueueManager(
            pgq_queries(conn, schema), channel=Channel(pgq_settings(schema).channel)
        )

        @manager.entrypoint(ENTRYPOINT)
        async def ping(job: Job) -> None:
            held = time.time()
            sent = json.loads(job.payload or b"{}")
            results.put({"seq": sent["seq"], "took": held - sent["at"]})

        async def until_stopped() -> None:
            while not stop.is_set():
                await asyncio.sleep(0.1)
            manager.shutdown.set()

        async def announce() -> None:
            while True:  # ready once its LISTEN is up: a NOTIFY of its own came back
                with contextlib.suppress(FailingListenerError):
                    await manager.listener_healthy(timedelta(seconds=0.5))
                    break
            ready.put(schema)

        async with asyncio.TaskGroup() as group:
            group.create_task(until_stopped())
            group.create_task(announce())
            await manager.run()
    finally:
        await conn.close()


def idle_to_work(plan: PgPlan, system: str, schema: str, waiters: int) -> list[float]:
    """Post one task at a time to waiting agents; seconds from each post to its lease."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    ready, results, stop = ctx.Queue(), ctx.Queue(), ctx.Event()
    if system == "shoal":
        url = with_schema(plan.url, schema)
        fleet = new_pg_fleet(plan, schema, waiters)
        args = [(url, f"idle{i}", ready, stop, results) for i in range(waiters)]
        target: Any = shoal_waiter

        def post(seq: int) -> None:
            fleet.post(f"ping {seq}", payload={"seq": seq, "at": time.time()})

        def close() -> None:
            fleet.close()
    else:
        asyncio.run(install_and_fill_pgqueuer(plan, schema, 0))
        conn = psycopg.connect(plan.url, autocommit=True)
        settings = pgq_settings(schema)
        queries = SyncQueries(SyncPsycopgDriver(conn), qbq=qb.QueryQueueBuilder(settings=settings))
        args = [(plan.url, schema, ready, stop, results) for _ in range(waiters)]
        target = pgqueuer_waiter

        def post(seq: int) -> None:
            sent = json.dumps({"seq": seq, "at": time.time()}).encode()
            queries.enqueue(ENTRYPOINT, sent)

        def close() -> None:
            conn.close()

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


# ---------------------------------------------------------------------- report


def observed_durability(plan: PgPlan) -> str:
    """The server's settings both sides run at (neither changes them per session)."""
    with admin(plan) as conn:
        rows = conn.execute(
            "select name, setting from pg_settings where name = any(%s) order by name",
            (["fsync", "synchronous_commit", "wal_sync_method", "max_connections"],),
        ).fetchall()
        version = conn.execute("show server_version").fetchone()
    settings = " ".join(f"{name}={value}" for name, value in rows)
    return f"PostgreSQL {version[0] if version else '?'}; {settings}"


def describe(plan: PgPlan) -> dict[str, Any]:
    shoal_dir = Path(shoal.__file__).resolve().parent
    return {
        "command": shlex.join([sys.executable, *sys.argv]),
        "server": observed_durability(plan),
        "url": plan.url,
        "tasks_per_processing_run": plan.tasks,
        "procs": list(plan.procs),
        "batches": list(BATCHES),
        "idle_posts": plan.posts,
        "idle_waiters": plan.waiters,
        "repeat": plan.repeat,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "loadavg_start": os.getloadavg(),
        "shoal": f"{getattr(shoal, '__version__', '?')} at {shoal_dir} "
        f"({git_state(shoal_dir.parent.parent)})",
        "pgqueuer": f"{version('pgqueuer')} (asyncpg {asyncpg.__version__}; durable tables)",
        "psycopg": psycopg.__version__,
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def processing_runs(plan: PgPlan) -> dict[tuple[str, int, int], Processing]:
    """Every processing measurement, keyed by (system, processes, batch). The two systems
    alternate within each configuration, so a drift in the machine's load hits both."""
    runs: dict[tuple[str, int, int], list[Processing]] = {}
    for procs, batch in itertools.product(plan.procs, BATCHES):
        for attempt in range(plan.repeat):
            order = ("pgqueuer", "shoal") if attempt % 2 else ("shoal", "pgqueuer")
            for system in order:
                tag = f" (run {attempt + 1}/{plan.repeat})" if plan.repeat > 1 else ""
                say(
                    f"processing: {system}, batch {batch}, {procs} procs, "
                    f"{plan.tasks:,} tasks{tag} ..."
                )
                with fresh_schemas(plan) as (mine, theirs):
                    if system == "shoal":
                        result = process_shoal(plan, mine, procs, batch)
                    else:
                        result = process_pgqueuer(plan, theirs, procs, batch)
                say(f"    {result.throughput:,.0f} tasks/s in {result.wall:.2f}s")
                for problem in result.problems:
                    say(f"    WARNING: {problem}")
                runs.setdefault((system, procs, batch), []).append(result)
    return {key: median_run(value) for key, value in runs.items()}


def processing_rows(
    plan: PgPlan, processing: dict[tuple[str, int, int], Processing], figures: dict[str, Any]
) -> list[Row]:
    figures["processing"] = {
        f"{system}, batch {batch}, {procs} procs": {
            "throughput": run.throughput,
            "wall": run.wall,
            "latency": summary(run.latencies),
            "worker_cpu_per_task": run.cpu_per_task,
        }
        for (system, procs, batch), run in processing.items()
    }
    rows = []
    for batch, procs in itertools.product(BATCHES, plan.procs):
        rate = processing[("shoal", procs, batch)].throughput
        theirs = processing[("pgqueuer", procs, batch)].throughput
        rows.append(
            Row(
                f"process, batch {batch}, {procs} procs",
                rate,
                theirs,
                "/s",
                f">= {TARGET_RATIO:g}x pgqueuer",
                rate >= TARGET_RATIO * theirs,
            )
        )
    for batch, procs in itertools.product(BATCHES, plan.procs):
        rows.append(
            Row(
                f"worker CPU per task, batch {batch}, {procs} procs",
                processing[("shoal", procs, batch)].cpu_per_task,
                processing[("pgqueuer", procs, batch)].cpu_per_task,
                "ms",
                note="client side only",
            )
        )
    return rows


def contended_rows(
    plan: PgPlan, processing: dict[tuple[str, int, int], Processing], figures: dict[str, Any]
) -> list[Row]:
    """Claim latency under contention, from the processing runs at the most processes."""
    procs = LATENCY_PROCS if LATENCY_PROCS in plan.procs else max(plan.procs)
    rows = []
    figures["latency_contended"] = {"procs": procs}
    for batch in BATCHES:
        mine = summary(processing[("shoal", procs, batch)].latencies)
        theirs = summary(processing[("pgqueuer", procs, batch)].latencies)
        figures["latency_contended"][f"batch {batch}"] = {"shoal": mine, "pgqueuer": theirs}
        for stat in ("p50", "p99", "max"):
            rows.append(
                Row(f"claim {stat}, batch {batch}, {procs} procs", mine[stat], theirs[stat], "ms")
            )
    return rows


def idle_rows(plan: PgPlan, figures: dict[str, Any]) -> list[Row]:
    """Idle to work with one agent waiting (nobody else to catch a wake-up it misses) and
    with several (all woken, one wins)."""
    figures["idle_to_work"] = {}
    rows = []
    for waiters in sorted({1, plan.waiters}):
        samples: dict[str, list[float]] = {}
        for system in ("shoal", "pgqueuer"):
            say(f"idle to work: {system}, {waiters} waiting agents, {plan.posts} posts ...")
            with fresh_schemas(plan) as (for_shoal, for_pgqueuer):
                schema = for_shoal if system == "shoal" else for_pgqueuer
                samples[system] = idle_to_work(plan, system, schema, waiters)
        mine, theirs = summary(samples["shoal"]), summary(samples["pgqueuer"])
        figures["idle_to_work"][f"{waiters} waiting"] = {"shoal": mine, "pgqueuer": theirs}
        where = f"{waiters} waiting"
        rows += [
            Row(f"idle to work p50, {where}", mine["p50"], theirs["p50"], "ms"),
            Row(
                f"idle to work p99, {where}",
                mine["p99"],
                theirs["p99"],
                "ms",
                f"<= {TARGET_IDLE_P99 * 1000:g} ms",
                mine["p99"] <= TARGET_IDLE_P99,
            ),
            Row(f"idle to work max, {where}", mine["max"], theirs["max"], "ms"),
        ]
    return rows


def main(args: argparse.Namespace) -> int:
    plan = make_pg_plan(args)
    try:
        dropped = drop_leftovers(plan)
    except psycopg.OperationalError as exc:
        raise SystemExit(f"cannot reach PostgreSQL at {plan.url}: {exc}") from exc
    meta = describe(plan)
    say("shoal claims benchmark, against pgqueuer on the same PostgreSQL")
    for key, value in meta.items():
        say(f"  {key:<26} {value}")
    if dropped:
        say(f"  dropped {len(dropped)} schemas left by earlier killed runs")
    say("")

    began = time.perf_counter()
    figures: dict[str, Any] = {}
    processing = processing_runs(plan)
    rows = processing_rows(plan, processing, figures)
    rows += contended_rows(plan, processing, figures)
    rows += idle_rows(plan, figures)
    problems = {
        f"{system}, batch {batch}, {procs} procs": run.problems
        for (system, procs, batch), run in processing.items()
        if run.problems
    }
    elapsed = time.perf_counter() - began

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    say("")
    say(
        f"results (throughput: higher is better, latency: lower is better; measured in "
        f"{elapsed:.0f}s; load average now {load})"
    )
    print_table(rows, "pgqueuer")
    say(
        "  claim latency: every claim() / complete-and-claim call of shoal's run; pgqueuer: "
        "every dequeue() its QueueManager made"
    )
    say(
        "  idle to work: from just before post() / enqueue() to the waiting agent holding "
        "the task (shoal: claim(wait=...) returned it; pgqueuer: its entrypoint was called)"
    )
    say(
        "  worker CPU per task: the worker processes' own CPU time over the run / tasks "
        "(the server's share is not included)"
    )
    close_report(
        rows,
        "pgqueuer",
        problems,
        (
            "shoal: worker reports, state counts and the event log; pgqueuer: worker reports, "
            "an empty queue table, and one 'picked' and one 'successful' log row per job"
        ),
        args.json,
        meta,
        figures,
        elapsed,
    )
    return 1 if problems else 0
