"""The checks of a task's fields as agents and people give them: ``post`` and its batch
entries, a schedule's template, ``edit``'s changes, labels, and the fleet's size caps.

Apart from ``validation`` (ids, durations, counts: the words every verb reads) because a
task carries many fields, and each of them is checked the same way whichever face or verb
brought it in. Nothing here needs a store: bad input fails before any I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from shoal.errors import BadInput, KeyTaken, TooLarge
from shoal.limits import MAX_LEASE_TTL, MAX_SIZE
from shoal.model import NewTask, Task
from shoal.times import parse_moment
from shoal.validation import (
    YEAR,
    as_task_ids,
    check_agent_id,
    check_count,
    check_group,
    check_json,
    check_text,
    json_size,
    normalize_names,
    parse_duration,
    parse_priority,
    positive_duration,
)
from shoal.vocabulary import TaskState

__all__ = [
    "EDIT_FIELDS",
    "MAX_LABEL",
    "MAX_LABELS",
    "POST_DEFAULTS",
    "POST_FIELDS",
    "check_edit",
    "check_labels",
    "check_post",
    "check_sizes",
    "draft_of",
    "own_keyed",
]

#: How many labels a task may carry, and how long each may be.
MAX_LABELS, MAX_LABEL = 32, 64


def check_labels(values: Iterable[str] | str | None) -> tuple[str, ...]:
    """Labels as a sorted, de-duplicated tuple. Looser than skill names (a GitHub label
    like "good first issue" holds spaces): each is one line of 1-64 characters."""
    if values is None:
        return ()
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, Iterable):
        raise BadInput(f"labels must be a list of text, not {values!r}")
    names: set[str] = set()
    for raw in values:
        name = check_text(raw, "label", MAX_LABEL, line=True).strip()
        if not name:
            raise BadInput("a label is empty", hint="name the label, or leave it out")
        names.add(name)
    if len(names) > MAX_LABELS:
        raise BadInput(f"a task carries at most {MAX_LABELS} labels, not {len(names)}")
    return tuple(sorted(names))


#: What ``Fleet.edit`` may change: what a task says and how it is ranked, never where it is
#: or how it runs (its queue, lease, attempts, dependencies, payload).
EDIT_FIELDS = (
    "title",
    "body",
    "priority",
    "skills",
    "domain",
    "labels",
    "expected_duration",
)


def check_edit(changes: Mapping[str, Any]) -> dict[str, Any]:
    """``Fleet.edit``'s changes, checked as ``post`` checks them: each name one of
    ``EDIT_FIELDS``, at least one given. None clears a domain or an expected duration."""
    unknown = sorted(set(changes) - set(EDIT_FIELDS))
    if unknown:
        raise BadInput(
            f"a task's {', '.join(unknown)} cannot be edited",
            hint=f"edit any of: {', '.join(EDIT_FIELDS)}",
        )
    if not changes:
        raise BadInput("nothing to change", hint=f"give one or more of: {', '.join(EDIT_FIELDS)}")
    checked: dict[str, Any] = {}
    for name, value in changes.items():
        if name == "title":
            checked[name] = check_text(value, "title", 1000, line=True).strip()
            if not checked[name]:
                raise BadInput("a task needs a title", hint="say in a few words what is to be done")
        elif name == "body":
            checked[name] = check_text(value, "body", MAX_SIZE)
        elif name == "priority":
            checked[name] = parse_priority(value)
        elif name == "skills":
            checked[name] = normalize_names(value, "skill")
        elif name == "domain":
            domains = normalize_names(None if value in (None, "") else [value], "domain")
            checked[name] = domains[0] if domains else None
        elif name == "labels":
            checked[name] = check_labels(value)
        else:
            checked[name] = positive_duration(value, "expected_duration")
    return checked


def check_sizes(draft: NewTask, max_payload: int, max_body: int, where: str = "") -> NewTask:
    """``TooLarge`` unless the task's payload (as JSON) and body (UTF-8) fit the fleet's
    caps (the settings ``max_payload_bytes`` and ``max_body_bytes``). ``where`` names the
    task in a batch ("task 3 of the batch: ")."""
    body = len(draft.body.encode("utf-8", "surrogatepass"))
    if body > max_body:
        raise TooLarge(
            f"{where}body is {body:,} bytes; this fleet takes at most {max_body:,} "
            "(max_body_bytes)",
            hint="put the text in a file and name it in the body, or raise the cap "
            "(`shoal config set max_body_bytes 4MiB`)",
        )
    if draft.payload is not None:
        payload = json_size(draft.payload)
        if payload > max_payload:
            raise TooLarge(
                f"{where}payload is {payload:,} bytes as JSON; this fleet takes at most "
                f"{max_payload:,} (max_payload_bytes)",
                hint="keep large data elsewhere (a file, a URL) and put where it is in the "
                "payload, or raise the cap (`shoal config set max_payload_bytes 4MiB`)",
            )
    return draft


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
    group: str | None = None,
    labels: Iterable[str] | str | None = None,
    posted_by: str | None = None,
) -> NewTask:
    """Every check of ``post`` that needs no store, so bad input fails before any I/O."""
    title_text = check_text(title, "title", 1000, line=True).strip()
    if not title_text:
        raise BadInput("a task needs a title", hint="say in a few words what is to be done")
    check_json(payload, "payload")
    domains = normalize_names([domain] if domain is not None else None, "domain")
    if to is not None:
        check_agent_id(to)
    if posted_by is not None:
        check_agent_id(posted_by)
    if pinned and to is None:
        raise BadInput("a pinned task needs an agent", hint="pass to=AGENT with pinned=True")
    if parent is not None:
        (parent,) = as_task_ids([parent], "parent")
    ttl = positive_duration(lease_ttl, "lease_ttl", MAX_LEASE_TTL)
    expected = positive_duration(expected_duration, "expected_duration")
    if max_attempts is not None:
        check_count(max_attempts, "max_attempts", 1, 1_000_000)
    if key is not None:
        key = check_text(key, "key", 256, line=True)
    ready = parse_moment(not_before, "not_before") if not_before is not None else None
    delay = None
    if retry_delay is not None:
        delay = parse_duration(retry_delay, "retry_delay")
        if delay > YEAR:
            raise BadInput(f"retry_delay must be at most a year, not {retry_delay!r}")
    return NewTask(
        title=title_text,
        body=check_text(body, "body", MAX_SIZE),
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
        group=None if group is None else check_group(group),
        labels=check_labels(labels),
        posted_by=posted_by,
    )


#: ``post``'s defaults (``check_post``'s arguments but the title), for the callers that
#: hold a task's fields in a mapping: ``Fleet.post_new`` and a schedule's template.
POST_DEFAULTS: dict[str, Any] = {
    "body": "",
    "payload": None,
    "priority": 5,
    "skills": None,
    "domain": None,
    "to": None,
    "after": None,
    "parent": None,
    "pinned": False,
    "expected_duration": None,
    "lease_ttl": None,
    "max_attempts": None,
    "key": None,
    "not_before": None,
    "retry_delay": None,
    "group": None,
    "labels": None,
    "posted_by": None,
}


#: What a caller may give ``post`` (and a batch entry): its arguments but the poster, which
#: ``Fleet`` sets from who is acting, never from what an agent wrote.
POST_FIELDS = frozenset({"title", *POST_DEFAULTS}) - {"posted_by"}


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
    return check_post(**{**POST_DEFAULTS, **spec})


def own_keyed(existing: Task, posted_by: str | None) -> Task:
    """``existing``, the task a post's key names, if the same poster posted it: the same
    agent (``posted_by``, recorded by the agent faces), or a person both times (no agent).
    Otherwise ``KeyTaken``: an agent that posted first under a key someone else will use --
    an imported issue's (``beads:bd-12``), a release's -- would have its task handed back
    in place of theirs, its text standing in for their work (docs/SECURITY.md, "Untrusted
    text"). ``Fleet.post``, ``post_many`` and the imports (a person's, which look their
    keys up first) ask it."""
    if existing.posted_by == posted_by:
        return existing
    holder = f"agent {existing.posted_by}" if existing.posted_by else "a person (no agent)"
    raise KeyTaken(
        f"key {existing.key!r} names task {existing.id}, which {holder} posted; a key gives "
        "back only the poster's own task, so nothing was added",
        hint=f"read task {existing.id} (`shoal show {existing.id}`) before trusting it; post "
        "under another key",
    )
