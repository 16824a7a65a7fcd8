"""Importing tasks from a file: shoal's own JSON Lines, a beads export, a GitHub issue list.

People already keep their tasks somewhere; moving them into a fleet by hand loses the
priorities and the dependencies. Reading a file is pure (text in, checked entries out), so
every line is judged before anything is written: a bad line names its line number and
nothing of the file is added. ``following.post_entries`` is the one function that writes
(through ``Fleet.post_many``, ``edit`` and ``cancel``).

**Idempotent by key.** Every imported task has an idempotency key, so importing the same
file again adds nothing and says so ("12 tasks: 0 added, 0 updated, 0 closed, 12 already
there"):

- shoal JSON Lines: the line's own ``key``; a line without one gets ``jsonl:<hash>`` of its
  content (the same line, the same task).
- beads: ``beads:<id>``.  GitHub: ``github:<number>``.

**shoal JSON Lines** (``shoal add --file``): one JSON object per line with ``title``
(required), ``priority`` (1-9 or critical/high/medium/low), ``domain``, ``skills``, ``key``,
``depends_on`` (keys of tasks in the same file or already in the fleet),
``expected_duration``, ``not_before``, ``body``, ``payload``, ``lease_ttl``,
``max_attempts``, ``retry_delay``, ``labels``, ``group`` (how many of its kind may run at
once: ``shoal group set``). Any other field is a bad line. Blank lines
are ignored.

**beads** (the JSONL of ``bd export``, ``.beads/issues.jsonl``):

- priority 0 -> 1, 1 -> 2, 2 -> 5 (beads' default, shoal's), 3 -> 7, 4 -> 9;
- label ``domain:X`` -> domain X (at most one), ``skill:Y`` -> skill Y; every label is the
  task's label too (``shoal list --label``), and is kept in the payload;
- ``description`` -> body, followed by design, acceptance criteria and notes if present;
  ``estimated_minutes`` -> expected_duration;
- dependencies of type ``blocks`` -> ``after``: the task waits for the issue it depends
  on. ``parent-child``: the parent (an epic) waits for its open children -- blocked, so not
  claimable, until they are done; then it is ready as the epic's wrap-up. Other types
  (related, discovered-from) do not order work and are left out;
- ``assignee`` (an issue ``in_progress``, or open): the task goes to that agent's queue if
  the agent is in the fleet, present and able to do it (else to the pool); others may still
  steal it, as any queued work;
- ``blocked``: the task waits for its open ``blocks`` dependencies; blocked on nothing in
  the file (blocked for a reason beads does not record), it is held back -- not imported,
  nor anything that waits on it -- until an import finds it unblocked;
- closed and deleted (tombstone) issues are not imported; a dependency on one is already
  met. One that an earlier import added is closed (``shoal import`` follows its source).

**GitHub** (the JSON array of ``gh issue list --json number,title,body,labels``):

- label ``priority:critical|high|medium|low`` -> 1, 2, 5, 8 (shoal's priority names) and
  ``P0`` .. ``P3`` -> 1, 2, 5, 8; the most urgent wins; no such label -> 5;
- ``domain:X`` and ``skill:Y`` as for beads; labels and the issue's url kept in the payload;
- an issue whose ``state`` (if listed: ``--state all --json ...,state``) is closed is not
  imported; one an earlier import added is closed.

**Following the source** (beads and GitHub, ``following``): importing again updates what
changed at the source in the tasks not finished (title, body, priority, skills, domain,
labels, expected duration -- a held task keeps its skills and domain), and cancels, with
a note, the tasks whose issue was closed; what waits on them stops waiting, as beads'
dependents do. What it does not follow: dependencies and children added after a task was
first imported (a task's dependencies are set when it is posted), and a reopened issue
whose task ended (retry it).

Tasks that depend on others in the same file are posted after them: one ``post_many``
(one transaction) per level of the dependency order. Everything that can be checked is
checked before the first: fields, keys, cycles, unknown and ended dependencies.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

from shoal.errors import BadInput
from shoal.task_checks import draft_of
from shoal.validation import PRIORITY_NAMES

__all__ = [
    "BEADS_PRIORITY",
    "GITHUB_PRIORITY",
    "JSONL_FIELDS",
    "Batch",
    "Closing",
    "Entry",
    "levels",
    "nothing_added",
    "parse_beads",
    "parse_github",
    "parse_jsonl",
]

#: The fields a line of shoal JSON Lines may hold.
JSONL_FIELDS = frozenset(
    [
        "title",
        "body",
        "payload",
        "priority",
        "skills",
        "domain",
        "key",
        "depends_on",
        "expected_duration",
        "not_before",
        "lease_ttl",
        "max_attempts",
        "retry_delay",
        "labels",
        "group",
    ]
)
#: beads priority (0 most urgent .. 4) -> shoal priority (1 most urgent .. 9).
BEADS_PRIORITY: Mapping[int, int] = {0: 1, 1: 2, 2: 5, 3: 7, 4: 9}
#: GitHub priority labels (lower-cased) -> shoal priority.
GITHUB_PRIORITY: Mapping[str, int] = {
    **{f"priority:{name}": number for name, number in PRIORITY_NAMES.items()},
    **{f"p{i}": number for i, number in enumerate(PRIORITY_NAMES.values())},
}
_BEADS_DONE = frozenset(["closed", "tombstone"])
_BEADS_BLOCKING = frozenset(["blocks", ""])


@dataclass(frozen=True)
class Entry:
    """One task read from a file, checked: ``fields`` are ``post``'s arguments (the key
    among them, never ``after``), ``depends_on`` the keys it waits for."""

    where: str
    key: str
    fields: Mapping[str, Any]
    depends_on: tuple[str, ...] = ()
    #: The agent the issue is assigned to: its queue, if it can take the task there.
    assignee: str | None = None


class Closing(NamedTuple):
    """A closed (or deleted) issue: its key, and the note its task is cancelled with."""

    key: str
    note: str


@dataclass(frozen=True)
class Batch:
    """A file's tasks, in file order; its closed issues; the keys of the issues blocked on
    nothing the file names (not posted, nor what waits on them: ``following.held``);
    whether a re-import follows the source (updates and closes tasks: beads and GitHub,
    not shoal's own JSON Lines)."""

    entries: tuple[Entry, ...]
    closing: tuple[Closing, ...] = ()
    blocked: frozenset[str] = frozenset()
    follows: bool = False


# ---------------------------------------------------------------------- reading


def parse_jsonl(text: str) -> Batch:
    """shoal's own JSON Lines, checked line by line."""
    with nothing_added():
        return _parse_jsonl(text)


def parse_beads(text: str) -> Batch:
    """The JSONL of ``bd export``: open issues become tasks, closed ones close theirs."""
    with nothing_added():
        return _parse_beads(text)


def parse_github(text: str) -> Batch:
    """The JSON array of ``gh issue list --json number,title,body,labels[,state]``."""
    with nothing_added():
        return _parse_github(text)


@contextmanager
def nothing_added() -> Iterator[None]:
    """A refusal while reading or checking a file says that none of it was added."""
    try:
        yield
    except BadInput as exc:
        hint = f"{exc.hint}; nothing of the file was added" if exc.hint else None
        raise type(exc)(exc.message, hint=hint or "nothing of the file was added") from None


def _parse_jsonl(text: str) -> Batch:
    entries = [_jsonl_entry(f"line {n}", obj) for n, obj in _objects(text)]
    return _checked(Batch(tuple(entries)))


def _parse_beads(text: str) -> Batch:
    issues = list(_objects(text))
    for n, issue in issues:
        _require_text(f"line {n}", issue, "id")
    done = {issue["id"]: issue for _n, issue in issues if issue.get("status") in _BEADS_DONE}
    children = _beads_children(issues)
    entries: list[Entry] = []
    held: set[str] = set()  # blocked on nothing the file names
    for n, issue in issues:
        if issue["id"] in done:
            continue
        where = f"line {n} ({issue['id']})"
        entry = _beads_entry(where, issue, done, children.get(issue["id"], ()))
        entries.append(entry)
        if issue.get("status") == "blocked" and not entry.depends_on:
            held.add(entry.key)
    closing = tuple(Closing(f"beads:{key}", _beads_note(issue)) for key, issue in done.items())
    return _checked(Batch(tuple(entries), closing, frozenset(held), follows=True))


def _beads_note(issue: Mapping[str, Any]) -> str:
    """The note a closed issue's task is cancelled with: how, and beads' reason if any."""
    if issue.get("status") == "tombstone":
        return f"deleted in beads ({issue['id']})"
    reason = issue.get("close_reason")
    said = f": {' '.join(reason.split())[:200]}" if isinstance(reason, str) and reason else ""
    return f"closed in beads ({issue['id']}){said}"


def _parse_github(text: str) -> Batch:
    issues = list(_array_items(text))
    entries: list[Entry] = []
    closing: list[Closing] = []
    for n, issue in issues:
        number = issue.get("number")
        if isinstance(number, bool) or not isinstance(number, int):
            raise BadInput(f"line {n}: an issue needs its number", hint=_GH_HINT)
        if str(issue.get("state", "open")).lower() == "closed":
            closing.append(Closing(f"github:{number}", f"closed on GitHub (#{number})"))
        else:
            entries.append(_github_entry(f"line {n} (#{number})", issue, number))
    return _checked(Batch(tuple(entries), tuple(closing), follows=True))


_GH_HINT = (
    "export with `gh issue list --state all --json number,title,body,labels,state > issues.json`"
)


def _objects(text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each non-blank line's JSON object, with its line number."""
    for n, line in enumerate(text.lstrip("\ufeff").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BadInput(
                f"line {n}: not valid JSON: {exc.msg} at column {exc.colno}",
                hint="each line must be one JSON object",
            ) from None
        if not isinstance(obj, dict):
            raise BadInput(f"line {n}: expected a JSON object, got {type(obj).__name__}")
        yield n, obj


def _array_items(text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each object of a JSON array, with the line it starts on (so errors can name it)."""
    text = text.lstrip("\ufeff")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(f"line {exc.lineno}: not valid JSON: {exc.msg}", hint=_GH_HINT) from None
    if not isinstance(data, list):
        raise BadInput("expected a JSON array of issues", hint=_GH_HINT)
    decoder, pos = json.JSONDecoder(), text.index("[") + 1
    for item in data:
        pos = _skip_separators(text, pos)
        line = text.count("\n", 0, pos) + 1
        _value, pos = decoder.raw_decode(text, pos)
        if not isinstance(item, dict):
            raise BadInput(f"line {line}: expected an issue object, got {type(item).__name__}")
        yield line, item


def _skip_separators(text: str, pos: int) -> int:
    while pos < len(text) and (text[pos].isspace() or text[pos] == ","):
        pos += 1
    return pos


# ---------------------------------------------------------------------- mapping


def _jsonl_entry(where: str, obj: dict[str, Any]) -> Entry:
    unknown = sorted(set(obj) - JSONL_FIELDS)
    if unknown:
        raise BadInput(
            f"{where}: unknown field{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}",
            hint=f"a line may hold: {', '.join(sorted(JSONL_FIELDS))}",
        )
    if "title" not in obj:
        raise BadInput(f"{where}: a task needs a title", hint='e.g. {"title": "fix the parser"}')
    fields = {k: v for k, v in obj.items() if k != "depends_on"}
    if fields.get("key") is None:
        digest = hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()
        fields["key"] = f"jsonl:{digest[:20]}"
    return Entry(where, fields["key"], fields, _keys(where, obj.get("depends_on")))


def _keys(where: str, value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(k, str) and k for k in value):
        raise BadInput(
            f"{where}: depends_on must be a list of keys",
            hint='e.g. "depends_on": ["schema", "api"]',
        )
    return tuple(dict.fromkeys(value))


def _beads_entry(
    where: str, issue: dict[str, Any], done: Mapping[str, Any], children: Sequence[str]
) -> Entry:
    _require_text(where, issue, "title")
    priority = issue.get("priority", 2)
    if (
        isinstance(priority, bool)
        or not isinstance(priority, int)
        or priority not in BEADS_PRIORITY
    ):
        raise BadInput(f"{where}: beads priority must be 0 to 4, not {priority!r}")
    labels = _label_names(where, issue.get("labels"))
    fields: dict[str, Any] = {
        "title": issue["title"],
        "body": _beads_body(where, issue),
        "priority": BEADS_PRIORITY[priority],
        "key": f"beads:{issue['id']}",
        "payload": {
            "source": "beads",
            "id": issue["id"],
            "issue_type": issue.get("issue_type"),
            "labels": labels,
        },
        "labels": labels,
        **_label_fields(where, labels),
    }
    minutes = issue.get("estimated_minutes")
    if isinstance(minutes, int) and not isinstance(minutes, bool) and minutes > 0:
        fields["expected_duration"] = minutes * 60.0
    waits = [*_beads_blockers(where, issue), *children]
    after = [f"beads:{d}" for d in waits if d not in done]
    assignee = issue.get("assignee")
    who = assignee.strip() if isinstance(assignee, str) and assignee.strip() else None
    return Entry(where, fields["key"], fields, tuple(dict.fromkeys(after)), who)


def _beads_children(issues: Sequence[tuple[int, dict[str, Any]]]) -> dict[str, list[str]]:
    """Each parent's children, by the ``parent-child`` dependencies listed on any issue
    (a child lists its parent as what it depends on)."""
    children: dict[str, list[str]] = {}
    for _n, issue in issues:
        deps = issue.get("dependencies")
        for dep in deps if isinstance(deps, list) else ():
            if isinstance(dep, dict) and str(dep.get("type")) == "parent-child":
                child, parent = dep.get("issue_id", issue["id"]), dep.get("depends_on_id")
                if isinstance(child, str) and isinstance(parent, str) and child != parent:
                    children.setdefault(parent, []).append(child)
    return children


def _beads_body(where: str, issue: dict[str, Any]) -> str:
    """The description, then design, acceptance criteria and notes under headings."""
    parts = [_text(where, issue, "description")]
    for name, heading in (
        ("design", "Design"),
        ("acceptance_criteria", "Acceptance criteria"),
        ("notes", "Notes"),
    ):
        if value := _text(where, issue, name):
            parts.append(f"## {heading}\n\n{value}")
    return "\n\n".join(p for p in parts if p)


def _beads_blockers(where: str, issue: dict[str, Any]) -> list[str]:
    """The ids this issue waits for: its ``blocks`` dependencies."""
    deps = issue.get("dependencies") or []
    if not isinstance(deps, list):
        raise BadInput(f"{where}: dependencies must be a list")
    blockers = []
    for dep in deps:
        if not isinstance(dep, dict) or not isinstance(dep.get("depends_on_id"), str):
            raise BadInput(f"{where}: a dependency needs its depends_on_id")
        if dep.get("issue_id", issue["id"]) != issue["id"]:
            continue  # another issue's dependency, listed here: not this one's wait
        if str(dep.get("type") or "") in _BEADS_BLOCKING:
            blockers.append(dep["depends_on_id"])
    return blockers


def _github_entry(where: str, issue: dict[str, Any], number: int) -> Entry:
    _require_text(where, issue, "title")
    labels = _label_names(where, issue.get("labels"))
    priorities = [GITHUB_PRIORITY[n.lower()] for n in labels if n.lower() in GITHUB_PRIORITY]
    payload: dict[str, Any] = {"source": "github", "number": number, "labels": labels}
    if isinstance(issue.get("url"), str):
        payload["url"] = issue["url"]
    fields: dict[str, Any] = {
        "title": issue["title"],
        "body": _text(where, issue, "body"),
        "priority": min(priorities, default=5),
        "key": f"github:{number}",
        "payload": payload,
        "labels": labels,
        **_label_fields(where, labels),
    }
    return Entry(where, fields["key"], fields)


def _label_names(where: str, labels: object) -> list[str]:
    """Label names: beads lists text, GitHub objects with a ``name``."""
    if labels is None:
        return []
    if not isinstance(labels, list):
        raise BadInput(f"{where}: labels must be a list")
    names = [label.get("name") if isinstance(label, dict) else label for label in labels]
    if not all(isinstance(name, str) for name in names):
        raise BadInput(f"{where}: each label must be text or an object with a name")
    return [str(name) for name in names]


def _label_fields(where: str, labels: Sequence[str]) -> dict[str, Any]:
    """``domain:X`` -> the domain (one at most), ``skill:Y`` -> the skills."""
    domains = [label.split(":", 1)[1].strip() for label in labels if label.startswith("domain:")]
    skills = [label.split(":", 1)[1].strip() for label in labels if label.startswith("skill:")]
    if len(set(domains)) > 1:
        raise BadInput(
            f"{where}: a task has one domain, not {', '.join(sorted(set(domains)))}",
            hint="keep one domain:X label on the issue",
        )
    fields: dict[str, Any] = {"skills": skills}
    if domains:
        fields["domain"] = domains[0]
    return fields


def _require_text(where: str, obj: dict[str, Any], name: str) -> None:
    if not isinstance(obj.get(name), str) or not obj[name].strip():
        raise BadInput(f"{where}: needs a {name}")


def _text(where: str, obj: dict[str, Any], name: str) -> str:
    value = obj.get(name)
    if value is not None and not isinstance(value, str):
        raise BadInput(f"{where}: {name} must be text")
    return value or ""


# ---------------------------------------------------------------------- checking


def _checked(batch: Batch) -> Batch:
    """Check every entry as ``post`` would, its key unique in the file, and no cycle."""
    first: dict[str, str] = {}
    for entry in batch.entries:
        try:
            draft_of({**entry.fields, "after": None}, 0)
        except BadInput as exc:
            raise type(exc)(f"{entry.where}: {exc.message}", hint=exc.hint) from None
        if entry.key in first:
            raise BadInput(
                f"{entry.where}: key {entry.key!r} was already used on {first[entry.key]}",
                hint="give each task its own key, or drop the repeated line",
            )
        first[entry.key] = entry.where
    levels(batch.entries, frozenset())
    return batch


def levels(entries: Sequence[Entry], known: frozenset[str]) -> list[list[Entry]]:
    """``entries`` in dependency order, as levels: each waits only for earlier levels, for
    keys in ``known`` or for keys outside the file. A cycle is a bad line."""
    in_file = {e.key for e in entries}
    placed, levels, left = set(known), [], list(entries)
    while left:
        level = [e for e in left if all(d in placed or d not in in_file for d in e.depends_on)]
        if not level:
            raise BadInput(
                f"{left[0].where}: depends_on forms a cycle among "
                f"{', '.join(repr(e.key) for e in left)}",
                hint="a task cannot wait, directly or not, for itself",
            )
        levels.append(level)
        placed |= {e.key for e in level}
        left = [e for e in left if e.key not in placed]
    return levels
