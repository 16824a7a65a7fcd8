"""pgqueuer, the other system of the PostgreSQL comparison, run the way its own worker runs.

One ``QueueManager`` per process on its own asyncpg connection, ``run(batch_size=1 or
10, mode=drain)``, every other setting at its default (unlimited in-process concurrency;
completions buffered and written up to batch_size at a time, or every 0.1 s). Its tables
stay LOGGED (pgqueuer's ``durable`` default) and it never changes ``synchronous_commit``,
as shoal does not. Every function takes the server's URL and the fresh schema of one
measurement (``_pg_side.fresh_schemas``); pgqueuer's objects live there, on a NOTIFY
channel of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
import traceback
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

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

from _harness import BARRIER_TIMEOUT, worker_report

ENTRYPOINT = "noop"
PGQ_FILL_CHUNK = 1_000  # jobs per enqueue call when pre-filling pgqueuer


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


async def install_and_fill_pgqueuer(url: str, schema: str, count: int) -> None:
    """``pgq install`` into ``schema``, then ``count`` no-op jobs, a chunk per enqueue."""
    conn = await asyncpg.connect(url)
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
    return worker_report(start, end, cpu, queries.dequeue_latencies, done)


def verify_pgqueuer(
    url: str, schema: str, expected: int, reports: Sequence[dict[str, Any]]
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
    with psycopg.connect(url, autocommit=True) as conn:
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


# ---------------------------------------------------------------------- idle to work


def pgqueuer_poster(url: str, schema: str) -> tuple[Callable[[int], None], Callable[[], None]]:
    """pgqueuer installed in ``schema`` with nothing queued, and how to post one job at a
    time carrying its sequence number and ``time.time()``; then how to close."""
    asyncio.run(install_and_fill_pgqueuer(url, schema, 0))
    conn = psycopg.connect(url, autocommit=True)
    queries = SyncQueries(
        SyncPsycopgDriver(conn), qbq=qb.QueryQueueBuilder(settings=pgq_settings(schema))
    )

    def post(seq: int) -> None:
        sent = json.dumps({"seq": seq, "at": time.time()}).encode()
        queries.enqueue(ENTRYPOINT, sent)

    return post, conn.close


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
