"""The writer queue of a SQLite fleet: writers take turns, and nobody waits long.

Why not SQLite's own lock? Its busy handler sleeps and retries on a growing schedule, so
under steady contention the same unlucky process can lose every retry for seconds. Why not
a plain ``flock``? The kernel wakes a waiter when the lock is freed, but the process that
just freed it is still running and usually takes it again first ("barging"): with 16
agents on 2 cores, some wait 100-300 ms while others go round again and again.

Why not strict turns either? Handing every turn to the longest waiter (a priority-
inheritance mutex, as LMDB does) bounds every wait, but every turn then runs cold: the
writer's caches hold the others' data and SQLite has dropped its page cache, since another
connection wrote; a turn that takes 166 us in one process took 525 us at 16.

So on Linux with glibc the queue is two robust, process-shared pthread mutexes in a small
shared file beside the database, used the way the Linux kernel's own mutex is: a writer
that gives its turn back and asks again at once may take it again (it stays warm), until
the writer at the head of the queue has waited ``_WAIT_BOUND`` (2 ms); then the head raises
a hand-off flag and the turn goes to it. Behind the head, writers wait in a priority-
inheritance mutex, whose unlock hands it to the longest waiter (FIFO among equals). So
a writer waits at most the bound or its place in a strict queue, whichever is longer.
"Robust" means that a process killed while holding either mutex does not wedge the fleet:
the next locker is told the owner died and carries on (SQLite rolls back the dead writer's
transaction itself).

The mutexes are initialised by the first process to open the file while nobody else has it
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

_MAGIC = b"shoal-writer-q2\0"
#: Marks of the queues earlier shoals made: a first opener may reset one of those.
_OLD_MAGICS = (b"shoal-writer-q1\0",)
_FILE_SIZE = 4096
_MUTEX_OFFSET = 64  # the queue: where writers wait, in order
_TURN_OFFSET = 128  # the turn: what the writer at work holds
_HANDOFF_OFFSET = 192  # set while the head of the queue has waited out _WAIT_BOUND
_MUTEX_BYTES = 64  # pthread_mutex_t is 40 bytes on x86-64 and 48 on aarch64 glibc
#: How long a writer may wait (seconds, from when it asked) while the writer at work takes
#: its turn again; past it, turns go strictly in order. docs/performance.md, "Many
#: processes", has the measurements.
_WAIT_BOUND = 0.002
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
    """Two robust, process-shared pthread mutexes in a shared file: the queue (priority
    inheritance, so its unlock hands it to the longest waiter) and the turn (plain, so a
    writer that gives it back and comes back at once may take it again). See
    ``acquire`` for how the two make a queue whose turns run hot."""

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
        self._queue = (ctypes.c_char * _MUTEX_BYTES).from_buffer(self._map, _MUTEX_OFFSET)
        self._turn = (ctypes.c_char * _MUTEX_BYTES).from_buffer(self._map, _TURN_OFFSET)
        self._handoff = ctypes.c_uint32.from_buffer(self._map, _HANDOFF_OFFSET)
        # A robust mutex's first word is its futex: the owner's thread id, plus flag bits
        # (one says others wait). Checked once here (it is glibc's layout, not an API);
        # when it holds, close can tell whether this thread still holds the turn, and the
        # head of the queue whether others wait behind it.
        self._word = ctypes.c_uint32.from_buffer(self._map, _TURN_OFFSET)
        self._queue_word = ctypes.c_uint32.from_buffer(self._map, _MUTEX_OFFSET)
        self._sees_owner = False
        self._sees_owner = self._check_layout()

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
        made), marked as a queue (by this shoal or an earlier one), or a queue whose
        setting-up was cut short (the mark is cleared first and written last, see
        ``_initialise``). Anything else is someone else's data, and is left as it is."""
        size = os.fstat(fd).st_size
        if not size:
            return
        head = os.pread(fd, len(_MAGIC), 0)
        if head == _MAGIC or head in _OLD_MAGICS or (size == _FILE_SIZE and not head.strip(b"\0")):
            return
        raise StoreDamaged(
            f"{self._path} is not a shoal writer queue (its content is not shoal's); "
            "shoal leaves it as it is and writes nothing",
            hint=_reset_hint(self._path),
        )

    def _initialise(self, shared: mmap.mmap) -> None:
        shared[: len(_MAGIC)] = b"\0" * len(_MAGIC)
        shared[_HANDOFF_OFFSET : _HANDOFF_OFFSET + 4] = b"\0" * 4
        self._make_mutex(shared, _MUTEX_OFFSET, inherit=True)
        self._make_mutex(shared, _TURN_OFFSET, inherit=False)
        shared[: len(_MAGIC)] = _MAGIC

    def _make_mutex(self, shared: mmap.mmap, offset: int, inherit: bool) -> None:
        libc = self._libc
        attr = ctypes.create_string_buffer(64)
        mutex = (ctypes.c_char * _MUTEX_BYTES).from_buffer(shared, offset)
        try:
            for call, value in (
                (libc.pthread_mutexattr_init, None),
                (libc.pthread_mutexattr_setpshared, 1),  # PTHREAD_PROCESS_SHARED
                (libc.pthread_mutexattr_setrobust, 1),  # PTHREAD_MUTEX_ROBUST
                # PTHREAD_PRIO_INHERIT (the queue: unlock hands over) or PTHREAD_PRIO_NONE
                (libc.pthread_mutexattr_setprotocol, 1 if inherit else 0),
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

    def acquire(self, timeout: float) -> bool:
        """The turn, with a bounded wait.

        Strict turns (each writer's turn handed to the longest waiter) make every turn run
        cold: the writer's caches hold the other writers' data and SQLite has thrown its
        page cache away, since another connection wrote. So a writer that gives the turn
        back and asks again at once may take it again -- but only while the writer at the
        head of the queue has waited less than ``_WAIT_BOUND`` since it asked; then the
        head raises the hand-off flag, and from then on nobody takes the turn past it.
        Writers behind the head wait in the queue mutex, whose unlock hands it to the
        longest waiter, and the flag stays raised from one head to the next while any
        wait (the next head lowers it if it has not waited its bound yet). So with many
        writers, every turn is handed on in arrival order, as in a plain FIFO; with a
        short queue, a busy writer runs several turns warm while the next one waits less
        than the bound.

        Both mutexes are robust: a writer killed holding either is noticed by the next
        one to lock it, which carries on (SQLite rolls back the dead writer's
        transaction). A head killed with the flag raised leaves it raised: writers then
        queue (never wait on a flag) and the next head lowers it."""
        libc = self._libc
        if not self._handoff.value:
            # Nobody has waited past the bound: take the turn if it is free (it saves the
            # queue's two system calls when nobody writes, and keeps a busy writer hot).
            rc = libc.pthread_mutex_trylock(self._turn)
            if rc == 0:
                return True
            if rc == _EOWNERDEAD:
                return self._survived(self._turn)
        arrived = time.time()
        deadline = arrived + timeout
        if not self._wait(self._queue, deadline):
            return False
        try:  # the head of the queue: the next turn is ours
            if self._handoff.value and time.time() < arrived + _WAIT_BOUND:
                self._handoff.value = 0  # left raised for us, but we have not waited long
            got = self._wait(self._turn, min(arrived + _WAIT_BOUND, deadline))
            if not got and time.time() < deadline:
                self._handoff.value = 1
                got = self._wait(self._turn, deadline)
            if self._handoff.value and not self._others_queue():
                self._handoff.value = 0  # nobody behind us: nobody to hand off to
            return got
        finally:
            libc.pthread_mutex_unlock(self._queue)

    def _others_queue(self) -> bool:
        """Whether writers wait in the queue behind this one (its head). The flag stays
        raised for them: lowered between two heads, while the next one is still being
        scheduled, it let writers that never queued take turn after turn past all of
        them (at 16 processes on a loaded machine, p99 waits of 180 ms)."""
        return not self._sees_owner or bool(self._queue_word.value & _FUTEX_WAITERS)

    def _wait(self, mutex: ctypes.Array[ctypes.c_char], deadline: float) -> bool:
        """Lock ``mutex`` by ``deadline`` (wall clock, as ``pthread_mutex_timedlock``
        wants), in slices so that Ctrl-C is noticed while waiting."""
        when = _Timespec()
        while True:
            until = min(deadline, time.time() + _SLICE)
            when.tv_sec = int(until)
            when.tv_nsec = int((until - int(until)) * 1e9)
            rc = self._libc.pthread_mutex_timedlock(mutex, ctypes.byref(when))
            if rc == 0:
                return True
            if rc == _EOWNERDEAD:
                return self._survived(mutex)
            if rc != _ETIMEDOUT:
                raise OSError(rc, os.strerror(rc))
            if time.time() >= deadline:
                return False

    def _survived(self, mutex: ctypes.Array[ctypes.c_char]) -> bool:
        """The lock came to us from a holder that died; SQLite undoes what it was writing."""
        log.warning("a writer died holding the queue at %s; carrying on", self._path)
        self._libc.pthread_mutex_consistent(mutex)
        return True

    def _check_layout(self) -> bool:
        if not self.acquire(1.0):
            return False
        try:
            return self._owner_is_this_thread()
        finally:
            self._libc.pthread_mutex_unlock(self._turn)

    def _owner_is_this_thread(self) -> bool:
        """Whether the turn's futex word names this thread as its owner (glibc's layout)."""
        return self._word.value & _FUTEX_TID_MASK == threading.get_native_id()

    def _holds(self) -> bool:
        """Whether this thread holds the turn, where the layout check said the futex word
        can tell (``_sees_owner``); elsewhere it is not guessed."""
        return self._sees_owner and self._owner_is_this_thread()

    def release(self) -> None:
        handoff = self._handoff.value
        self._libc.pthread_mutex_unlock(self._turn)
        if handoff:
            # The head of the queue has waited its bound and is being woken; on a busy
            # machine, giving up this CPU lets it start at once instead of after our slice.
            os.sched_yield()

    def close(self) -> None:
        """Leave the queue. A turn this thread still holds is let go first: glibc keeps
        every robust mutex a thread holds on a list threaded through the mutexes
        themselves, and the thread's next lock of any robust mutex writes into the head of
        that list -- memory this close would unmap, so a crash (or, where the address is
        mapped again, a write into another fleet's queue) later and far from here."""
        if self._fd < 0:
            return
        if self._holds():
            log.warning("closing the writer queue at %s while holding it; letting go", self._path)
            self._libc.pthread_mutex_unlock(self._turn)
        del self._word
        del self._queue_word
        del self._handoff
        del self._turn
        del self._queue
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
