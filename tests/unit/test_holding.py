"""A worker's own count of each lease (``runtime._holding``): it decides when a command whose
lease no heartbeat renewed is stopped, so it must never count a lease longer than the store
does -- whatever the wall clock did -- and must notice when the wall clock passed its end."""

from __future__ import annotations

from shoal.runtime._holding import Hold
from shoal.runtime.command import KILL_GRACE

WALL = 1_800_000_000.0


def test_a_renewal_counts_from_when_the_heartbeat_was_sent() -> None:
    hold = Hold.granted(100.0, expires=WALL + 60, wall=WALL)
    assert hold.until == 160.0
    # Sent at 130 (wall +30), renewed by the store a moment later, read at wall +30.5.
    hold.renew(130.0, expires=WALL + 90.2, wall=WALL + 30.5)
    assert abs(hold.until - 189.7) < 1e-6 and hold.renewed == 130.0


def test_a_wall_clock_moved_back_does_not_lengthen_a_lease() -> None:
    """Between the store's renewal and the worker's reading of the time, the wall clock
    went back an hour: the lease looks an hour longer, but is counted as it was claimed."""
    hold = Hold.granted(100.0, expires=WALL + 60, wall=WALL)
    hold.renew(130.0, expires=WALL + 90, wall=WALL + 30 - 3600)
    assert hold.until == 190.0
    assert not hold.running_out(185.0, WALL + 30 - 3600) and hold.running_out(188.0, WALL)


def test_a_wall_clock_that_jumps_past_the_lease_stops_the_command() -> None:
    """A suspended laptop wakes, or the clock is stepped forward: little monotonic time has
    passed, but by the fleet's clock the lease is over -- another agent may be given it."""
    hold = Hold.granted(100.0, expires=WALL + 60, wall=WALL)
    assert not hold.running_out(101.0, WALL + 1)
    assert hold.running_out(101.0, WALL + 3600) and not hold.may_hold(101.0, WALL + 3600)


def test_a_command_is_stopped_before_its_lease_can_run_out() -> None:
    long = Hold.granted(0.0, expires=WALL + 600, wall=WALL)
    assert long.margin == KILL_GRACE  # time for SIGTERM, then SIGKILL, before the end
    assert not long.running_out(600.0 - KILL_GRACE - 0.01, WALL)
    assert long.running_out(600.0 - KILL_GRACE, WALL) and long.may_hold(599.9, WALL)
    short = Hold.granted(0.0, expires=WALL + 2, wall=WALL)
    assert short.margin == 0.2  # a tenth of a short lease
    assert short.running_out(1.8, WALL) and not short.running_out(1.7, WALL)
    assert not short.may_hold(2.0, WALL)
