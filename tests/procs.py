"""Code that runs in child processes for the race and crash tests (module level, so that the
'spawn' start method can import it). Children talk to the test through pipes and events,
never through sleeps."""

from __future__ import annotations

import functools
import multiprocessing as mp
import os
import random
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from typing import Any, TypeVar

from shoal import Claim, Fleet, FleetFull, LeaseLost, ManualClock
from shoal.errors import WriteConflict
from shoal.stores import open_store

T = TypeVar("T")

CTX = mp.get_context("spawn")


def race(target: Callable[..., None], args_each: list[tuple[Any, ...]]) -> list[Any]:
    """Start a process per ``args_each`` entry running ``target(*args, start, out)``, all
    let go together by the barrier ``start``; what each sent on ``out``, in order, once
    every one has exited cleanly."""
    start = CTX.Barrier(len(args_each))
    pipes, children = [], []
    for args in args_each:
        receiver, sender = CTX.Pipe(duplex=False)
        child = CTX.Process(target=target, args=(*args, start, sender))
        child.start()
        sender.close()
        pipes.append(receiver)
        children.append(child)
    reports = [pipe.recv() for pipe in pipes]
    for child in children:
        child.join(timeout=120)
        assert child.exitcode == 0, f"a racer exited {child.exitcode}"
    return reports


def drain(url: str, agent: str, batch: int, start: Barrier, out: Connection) -> None:
    """Claim and complete until the fleet has nothing left; report what this agent did."""
    fleet = Fleet.open(url, create=False)
    fleet.register(agent, max_concurrent=batch)
    start.wait()
    done: list[int] = []
    waits: list[float] = []
    lost = 0
    began = time.perf_counter()
    claim = fleet.claim(agent, batch)
    waits.append(time.perf_counter() - began)
    while claim:
        done.extend(t.id for t in claim.tasks)
        began = time.perf_counter()
        if batch == 1:
            nxt = fleet.complete(claim.leases[0], {"by": agent}, then_claim=1).next
        else:
            result = fleet.complete_many(
                [(lease, None) for lease in claim.leases], then_claim=batch
            )
            lost += len(result.lost)
            nxt = result.next
        waits.append(time.perf_counter() - began)
        if nxt is None:
            break
        claim = nxt
    fleet.close()
    out.send({"agent": agent, "done": done, "lost": lost, "waits": waits})
    out.close()


def drain_own_clone(cache: str, url: str, agent: str, start: Barrier, out: Connection) -> None:
    """Claim and complete one task at a time until the fleet has nothing left, on a git
    store through a private clone of this process's own (its own ``SHOAL_GIT_CACHE``), as
    an agent on another host would. A ``WriteConflict`` that gets out of ``Fleet`` (every
    one of its runs lost the push to a faster writer) is tried again here -- the README's
    exit 4: nothing changed, retry; ``shoal worker`` does the same -- and counted."""
    os.environ["SHOAL_GIT_CACHE"] = cache
    escaped = 0

    def persist(call: Callable[[], T]) -> T:
        nonlocal escaped
        while True:
            try:
                return call()
            except WriteConflict:
                escaped += 1
                assert escaped < 100, f"{agent} lost every push for minutes"

    fleet = Fleet.open(url, create=False)
    persist(lambda: fleet.register(agent))
    start.wait()
    done: list[int] = []
    claim: Claim | None = persist(lambda: fleet.claim(agent))
    while claim:
        lease = claim.leases[0]
        done.append(lease.task_id)
        finished = functools.partial(fleet.complete, lease, {"by": agent}, then_claim=1)
        claim = persist(finished).next
    conflicts = getattr(fleet._store, "conflicts", 0)
    fleet.close()
    out.send({"agent": agent, "done": done, "escaped": escaped, "conflicts": conflicts})
    out.close()


def register_once(url: str, agent: str, start: Barrier, out: Connection) -> None:
    fleet = Fleet.open(url, create=False)
    start.wait()
    try:
        fleet.register(agent)
        out.send("ok")
    except FleetFull:
        out.send("full")
    fleet.close()


