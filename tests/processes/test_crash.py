"""Crash recovery with a real ``kill -9``, on SQLite and on PostgreSQL: a dead agent's work
comes back, its late calls are fenced off, and a writer killed mid-transaction leaves the
fleet whole and unlocked."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sqlite3
import time
from collections import Counter
from pathlib import Path

import pytest

from shoal import Fleet, Lease, LeaseLost, ManualClock, TaskState
from tests import procs

CTX = mp.get_context("spawn")
T0 = 1_800_000_000.0


def test_a_killed_agents_leases_expire_and_its_late_complete_is_refused(
    shared_store: tuple[str, str],
) -> None:
    _, url = shared_store
    setup = Fleet.open(url, clock=ManualClock(T0))
    setup.post_many([{"title": f"job {i}"} for i in range(5)])
    receiver, sender = CTX.Pipe(duplex=False)
    child = CTX.Process(target=procs.hold_and_hang, args=(url, T0, 3, sender))
    child.start()
    sender.close()
    held = [Lease(**lease) for lease in receiver.recv()]  # the child holds 3 leases now
    assert len(held) == 3
    os.kill(child.pid or 0, signal.SIGKILL)
    child.join(timeout=30)
    assert child.exitcode == -signal.SIGKILL

    # Before expiry the work is still the dead agent's: nobody else can take it.
    before = Fleet.open(url, clock=ManualClock(T0 + 599))
    before.register("rescuer", max_concurrent=5)
    early = before.claim("rescuer", 5)
    assert {t.id for t in early.tasks} == {4, 5}  # only the two unclaimed tasks

    # After expiry, with no monitor running, a claim takes them back.
    after = Fleet.open(url, clock=ManualClock(T0 + 601))
    claim = after.claim("rescuer", 3)
    assert sorted(t.id for t in claim.tasks) == sorted(lease.task_id for lease in held)
    assert all(t.attempts == 2 for t in claim.tasks)
    for lease in claim.leases:
        after.complete(lease, "rescued")
    for lease in held:  # the dead agent's late completion is fenced off
        with pytest.raises(LeaseLost, match=r"already completed"):
            after.complete(lease, "zombie")
    for listed in after.tasks(limit=10):
        if listed.id in {lease.task_id for lease in held}:
            task = after.get(listed.id)  # read whole: a listing leaves the result out
            assert task.state is TaskState.DONE and task.result == "rescued"
            kinds = [e.kind for e in after.events(task=task.id)]
            assert kinds == ["posted", "claimed", "expired", "claimed", "completed"]
    for fleet in (setup, before, after):
        fleet.close()


def test_a_writer_killed_mid_transaction_leaves_the_fleet_consistent(
    shared_store: tuple[str, str], tmp_path: Path
) -> None:
    kind, url = shared_store
    fleet = Fleet.open(url)
    fleet.configure(max_agents=8)
    fleet.post_many([{"title": f"job {i}"} for i in range(300)])
    children, pipes = [], []
    for i in range(3):
        receiver, sender = CTX.Pipe(duplex=False)
        child = CTX.Process(target=procs.churn, args=(url, f"churn{i}", sender))
        child.start()
        sender.close()
        children.append(child)
        pipes.append(receiver)
    for pipe in pipes:
        assert pipe.recv() >= 20  # each child is deep in its loop of writes
    for child in children:  # no warning: whatever each was writing is cut off
        os.kill(child.pid or 0, signal.SIGKILL)
    for child in children:
        child.join(timeout=30)
        assert child.exitcode == -signal.SIGKILL

    if kind == "sqlite":
        raw = sqlite3.connect(tmp_path / "fleet.db")
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        raw.close()
    # Nothing is half-done: the counts by state agree with the tasks, each task's events
    # agree with its state, and the fleet takes writes at once (no lock left behind).
    # On PostgreSQL a killed client's last COMMIT may still be landing in its server
    # process: read until two snapshots agree (a settled fleet), within a deadline.
    deadline = time.monotonic() + 10
    while True:
        tasks = fleet.tasks(limit=100_000)
        counts = Counter(t.state.value for t in tasks)
        kept = {k: v for k, v in fleet.status().counts.items() if v}
        if kept == dict(counts) and fleet.tasks(limit=100_000) == tasks:
            break
        assert time.monotonic() < deadline, (kept, dict(counts))
        time.sleep(0.05)  # polling for the killed clients' transactions to settle
    agents = {a.id: a for a in fleet.agents()}
    for agent in agents.values():
        queued = sum(1 for t in tasks if t.state is TaskState.PENDING and t.agent == agent.id)
        assert agent.queued == queued
    last = {}
    for event in fleet.events(limit=1_000_000):
        if event.task_id is not None:
            last[event.task_id] = event.kind
    expected = {
        "completed": TaskState.DONE,
        "claimed": TaskState.CLAIMED,
        "failed": TaskState.PENDING,
        "posted": TaskState.PENDING,
        "dead": TaskState.DEAD,
    }
    for task in tasks:
        assert task.state is expected[last[task.id]], (task, last[task.id])
    fleet.register("survivor")
    fresh = fleet.post("after the crash", priority=1)
    assert fleet.claim("survivor").tasks[0].id == fresh.id
    fleet.close()


def test_a_writer_killed_inside_its_transaction_neither_wedges_nor_leaks(
    shared_store: tuple[str, str],
) -> None:
    _, url = shared_store
    fleet = Fleet.open(url)
    receiver, sender = CTX.Pipe(duplex=False)
    child = CTX.Process(target=procs.die_holding_the_write_lock, args=(url, sender))
    child.start()
    sender.close()
    assert receiver.recv() == "holding"  # it holds the writer queue and SQLite's lock
    os.kill(child.pid or 0, signal.SIGKILL)
    child.join(timeout=30)
    task = fleet.post("the next writer goes ahead")  # not stuck behind the dead writer
    assert task.id == 1
    with fleet._store.read() as tx:
        assert tx.get_meta("probe") is None  # its half-written transaction is gone
    fleet.close()
