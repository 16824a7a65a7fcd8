"""bench/forkjoin.py, which docs/scheduling.md (*The fork-join tree*) quotes: its list
scheduler taking the oldest ready part is the shared queue the simulator runs as pull+wake
(the same makespan, run by run), so what it says of other orders is said of that queue;
and its account of a run places every free agent-minute in the ramp, the middle or the
drain, so the drain it credits with shoal's gain (once blamed for its gap) is all of the
difference there is, but the middle's few agent-minutes."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from shoal import sim
from shoal.sim.workloads import build

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "bench") not in sys.path:
    sys.path.insert(0, str(ROOT / "bench"))  # bench/ is scripts, not a package
forkjoin = importlib.import_module("forkjoin")

READY_FIRST = "ready first (a shared queue: pull+wake)"


@pytest.mark.parametrize("seed", [0, 3])
def test_the_ready_first_list_is_pull_wake_run_by_run(seed: int) -> None:
    work = build("forkjoin", seed)
    listed = forkjoin.list_schedule(work, forkjoin.ORDERS[READY_FIRST])
    assert listed == pytest.approx(sim.run(work, "pull+wake", seed).ratio, abs=1e-9)
    # and the order is what moves it: depth-first is slower on the same tree
    assert forkjoin.list_schedule(work, forkjoin.ORDERS["newest first (depth-first)"]) > listed


@pytest.mark.parametrize("policy", ["pull+wake", "shoal"])
def test_the_account_places_every_free_minute(policy: str) -> None:
    result = sim.simulate("forkjoin", policy, 0)
    trace = result.trace
    busy = sum(s.end - s.start for s in trace.segments) / 60
    free = len(trace.workload.agents) * trace.makespan / 60 - busy
    account = forkjoin.account(policy, 0)
    assert account.ramp + account.middle + account.drain == pytest.approx(free)
    assert account.ratio == result.metrics.ratio


def test_shoal_gains_on_pull_wake_in_the_drain() -> None:
    """Ready joins last: shoal splits the tree first and ends on joins side by side, its
    last leaf longer before the end than the shared queue's -- and the gain is the drain's
    (less the few agent-minutes of the middle where an agent waits beside a stolen task's
    join)."""
    ours, theirs = forkjoin.account("shoal", 0), forkjoin.account("pull+wake", 0)
    agents = len(build("forkjoin", 0).agents)
    later = sim.run("forkjoin", "shoal", 0).makespan - sim.run("forkjoin", "pull+wake", 0).makespan
    assert later < 0
    assert ours.ramp == pytest.approx(theirs.ramp) and theirs.middle == 0
    gap = ours.middle + ours.drain - theirs.drain
    assert gap == pytest.approx(agents * later / 60)
    assert ours.after_last_leaf > theirs.after_last_leaf  # no chain of joins at the end
