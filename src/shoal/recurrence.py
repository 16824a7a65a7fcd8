"""When a schedule's occurrences fall due: the checks and the arithmetic of recurring work.

A schedule (``model.Schedule``) recurs either ``every`` so many seconds or at the times a
five-field ``cron`` expression names, read in a time zone (``tz``, UTC unless given: a
fleet spans hosts, so no host's local zone is the fleet's). Cron expressions are read by
cronsim, a small, well-kept parser with Debian cron's rules (day-of-month and day-of-week
combine as Debian's cron does; a 03:30 job on the night clocks skip an hour runs once, after
the jump; on the night they repeat an hour, once) -- never by a parser of our own.

Everything here is pure: no store, no clock. ``next_tick`` is what a schedule's next tick
is after ``now``: ticks missed while nobody looked are not made up (no back-fill) -- the
next one is the first still to come. ``every`` keeps its phase: ticks stay at start + k *
every whatever moment they are looked at.

cronsim is imported where a cron expression is read, so a command that reads none pays
nothing for it.
"""

from __future__ import annotations

import functools
import math
from datetime import UTC, datetime, tzinfo
from typing import TYPE_CHECKING

from shoal.errors import BadInput
from shoal.validation import parse_duration

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

__all__ = ["MAX_EVERY", "MIN_EVERY", "check_recurrence", "first_tick", "next_tick"]

#: The shortest gap between occurrences: a second (a cron expression's is a minute).
MIN_EVERY = 1.0
#: The longest: a year (a longer wait is a one-off task with --at).
MAX_EVERY = 366 * 86400.0
_CRON_HINT = (
    'five fields: minute hour day-of-month month day-of-week, e.g. "0 3 * * *" (03:00 '
    'daily) or "*/15 9-17 * * MON-FRI"'
)


def check_recurrence(
    every: float | str | None, cron: str | None, tz: str | None
) -> tuple[float | None, str | None, str | None]:
    """``every`` (a duration) or ``cron`` (with ``tz``, default UTC) checked and made
    canonical: (seconds, None, None) or (None, expression, zone name). Exactly one of
    ``every`` and ``cron``; ``tz`` only with ``cron``."""
    if (every is None) == (cron is None):
        raise BadInput(
            "a schedule recurs either every so often or by a cron expression: give one of "
            "every and cron" + (", not both" if every is not None else ""),
            hint='e.g. --every 30m, or --cron "0 3 * * *" --tz Europe/Paris',
        )
    if every is not None:
        if tz is not None:
            raise BadInput(
                "tz goes with cron only: every counts seconds, which no time zone changes",
                hint="leave --tz out, or use --cron",
            )
        seconds = parse_duration(every, "every")
        if not MIN_EVERY <= seconds <= MAX_EVERY:
            raise BadInput(
                f"every must be from 1s to 366d, not {every!r}",
                hint="e.g. --every 30m or --every 1d",
            )
        return seconds, None, None
    assert cron is not None
    name = "UTC" if tz is None or (isinstance(tz, str) and tz.upper() == "UTC") else tz
    if not isinstance(name, str):
        raise BadInput(f"tz must be a time zone's name, not {tz!r}")
    if name != "UTC" and name not in _known_zones():
        raise BadInput(f"unknown time zone {name[:80]!r}", hint=_ZONE_HINT)
    zone = _zone(name)
    if not isinstance(cron, str):
        raise BadInput(f"cron must be text, not {cron!r}", hint=_CRON_HINT)
    expression = " ".join(cron.split())
    if len(expression.split(" ")) != 5 or len(expression) > 200:
        raise BadInput(f"cron {cron!r} is not five fields", hint=_CRON_HINT)
    _cron_after(expression, zone, datetime.now(UTC).timestamp())  # parses, and matches
    return None, expression, name


def first_tick(every: float | None, cron: str | None, tz: str | None, start: float) -> float:
    """The first tick at or after ``start`` (every: ``start`` itself)."""
    if every is not None:
        return start
    assert cron is not None
    assert tz is not None
    return _cron_after(cron, _zone(tz), math.ceil(start) - 1.0)


def next_tick(
    every: float | None, cron: str | None, tz: str | None, last: float, now: float
) -> float:
    """The first tick after ``now`` of a schedule whose latest tick was ``last``: ticks
    between them are passed over, not made up."""
    if every is not None:
        if now < last:
            return last
        return last + (math.floor((now - last) / every) + 1) * every
    assert cron is not None
    assert tz is not None
    return _cron_after(cron, _zone(tz), max(now, last))


_ZONE_HINT = 'give an IANA name such as "UTC", "Europe/Paris" or "America/New_York"'


@functools.cache
def _known_zones() -> frozenset[str]:
    """The IANA zones this host (or the tzdata package) knows: a schedule names one of
    them, never a host's own "localtime" nor a path."""
    from zoneinfo import available_timezones

    return frozenset(available_timezones()) - {"localtime", "Factory"}


def _zone(name: str) -> tzinfo:
    """The time zone ``name`` (IANA: "Europe/Paris", "UTC"), or ``BadInput``."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if name == "UTC":
        return UTC
    try:
        zone: ZoneInfo = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError, OSError):
        raise BadInput(f"unknown time zone {name[:80]!r}", hint=_ZONE_HINT) from None
    return zone


def _cron_after(expression: str, zone: tzinfo, after: float) -> float:
    """The first time after ``after`` (epoch seconds) that ``expression`` names in ``zone``."""
    from cronsim import CronSim, CronSimError

    try:
        ticks = CronSim(expression, datetime.fromtimestamp(after, zone))
        return next(ticks).timestamp()
    except CronSimError as exc:
        raise BadInput(f"cron {expression!r} is not valid: {exc}", hint=_CRON_HINT) from None
    except StopIteration:
        raise BadInput(
            f"cron {expression!r} names no time in the next fifty years", hint=_CRON_HINT
        ) from None
