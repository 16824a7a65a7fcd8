"""Waits run on the Clock: a claim that waits for work, and a worker that waits out its idle
grace, pass their time on a manual clock in a test, so no test has to sleep for it."""

from __future__ import annotations

from shoal import Fleet, ManualClock, clock
from shoal.runtime.worker import Worker
from shoal.vocabulary import ClaimReason, ClaimSource


def test_a_waiting_claim_on_a_manual_clock_lets_the_wait_pass_on_that_clock() -> None:
    clock = ManualClock()
    with Fleet.open("memory://", clock=clock) as fleet:
        fleet.register("ada")
        start = clock.now()
        claim = fleet.claim("ada", wait=30)
        assert not claim and claim.reason is ClaimReason.EMPTY
        assert 30 <= clock.now() - start <= 31  # the whole wait, and no more


def test_a_waiting_claim_takes_a_task_that_becomes_ready_during_the_wait() -> None:
    clock = ManualClock()
    with Fleet.open("memory://", clock=clock) as fleet:
        fleet.register("ada")
        start = clock.now()
        task = fleet.post("later", not_before=start + 10)
        claim = fleet.claim("ada", wait=60)
        assert claim.tasks == (fleet.get(task.id),)
        assert claim.grants[0].source is ClaimSource.POOL
        assert 10 <= clock.now() - start < 12  # woke when it was ready, not at the deadline


def test_an_ephemeral_worker_on_a_manual_clock_leaves_after_its_idle_grace() -> None:
    fleet_clock, worker_clock = ManualClock(), ManualClock()
    with Fleet.open("memory://", clock=fleet_clock) as fleet:
        fleet.configure(idle_timeout=300)
        worker = Worker(fleet, "ada", lambda ctx: None, ephemeral=True, clock=worker_clock)
        start = worker_clock.now()
        report = worker.run()
        assert report.reason == "idle"
        assert worker_clock.now() - start >= 300  # the grace passed on the worker's clock
        assert fleet_clock.now() < start + 1  # and not on the fleet's


class NowAndSleepOnly:
    """A clock written to the Clock protocol's two required methods, nothing more."""

    def __init__(self) -> None:
        self.manual = ManualClock()

    def now(self) -> float:
        return self.manual.now()

    def sleep(self, seconds: float) -> None:
        self.manual.sleep(seconds)


def test_a_clock_with_only_now_and_sleep_still_claims_and_waits() -> None:
    bare = NowAndSleepOnly()
    with Fleet.open("memory://", clock=bare) as fleet:
        fleet.register("ada")
        task = fleet.post("now")
        assert fleet.claim("ada").tasks == (fleet.get(task.id),)
    # Its deadlines and waits fall back to the real ones: a wait is handed its whole timeout
    # (here to a stand-in that reports a change at once), and the manual time stays put.
    asked: list[float] = []
    assert clock.wait(bare, lambda timeout: asked.append(timeout) or True, 5.0)
    assert asked == [5.0] and bare.manual.now() == ManualClock().now()
    assert clock.monotonic(bare) > 0
