"""The runtime's pure decisions, with numbers and a manual clock, no processes: how long an
idle worker waits between polls, how long a supervisor waits before restarting a crashed
worker, and how many workers it runs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shoal import ManualClock, Settings, policy, sizing


def decide(**overrides: object) -> sizing.ScaleDecision:
    facts: dict[str, object] = {
        "recommendation": "maintain",
        "running": 2,
        "idle": (),
        "minimum": 0,
        "maximum": 4,
        "room": 10,
        "since_change": 1000.0,
        "cooldown": 10.0,
    }
    facts.update(overrides)
    return sizing.scale_decision(**facts)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- polling


def test_an_idle_worker_polls_at_the_base_rate_then_doubles_up_to_the_maximum() -> None:
    s = Settings(poll_base=1.0, poll_max=60.0, poll_backoff_after=3)
    waits = [policy.poll_delay(n, s) for n in range(12)]
    assert waits == [0.0, 1.0, 1.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0]


def test_work_found_resets_the_backoff() -> None:
    s = Settings()
    assert policy.poll_delay(0, s) == 0.0  # after a task: poll again at once


# ---------------------------------------------------------------------- crash restarts


def test_restarts_after_crashes_in_a_row_back_off_and_are_capped() -> None:
    delays = [sizing.restart_delay(n, 1.0, 30.0) for n in range(8)]
    assert delays == [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


@given(st.integers(0, 10_000), st.floats(0.01, 100), st.floats(0.01, 1000))
def test_a_restart_delay_is_never_negative_nor_above_the_cap(
    n: int, base: float, cap: float
) -> None:
    assert 0.0 <= sizing.restart_delay(n, base, cap) <= max(cap, 0.0)


# ---------------------------------------------------------------------- scaling


def test_spawn_recommended_starts_one_worker() -> None:
    assert decide(recommendation="spawn").spawn == 1


def test_never_past_the_cap_nor_the_fleets_room() -> None:
    at_cap = decide(recommendation="spawn", running=4, maximum=4)
    assert not at_cap and "cap" in at_cap.reason
    full = decide(recommendation="spawn", running=1, room=0)
    assert not full and "full" in full.reason


def test_cooldown_holds_changes_but_not_the_floor() -> None:
    assert not decide(recommendation="spawn", since_change=3.0)
    floor = decide(running=0, minimum=2, since_change=0.0)
    assert floor.spawn == 2


def test_the_floor_is_kept_within_the_cap_and_the_room() -> None:
    assert decide(running=0, minimum=3, maximum=4, room=1).spawn == 1


def test_terminate_idle_stops_the_longest_idle_worker_down_to_the_minimum() -> None:
    d = decide(recommendation="terminate_idle", running=3, idle=("w3", "w1"), minimum=1)
    assert d.stop == ("w3",) and d.spawn == 0
    assert not decide(recommendation="terminate_idle", running=1, idle=("w1",), minimum=1)
    assert not decide(recommendation="terminate_idle", running=3, idle=(), minimum=0)


def test_above_the_cap_idle_workers_are_stopped_at_once() -> None:
    d = decide(running=5, maximum=3, idle=("a", "b", "c"), since_change=0.0)
    assert d.stop == ("a", "b")


@given(
    st.sampled_from(["spawn", "terminate_idle", "maintain"]),
    st.integers(0, 20),
    st.integers(0, 6),
    st.integers(1, 12),
    st.integers(0, 20),
)
def test_a_decision_never_leaves_the_bounds(
    recommendation: str, running: int, minimum: int, maximum: int, room: int
) -> None:
    minimum = min(minimum, maximum)
    idle = tuple(f"w{i}" for i in range(running))
    d = decide(
        recommendation=recommendation,
        running=running,
        idle=idle,
        minimum=minimum,
        maximum=maximum,
        room=room,
    )
    after = running + d.spawn - len(d.stop)
    assert d.spawn <= room
    assert after <= max(maximum, running - len(idle))
    if d.spawn:
        assert after <= maximum
    if d.stop:
        assert after >= min(minimum, running) and set(d.stop) <= set(idle)


def test_under_steady_load_the_supervisor_grows_one_worker_per_cooldown_to_the_cap() -> None:
    """A simulated supervisor pass every second on a manual clock: an assessment that keeps
    asking for agents grows the fleet by one per cooldown, and never past the cap; then an
    idle fleet shrinks by one per cooldown, down to the floor."""
    clock = ManualClock()
    running, last_change, timeline = 1, -1e9, []
    for _ in range(40):
        d = decide(
            recommendation="spawn",
            running=running,
            maximum=4,
            minimum=1,
            since_change=clock.now() - last_change,
            cooldown=5.0,
        )
        if d:
            last_change = clock.now()
        running += d.spawn
        timeline.append(running)
        clock.advance(1.0)
    assert timeline[:11] == [2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 4]
    assert max(timeline) == 4
    for _ in range(40):
        idle = tuple(f"w{i}" for i in range(running))
        d = decide(
            recommendation="terminate_idle",
            running=running,
            idle=idle,
            maximum=4,
            minimum=1,
            since_change=clock.now() - last_change,
            cooldown=5.0,
        )
        if d:
            last_change = clock.now()
        running -= len(d.stop)
        clock.advance(1.0)
    assert running == 1
