"""The writer queue of a SQLite fleet: writers take turns in the order they arrived.

Why not SQLite's own lock? Its busy handler sleeps and retries on a growing schedule, so
under steady contention the same unlucky process can lose every retry for seconds. Why not
a plain ``flock``? The kernel wakes a waiter when the lock is freed, but the process that
just freed it is still running and usually takes it again first ("barging"): with 16
agents on 2 cores, some wait 100-300 ms while others go round again and again.

So on Linux with glibc the queue is a robust, process-shared, priority-inheritance pthread
mutex in a small shared file beside the database -- the arrangement LMDB has used for years.
Unlocking a PI mutex hands it to the longest waiter (FIFO among equals), so no writer
starves; the price is a context switch per hand-off, which caps throughput below what
barging allows but keeps the worst wait proportional to the queue. "Robust" means that a
process killed while holding it does not wedge the fleet: the next locker is told the
owner died and carries on (SQLite rolls back the dead writer's transaction itself).

The mutex is initialised by the first process to open the file while nobody else has it
open (each opener holds a shared ``flock`` on it for as long as it is open, and openers
take turns at a POSIX record lock while deciding), so a mutex left in a stale state by a
machine crash is reset by the next first opener.

Everywhere else (another C library, another OS) the queue falls back to ``flock``. Either
way the queue only orders writers; SQLite's own ``BEGIN IMMEDIATE`` lock is what makes each
write atomic, so a queue that failed open could cost fairness, never correctness.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
import threading
import time
from pathlib import Path
from typing import Protocol

from shoal._log import lazy_logger
from shoal.errors import StoreDamaged
from shoal.stores._files import open_private

__all__ = ["WriterLock", "open_writer_lock"]

_MAGIC = b"shoal-writer-q1\0"
_FILE_SIZE = 4096
_MUTEX_OFFSET = 64
_MUTEX_BYTES = 64  # pthread_mutex_t is 40 bytes on x86-64 and 48 on aarch64 glibc
_SLICE = 0.2  # seconds per timed wait, so Ctrl-C is noticed while queued
_EOWNERDEAD = errno.EOWNERDEAD
_ETIMEDOUT = errno.ETIMEDOUT
_FUTEX_WAITERS = 0x80000000
_FUTEX_TID_MASK = 0x3FFFFFFF

log = lazy_logger(__name__)


class WriterLock(Protocol):
    """Mutual exclusion among the writers of one fleet, across processes."""

    fair: bool

    def acquire(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the lock; False if it did not come."""
        ...

    def release(self) -> None: ...
    def close(self) -> None: ...


def open_writer_lock(path: Path) -> WriterLock:
    """The fair queue where it can be had, else a plain ``flock`` (on a file of its own, so
    it never waits on the presence locks of the fair queue's users)."""
    libc = _glibc()
    if libc is not None:
        try:
            return _RobustMutex(path, libc)
        except OSError as exc:
            log.warning("the fair writer queue at %s cannot be had (%s); using flock", path, exc)
    else:
        log.debug("no glibc here: the writer queue at %s is a plain flock", path)
    return _Flock(path.with_name(path.name + "-flock"))


# POSIX record locks (lockf) belong to a process, not a thread, so they cannot make two
# threads of one process take turns at setting the queue up; this lock does.
_ATTACHING = threading.Lock()


