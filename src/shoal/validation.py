"""Every check of input that needs no store: bad input fails here, before any I/O.

One module for every face: ``Fleet`` runs these before it opens a transaction, and the
CLI, the MCP server and the worker call the same functions for what they parse themselves,
so a malformed priority, agent id, duration or task id is refused everywhere with the same
words. Each refusal is a ``BadInput`` that says what was wrong and how to fix it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence

from shoal.errors import BadInput, InvalidPriority
from shoal.limits import MAX_BATCH, MAX_DURATION, MAX_NAMES
from shoal.model import Agent, Lease
from shoal.text import check_block, check_line, check_storable, lazy_compile
from shoal.vocabulary import AgentStatus, TaskState

__all__ = [
    "AGENT_ID",
    "MAX_BATCH",
    "MAX_GROUP_LIMIT",
    "MAX_ID",
    "NEW_AGENT_ID",
    "PRIORITY_NAMES",
    "as_task_ids",
    "check_agent_id",
    "check_count",
    "check_group",
    "check_group_limit",
    "check_joining_agent_id",
    "check_json",
    "check_lease",
    "check_max_concurrent",
    "check_n",
    "check_new_agent_id",
    "check_result",
    "check_text",
    "check_wait",
    "check_worker_times",
    "json_size",
    "normalize_names",
    "parse_agent_status",
    "parse_duration",
    "parse_priority",
    "parse_size",
    "parse_state",
    "positive_duration",
]

#: Names accepted wherever a priority is asked for. 1 is the most urgent.
PRIORITY_NAMES: Mapping[str, int] = {"critical": 1, "high": 2, "medium": 5, "low": 8}

#: Any id a fleet may hold, old ones included: older versions registered ids with ``/`` and
#: up to 128 characters, and those agents keep working (read, shown, acted on, terminated).
AGENT_ID = lazy_compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,127}$")
#: The ids a new registration may take: letters, digits and ``. _ - @ :``, starting with a
#: letter or digit, at most 64. Nothing in it means anything in a URL's path (no ``/``, and
#: never a ``.`` or ``..`` segment), so an id is always one segment wherever it goes.
NEW_AGENT_ID = lazy_compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}$")
_NEW_ID_RULE = "1-64 letters, digits or . _ - @ :, starting with a letter or digit"
_NAME_RE = lazy_compile(r"^[A-Za-z0-9][A-Za-z0-9_.+:/-]{0,63}$")
_DURATION_RE = lazy_compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_DURATION_PART = lazy_compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)")
_DURATION_PARTS = lazy_compile(r"^\s*(?:\d+(?:\.\d+)?\s*(?:ms|s|m|h|d)\s*)+$")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}
_SIZE_RE = lazy_compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:(k|m|g)(?:i?b)?|b)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {None: 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_priority(value: object) -> int:
    """Turn 1..9, "3" or a name (critical, high, medium, low) into a priority number."""
    if isinstance(value, bool):
        raise InvalidPriority(f"priority must be a number from 1 to 9, not {value!r}")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and value.strip().lower() in PRIORITY_NAMES:
        return PRIORITY_NAMES[value.strip().lower()]
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    else:
        raise InvalidPriority(
            f"priority {value!r} is not understood",
            hint="use 1 (most urgent) to 9, or critical (1), high (2), medium (5), low (8)",
        )
    if not 1 <= number <= 9:
        raise InvalidPriority(
            f"priority {number} is out of range",
            hint="use 1 (most urgent) to 9, or critical (1), high (2), medium (5), low (8)",
        )
    return number


def check_agent_id(agent_id: object) -> str:
    """An id that names an agent the fleet may hold: a new one (``check_new_agent_id``) or
    one an older version registered, which may also hold ``/`` and run to 128 characters."""
    if not isinstance(agent_id, str) or not AGENT_ID.fullmatch(agent_id):
        raise BadInput(f"agent id {agent_id!r} is not valid", hint=f"use {_NEW_ID_RULE}")
    return agent_id


def check_new_agent_id(agent_id: object) -> str:
    """An id a new agent may register under (``NEW_AGENT_ID``)."""
    if not isinstance(agent_id, str) or not NEW_AGENT_ID.fullmatch(agent_id):
        raise BadInput(
            f"agent id {agent_id!r} is not valid for a new agent",
            hint=f"use {_NEW_ID_RULE} (no /: an id goes into URLs as one piece)",
        )
    return agent_id


def check_joining_agent_id(agent_id: str, known: Agent | None) -> str:
    """An id to register an agent (or make its token) under: one a new agent may take, or
    the id of a live agent the fleet already holds -- an older version's, which its agent
    goes on using until it is moved. ``known``: the fleet's agent of that id, if any."""
    if known is None or known.status is AgentStatus.TERMINATED:
        check_new_agent_id(agent_id)
    return agent_id


