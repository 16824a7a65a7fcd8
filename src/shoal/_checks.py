"""Every check of user input that needs no store: bad input fails here, before any I/O.

``Fleet`` runs these first, so a refused call never opens a transaction. Each refusal is a
``BadInput`` that says what was wrong and how to fix it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from shoal.errors import BadInput
from shoal.model import (
    AgentStatus,
    Lease,
    NewTask,
    TaskState,
    as_task_ids,
    check_agent_id,
    check_count,
    check_json,
    normalize_names,
    parse_duration,
    parse_moment,
    parse_priority,
)

__all__ = [
    "MAX_BATCH",
    "POST_FIELDS",
    "check_lease",
    "check_n",
    "check_post",
    "check_text",
    "draft_of",
    "parse_agent_status",
    "parse_state",
    "positive_duration",
]

#: The most tasks one claim may take, and the most an agent may hold.
MAX_BATCH = 1000


def check_post(
    title: object,
    body: object,
    payload: Any,
    priority: int | str,
    skills: Iterable[str] | str | None,
    domain: str | None,
    to: str | None,
    after: Sequence[int] | None,
    parent: int | None,
    pinned: bool,
    expected_duration: float | str | None,
    lease_ttl: float | str | None,
    max_attempts: int | None,
    key: str | None,
    not_before: float | str | datetime | None = None,
    retry_delay: float | str | None = None,
) -> NewTask:
    """Every check of ``post`` that needs no store, so bad input fails before any I/O."""
    title_text = check_text(title, "title", 1000).strip()
    if not title_text:
        raise BadInput("a task needs a title", hint="say in a few words what is to be done")
    check_json(payload, "payload")
    domains = normalize_names([domain] if domain else None, "domain")
    if to is not None:
        check_agent_id(to)
    if pinned and to is None:
        raise BadInput("a pinned task needs an agent", hint="pass to=AGENT with pinned=True")
    if parent is not None:
        (parent,) = as_task_ids([parent], "parent")
    ttl = positive_duration(lease_ttl, "lease_ttl")
    expected = positive_duration(expected_duration, "expected_duration")
    if max_attempts is not None:
        check_count(max_attempts, "max_attempts", 1, 1_000_000)
    if key is not None:
        key = check_text(key, "key", 256)
    ready = parse_moment(not_before, "not_before") if not_before is not None else None
    delay = None
    if retry_delay is not None:
        delay = parse_duration(retry_delay, "retry_delay")
        if delay > YEAR:
            raise BadInput(f"retry_delay must be at most a year, not {retry_delay!r}")
    return NewTask(
        title=title_text,
        body=check_text(body, "body", 1_000_000),
        payload=payload,
        priority=parse_priority(priority),
        skills=normalize_names(skills, "skill"),
        domain=domains[0] if domains else None,
        state=TaskState.PENDING,
        agent=to,
        pinned=bool(pinned),
        parent=parent,
        key=key,
        max_attempts=max_attempts,
        lease_ttl=ttl,
        expected_duration=expected,
        waiting_on=0,
        created_at=0.0,
        pool_key=0.0,
        seq=0,
        after=as_task_ids(after, "after"),
        ready_at=ready,
        retry_delay=delay,
    )


POST_FIELDS = frozenset(
    [
        "title",
        "body",
        "payload",
        "priority",
        "skills",
        "domain",
        "to",
        "after",
        "parent",
        "pinned",
        "expected_duration",
        "lease_ttl",
        "max_attempts",
        "key",
        "not_before",
        "retry_delay",
    ]
)


def draft_of(spec: Mapping[str, Any], index: int) -> NewTask:
    """One ``post_many`` entry, checked like ``post``'s arguments."""
    if not isinstance(spec, Mapping) or "title" not in spec:
        raise BadInput(f"task {index} of the batch needs at least a title")
    unknown = sorted(set(spec) - POST_FIELDS)
    if unknown:
        raise BadInput(
            f"task {index} of the batch has unknown fields: {', '.join(unknown)}",
            hint=f"use post's arguments: {', '.join(sorted(POST_FIELDS))}",
        )
    return check_post(
        spec["title"],
        spec.get("body", ""),
        spec.get("payload"),
        spec.get("priority", 5),
        spec.get("skills"),
        spec.get("domain"),
        spec.get("to"),
        spec.get("after"),
        spec.get("parent"),
        spec.get("pinned", False),
        spec.get("expected_duration"),
        spec.get("lease_ttl"),
        spec.get("max_attempts"),
        spec.get("key"),
        spec.get("not_before"),
        spec.get("retry_delay"),
    )


YEAR = 365 * 86400.0


def positive_duration(value: float | str | None, what: str) -> float | None:
    if value is None:
        return None
    seconds = parse_duration(value, what)
    if not 0 < seconds <= YEAR:
        raise BadInput(
            f"{what} must be more than zero and at most a year, not {value!r}",
            hint="e.g. 600, 10m or 2h",
        )
    return seconds


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
    return lease


def check_text(value: object, what: str, limit: int) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadInput(f"{what} must be text, not {type(value).__name__}")
    if len(value) > limit:
        raise BadInput(f"{what} is too long ({len(value)} characters; the limit is {limit})")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BadInput(
            f"{what} is not valid text: it holds bytes that are not UTF-8",
            hint="send UTF-8 text (check the terminal's or the file's encoding)",
        ) from None
    return value


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
