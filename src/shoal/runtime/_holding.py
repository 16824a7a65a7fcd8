"""A worker's own reckoning of how long it may hold each task: the lease as the store last
renewed it, counted on the worker's clocks.

A task is the worker's only while its lease lasts. Two things end that without the worker
saying so, and both must stop the task's command, because the task is now -- or is about
to be -- someone else's:

* **the lease is gone**: a heartbeat answers without it (it expired, the task was cancelled,
  a reaper or another agent's claim took it back) -- ``LEASE_GONE``;
* **no heartbeat renewed it in time**: the store is out of reach for as long as the lease
  lasts, or this host's clock jumped past the lease's end (a suspended laptop waking, a
  clock stepped forward) before the next heartbeat. Once a lease has run out any agent may
  be given the task, and the worker cannot learn that from a store it cannot reach. So it
  counts, two ways, and believes the earlier: every renewal moves ``Hold.until`` to when
  the lease may run out on the worker's never-going-back clock (a wall clock moved back
  cannot lengthen it), and keeps ``Hold.expires``, the end the store wrote, by the wall
  clock the fleet's rules use. The task's thread stops the command ``Hold.margin`` before
  either says the lease ends -- ``LEASE_UNRENEWED`` -- so that it is gone, SIGKILL
  included, before anyone else can be handed the task.

The reckoning errs early: ``until`` counts from the moment the heartbeat was *sent*, and a
lease is never taken to last longer than it did when it was claimed.
"""

from __future__ import annotations

from dataclasses import dataclass

from shoal.runtime.command import KILL_GRACE

__all__ = ["LEASE_GONE", "LEASE_UNRENEWED", "Hold"]

#: Why a command is stopped when a heartbeat finds its lease gone.
LEASE_GONE = "lease lost: a heartbeat found it gone (expired, cancelled or taken back)"
#: Why a command is stopped when no heartbeat renewed its lease before it could run out.
LEASE_UNRENEWED = "lease lost: no heartbeat renewed it before it could run out"


@dataclass
class Hold:
    """How long the worker may go on with one task, on the worker's clock."""

    #: Seconds a renewal is good for: the lease's length when it was claimed.
    span: float
    #: When the lease may run out, at the earliest (the worker's monotonic clock).
    until: float
    #: When the store last renewed it (or granted it), on the same clock.
    renewed: float
    #: The lease's end as the store wrote it, on the fleet's (wall) clock.
    expires: float

    @classmethod
    def granted(cls, now: float, expires: float, wall: float) -> Hold:
        """A lease just claimed, ending at ``expires``, which is ``wall`` now."""
        left = expires - wall
        return cls(span=left, until=now + left, renewed=now, expires=expires)

    def renew(self, asked: float, expires: float, wall: float) -> None:
        """A heartbeat sent at ``asked`` renewed the lease to ``expires``, which is ``wall``
        now: it has ``expires - wall`` seconds to run, never taken as more than ``span`` (a
        wall clock moved back between the store's renewal and this reading must not
        lengthen it)."""
        self.until = asked + min(expires - wall, self.span)
        self.renewed = asked
        self.expires = expires

    @property
    def margin(self) -> float:
        """How long before ``until`` the command is stopped: the time a stopped command
        gets before its SIGKILL, or a tenth of a short lease."""
        return min(KILL_GRACE, self.span / 10)

    def running_out(self, now: float, wall: float) -> bool:
        """Whether to stop the command: the lease ends within ``margin`` by either clock
        (``now`` the worker's monotonic time, ``wall`` the fleet's)."""
        return now >= self.until - self.margin or wall >= self.expires - self.margin

    def may_hold(self, now: float, wall: float) -> bool:
        """Whether the lease may still be ours (no margin): worth settling the task."""
        return now < self.until and wall < self.expires