def normalize_names(values: Iterable[str] | str | None, what: str) -> tuple[str, ...]:
    """Skills or domains as a sorted, de-duplicated tuple; a string may list them with commas."""
    if values is None:
        return ()
    if isinstance(values, str):
        values = [values]
    names: set[str] = set()
    for raw in values:
        if not isinstance(raw, str):
            raise BadInput(f"{what} must be text, not {raw!r}")
        if not raw.replace(",", " ").strip():
            raise BadInput(
                f"a {what} name is empty ({raw!r})",
                hint=f"name the {what}, or leave the option out",
            )
        for part in raw.split(","):
            name = part.strip()
            if name and not _NAME_RE.fullmatch(name):
                raise BadInput(
                    f"{what} name {name!r} is not valid",
                    hint="use 1-64 letters, digits or _ . + : / -, starting with a letter or digit",
                )
            if name:
                names.add(name)
    if len(names) > MAX_NAMES:
        raise BadInput(
            f"at most {MAX_NAMES} {what}s may be given, not {len(names)}",
            hint=f"name the few {what}s the work needs; a broad {what} name covers many",
        )
    return tuple(sorted(names))


def parse_duration(value: object, what: str = "duration") -> float:
    """Seconds from 90, 1.5, "90", "90s", "5m", "2h", "1d", "250ms", or units together:
    "1h30m", "2d 4h"."""
    if isinstance(value, bool):
        raise BadInput(f"{what} must be a duration, not {value!r}")
    if isinstance(value, int) and abs(value) > 2**53:  # float() would overflow or round
        raise BadInput(f"{what} {value!r} is far past any duration", hint="e.g. 90s, 5m or 2h")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION_RE.match(value)):
        seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2)]
    elif isinstance(value, str) and _DURATION_PARTS.match(value):
        parts = _DURATION_PART.findall(value)
        seconds = sum(float(number) * _DURATION_UNITS[unit] for number, unit in parts)
    else:
        raise BadInput(
            f"{what} {value!r} is not a duration",
            hint="give seconds (90) or numbers with units: 250ms, 90s, 5m, 1h30m, 2d",
        )
    if not math.isfinite(seconds) or seconds < 0:
        raise BadInput(f"{what} must be zero or more seconds, not {value!r}")
    return seconds


def parse_size(value: object, what: str = "size") -> int:
    """Bytes from 1048576, "1048576", "512K", "512KiB", "1M", "1MB", "1MiB": K, M and G
    count in 1024s, whichever way they are written."""
    if isinstance(value, bool):
        raise BadInput(f"{what} must be a size in bytes, not {value!r}")
    if isinstance(value, int):
        number = float(min(max(value, -1), 2**54))  # far past any cap either way
    elif isinstance(value, float) and value.is_integer():
        number = value
    elif isinstance(value, str) and (match := _SIZE_RE.match(value)):
        unit = match.group(2).lower() if match.group(2) else None
        number = float(match.group(1)) * _SIZE_UNITS[unit]
    else:
        raise BadInput(
            f"{what} {value!r} is not a size",
            hint="give bytes (1048576) or a number with K, M or G (512K, 1MiB, 8M)",
        )
    if not math.isfinite(number) or number < 0 or number > 2**53:
        raise BadInput(f"{what} must be from 0 to {2**53:,} bytes, not {value!r}")
    if not number.is_integer():
        raise BadInput(f"{what} must be a whole number of bytes, not {value!r}")
    return int(number)


def json_size(value: object) -> int:
    """How many bytes ``value`` takes as compact JSON in UTF-8: what a size cap measures."""
    if value is None:
        return 0
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return len(text.encode("utf-8", "surrogatepass"))


def check_json(value: object, what: str) -> object:
    """Make sure ``value`` can be stored as JSON on every store (``text.check_storable``);
    return it unchanged."""
    if value is None or isinstance(value, int | bool):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    check_storable(what, value)
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise BadInput(f"{what} must be JSON-serializable: {exc}") from None
    return value


#: The largest id a store can hold (a signed 64-bit integer).
MAX_ID = 2**63 - 1


def as_task_ids(values: Sequence[int] | int | str | None, what: str) -> tuple[int, ...]:
    """Task ids from user input: one id, a list, or text like "12" or "12, 14"."""
    if values is None:
        return ()
    items: Sequence[object]
    if isinstance(values, str):
        items = values.replace(",", " ").split()
    elif isinstance(values, int):
        items = [values]
    else:
        items = values
    out: list[int] = []
    for value in items:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            try:
                number = int(str(value).strip().lstrip("#"))
            except ValueError:
                raise BadInput(
                    f"{what} must list task ids (whole numbers), not {value!r}"
                ) from None
        if not 1 <= number <= MAX_ID:
            raise BadInput(f"{what}: {number} is not a task id (ids are whole numbers from 1)")
        out.append(number)
    return tuple(dict.fromkeys(out))


