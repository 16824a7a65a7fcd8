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


def _hold_until_told(path: Path, talk: Connection) -> None:  # pragma: no cover - a child
    assert LIBC is not None
    lock = _RobustMutex(path, LIBC)
    assert lock.acquire(5.0)
    talk.send("holding")
    talk.recv()
    lock.release()
    talk.send("released")
    talk.recv()  # never comes: killed


def _wait_until_killed(path: Path, talk: Connection) -> None:  # pragma: no cover - a child
    assert LIBC is not None
    lock = _RobustMutex(path, LIBC)
    talk.send("asking")
    lock.acquire(600.0)  # the head of the queue, past its bound: killed while waiting


def test_a_head_killed_while_asking_for_the_hand_off_does_not_wedge_the_queue(
    tmp_path: Path,
) -> None:
    """kill -9 of the writer at the head of the queue, which holds the queue mutex and has
    raised the hand-off flag: the next writer still gets its turn, and lowers the flag."""
    if LIBC is None:
        pytest.skip("the robust mutex needs glibc on Linux")
    path = tmp_path / "f.lock"
    context = multiprocessing.get_context("spawn")
    holder_end, holder_child = context.Pipe()
    head_end, head_child = context.Pipe()
    holder = context.Process(target=_hold_until_told, args=(path, holder_child))
    head = context.Process(target=_wait_until_killed, args=(path, head_child))
    holder.start()
    try:
        assert holder_end.poll(60) and holder_end.recv() == "holding"
        head.start()
        assert head_end.poll(60) and head_end.recv() == "asking"
        ours = _RobustMutex(path, LIBC)
        flag = ours._handoff
        while not flag.value:  # the head raises it 2 ms after asking; the holder holds on
            assert head.is_alive()
        os.kill(head.pid or 0, signal.SIGKILL)
        head.join(30)
        got: list[bool] = []
        waiter = threading.Thread(target=lambda: got.append(ours.acquire(30.0)))
        waiter.start()
        holder_end.send("release")
        assert holder_end.poll(60) and holder_end.recv() == "released"
        waiter.join(30)
        assert got == [True]
        ours.release()
        assert flag.value == 0  # lowered by the head after the dead one
        assert ours.acquire(0.5)
        ours.release()
        del flag
        ours.close()
    finally:
        for child in (holder, head):
            child.kill()
            child.join(30)
