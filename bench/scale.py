"""A fleet at scale -- 1,000 agents, 100,000 tasks queued, 10,000,000 finished -- and
whether its history slows the live work down.

Why this exists
---------------
Every index a claim reads is partial, over live work only (pending and claimed tasks), so
finished history should cost a claim nothing; the counts, listings and snapshots the faces
show are another matter. This measures both on one fleet: first with no history at all,
then with ``--finished`` tasks (ten million by default) finished, with their events, and
prints each figure with its ratio to the fleet without history.

What runs
---------
The live fleet is made with the Fleet API: ``--agents`` agents (1,000) with two skills and
two domains each, ``--queued`` tasks (100,000) over 50 domains -- 70% in the pool, 30% in
the queues of 30% of the agents -- and, for steals, a few thieves whose skill only the
queues of a few busy victims hold (so a thief has an empty queue and an empty pool and must
steal). History is written straight into the store's tables, set-based, as the store itself
writes finished tasks and their events (``_scale_history``).

Measured on each fleet (the same fleet, before and after the history is written):

* claim p50/p99: ``--procs`` processes (16), each cycling through its share of the agents,
  every agent holding one task: ``complete(lease, then_claim=1)`` for the next agent in
  turn, each timed, ``--cycles`` per process;
* steal p50: each thief claims in turn (a steal from a busy victim's tail), timed alone;
* ``Fleet.status()``, ``assess()``, ``ready()`` (fleet-wide) and ``agents()``: the median of
  five, while every agent holds a task.

Then (unless ``--no-prune``) what retention costs: one prune batch (``PRUNE_BATCH`` tasks
and their events, one transaction: the longest a claim can wait behind it), and the claims
of the processes while a prune deletes the older half of the history beside them.

Targets: claim p50 and p99 with history at most 1.5 times without; steal p50 at most 2
times; status, assess, ready and agents under 100 ms each, with history.

This machine is shared and noisy: the ratios mean more than the absolute figures, and a
short ``--quick`` run (1,000,000 finished) is a sanity check, not a verdict. Run
``make bench-scale`` (SQLite) or ``bench/scale.py --store postgres``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _scale_history as history
from _harness import meta, percentile, say
from _results import Figures, figure_name, write_results
from shoal import Fleet, Lease
from shoal.limits import PRUNE_BATCH

DEFAULT_PG_URL = "postgresql://127.0.0.1:5432/test"
CTX = mp.get_context("spawn")
SKILLS = [f"s{i}" for i in range(8)]
DOMAINS = 50
RARE = "rare"  # the thieves' one skill: only the victims' queues hold its tasks
LIMIT_MS = 100.0  # status, assess, ready, agents
SAMPLES = 5  # of each of those


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="shoal at scale: claims, steals and snapshots on a fleet of 1,000 agents "
        "and 100,000 queued tasks, without history and with 10,000,000 finished tasks.",
    )
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument(
        "--pg-url",
        default=DEFAULT_PG_URL,
        help=f"with --store postgres: the server (default {DEFAULT_PG_URL}); the fleet gets "
        "a fresh schema, dropped afterwards",
    )
    parser.add_argument("--finished", type=int, default=None, help="default 10,000,000")
    parser.add_argument("--quick", action="store_true", help="1,000,000 finished, fewer cycles")
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--procs", type=int, default=16, help="claiming processes")
    parser.add_argument("--queued", type=int, default=100_000, help="pending tasks")
    parser.add_argument("--cycles", type=int, default=None, help="per process (300; quick 150)")
    parser.add_argument("--no-prune", action="store_true", help="skip measuring a prune")
    parser.add_argument("--dir", type=Path, default=None, help="SQLite: where the fleet lives")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    if args.finished is None:
        args.finished = 1_000_000 if args.quick else 10_000_000
    if args.cycles is None:
        args.cycles = 150 if args.quick else 300
    if args.agents < 20 or args.procs < 1 or args.queued < args.agents or args.finished < 0:
        parser.error("needs --agents >= 20, --procs >= 1, --queued >= --agents, --finished >= 0")
    if args.procs > args.agents // 2:
        parser.error("--procs must leave every process at least two agents")
    return args


# ---------------------------------------------------------------------- the fleet


@dataclass(frozen=True)
class Layout:
    """Who is who: the agents the processes cycle through, the thieves and their victims."""

    cyclers: list[str]
    thieves: list[str]
    victims: list[str]


def layout(agents: int) -> Layout:
    few = max(1, agents // 100)
    cyclers = [f"a{i:04d}" for i in range(agents - 2 * few)]
    return Layout(cyclers, [f"t{i:03d}" for i in range(few)], [f"v{i:03d}" for i in range(few)])


def domain(i: int) -> str:
    return f"d{i % DOMAINS:02d}"


def skills_of(i: int) -> list[str]:
    return [SKILLS[i % len(SKILLS)], SKILLS[(i + 3) % len(SKILLS)]]


def build(fleet: Fleet, who: Layout, queued: int) -> int:
    """Register everyone and post the live work; returns how many tasks were posted."""
    fleet.configure(
        max_agents=len(who.cyclers) + 2 * len(who.thieves) + 10,
        lease_ttl="1d",  # nothing expires while history is written
        heartbeat_timeout="1d",
        max_steals_per_agent=1_000_000,
        max_steals_per_cycle=1_000_000,
    )
    for i, agent in enumerate(who.cyclers):
        fleet.register(agent, skills=skills_of(i), domains=[domain(i), domain(i + 7)])
    for agent in (*who.thieves, *who.victims):
        fleet.register(agent, skills=[RARE], domains=[domain(0)])
    owners = who.cyclers[: max(1, len(who.cyclers) * 3 // 10)]
    in_queues = queued * 3 // 10
    specs: list[dict[str, Any]] = []
    for i in range(queued - in_queues):  # the pool: one skill each, never none (see below)
        specs.append({"title": f"pool {i}", "skills": [SKILLS[i % 8]], "domain": domain(i)})
    for i in range(in_queues):
        k = i % len(owners)
        specs.append(
            {
                "title": f"queued {i}",
                "skills": skills_of(k)[:1],
                "domain": domain(k),
                "to": owners[k],
            }
        )
    # The victims' queues hold the only tasks of the thieves' skill, deeper than any other
    # queue, and no pool task is doable by everyone (no skills): so a thief's own queue and
    # its pool are empty, and it steals from the busiest victim.
    for v, victim in enumerate(who.victims):
        specs += [
            {
                "title": f"rare {v}.{i}",
                "skills": [RARE],
                "domain": domain(0),
                "to": victim,
                "priority": 7,
            }
            for i in range(max(200, 2 * in_queues // len(owners)))
        ]
    for start in range(0, len(specs), 5000):
        fleet.post_many(specs[start : start + 5000])
    for victim in who.victims:  # at work: a victim holds one of its own tasks
        assert fleet.claim(victim).leases, victim
    return len(specs)


# ---------------------------------------------------------------------- measuring


def cycle(url: str, agents: list[str], cycles: int, ready: Any, finish: Any, out: Any) -> None:
    """One claiming process: every agent of its share claims a task, then complete-and-claim
    for each agent in turn, timed; it reports, holds its tasks until ``finish``, ends them."""
    fleet = Fleet.open(url, create=False)
    held: dict[str, Lease] = {}
    for agent in agents:
        claim = fleet.claim(agent)
        if claim.leases:
            held[agent] = claim.leases[0]
    ready.wait()
    waits = []
    for i in range(cycles):
        agent = agents[i % len(agents)]
        lease = held.pop(agent, None)
        began = time.perf_counter()
        nxt = fleet.complete(lease, then_claim=1).next if lease else fleet.claim(agent)
        waits.append(time.perf_counter() - began)
        if nxt is not None and nxt.leases:
            held[agent] = nxt.leases[0]
    out.send(waits)
    finish.wait()
    for lease in held.values():
        fleet.complete(lease)
    fleet.close()
    out.send(len(held))


class Claimers:
    """The claiming processes, started and past their first claims (see ``claiming``)."""

    def __init__(self, pipes: list[Any]) -> None:
        self.pipes = pipes
        self.waits: list[float] = []

    def done(self) -> bool:
        """Whether every process has finished its timed cycles."""
        return all(pipe.poll() for pipe in self.pipes)

    def collect(self) -> list[float]:
        """Their waits (seconds), once they have finished."""
        if not self.waits:
            for pipe in self.pipes:
                self.waits.extend(pipe.recv())
        return self.waits


@contextmanager
def claiming(url: str, who: Layout, procs: int, cycles: int) -> Iterator[Claimers]:
    """The claiming processes, started and past their first claims: the body runs beside
    their timed cycles. Afterwards they end the tasks they hold."""
    ready, finish = CTX.Barrier(procs + 1), CTX.Event()
    pipes, children = [], []
    for p in range(procs):
        receiver, sender = CTX.Pipe(duplex=False)
        share = who.cyclers[p::procs]
        child = CTX.Process(target=cycle, args=(url, share, cycles, ready, finish, sender))
        child.start()
        sender.close()
        pipes.append(receiver)
        children.append(child)
    ready.wait()
    claimers = Claimers(pipes)
    try:
        yield claimers
        claimers.collect()
    finally:
        finish.set()
        for pipe, child in zip(pipes, children, strict=True):
            pipe.recv()
            child.join(timeout=300)
            if child.exitcode != 0:
                raise SystemExit(f"a claiming process failed (exit {child.exitcode})")


def median_ms(call: Callable[[], object]) -> float:
    times = []
    for _ in range(SAMPLES):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1e3


def steals(fleet: Fleet, who: Layout, rounds: int) -> list[float]:
    """Each thief claims ``rounds`` times: a steal each, timed; the stolen task is done."""
    waits = []
    for _ in range(rounds):
        for thief in who.thieves:
            began = time.perf_counter()
            claim = fleet.claim(thief)
            waits.append(time.perf_counter() - began)
            assert claim.sources == ("steal",), (thief, claim.reason)
            fleet.complete(claim.leases[0])
    return waits


def measure(url: str, fleet: Fleet, who: Layout, args: argparse.Namespace) -> dict[str, float]:
    """One fleet's figures: claims under the processes, snapshots, steals."""
    with claiming(url, who, args.procs, args.cycles) as claimers:
        waits = claimers.collect()
        snapshots = {  # every cycling agent holds a task now
            "status_ms": median_ms(fleet.status),
            "assess_ms": median_ms(fleet.assess),
            "ready_ms": median_ms(fleet.ready),
            "agents_ms": median_ms(fleet.agents),
        }
    stolen = steals(fleet, who, max(5, 50 // len(who.thieves)))
    return {
        "claim_p50_ms": statistics.median(waits) * 1e3,
        "claim_p99_ms": percentile(waits, 99) * 1e3,
        "steal_p50_ms": statistics.median(stolen) * 1e3,
        **snapshots,
    }


def measure_prune(
    url: str, fleet: Fleet, who: Layout, args: argparse.Namespace
) -> dict[str, float]:
    """What retention costs: one batch alone, then the claims beside a prune of the older
    half of the history (what finished more than 30 days ago)."""
    batch = [0.0] * SAMPLES
    for i in range(SAMPLES):
        began = time.perf_counter()
        fleet.prune("30d", limit=1)  # one batch: PRUNE_BATCH tasks and their events
        batch[i] = time.perf_counter() - began
    deleted = 0
    with claiming(url, who, args.procs, args.cycles) as claimers:
        began = time.perf_counter()
        while not claimers.done():  # a pass of the monitor at a time, beside the claims
            report = fleet.prune("30d", limit=10_000)
            deleted += report.tasks
            if not report.more:
                break
        seconds = time.perf_counter() - began
        waits = claimers.collect()
    return {
        "prune_batch_ms": statistics.median(batch) * 1e3,
        "prune_per_s": deleted / seconds if seconds else 0.0,
        "prune_claim_p50_ms": statistics.median(waits) * 1e3,
        "prune_claim_p99_ms": percentile(waits, 99) * 1e3,
    }


# ---------------------------------------------------------------------- the stores


@dataclass
class Place:
    """Where the fleet lives: its URL, and how history is written into it."""

    url: str
    fill: Callable[[int, dict[str, Any]], tuple[int, int]]
    size: Callable[[], int]  # bytes on disk
    skillsets: Callable[[], list[int]]
    settle: Callable[[], None]  # what the store's own upkeep would have done by now


@contextmanager
def sqlite_place(args: argparse.Namespace) -> Iterator[Place]:
    import sqlite3

    if args.dir:
        Path(args.dir).mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="shoal-scale-", dir=args.dir))
    path = folder / "fleet.db"

    def skillsets() -> list[int]:
        with sqlite3.connect(path) as conn:
            return [r[0] for r in conn.execute("SELECT id FROM skillsets WHERE skills <> ''")]

    def size() -> int:
        return sum(f.stat().st_size for f in folder.iterdir())

    try:
        yield Place(
            f"sqlite://{path}",
            lambda n, params: history.fill_sqlite(str(path), n, params, say),
            size,
            skillsets,
            lambda: None,  # shoal never runs ANALYZE on SQLite: neither does this
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def postgres_place(args: argparse.Namespace) -> Iterator[Place]:
    import psycopg

    from shoal.stores.postgres import postgres_target

    schema = f"shoal_scale_{uuid.uuid4().hex[:12]}"
    url = f"{args.pg_url}{'&' if '?' in args.pg_url else '?'}schema={schema}"
    conninfo = postgres_target(url)[0]
    try:
        conn = psycopg.connect(conninfo, autocommit=True, options=f"-c search_path={schema}")
    except psycopg.Error as exc:
        raise SystemExit(f"cannot reach PostgreSQL at {args.pg_url}: {exc}") from None

    def skillsets() -> list[int]:
        return [r[0] for r in conn.execute("SELECT id FROM skillsets WHERE skills <> ''")]

    def size() -> int:
        row = conn.execute(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
            "WHERE c.relnamespace = %s::regnamespace AND c.relkind = 'r'",
            (schema,),
        ).fetchone()
        return int(row[0] or 0) if row else 0

    def settle() -> None:
        """Autovacuum analyses a table once 2% of it changed (the schema sets that), a
        minute or so later: a fleet measured right after 100,000 posts would be measured
        on a planner that has no statistics yet, and that is not the fleet at scale."""
        for table in ("agents", "tasks", "events", "deps"):
            conn.execute(f"VACUUM ANALYZE {table}")

    try:
        fill = lambda n, p: history.fill_postgres(conn, n, p, say)  # noqa: E731
        yield Place(url, fill, size, skillsets, settle)
    finally:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.close()


# ---------------------------------------------------------------------- the report

#: The targets, on the fleet with history, as ``_results`` reads them.
TARGETS = {
    "claim_p50_ratio_vs_empty": "<= 1.5",
    "claim_p99_ratio_vs_empty": "<= 1.5",
    "steal_p50_ratio_vs_empty": "<= 2",
    "status_ms": f"<= {LIMIT_MS:g}",
    "assess_ms": f"<= {LIMIT_MS:g}",
    "ready_ms": f"<= {LIMIT_MS:g}",
    "agents_ms": f"<= {LIMIT_MS:g}",
}
ROWS = [
    ("claim_p50_ms", "claim p50 (complete + claim, ms)"),
    ("claim_p99_ms", "claim p99 (ms)"),
    ("steal_p50_ms", "steal p50 (ms)"),
    ("status_ms", "Fleet.status() (ms)"),
    ("assess_ms", "Fleet.assess() (ms)"),
    ("ready_ms", "Fleet.ready() (ms)"),
    ("agents_ms", "Fleet.agents() (ms)"),
]


def name(store: str, quantity: str, procs: int) -> str:
    """A figure's name (``_results.figure_name``): the claims' carry their process count."""
    contended = quantity.startswith(("claim_", "prune_claim_"))
    return figure_name(store, "scale", procs=procs if contended else None, quantity=quantity)


def report(
    store: str,
    empty: dict[str, float],
    full: dict[str, float],
    extra: dict[str, float],
    args: argparse.Namespace,
) -> Figures:
    """Print the table and the verdicts; the figures and targets for --json."""
    figures = Figures()
    values: dict[str, float] = {}
    for key, value in full.items():
        values[key] = value
        values[key.replace("_ms", "_empty_ms")] = empty[key]
    for key in ("claim_p50_ms", "claim_p99_ms", "steal_p50_ms"):
        values[key.replace("_ms", "_ratio_vs_empty")] = full[key] / empty[key]
    values.update(extra)
    for q in ("p50", "p99"):  # the claims beside a prune, against those without one
        if f"prune_claim_{q}_ms" in extra:
            values[f"prune_claim_{q}_ratio_vs_history"] = (
                extra[f"prune_claim_{q}_ms"] / full[f"claim_{q}_ms"]
            )
    verdicts = {}
    for key, value in values.items():
        verdicts[key] = figures.put(name(store, key, args.procs), round(value, 3), TARGETS.get(key))
    say("")
    say(f"{'':36} {'no history':>12} {f'{args.finished:,} finished':>20} {'ratio':>7}")
    for key, words in ROWS:
        a, b = empty[key], full[key]
        say(f"  {words:34} {a:12.2f} {b:20.2f} {b / a if a else 0:7.2f}")
    if "prune_batch_ms" in extra:
        say("")
        say(
            f"  one prune batch ({PRUNE_BATCH} tasks and their events): "
            f"{extra['prune_batch_ms']:.1f} ms"
        )
        say(
            f"  a prune beside the claims: {extra['prune_per_s']:,.0f} tasks deleted a second; "
            f"claims meanwhile p50 {extra['prune_claim_p50_ms']:.2f} ms, "
            f"p99 {extra['prune_claim_p99_ms']:.2f} ms"
        )
    say("")
    for key, target in TARGETS.items():
        word = {True: "PASS", False: "MISS", None: "----"}[verdicts.get(key)]
        say(f"  {word}  {key} = {values[key]:.2f} (target {target})")
    tally = sum(1 for t in figures.targets.values() if t["pass"])
    say(f"targets: {tally} PASS, {len(figures.targets) - tally} MISS")
    return figures


# ---------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    who = layout(args.agents)
    setup = {
        "repeat": 1,
        "agents": args.agents,
        "procs": args.procs,
        "cycles": args.cycles,
        "queued": args.queued,
        "finished": args.finished,
    }
    head = meta(args.store, setup, {}, {}, {})
    say("shoal at scale: does history slow the live work down?")
    for key, value in head.items():
        say(f"  {key:<14} {value}")
    say(
        f"  fleet          {args.agents:,} agents ({len(who.cyclers):,} cycled by "
        f"{args.procs} processes, {len(who.thieves)} thieves, {len(who.victims)} victims)"
    )
    began = time.perf_counter()
    place = sqlite_place(args) if args.store == "sqlite" else postgres_place(args)
    with place as where, Fleet.open(where.url) as fleet:
        say("building the live fleet with the Fleet API ...")
        posted = build(fleet, who, args.queued)
        where.settle()
        say(f"  {posted:,} tasks posted in {time.perf_counter() - began:.0f}s; measuring it ...")
        empty = measure(where.url, fleet, who, args)
        say(f"writing {args.finished:,} finished tasks and their events ...")
        filling = time.perf_counter()
        params = history.shape(where.skillsets(), DOMAINS, len(who.cyclers), args.finished)
        tasks, events = where.fill(args.finished, params)
        where.settle()
        fill_s = time.perf_counter() - filling
        say(f"  {tasks:,} tasks and {events:,} events in {fill_s:.0f}s; measuring again ...")
        full = measure(where.url, fleet, who, args)
        head["history"] = {
            "tasks": tasks,
            "events": events,
            "seconds": round(fill_s, 1),
            "store_bytes": where.size(),
        }
        extra: dict[str, float] = {}
        if not args.no_prune and args.finished:
            say("measuring a prune ...")
            extra = measure_prune(where.url, fleet, who, args)
    figures = report(args.store, empty, full, extra, args)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    say(f"measured in {time.perf_counter() - began:.0f}s; load average now {load}")
    if args.json is not None:
        head["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        write_results(args.json, head, figures)
        say(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
