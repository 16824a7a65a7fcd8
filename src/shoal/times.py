"""How moments are written: ISO 8601 in UTC on the way out, ISO 8601 with a zone (or epoch
seconds) on the way in.

Every time shoal keeps is epoch seconds (a float) from its ``Clock``; only at the edges is it
text. One parser and one formatter, so the CLI, the MCP server and JSON agree to the
millisecond and refuse the same ambiguous input (a time without a zone).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from shoal.errors import BadInput

__all__ = ["MAX_MOMENT", "iso_time", "parse_moment"]


#: The latest moment shoal takes (the end of year 9999, the last one ISO 8601 can write).
MAX_MOMENT = 253402300799.0


def parse_moment(value: object, what: str = "time") -> float:
    """Epoch seconds from a number or an ISO 8601 time with its zone: 2026-12-01T09:00Z,
    2026-12-01 10:00+01:00. A time without a zone is refused rather than guessed; one before
    1970 is taken as 1970 (it has passed either way)."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if not 0 <= value <= MAX_MOMENT:  # (NaN fails it too; a huge int is not converted)
            raise BadInput(
                f"{what} must be a time (epoch seconds up to the year 9999), not {value!r}",
                hint="or an ISO 8601 time with its zone, e.g. 2026-12-01T09:00Z",
            )
        return float(value)
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise BadInput(
                f"{what} {value!r} is not a time",
                hint="give an ISO 8601 time with its zone, e.g. 2026-12-01T09:00Z",
            ) from None
    else:
        raise BadInput(f"{what} must be a time, not {value!r}")
    if moment.tzinfo is None:
        raise BadInput(
            f"{what} {value!r} has no time zone",
            hint="add Z for UTC or an offset such as +01:00, e.g. 2026-12-01T09:00Z",
        )
    try:
        seconds = moment.timestamp()
    except (OverflowError, ValueError):  # past the year 9999 once in UTC
        seconds = math.inf
    if seconds > MAX_MOMENT:
        raise BadInput(f"{what} {value!r} is after the year 9999", hint="give a nearer time")
    return max(seconds, 0.0)


def iso_time(seconds: float | None) -> str | None:
    """A moment as ISO 8601 UTC to the millisecond (``2026-11-23T09:30:00.000Z``): how every
    time leaves shoal in JSON."""
    if seconds is None:
        return None
    moment = datetime.fromtimestamp(min(max(seconds, 0.0), MAX_MOMENT), tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
