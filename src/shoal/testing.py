"""What shoal's own tests use, shipped for yours: a manual clock and a fleet to drive with it.

>>> from shoal.testing import ManualClock, manual_fleet
>>> fleet, clock = manual_fleet()
>>> _ = fleet.register("a")
>>> clock.advance(600)  # ten minutes pass at once
1767226200.0
"""

from __future__ import annotations

import random

from shoal.clock import ManualClock
from shoal.fleet import Fleet

__all__ = ["ManualClock", "manual_fleet"]


def manual_fleet(url: str = "memory://", *, seed: int = 0) -> tuple[Fleet, ManualClock]:
    """A fleet on ``url`` whose time moves only when you advance the returned clock."""
    clock = ManualClock()
    return Fleet.open(url, clock=clock, rng=random.Random(seed)), clock
