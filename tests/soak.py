"""Two sizes for the tests that are soaks at heart -- processes racing over thousands of
tasks, clones racing over a git board, random histories two stores must agree on: `make
test` runs them small, `make soak` full.

Small still asserts everything full does (every task once, none lost, the history and the
log agree, every racer got a share, a group never past its limit), on fewer tasks: the
races are as dense, only shorter. A soak-sized test is marked ``soak``; `make soak` sets
``SHOAL_SOAK=1`` and runs those tests alone, at the sizes that found the bugs they guard.
"""

from __future__ import annotations

import os

import pytest

__all__ = ["SOAK", "sized", "soak"]

#: Whether this run is `make soak` (the full sizes).
SOAK = os.environ.get("SHOAL_SOAK", "").strip().lower() in ("1", "true", "yes")

#: The marker of a soak-sized test (`make soak` runs ``-m soak``).
soak = pytest.mark.soak


def sized(small: int, full: int) -> int:
    """``full`` in `make soak`, else ``small``."""
    return full if SOAK else small
