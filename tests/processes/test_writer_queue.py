"""The writer queue of a SQLite fleet survives its holder: a process killed (``kill -9``)
with the lock does not wedge the writers after it -- one that asks afterwards, or one
already waiting. (The queue's other behaviour is tested in-process, tests/stores.)"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from shoal.stores._writerlock import _glibc, _RobustMutex

LIBC = _glibc()


def _hold_until_killed(path: Path, holding: Connection) -> None:  # pragma: no cover - a child
    assert LIBC is not None
    lock = _RobustMutex(path, LIBC)
    assert lock.acquire(5.0)
    holding.send("holding")
    holding.recv()  # never comes: the parent kills this process holding the lock


@pytest.mark.parametrize("waiting", [False, True], ids=["after", "while-waiting"])
def test_a_holder_killed_with_the_lock_does_not_wedge_the_queue(
    tmp_path: Path, waiting: bool
) -> None:
    """kill -9 of the holder: the next writer gets the lock -- one that asks afterwards
    (the untimed try) and one already waiting for it (the timed wait)."""
    if LIBC is None:
        pytest.skip("the robust mutex needs glibc on Linux")
    path = tmp_path / "f.lock"
    ours = _RobustMutex(path, LIBC)
    context = multiprocessing.get_context("spawn")
    parent_end, child_end = context.Pipe()
    child = context.Process(target=_hold_until_killed, args=(path, child_end))
    child.start()
    assert parent_end.poll(60) and parent_end.recv() == "holding"
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(ours.acquire(30.0)))
    if waiting:
        waiter.start()
    os.kill(child.pid or 0, signal.SIGKILL)
    child.join(30)
    if not waiting:
        waiter.start()
    waiter.join(30)
    assert got == [True]
    ours.release()
    assert ours.acquire(1.0)  # and it works as before
    ours.release()
    ours.close()
