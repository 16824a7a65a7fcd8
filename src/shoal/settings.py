"""Fleet settings: the numbers every rule uses, stored in the fleet and changeable at run time.

The defaults come from the source documents (docs/ARCHITECTURE.md, "Defaults"). Each setting
has a kind (a duration in seconds, a count, a priority, a ratio), bounds, and a sentence on
what it does; ``Settings.replace`` and ``parse_setting`` refuse anything outside them, so a
fleet can never hold a negative lease or a steal cap of "lots".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from shoal._values import field_names, replace, value
from shoal.errors import InvalidSetting
from shoal.limits import MAX_COUNT, MAX_DURATION, MAX_LEASE_TTL, MAX_NUMBER, MAX_SIZE
from shoal.validation import parse_duration, parse_priority, parse_size

__all__ = [
    "MAX_DURATION",
    "ORDERS",
    "SETTINGS",
    "Setting",
    "Settings",
    "format_duration",
    "format_setting",
    "format_size",
    "parse_setting",
]

#: The values of the ``order`` setting: how tasks of equal priority are ranked.
ORDERS = ("priority", "longest_first")


@value
class Setting:
    """How one setting is read, checked and explained. Its default is on ``Settings``."""

    name: str
    kind: str  # "duration" | "count" | "priority" | "number" | "size" | "choice"
    minimum: float
    help: str
    maximum: float | None = None  # None: the kind's ceiling (``ceiling``)
    choices: tuple[str, ...] = ()  # the words a "choice" setting accepts

    @property
    def ceiling(self) -> float:
        """The largest value it takes: its own maximum, else its kind's (``shoal.limits``):
        no setting is unbounded, so no absurd number reaches a store or a rule."""
        if self.maximum is not None:
            return self.maximum
        ceilings = {
            "duration": MAX_DURATION,
            "count": MAX_COUNT,
            "number": MAX_NUMBER,
            "size": MAX_SIZE,
        }
        return ceilings.get(self.kind, math.inf)


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        Setting("max_agents", "count", 1, "seats: non-managers neither offline nor terminated"),
        Setting(
            "lease_ttl", "duration", 1, "how long a claim lasts without a heartbeat", MAX_LEASE_TTL
        ),
        Setting("heartbeat_timeout", "duration", 1, "silence after which an agent is offline"),
        Setting("idle_timeout", "duration", 0, "idle time after which ephemeral agents end"),
        Setting("max_attempts", "count", 1, "claims a task gets before it is dead"),
        Setting("retry_delay", "duration", 0, "first wait before a failed task is retried"),
        Setting("retry_delay_max", "duration", 0, "longest wait before a retry (doubling)"),
        Setting("failure_streak", "count", 0, "failures in a row that pause an agent (0: off)"),
        Setting("pause_cooldown", "duration", 1, "how long the breaker pauses an agent"),
        Setting("stall_factor", "number", 0.01, "x expected duration before a task is stalled"),
        Setting("aging", "number", 0, "score points a pool task gains per minute of waiting"),
        Setting("rebalance_interval", "duration", 1, "rebalance period; also the steal window"),
        Setting("idle_min_for_rebalance", "duration", 0, "idle time before rebalance feeds"),
        Setting("busy_threshold", "count", 0, "queue depth above which the rebalance robs"),
        Setting("steal_threshold", "count", 0, "queue depth above which a claim may steal"),
        Setting("steal_min_priority", "priority", 1, "only priority numbers >= this are stolen", 9),
        Setting(
            "cross_domain_priority", "priority", 1, "priority >= this, no skills: any domain", 9
        ),
        Setting("max_steals_per_agent", "count", 0, "steals per thief per window"),
        Setting("max_steals_per_cycle", "count", 0, "steals fleet-wide per window"),
        Setting("domain_wait", "duration", 0, "others leave new work to its idle domain agents"),
        Setting("locality_wait", "duration", 0, "ready time before others take domain work"),
        Setting(
            "order",
            "choice",
            0,
            "equal priorities: newest (priority) or longest expected first",
            choices=ORDERS,
        ),
        Setting("poll_base", "duration", 0.01, "first wait of an agent polling for work"),
        Setting("poll_max", "duration", 0.01, "longest wait of a polling agent"),
        Setting("poll_backoff_after", "count", 1, "empty polls before the wait doubles"),
        Setting("assess_spawn_pending", "count", 1, "pending tasks that call for a new agent"),
        Setting("assess_idle_pending", "count", 0, "pending tasks at or below: underused"),
        Setting(
            "history_retention", "duration", 0, "the monitor deletes older finished work (0: keep)"
        ),
        Setting("max_payload_bytes", "size", 1024, "largest task payload, as JSON, in bytes"),
        Setting("max_body_bytes", "size", 1024, "largest task body, in bytes (UTF-8)"),
    )
}


@value
class Settings:
    """One consistent set of values. Read them as attributes: ``settings.lease_ttl``."""

    max_agents: int = 4
    lease_ttl: float = 600.0
    heartbeat_timeout: float = 90.0
    idle_timeout: float = 60.0
    max_attempts: int = 3
    retry_delay: float = 10.0
    retry_delay_max: float = 3600.0
    failure_streak: int = 5
    pause_cooldown: float = 600.0
    stall_factor: float = 2.0
    aging: float = 1.0
    rebalance_interval: float = 300.0
    idle_min_for_rebalance: float = 120.0
    busy_threshold: int = 5
    steal_threshold: int = 0
    steal_min_priority: int = 5
    cross_domain_priority: int = 8
    max_steals_per_agent: int = 3
    max_steals_per_cycle: int = 10
    domain_wait: float = 120.0
    locality_wait: float = 0.0
    order: str = "priority"
    poll_base: float = 1.0
    poll_max: float = 60.0
    poll_backoff_after: int = 3
    assess_spawn_pending: int = 3
    assess_idle_pending: int = 1
    history_retention: float = 0.0
    max_payload_bytes: int = 1024 * 1024
    max_body_bytes: int = 1024 * 1024

    def replace(self, /, **changes: object) -> Settings:
        """A copy with ``changes`` applied, each parsed and checked like ``config set``."""
        parsed = {name: parse_setting(name, value) for name, value in changes.items()}
        updated = replace(self, **parsed)
        if updated.poll_max < updated.poll_base:
            raise InvalidSetting(
                f"poll_max ({updated.poll_max:g}s) is below poll_base ({updated.poll_base:g}s)",
                hint="set poll_max to at least poll_base",
            )
        if updated.retry_delay_max < updated.retry_delay:
            raise InvalidSetting(
                f"retry_delay_max ({updated.retry_delay_max:g}s) is below retry_delay "
                f"({updated.retry_delay:g}s)",
                hint="set retry_delay_max to at least retry_delay",
            )
        return updated

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in field_names(self)}

    def overrides(self) -> dict[str, Any]:
        """Only the values that differ from the defaults (what a fleet stores)."""
        default = Settings()
        return {k: v for k, v in self.to_dict().items() if getattr(default, k) != v}

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> Settings:
        """Settings from stored values; names this version does not know are ignored, and
        a number above its ceiling (stored by an older shoal, which had none) is read as
        the ceiling, so such a fleet still opens."""
        known = {k: _within(SETTINGS[k], v) for k, v in values.items() if k in SETTINGS}
        return cls().replace(**known)


def _within(spec: Setting, value: object) -> object:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if spec.kind in ("duration", "count", "number", "size") and value > spec.ceiling:
        return int(spec.ceiling) if spec.kind in ("count", "size") else spec.ceiling
    return value


def parse_setting(name: str, value: object) -> Any:
    """Check that ``name`` is a setting and turn ``value`` (text or number) into its type."""
    spec = SETTINGS.get(name)
    if spec is None:
        import difflib

        close = difflib.get_close_matches(name, SETTINGS, n=1)
        hint = f"did you mean {close[0]}?" if close else "see `shoal config get` for the list"
        raise InvalidSetting(f"there is no setting called {name!r}", hint=hint)
    if spec.kind == "choice":
        return _parse_choice(spec, value)
    try:
        if spec.kind == "duration":
            number: float = parse_duration(value, name)
        elif spec.kind == "priority":
            number = parse_priority(value)
        elif spec.kind == "size":
            number = parse_size(value, name)
        elif spec.kind == "count":
            if isinstance(value, bool):
                raise ValueError
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            number = int(str(value).strip()) if isinstance(value, str) else int(value)  # type: ignore[call-overload]
        else:
            if isinstance(value, bool):
                raise ValueError
            number = float(value)  # type: ignore[arg-type]
            if not math.isfinite(number):
                raise ValueError
    except (ValueError, TypeError):
        raise InvalidSetting(
            f"{name} must be {_describe(spec)}, not {value!r}", hint=f"{name}: {spec.help}"
        ) from None
    except Exception as exc:  # a BadInput from the duration or priority parser
        raise InvalidSetting(
            f"{name} must be {_describe(spec)}, not {value!r}", hint=f"{name}: {spec.help}"
        ) from exc
    if spec.kind == "duration" and number > spec.ceiling:
        longest = format_duration(spec.ceiling)
        raise InvalidSetting(
            f"{name} must be at most {longest} ({spec.ceiling:g}s), not {number:g}s",
            hint=f"{name}: {spec.help}",
        )
    if number < spec.minimum:
        raise InvalidSetting(
            f"{name} must be at least {spec.minimum:g}, not {number:g}",
            hint=f"{name}: {spec.help}",
        )
    if number > spec.ceiling:
        most = format_size(int(spec.ceiling)) if spec.kind == "size" else f"{spec.ceiling:,.0f}"
        raise InvalidSetting(
            f"{name} must be at most {most}, not {format_setting(number, name)}",
            hint=f"{name}: {spec.help}",
        )
    return int(number) if spec.kind in ("count", "priority", "size") else float(number)


def _parse_choice(spec: Setting, value: object) -> str:
    word = value.strip().lower() if isinstance(value, str) else None
    if word not in spec.choices:
        raise InvalidSetting(
            f"{spec.name} must be one of {', '.join(spec.choices)}, not {value!r}",
            hint=f"{spec.name}: {spec.help}",
        )
    return word


def format_setting(value: object, name: str | None = None) -> str:
    """A setting's value for people: a duration with its units (``10m``, ``1h30m``, ``90s``,
    which ``config set`` takes back), other numbers without trailing zeros, words as they
    are."""
    spec = SETTINGS.get(name) if name else None
    if spec is not None and spec.kind == "duration" and isinstance(value, int | float):
        return format_duration(float(value))
    if spec is not None and spec.kind == "size" and isinstance(value, int | float):
        return format_size(int(value))
    return f"{value:g}" if isinstance(value, int | float) else str(value)


def format_duration(seconds: float) -> str:
    """Seconds as a duration ``parse_duration`` reads back: 0s, 0.5s, 90s, 10m, 1h30m, 2d."""
    if seconds < 60 or not float(seconds).is_integer():
        return f"{seconds:g}s"
    parts, rest = [], int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def format_size(size: int) -> str:
    """Bytes as ``parse_size`` reads them back: 1MiB, 512KiB, or the number of bytes."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    return str(size)


def _describe(spec: Setting) -> str:
    return {
        "duration": "a duration (seconds, or 90s / 5m / 2h)",
        "priority": "a priority from 1 to 9",
        "count": "a whole number",
        "number": "a number",
        "size": "a size in bytes (or 512K, 1MiB)",
    }[spec.kind]
