"""Running a Fleet call again when a shared store aborted it for crossing another writer.

On PostgreSQL two writers can, rarely, lock rows in opposite orders; the server then aborts
one of them (a deadlock it broke), and the store raises ``WriteConflict``. Nothing of the
aborted transaction was kept, so the whole call may simply run again.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

from shoal.errors import WriteConflict

__all__ = ["rerun_on_conflict"]


class _Fleet(Protocol):
    rng: random.Random
    _store: Any


_Method = TypeVar("_Method", bound=Callable[..., Any])
#: How many times a call is run again after a WriteConflict before it gives up.
_CONFLICT_RETRIES = 5


def rerun_on_conflict(method: _Method) -> _Method:
    """Run the call again when a shared store aborted it for crossing another writer (a
    deadlock PostgreSQL broke). Nothing of the aborted run was kept, so running it again is
    safe; a short random pause keeps the two from crossing again. A store may ask for more
    tries and pause its own way (``conflict_retries``, ``conflict_pause(attempt, rng)``): on
    the git store every write moves one branch, so a lost race is everyday, not rare."""

    @functools.wraps(method)
    def rerun(self: _Fleet, /, *args: Any, **kwargs: Any) -> Any:
        retries = getattr(self._store, "conflict_retries", _CONFLICT_RETRIES)
        pause_for: Callable[[int, random.Random], float] | None = getattr(
            self._store, "conflict_pause", None
        )
        for attempt in range(retries):
            try:
                return method(self, *args, **kwargs)
            except WriteConflict:
                if attempt == retries - 1:
                    raise
                # Real time, whatever the fleet's clock: the other writer is a real one.
                if pause_for is not None:
                    time.sleep(pause_for(attempt, self.rng))
                else:  # jittered and growing, so writers that crossed do not cross again
                    time.sleep(self.rng.uniform(0.001, 0.005) * 2**attempt)
        raise AssertionError("unreachable")

    return cast(_Method, rerun)
