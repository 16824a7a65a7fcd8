"""The writer queue beside a SQLite fleet: exclusive, fair where it can be, never wedged."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from shoal.stores._writerlock import WriterLock, _Flock, _glibc, _RobustMutex, open_writer_lock

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
    lock = make(tmp_path / "f.lock")
    lock.acquire(1.0)  # left locked, as after a machine crash
    lock.close()
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
