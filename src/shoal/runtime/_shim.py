"""The shim between a worker and a task's command: it owns the command's process group, and
ends that group when the worker is gone, however the worker went.

Why it exists: a worker killed by SIGKILL (or the OOM killer, or a crash) cannot stop what it
started. Its command, re-parented to init, would run on while the task's lease expires and
the task goes to another agent -- two agents at work on one task, twice the cost, and two
writers to the same branch. So the worker does not start the command itself: it starts this
shim, in a session of its own, and the shim starts the command into the shim's own process
group, which it then watches over.

How it knows the worker is gone: ``run_command`` hands it one end of a socket pair (``FD``)
whose other end only the worker holds. The worker never writes to it; when the worker dies,
by any means, the kernel closes its end, and the shim's read returns end-of-file at once. This
works alike on Linux and macOS, and it has none of ``PR_SET_PDEATHSIG``'s traps (that signal
follows the *thread* that forked, reaches only the direct child, and is dropped by a setuid
exec). The shim then sends SIGTERM to the group and, ``ORPHAN_GRACE`` later, SIGKILL to
whatever is left of it, itself included.

What it says to the worker, one line each on ``FD``: ``pid N`` once the command is started
(or ``error ERRNO`` if it could not be: not found, not executable...), then ``exit CODE`` when
it has ended (negative: killed by that signal). A stop from the worker (SIGTERM to the
group) reaches the command and the shim alike; the shim waits for the command to end,
reports, and then SIGKILLs the rest of the group, so that nothing the command started
outlives a stop. If the shim itself is killed the worker notices (no ``exit`` line) and kills
the group in its place.

Run as ``python -I -S _shim.py FD COMMAND...``, it starts in about the time of a bare
``python -c pass`` (it runs once per task): the standard library's C modules only, nothing
of shoal, no threads (one loop waits on the channel and on the command at once, woken by
SIGCHLD through ``signal.set_wakeup_fd``), and the C half of ``signal``, whose Python half
would double the start-up with ``enum``. It writes nothing to the command's stdout or
stderr, and does not read its stdin.
"""

from __future__ import annotations

import os
import select
import sys
import time

try:  # the C half of `signal`: the same calls and numbers, without the enum classes
    import _signal as signal  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - an interpreter without it
    import signal

__all__ = ["ORPHAN_GRACE", "main"]

#: Seconds between SIGTERM and SIGKILL for a command whose worker is gone: it may clean up,
#: but it ends within a second of its worker (the task is no longer anyone's here).
ORPHAN_GRACE = 0.5
#: Signals that mean "the group is being stopped": noted, so the shim outlives the command.
_STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: Signals the command gets at their default, whatever the shim's Python did with them.
_DEFAULTS = (*_STOPS, signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD)


def _say(channel: int, line: str) -> bool:
    """One line to the worker; False if it is gone (there is nobody to tell)."""
    try:
        os.write(channel, f"{line}\n".encode("ascii"))
    except OSError:
        return False
    return True


def _closed(channel: int) -> bool:
    """Whether the worker's end is closed. It never writes: readable means closed."""
    try:
        return bool(select.select([channel], [], [], 0)[0]) and not os.read(channel, 512)
    except OSError:
        return True


def _wait(pid: int, channel: int, wake: int) -> tuple[int, bool]:
    """Wait for the command to end; if the worker's end of ``channel`` closes first, end
    the group (SIGTERM, then SIGKILL after ``ORPHAN_GRACE``). The command's wait status,
    and whether the worker was gone."""
    orphaned: float | None = None
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status, orphaned is not None
        if orphaned is None:
            ready = select.select([channel, wake], [], [])[0]
            if channel in ready and _closed(channel):
                orphaned = time.monotonic()
                os.killpg(0, signal.SIGTERM)
        else:
            left = orphaned + ORPHAN_GRACE - time.monotonic()
            if left <= 0:
                os.killpg(0, signal.SIGKILL)  # the command, what it started, and us
            ready = select.select([wake], [], [], max(left, 0.0))[0]
        if wake in ready:
            os.read(wake, 512)  # a signal came (SIGCHLD: look again)


def main(argv: list[str]) -> int:
    channel, command = int(argv[1]), argv[2:]
    os.set_inheritable(channel, False)  # the command must not hold the worker's lifeline
    if os.getpgrp() != os.getpid():  # not started as a group's leader: lead one of our own
        os.setpgid(0, 0)
    stopping: list[int] = []
    wake, woken = os.pipe()
    os.set_blocking(woken, False)
    signal.set_wakeup_fd(woken)
    for sig in _STOPS:  # the command got the same signal: wait for it, then clean up
        signal.signal(sig, lambda signum, _frame: stopping.append(signum))
    signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)  # its wake-up is what counts
    try:
        pid = os.posix_spawnp(command[0], command, os.environ, setsigdef=_DEFAULTS)
    except OSError as exc:
        _say(channel, f"error {exc.errno}")
        return 0
    _say(channel, f"pid {pid}")
    status, orphaned = _wait(pid, channel, wake)
    told = _say(channel, f"exit {os.waitstatus_to_exitcode(status)}")
    if stopping or orphaned or not told or _closed(channel):
        os.killpg(0, signal.SIGKILL)  # what the command left running in its group, and us
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
