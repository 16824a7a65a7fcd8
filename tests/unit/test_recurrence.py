"""When a schedule's ticks fall (``shoal.recurrence``): pure arithmetic, no store, no clock
-- every keeps its phase and makes up nothing; cron reads its zone, with Debian cron's
rules on the nights clocks change."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from shoal.errors import BadInput
from shoal.recurrence import check_recurrence, first_tick, next_tick

PARIS = ZoneInfo("Europe/Paris")


def paris(ts: float) -> str:
    return datetime.fromtimestamp(ts, PARIS).isoformat()


def test_every_keeps_its_phase_and_makes_up_nothing() -> None:
    assert first_tick(600.0, None, None, 1000.0) == 1000.0
    assert next_tick(600.0, None, None, 1000.0, 1000.0) == 1600.0
    assert next_tick(600.0, None, None, 1000.0, 1599.0) == 1600.0
    assert next_tick(600.0, None, None, 1000.0, 1000.0 + 3600 * 24 + 5) == 1000.0 + 87000
    assert next_tick(600.0, None, None, 5000.0, 1000.0) == 5000.0  # still to come: kept


def test_cron_runs_once_on_the_nights_the_clocks_change() -> None:
    spring = datetime(2027, 3, 27, 12, 0, tzinfo=PARIS).timestamp()  # 02:00 -> 03:00
    tick = first_tick(None, "30 2 * * *", "Europe/Paris", spring)
    assert paris(tick) == "2027-03-28T03:00:00+02:00"  # 02:30 never came: just after
    assert paris(next_tick(None, "30 2 * * *", "Europe/Paris", tick, tick)) == (
        "2027-03-29T02:30:00+02:00"
    )
    autumn = datetime(2026, 10, 24, 12, 0, tzinfo=PARIS).timestamp()  # 03:00 -> 02:00
    tick = first_tick(None, "30 2 * * *", "Europe/Paris", autumn)
    assert paris(tick) == "2026-10-25T02:30:00+02:00"
    again = next_tick(None, "30 2 * * *", "Europe/Paris", tick, tick)
    assert paris(again) == "2026-10-26T02:30:00+01:00"  # 02:30 came twice: once


def test_a_first_tick_may_be_the_start_itself() -> None:
    three = datetime(2026, 12, 1, 3, 0, tzinfo=PARIS).timestamp()
    assert first_tick(None, "0 3 * * *", "Europe/Paris", three) == three
    assert first_tick(None, "0 3 * * *", "Europe/Paris", three + 0.5) == three + 86400


@pytest.mark.parametrize(
    ("every", "cron", "tz", "says"),
    [
        (None, "0 3 * * * *", None, "five fields"),
        (None, "*/0 * * * *", None, "not valid"),
        (None, "0 0 31 2 *", None, "not valid"),
        (None, "0 3 * * *", "Europe/Pariss", "unknown time zone"),
        ("0.5s", None, None, "from 1s"),
        (None, None, None, "give one of"),
    ],
)
def test_bad_recurrences_say_what_is_wrong(
    every: str | None, cron: str | None, tz: str | None, says: str
) -> None:
    with pytest.raises(BadInput, match=says) as refused:
        check_recurrence(every, cron, tz)
    assert refused.value.hint
