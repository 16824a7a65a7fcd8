"""A worker's own reckoning of how long it may hold each task: the lease as the store last
renewed it, on the worker's clock.

A task is the worker's only while its lease lasts. Two things end that without the worker
saying so, and both must stop the task's command, because the task is now -- or is about
to be -- someone else's:

* **the lease is gone**: a heartbeat answers without it (it expired, the task was cancelled,
  a reaper or another agent's claim took it back) -- ``LEASE_GONE``;
* **the store is out of reach** for as long as the lease lasts: no heartbeat can renew it,
  and once it runs out any agent may be given the task. The worker cannot learn that from
  the store, so it counts: every renewal moves ``Hold.until`` to when the lease may run out,
  on the worker's own never-going-back clock (a wall clock that jumps neither lengthens nor
  shortens it), and the task's thread stops the command ``Hold.margin`` before that moment
  -- ``LEASE_UNRENEWED`` -- so that it is gone, SIGKILL included, before anyone else can
  be handed the task.

The reckoning errs early: ``until`` counts from the moment the heartbeat was *sent*, and a
lease is never taken to last longer than it did when it was claimed.
"""

from __future__ import annotations

from dataclasses import dataclass

from shoal.runtime.command import KILL_GRACE

__all__ = ["LEASE_GONE", "LEASE_UNRENEWED", "Hold"]

#: Why a command is stopped when a heartbeat finds its lease gone.
LEASE_GONE = "lease lost: a heartbeat found it gone (expired, cancelled or taken back)"
#: Why a command is stopped when the store did not answer for as long as its lease lasts.
LEASE_UNRENEWED = "lease lost: the store was out of reach for as long as the lease lasts"


@dataclass
class Hold:
    """How long the worker may go on with one task, on the worker's clock."""

    #: Seconds a renewal is good for: the lease's length when it was claimed.
    span: float
    #: When the lease may run out, at the earliest (the worker's monotonic clock).
    until: float
    #: When the store last renewed it (or granted it), on the same clock.
    renewed: float

    @classmethod
    def granted(cls, now: float, left: float) -> Hold:
        """A lease just claimed, with ``left`` seconds to run."""
        return cls(span=left, until=now + left, renewed=now)

    def renew(self, asked: float, left: float) -> None:
        """A heartbeat sent at ``asked`` renewed the lease, which now has ``left`` seconds
        to run (never taken as more than ``span``: a wall clock moved back between the
        store's renewal and this reading must not lengthen it)."""
        self.until = asked + min(left, self.span)
        self.renewed = asked

    @property
    def margin(self) -> float:
        """How long before ``until`` the command is stopped: the time a stopped command
        gets before its SIGKILL, or a tenth of a short lease."""
        return min(KILL_GRACE, self.span / 10)

    def running_out(self, now: float) -> bool:
        return now >= self.until - self.margin

    def may_hold(self, now: float) -> bool:
        return now < self.until
