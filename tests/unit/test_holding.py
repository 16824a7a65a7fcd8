"""A worker's own count of each lease (``runtime._holding``): it decides when a command whose
lease no heartbeat could renew is stopped, so it must never count a lease longer than the
store does -- whatever the wall clock did."""

from __future__ import annotations

from shoal.runtime._holding import Hold
from shoal.runtime.command import KILL_GRACE


def test_a_renewal_counts_from_when_the_heartbeat_was_sent() -> None:
    hold = Hold.granted(now=100.0, left=60.0)
    assert hold.until == 160.0
    hold.renew(asked=130.0, left=59.5)  # the store renewed it a moment after it was asked
    assert hold.until == 189.5 and hold.renewed == 130.0


def test_a_wall_clock_moved_back_does_not_lengthen_a_lease() -> None:
    """Between the store's renewal and the worker's reading of the time, the wall clock
    went back an hour: the lease looks an hour longer, but is counted as it was claimed."""
    hold = Hold.granted(now=100.0, left=60.0)
    hold.renew(asked=130.0, left=3660.0)
    assert hold.until == 190.0


def test_a_command_is_stopped_before_its_lease_can_run_out() -> None:
    long = Hold.granted(now=0.0, left=600.0)
    assert long.margin == KILL_GRACE  # time for SIGTERM, then SIGKILL, before the end
    assert not long.running_out(600.0 - KILL_GRACE - 0.01)
    assert long.running_out(600.0 - KILL_GRACE) and long.may_hold(599.9)
    short = Hold.granted(now=0.0, left=2.0)
    assert short.margin == 0.2  # a tenth of a short lease
    assert short.running_out(1.8) and not short.running_out(1.7)
    assert not short.may_hold(2.0)
