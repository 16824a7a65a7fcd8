"""A task's command lives no longer than its worker's hold on the task: real `shoal worker`
processes, real commands with children of their own, real `kill -9`, on SQLite and
PostgreSQL.

Each fault below once left a command running for a task that was about to be, or already
was, another agent's -- two agents at work on one task. Now: the worker killed, its shim
killed, its lease taken by a host whose clock is an hour ahead, the store out of reach for
a whole lease -- each ends the command's whole process group in time, says why, and the task
is done once.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from shoal import Fleet, ManualClock, TaskState
from shoal.runtime import CommandHandler, Worker
from shoal.runtime._holding import LEASE_GONE, LEASE_UNRENEWED
from tests import pg, procs
from tests.helpers import wait_until
from tests.workers import pid_alive, running

pytestmark = pytest.mark.slow

CTX = mp.get_context("spawn")

#: A command with a child of its own, in its group: both must end with the task's hold.
GROUP = 'echo $$ > "$SHOAL_TASK_ID.cmd"; sleep 60 & echo $! > "$SHOAL_TASK_ID.child"; wait'


def command_pids(folder: Path, task_id: int) -> list[int]:
    """The pids of a task's command and its child, once both are running."""

    def written() -> list[int] | None:
        try:
            return [int((folder / f"{task_id}.{name}").read_text()) for name in ("cmd", "child")]
        except (OSError, ValueError):  # not there yet, or half written
            return None

    return wait_until(written, "the command and its child to start")  # type: ignore[no-any-return]


def gone_within(pids: list[int], seconds: float) -> float:
    """Wait until none of ``pids`` runs; the time.monotonic() when that was seen."""
    wait_until(lambda: not any(pid_alive(pid) for pid in pids), f"{pids} to end", seconds)
    return time.monotonic()


def settling(lines: list[dict[str, Any]], task_id: int) -> dict[str, Any] | None:
    """The worker's line saying how it let go of ``task_id``: released, or lost."""
    for line in lines:
        if line.get("task") == task_id and line.get("kind") in ("released", "lost"):
            return line
    return None


def kinds_of(fleet: Fleet, task_id: int) -> list[str]:
    return [e.kind for e in fleet.events(task=task_id)]


def rescue(url: str, *task_ids: int) -> None:
    """Another agent, on a host an hour ahead (the leases long over there), does the tasks."""
    with Fleet.open(url, clock=ManualClock(time.time() + 3600)) as later:
        later.register("rescuer", max_concurrent=len(task_ids))
        claim = later.claim("rescuer", len(task_ids))
        assert sorted(t.id for t in claim.tasks) == sorted(task_ids)
        for lease in claim.leases:
            later.complete(lease, "rescued")


def assert_done_once(fleet: Fleet, task_id: int, by: str) -> None:
    done = fleet.get(task_id)
    assert done.state is TaskState.DONE and done.agent == by, done
    assert kinds_of(fleet, task_id).count("completed") == 1


@contextmanager
def writes_blocked(kind: str, url: str) -> Iterator[None]:
    """Every write to the store waits, as if the store were out of reach, until the block
    ends; reads go on, so the test can look at the fleet meanwhile. On SQLite another
    process holds the write lock inside a transaction (and is killed); on PostgreSQL a
    connection holds the agents table locked against writes (a heartbeat's first write)."""
    if kind == "postgres":
        with pg.schema_conn(url) as conn:
            conn.execute("BEGIN")
            conn.execute("LOCK TABLE agents IN EXCLUSIVE MODE")
            try:
                yield
            finally:
                conn.execute("ROLLBACK")
        return
    receiver, sender = CTX.Pipe(duplex=False)
    holder = CTX.Process(target=procs.die_holding_the_write_lock, args=(url, sender))
    holder.start()
    sender.close()
    try:
        assert receiver.recv() == "holding"
        yield
    finally:
        os.kill(holder.pid or 0, signal.SIGKILL)
        holder.join(30)


# ---------------------------------------------------------------------- the worker dies


def test_a_worker_killed_mid_task_ends_its_commands_group_within_a_second(
    shared_store: tuple[str, str], tmp_path: Path
) -> None:
    """Two tasks at once, so two commands, each with a child: all four end."""
    _kind, url = shared_store
    with Fleet.init(url) as fleet:
        tasks = [fleet.post(f"long job {i}").id for i in range(2)]
        with running(url, "worker", "--agent", "w1", "--max-concurrent", "2", "--json", "--",
                     "sh", "-c", GROUP, cwd=tmp_path) as worker:  # fmt: skip
            pids = [pid for task_id in tasks for pid in command_pids(tmp_path, task_id)]
            os.kill(worker.popen.pid, signal.SIGKILL)
            killed = time.monotonic()
            seen = gone_within(pids, 10)
            worker.wait()
        print(f"the commands' groups ended {seen - killed:.3f}s after their worker's kill -9")
        assert seen - killed < 1.0
        # Nobody else holds the tasks until their leases run out; then each is done once.
        for task_id in tasks:
            held = fleet.get(task_id)
            assert held.state is TaskState.CLAIMED and held.agent == "w1"
        rescue(url, *tasks)
        for task_id in tasks:
            assert_done_once(fleet, task_id, "rescuer")
            kinds = kinds_of(fleet, task_id)
            assert kinds == ["posted", "claimed", "expired", "claimed", "completed"]