def check_count(value: object, what: str, low: int, high: int) -> int:
    """A whole number from ``low`` to ``high`` (never a bool, never unbounded)."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadInput(f"{what} must be a whole number from {low} to {high}, not {value!r}")
    return value


#: The most tasks of one concurrency group a limit may let be held at once.
MAX_GROUP_LIMIT = 1_000_000


def check_group(name: object) -> str:
    """A concurrency group's name: a name like a skill's or a domain's (``deploy``,
    ``github-api``), never text with control characters or spaces."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise BadInput(
            f"group name {name!r} is not valid",
            hint="use 1-64 letters, digits or _ . + : / -, starting with a letter or digit",
        )
    return name


def check_group_limit(value: object) -> int:
    """A group's limit: how many of its tasks may be held at once, at least 1 (a group
    nobody may run is a paused one: cancel its tasks, or pause the agents, instead)."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_GROUP_LIMIT:
        raise BadInput(
            f"a group's max must be a whole number from 1 to {MAX_GROUP_LIMIT}, not {value!r}",
            hint="e.g. --max 1 for one at a time; `shoal group clear NAME` lifts the limit",
        )
    return value


YEAR = 365 * 86400.0


def check_wait(value: float | str) -> float:
    """How long a claim may wait for work: a duration of at most ``MAX_DURATION`` (a
    longer one would never end, and past 2**53 seconds the deadline stops moving)."""
    seconds = parse_duration(value, "wait")
    if seconds > MAX_DURATION:
        raise BadInput(f"wait must be at most ten years, not {value!r}", hint="e.g. 30s or 5m")
    return seconds


def positive_duration(value: float | str | None, what: str, most: float = YEAR) -> float | None:
    """Seconds above zero and at most ``most`` (a year unless said), or None for None."""
    if value is None:
        return None
    seconds = parse_duration(value, what)
    if not 0 < seconds <= most:
        raise BadInput(
            f"{what} must be more than zero and at most {_days(most)}, not {value!r}",
            hint="e.g. 600, 10m or 2h",
        )
    return seconds


def _days(seconds: float) -> str:
    return "a year" if seconds == YEAR else f"{seconds / 86400:g} days"


def check_lease(lease: Lease) -> Lease:
    """A lease from outside: a real task id and a token of the right shape."""
    if not isinstance(lease, Lease):
        raise BadInput(f"expected a Lease, not {type(lease).__name__}")
    as_task_ids([lease.task_id], "lease task id")
    if not isinstance(lease.token, str) or not 0 < len(lease.token) <= 64:
        raise BadInput(
            "a lease token is the text `shoal claim` printed",
            hint="pass the token of your claim (--token or SHOAL_TOKEN)",
        )
    check_line("the lease token", lease.token)
    if lease.agent:
        check_agent_id(lease.agent)
    return lease


def check_result(value: object) -> object:
    """A task's result: text is a block (line breaks kept, control characters refused),
    anything else a JSON value every store can keep."""
    if isinstance(value, str):
        return check_block("result", value)
    return check_json(value, "result")


def check_text(value: object, what: str, limit: int, *, line: bool = False) -> str:
    """Text from outside, at most ``limit`` characters, holding nothing ``shoal.text``
    refuses: one line (``line``: a title, a key) or a block (a body, an error)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadInput(f"{what} must be text, not {type(value).__name__}")
    if len(value) > limit:
        raise BadInput(f"{what} is too long ({len(value)} characters; the limit is {limit})")
    return check_line(what, value) if line else check_block(what, value)


def check_n(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_BATCH:
        raise BadInput(
            f"n must be a whole number from 1 to {MAX_BATCH}, not {n!r}",
            hint="it is how many tasks to claim at once",
        )
    return n


def parse_state(state: TaskState | str) -> TaskState:
    try:
        return TaskState(state)
    except ValueError:
        names = ", ".join(s.value for s in TaskState)
        raise BadInput(f"there is no task state {state!r}", hint=f"use one of: {names}") from None


def parse_agent_status(status: AgentStatus | str) -> AgentStatus:
    try:
        return AgentStatus(status)
    except ValueError:
        names = ", ".join(s.value for s in AgentStatus)
        raise BadInput(
            f"there is no agent status {status!r}", hint=f"use one of: {names}"
        ) from None


def check_max_concurrent(value: object) -> int:
    """How many tasks an agent may hold at once: 1 to ``MAX_BATCH``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadInput(f"max_concurrent must be a whole number, not {value!r}")
    if not 1 <= value <= MAX_BATCH:
        raise BadInput(
            f"max_concurrent must be between 1 and {MAX_BATCH}, not {value}",
            hint="it is how many tasks this agent may hold at once",
        )
    return value


def check_worker_times(timeout: float | None, drain: float) -> None:
    """A worker's task timeout (None: no limit) must be above zero; its drain time (how
    long running tasks may finish when it stops) zero or more."""
    if timeout is not None and timeout <= 0:
        raise BadInput(f"the task timeout must be above 0 seconds, not {timeout:g}")
    if drain < 0:
        raise BadInput(f"the drain time must be 0 seconds or more, not {drain:g}")