class _Flock:
    """``flock`` on a file: exclusive, released by the kernel when a process dies."""

    fair = False

    def __init__(self, path: Path) -> None:
        self._fd = open_private(path, _WHAT, fix=_reset_hint(path))

    def acquire(self, timeout: float) -> bool:
        # flock cannot time out, so poll with a short, growing pause until the deadline.
        # (This is the unfair fallback: a releaser may take the lock again first.)
        deadline = time.monotonic() + timeout
        pause = 0.0002
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(pause)
                pause = min(pause * 2, 0.01)

    def release(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _RobustMutex:
    """A robust, process-shared, priority-inheritance pthread mutex in a shared file."""

    fair = True

    def __init__(self, path: Path, libc: ctypes.CDLL) -> None:
        self._libc = libc
        self._path = path
        self._fd = open_private(path, _WHAT, fix=_reset_hint(path))
        try:
            self._map = self._attach()
        except BaseException:
            os.close(self._fd)
            raise
        self._mutex = (ctypes.c_char * _MUTEX_BYTES).from_buffer(self._map, _MUTEX_OFFSET)
        # The mutex's first word is its futex: the owner's thread id, plus a flag bit while
        # others wait. Checked once here (it is glibc's layout, not an API); when it holds,
        # a writer that hands the lock on also hands over its CPU (see release).
        self._word = ctypes.c_uint32.from_buffer(self._map, _MUTEX_OFFSET)
        self._sees_waiters = self._check_layout()

    def _attach(self) -> mmap.mmap:
        with _ATTACHING:
            return self._attach_alone()

    def _attach_alone(self) -> mmap.mmap:
        fd = self._fd
        fcntl.lockf(fd, fcntl.LOCK_EX, 1, 0)  # openers (other processes) decide one at a time
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                alone = True
            except BlockingIOError:
                alone = False
            if alone:
                self._refuse_foreign(fd)
                log.debug("setting up the writer queue at %s (its first user)", self._path)
                os.ftruncate(fd, _FILE_SIZE)
                shared = mmap.mmap(fd, _FILE_SIZE)
                self._initialise(shared)
            else:
                if os.fstat(fd).st_size < _FILE_SIZE:
                    raise OSError("writer queue file is not set up by its other users")
                shared = mmap.mmap(fd, _FILE_SIZE)
                if shared[: len(_MAGIC)] != _MAGIC:
                    shared.close()
                    raise OSError("writer queue file is in use by an older shoal")
            fcntl.flock(fd, fcntl.LOCK_SH)  # we are a user now
            return shared
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN, 1, 0)

    def _refuse_foreign(self, fd: int) -> None:
        """The first opener resets the queue only if the file is shoal's: empty (just
        made), marked as a queue, or a queue whose setting-up was cut short (the mark is
        cleared first and written last, see ``_initialise``). Anything else is someone
        else's data, and is left as it is."""
        size = os.fstat(fd).st_size
        if not size:
            return
        head = os.pread(fd, len(_MAGIC), 0)
        if head == _MAGIC or (size == _FILE_SIZE and not head.strip(b"\0")):
            return
        raise StoreDamaged(
            f"{self._path} is not a shoal writer queue (its content is not shoal's); "
            "shoal leaves it as it is and writes nothing",
            hint=_reset_hint(self._path),
        )

    def _initialise(self, shared: mmap.mmap) -> None:
        libc = self._libc
        shared[: len(_MAGIC)] = b"\0" * len(_MAGIC)
        attr = ctypes.create_string_buffer(64)
        mutex = (ctypes.c_char * _MUTEX_BYTES).from_buffer(shared, _MUTEX_OFFSET)
        try:
            for call, value in (
                (libc.pthread_mutexattr_init, None),
                (libc.pthread_mutexattr_setpshared, 1),  # PTHREAD_PROCESS_SHARED
                (libc.pthread_mutexattr_setrobust, 1),  # PTHREAD_MUTEX_ROBUST
                (libc.pthread_mutexattr_setprotocol, 1),  # PTHREAD_PRIO_INHERIT
            ):
                rc = call(attr) if value is None else call(attr, value)
                if rc != 0:
                    raise OSError(rc, os.strerror(rc))
            ctypes.memset(mutex, 0, _MUTEX_BYTES)
            rc = libc.pthread_mutex_init(mutex, attr)
            if rc != 0:
                raise OSError(rc, os.strerror(rc))
            libc.pthread_mutexattr_destroy(attr)
        finally:
            del mutex
        shared[: len(_MAGIC)] = _MAGIC

    def acquire(self, timeout: float) -> bool:
        # First a plain try: it takes the lock only if nobody holds it and nobody waits (a
        # hand-off leaves the lock owned by the next waiter, never free), so it jumps no
        # queue; it saves the timed wait's set-up when the queue is empty.
        rc = self._libc.pthread_mutex_trylock(self._mutex)
        if rc == 0:
            return True
        if rc == _EOWNERDEAD:
            return self._survived()
        deadline = time.time() + timeout
        when = _Timespec()
        while True:
            until = min(deadline, time.time() + _SLICE)
            when.tv_sec = int(until)
            when.tv_nsec = int((until - int(until)) * 1e9)
            rc = self._libc.pthread_mutex_timedlock(self._mutex, ctypes.byref(when))
            if rc == 0:
                return True
            if rc == _EOWNERDEAD:
                return self._survived()
            if rc != _ETIMEDOUT:
                raise OSError(rc, os.strerror(rc))
            if time.time() >= deadline:
                return False

    def _survived(self) -> bool:
        """The lock came to us from a holder that died; SQLite undoes what it was writing."""
        log.warning("a writer died holding the queue at %s; carrying on", self._path)
        self._libc.pthread_mutex_consistent(self._mutex)
        return True

    def _check_layout(self) -> bool:
        if not self.acquire(1.0):
            return False
        try:
            return self._owner_is_this_thread()
        finally:
            self._libc.pthread_mutex_unlock(self._mutex)

    def _owner_is_this_thread(self) -> bool:
        """Whether the mutex's futex word names this thread as its owner (glibc's layout)."""
        return self._word.value & _FUTEX_TID_MASK == threading.get_native_id()

    def _holds(self) -> bool:
        """Whether this thread holds the lock, where the layout check said the futex word
        can tell (``_sees_waiters``); elsewhere it is not guessed."""
        return self._sees_waiters and self._owner_is_this_thread()

    def release(self) -> None:
        waiting = self._sees_waiters and self._word.value & _FUTEX_WAITERS
        self._libc.pthread_mutex_unlock(self._mutex)
        if waiting:
            # The next writer owns the lock now but still has to be scheduled; on a busy
            # machine, giving up this CPU lets it start at once instead of after our slice.
            os.sched_yield()

    def close(self) -> None:
        """Leave the queue. A lock this thread still holds is let go first: glibc keeps
        every robust mutex a thread holds on a list threaded through the mutexes
        themselves, and the thread's next lock of any robust mutex writes into the head of
        that list -- memory this close would unmap, so a crash (or, where the address is
        mapped again, a write into another fleet's queue) later and far from here."""
        if self._fd < 0:
            return
        if self._holds():
            log.warning("closing the writer queue at %s while holding it; letting go", self._path)
            self._libc.pthread_mutex_unlock(self._mutex)
        del self._word
        del self._mutex
        self._map.close()
        os.close(self._fd)  # drops our shared flock: we are no longer a user
        self._fd = -1


_WHAT = "the writer queue's lock file"


def _reset_hint(path: Path) -> str:
    return (
        f"stop the fleet's shoal processes, then move it away (`mv {path} {path}.bak`); "
        "the next writer makes a new one"
    )


def _glibc() -> ctypes.CDLL | None:
    """The process's C library, if it is glibc on Linux (whose mutex layout is stable)."""
    if os.uname().sysname != "Linux":
        return None
    try:
        # glibc's name on Linux; find_library would run `ldconfig -p` in a subprocess, which
        # cost every writing CLI call tens of milliseconds.
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        version = libc.gnu_get_libc_version
        version.restype = ctypes.c_char_p
        version()
        for fn in ("pthread_mutexattr_setrobust", "pthread_mutex_consistent"):
            getattr(libc, fn)
    except (OSError, AttributeError):
        return None
    libc.pthread_mutex_timedlock.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Timespec)]
    libc.pthread_mutex_trylock.argtypes = [ctypes.c_void_p]
    libc.pthread_mutex_unlock.argtypes = [ctypes.c_void_p]
    libc.pthread_mutex_consistent.argtypes = [ctypes.c_void_p]
    return libc