def hold_and_hang(url: str, now: float, count: int, out: Connection) -> None:
    """Claim ``count`` tasks at time ``now``, report the leases, then hang until killed."""
    fleet = Fleet.open(url, clock=ManualClock(now), create=False)
    fleet.register("doomed", max_concurrent=count)
    claim = fleet.claim("doomed", count)
    out.send([lease.to_dict() for lease in claim.leases])
    threading.Event().wait()  # hang, holding the leases, until the test kills us


def churn(url: str, agent: str, progress: Connection) -> None:
    """Claim and complete in a tight loop, reporting progress, until killed mid-write."""
    fleet = Fleet.open(url, create=False)
    fleet.register(agent, max_concurrent=3)
    rng = random.Random(agent)
    count = 0
    while True:
        claim = fleet.claim(agent, rng.randint(1, 3))
        for lease in claim.leases:
            try:
                if rng.random() < 0.2:
                    fleet.fail(lease, "flaky")
                else:
                    fleet.complete(lease, {"n": count})
            except LeaseLost:
                pass
        count += 1
        if count % 20 == 0:
            progress.send(count)
        if not claim:
            fleet.post(f"more work {count}")


def die_holding_the_write_lock(url: str, out: Connection) -> None:
    """Start a write transaction, write into it, report, and hang until killed."""
    store = open_store(url, create=False)
    with store.write() as tx:
        tx.set_meta("probe", "written by a writer about to die")
        out.send("holding")
        threading.Event().wait()


def stall_holding_the_write_lock(url: str, idle: float, out: Connection) -> None:
    """Start a fleet-wide write transaction on a PostgreSQL fleet (as ``configure`` does: it
    holds the fleet lock every writer needs; the server ends it after ``idle`` seconds of
    silence), report, wait for the word to commit, and report how that went."""
    from shoal.stores import postgres

    postgres.IDLE_IN_TRANSACTION = idle
    store = open_store(url, create=False)
    try:
        with store.write(exclusive=True) as tx:
            tx.set_meta("probe", "written by a writer that stalled")
            out.send("holding")
            out.recv()  # the test stops this process here, then lets it go on
    except Exception as exc:
        out.send(type(exc).__name__)
    else:
        out.send("committed")


def drain_coming_back(url: str, agent: str, start: Barrier, out: Connection) -> None:
    """For an agent registered earlier and silent since: claim and complete one at a time
    until a claim comes back empty -- its first claim brings it back from offline, and a
    completion it makes while written down offline (next is None) is followed by a claim
    that brings it back again."""
    fleet = Fleet.open(url, create=False)
    start.wait()
    done: list[int] = []
    claim = fleet.claim(agent)
    while claim:
        while claim:
            done.append(claim.tasks[0].id)
            claim = fleet.complete(claim.leases[0], then_claim=1).next or Claim()
        claim = fleet.claim(agent)
    fleet.close()
    out.send({"agent": agent, "done": done})
    out.close()


def drain_grouped(url: str, agent: str, batch: int, start: Barrier, out: Connection) -> None:
    """Claim and complete until no task is pending or held. An empty claim while a full
    group still holds work back is not the end: wait for a change (a completion frees a
    place) and ask again."""
    fleet = Fleet.open(url, create=False)
    fleet.register(agent, max_concurrent=batch)
    start.wait()
    done: list[int] = []
    while True:
        claim = fleet.claim(agent, batch, wait=1.0)
        if not claim:
            counts = fleet.status().counts
            if counts.get("pending", 0) == 0 and counts.get("claimed", 0) == 0:
                break
            continue
        while claim:
            done.extend(t.id for t in claim.tasks)
            result = fleet.complete_many(
                [(lease, None) for lease in claim.leases], then_claim=batch
            )
            claim = result.next or Claim()
    fleet.close()
    out.send({"agent": agent, "done": done})
    out.close()
