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

Run as ``python -I -S _shim.py FD COMMAND...``: the standard library only, nothing of shoal,
so that it starts in milliseconds (it runs once per task). It writes nothing to the
command's stdout or stderr, and does not read its stdin.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
from contextlib import suppress

__all__ = ["ORPHAN_GRACE", "main"]

#: Seconds between SIGTERM and SIGKILL for a command whose worker is gone: it may clean up,
#: but it ends within a second of its worker (the task is no longer anyone's here).
ORPHAN_GRACE = 0.5
#: Signals that mean "the group is being stopped": noted, so the shim outlives the command.
_STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: Signals the command gets at their default, whatever the shim's Python did with them.
_DEFAULTS = (*_STOPS, signal.SIGPIPE, signal.SIGXFSZ)


def _say(channel: int, line: str) -> None:
    """One line to the worker; if it is gone there is nobody to tell (the watch acts)."""
    with suppress(OSError):
        os.write(channel, f"{line}\n".encode("ascii"))


def _watch(channel: int, stopping: threading.Event) -> None:
    """Block until the worker's end of the channel closes, then end the group."""
    while True:
        try:
            if not os.read(channel, 512):
                break
        except OSError:
            break
    stopping.set()
    os.killpg(0, signal.SIGTERM)
    threading.Event().wait(ORPHAN_GRACE)  # if the command ends sooner, main() ends us all
    os.killpg(0, signal.SIGKILL)


def _worker_gone(channel: int) -> bool:
    """Whether the worker's end is closed (it never writes, so readable means closed)."""
    try:
        return bool(select.select([channel], [], [], 0)[0])
    except OSError:
        return True


def main(argv: list[str]) -> int:
    channel, command = int(argv[1]), argv[2:]
    os.set_inheritable(channel, False)  # the command must not hold the worker's lifeline
    stopping = threading.Event()

    def on_stop(_signum: int, _frame: object) -> None:
        stopping.set()  # the command got the same signal; wait for it, then clean up

    for sig in _STOPS:
        signal.signal(sig, on_stop)
    try:
        pid = os.posix_spawnp(command[0], command, os.environ, setsigdef=_DEFAULTS)
    except OSError as exc:
        _say(channel, f"error {exc.errno}")
        return 0
    _say(channel, f"pid {pid}")
    threading.Thread(target=_watch, args=(channel, stopping), daemon=True).start()
    _, status = os.waitpid(pid, 0)
    _say(channel, f"exit {os.waitstatus_to_exitcode(status)}")
    if stopping.is_set() or _worker_gone(channel):
        os.killpg(0, signal.SIGKILL)  # what the command left running in its group, and us
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
