"""The writer queue beside a SQLite fleet: exclusive, fair where it can be, never wedged."""

from __future__ import annotations

import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from shoal.stores._writerlock import (
    _MUTEX_OFFSET,
    WriterLock,
    _Flock,
    _glibc,
    _RobustMutex,
    open_writer_lock,
)

KINDS: dict[str, Callable[[Path], WriterLock]] = {"flock": _Flock}
if _glibc() is not None:
    libc = _glibc()
    assert libc is not None
    KINDS["robust-mutex"] = lambda path: _RobustMutex(path, libc)


@pytest.fixture(params=sorted(KINDS))
def make(request: pytest.FixtureRequest) -> Callable[[Path], WriterLock]:
    return KINDS[str(request.param)]


def test_the_default_queue_is_fair_on_linux_glibc(tmp_path: Path) -> None:
    lock = open_writer_lock(tmp_path / "f.lock")
    assert lock.fair == ("robust-mutex" in KINDS)
    lock.close()


def test_only_one_holder_at_a_time(tmp_path: Path, make: Callable[[Path], WriterLock]) -> None:
    first, second = make(tmp_path / "f.lock"), make(tmp_path / "f.lock")
    assert first.acquire(1.0)
    entered = threading.Event()

    def wait_for_it() -> None:
        assert second.acquire(10.0)
        entered.set()
        second.release()

    waiter = threading.Thread(target=wait_for_it)
    waiter.start()
    assert not entered.wait(0.1)  # blocked while the first holds it
    first.release()
    assert entered.wait(10.0)
    waiter.join()
    first.close()
    second.close()


def test_a_full_queue_times_out(tmp_path: Path) -> None:
    if "robust-mutex" not in KINDS:
        pytest.skip("flock cannot time out; only the robust mutex has deadlines")
    first, second = (
        KINDS["robust-mutex"](tmp_path / "f.lock"),
        KINDS["robust-mutex"](tmp_path / "f.lock"),
    )
    holding, done = threading.Event(), threading.Event()

    def hold() -> None:
        first.acquire(1.0)
        holding.set()
        done.wait()
        first.release()

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait()
    assert second.acquire(0.05) is False
    done.set()
    holder.join()
    assert second.acquire(1.0)
    second.release()
    first.close()
    second.close()


def test_the_last_user_leaving_lets_the_next_first_user_reset_it(tmp_path: Path) -> None:
    if "robust-mutex" not in KINDS:
        pytest.skip("only the robust mutex keeps state in the file")
    make = KINDS["robust-mutex"]
    make(tmp_path / "f.lock").close()
    # Left locked, as after a machine crash: the mutex names an owner that is gone (a
    # process that has exited), and no kernel ran its robust-list clean-up. Written into
    # the file: taking the lock here and unmapping it would leave this thread's robust
    # list pointing into unmapped memory (see _RobustMutex.close).
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    with (tmp_path / "f.lock").open("r+b") as queue:
        queue.seek(_MUTEX_OFFSET)
        queue.write(struct.pack("<I", int(gone.stdout)))
    again = make(tmp_path / "f.lock")  # alone: re-initialised, so not stuck
    assert again.acquire(0.5)
    again.release()
    again.close()


def test_threads_opening_at_once_all_join_the_same_fair_queue(tmp_path: Path) -> None:
    if "robust-mutex" not in KINDS:
        pytest.skip("only the robust mutex is set up by its first user")
    for trial in range(20):
        path = tmp_path / f"f{trial}.lock"
        opened: list[WriterLock] = []
        barrier = threading.Barrier(6)

        def open_it(
            path: Path = path,
            barrier: threading.Barrier = barrier,
            opened: list[WriterLock] = opened,
        ) -> None:
            barrier.wait()
            opened.append(open_writer_lock(path))

        threads = [threading.Thread(target=open_it) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert len(opened) == 6 and all(lock.fair for lock in opened)
        assert opened[0].acquire(1.0)
        opened[0].release()
        for lock in opened:
            lock.close()


def test_the_fallback_never_waits_on_the_fair_queues_users(tmp_path: Path) -> None:
    fair_user = open_writer_lock(tmp_path / "f.lock")  # holds its presence lock while open
    fallback = _Flock(tmp_path / "f.lock-flock")
    assert fallback.acquire(1.0)
    fallback.release()
    fallback.close()
    fair_user.close()


def test_the_fallback_gives_up_at_its_deadline(tmp_path: Path) -> None:
    holder, waiter = _Flock(tmp_path / "x"), _Flock(tmp_path / "x")
    assert holder.acquire(1.0)
    assert waiter.acquire(0.05) is False
    holder.release()
    assert waiter.acquire(1.0)
    waiter.release()
    holder.close()
    waiter.close()


def test_a_user_closing_the_queue_while_holding_it_lets_it_go(tmp_path: Path) -> None:
    """Closing while holding releases first, so the queue is not left held by this thread
    and the thread's robust list never points into the unmapped file (which crashed a
    later, unrelated lock of the same thread)."""
    if "robust-mutex" not in KINDS:
        pytest.skip("only the robust mutex lives in a mapping")
    make = KINDS["robust-mutex"]
    other = make(tmp_path / "f.lock")  # a second user: the queue is not reset between
    leaving = make(tmp_path / "f.lock")
    assert leaving.acquire(1.0)
    leaving.close()
    assert other.acquire(0.5)
    other.release()
    other.close()


#: Take a lock, close it while holding it, then take a lock on another queue: with the
#: lock not let go at close, the second lock wrote into the unmapped first one (SIGSEGV).
CLOSE_HELD_THEN_LOCK_ANOTHER = """
import sys
from pathlib import Path
from shoal.stores._writerlock import _glibc, _RobustMutex
libc = _glibc()
folder = Path(sys.argv[1])
other = _RobustMutex(folder / "other.lock", libc)
held = _RobustMutex(folder / "held.lock", libc)
assert held.acquire(1.0)
held.close()
assert other.acquire(1.0)
other.release()
other.close()
print("carried on")
"""


def test_a_queue_closed_while_held_does_not_crash_the_next_lock_of_the_thread(
    tmp_path: Path,
) -> None:
    """In a process of its own, since what this guards against kills the process."""
    if "robust-mutex" not in KINDS:
        pytest.skip("only the robust mutex lives in a mapping")
    done = subprocess.run(
        [sys.executable, "-c", CLOSE_HELD_THEN_LOCK_ANOTHER, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert done.stdout.strip() == "carried on"