def test_a_killed_shim_does_not_leave_its_command_running(tmp_path: Path) -> None:
    """The shim that leads the command's group is killed itself: the worker, still alive,
    ends the group in its place and fails the task with the signal."""
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    with Fleet.init(url) as fleet:
        task = fleet.post("long job", max_attempts=1)
        with running(url, "worker", "--agent", "w1", "--json", "--", "sh", "-c", GROUP,
                     cwd=tmp_path) as worker:  # fmt: skip
            pids = command_pids(tmp_path, task.id)
            shim = os.getpgid(pids[0])  # the group's leader
            assert shim not in pids and shim != worker.popen.pid
            assert os.getpgid(pids[1]) == shim
            os.kill(shim, signal.SIGKILL)
            gone_within(pids, 10)
            failed = worker.wait_for("failed", task=task.id)
            wait_until(lambda: "was killed" in worker.text(), "the worker to say so")
            assert worker.popen.poll() is None  # the worker itself goes on
            worker.signal(signal.SIGTERM)
            assert worker.wait() == 0, worker.text()
        assert "killed by signal 9" in failed["error"]
        assert fleet.get(task.id).state is TaskState.DEAD


# ---------------------------------------------------------------------- the lease is lost


def test_a_lease_taken_by_a_host_whose_clock_jumped_ahead_stops_the_command(
    shared_store: tuple[str, str], tmp_path: Path
) -> None:
    """Another host's clock jumps an hour ahead: there the lease is long over, and it takes
    the task. The worker's next heartbeat finds the lease gone and stops the command (the
    task is the other agent's now), saying so; the task is done once, by the other."""
    _kind, url = shared_store
    with Fleet.init(url) as fleet:
        fleet.configure(lease_ttl=3)  # a heartbeat a second
        task = fleet.post("contested")
        with running(url, "worker", "--agent", "w1", "--json", "--", "sh", "-c", GROUP,
                     cwd=tmp_path) as worker:  # fmt: skip
            pids = command_pids(tmp_path, task.id)
            with Fleet.open(url, clock=ManualClock(time.time() + 3600)) as ahead:
                ahead.register("thief")
                claim = ahead.claim("thief")
                assert [t.id for t in claim.tasks] == [task.id]
                lost = worker.wait_for("lost", task=task.id, timeout=20)
                gone_within(pids, 10)
                ahead.complete(claim.leases[0], "taken over")
            wait_until(lambda: "a heartbeat found its lease gone" in worker.text(), "the why")
            worker.signal(signal.SIGTERM)
            assert worker.wait() == 0, worker.text()
        assert lost["error"] == LEASE_GONE
        assert_done_once(fleet, task.id, "thief")
        assert fleet.get(task.id).result == "taken over"


def test_a_clock_jump_on_the_workers_host_stops_the_command_before_any_heartbeat(
    shared_store: tuple[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """This host's clock jumps an hour ahead (a laptop waking, a clock stepped forward): by
    it the lease is over, and any agent of the host may be given the task. The worker sees
    it at once -- its next heartbeat is half a minute away -- and stops the command; the
    task is done once. (A worker in this process, so that the jump is a manual clock's.)"""
    _kind, url = shared_store
    clock = ManualClock(time.time())
    with Fleet.init(url) as setup:
        setup.configure(lease_ttl=600)  # a heartbeat every 30 s
    fleet = Fleet.open(url, clock=clock)
    task = fleet.post("long job")
    said: list[tuple[str, dict[str, Any]]] = []
    handler = CommandHandler(["sh", "-c", GROUP], cwd=tmp_path)
    worker = Worker(Fleet.open(url, clock=clock), "w1", handler,
                    listener=lambda kind, data: said.append((kind, data)))  # fmt: skip
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        pids = command_pids(tmp_path, task.id)
        clock.advance(3600)
        jumped = time.monotonic()
        seen = gone_within(pids, 10)
        print(f"the command ended {seen - jumped:.3f}s after the clock jumped")
        wait_until(lambda: [d for k, d in said if k in ("released", "lost")], "a settle")
    finally:
        worker.stop(now=True)
        thread.join(30)
    assert any("(it jumped)" in r.getMessage() for r in caplog.records)
    fleet.register("other")
    claim = fleet.claim("other")
    assert [t.id for t in claim.tasks] == [task.id]
    fleet.complete(claim.leases[0], "done once")
    assert_done_once(fleet, task.id, "other")
    fleet.close()


def test_a_store_out_of_reach_for_a_whole_lease_stops_the_command_before_the_lease_ends(
    shared_store: tuple[str, str], tmp_path: Path
) -> None:
    """No heartbeat can reach the store: the worker counts the lease down on its own clock
    and stops the command before the lease can run out -- before any other agent could be
    given the task -- then gives the task back once the store answers."""
    kind, url = shared_store
    with Fleet.init(url) as fleet:
        fleet.configure(lease_ttl=2)
        task = fleet.post("long job")
        # --drain 0: at the end, the task it claims again is released at once.
        with running(url, "worker", "--agent", "w1", "--json", "--drain", "0", "--",
                     "sh", "-c", GROUP, cwd=tmp_path) as worker:  # fmt: skip
            pids = command_pids(tmp_path, task.id)
            with writes_blocked(kind, url):
                gone_within(pids, 20)
                gone_at = time.time()
                held = fleet.get(task.id)  # the last renewal the store took
                assert held.state is TaskState.CLAIMED and held.agent == "w1"
                assert held.lease_expires is not None
                print(f"command gone {held.lease_expires - gone_at:.2f}s before its lease ended")
                assert gone_at < held.lease_expires
                wait_until(lambda: "no heartbeat has reached the store" in worker.text(), "why")
            # The store answers again: the task is given back (or found expired already).
            settled = wait_until(lambda: settling(worker.events(), task.id), "a settle", 60)
            worker.signal(signal.SIGTERM)
            assert worker.wait() == 0, worker.text()
        if settled["kind"] == "released":
            assert settled["why"] == LEASE_UNRENEWED
        rescue(url, task.id)
        assert_done_once(fleet, task.id, "rescuer")
