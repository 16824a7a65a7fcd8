"""Posting an import, and following its source when it is imported again.

``importing`` reads a file into checked entries, writing nothing; this writes them. A first
import posts every task, each after the tasks it waits for (one ``Fleet.post_many`` per
level of the dependency order). Importing a beads export or a GitHub issue list again
follows the source (``Batch.follows``):

- an issue closed (or deleted) there cancels its task, if that has not finished, with a
  note saying so; the tasks waiting on it stop waiting (``Fleet.cancel(met=True)``), as an
  issue's dependents do in beads when it closes;
- an issue changed there updates its task, if that has not finished: title, body,
  priority, skills, domain, labels and expected duration, as the source has them now
  (``Fleet.edit``: one ``edited`` event); a held task keeps its skills and domain, which
  chose its holder, and takes the rest;
- a new issue is added, to its assignee's queue if that agent is present and can do it.

Each step is its own transaction; a file imported twice changes nothing the second time.
The summary says what happened: added, updated, closed, already there, skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shoal import policy
from shoal.errors import BadInput, InvalidTransition, ShoalError
from shoal.faces.importing import Batch, Closing, Entry, levels, nothing_added, parse_jsonl
from shoal.fleet import Fleet
from shoal.model import Task, TaskState
from shoal.settings import Settings
from shoal.task_checks import EDIT_FIELDS, check_edit, check_sizes, draft_of, own_keyed

__all__ = ["ImportReport", "import_jsonl", "post_entries"]

#: What an editable field is when an entry does not give it.
_UNSET: Mapping[str, Any] = {
    "body": "",
    "priority": 5,
    "skills": (),
    "domain": None,
    "labels": (),
    "expected_duration": None,
}


@dataclass(frozen=True)
class ImportReport:
    """What an import did: the ids it added, updated and closed, the ids its keys named
    that it left as they were, the closed issues it had no open task for (skipped), and
    the blocked issues it held back."""

    added: tuple[int, ...]
    existing: tuple[int, ...]
    skipped: int = 0
    updated: tuple[int, ...] = ()
    closed: tuple[int, ...] = ()
    held: int = 0
    #: The import followed its source (beads, GitHub): the message says updated and closed.
    follows: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "added": list(self.added),
            "updated": list(self.updated),
            "closed": list(self.closed),
            "existing": list(self.existing),
            "skipped": self.skipped,
            "held": self.held,
        }

    def message(self) -> str:
        """One line for people: "12 tasks: 1 added, 2 updated, 1 closed, 8 already there"."""
        total = len(self.added) + len(self.updated) + len(self.closed) + len(self.existing)
        if not total and not self.skipped and not self.held:
            return "the file holds no tasks; nothing changed"
        words = f"{total} task{_s(total)}: {len(self.added)} added, "
        if self.follows:
            words += f"{len(self.updated)} updated, {len(self.closed)} closed, "
        words += f"{len(self.existing)} already there"
        if self.skipped:
            words += f"; {self.skipped} closed issue{_s(self.skipped)} skipped"
        if self.held:
            words += f"; {self.held} blocked issue{_s(self.held)} held back (nothing to wait for)"
        if not (self.added or self.updated or self.closed):
            words += " (nothing changed)"
        return words


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def post_entries(fleet: Fleet, batch: Batch) -> ImportReport:
    """Post the tasks of ``batch`` not already in ``fleet`` (by key), each after the tasks
    it depends on; refuse the whole file, before writing, if a dependency is unknown or
    will never finish. A batch that follows its source also closes and updates the tasks
    an earlier import added."""
    found = {e.key: task for e in batch.entries if (task := fleet.by_key(e.key)) is not None}
    for task in found.values():  # an import is a person's: its keys are not an agent's
        own_keyed(task, None)
    held = _held([e for e in batch.entries if e.key not in found], batch.blocked)
    new = [e for e in batch.entries if e.key not in found and e.key not in held]
    with nothing_added():
        outside = _outside(fleet, batch.entries)
        _refuse_ended(new, {**found, **outside})
        _refuse_too_large(new, fleet.settings())
    closed, skipped = _close(fleet, batch.closing) if batch.follows else ((), 0)
    updated = _update(fleet, batch.entries, found) if batch.follows else {}
    ids = {key: task.id for key, task in {**found, **outside}.items()}
    added: dict[str, int] = {}
    for level in levels(new, frozenset(found)):
        specs = [{**_routed(fleet, e), "after": [ids[d] for d in e.depends_on]} for e in level]
        for entry, task_id in zip(level, fleet.post_many(specs), strict=True):
            ids[entry.key] = added[entry.key] = task_id
    return ImportReport(
        added=tuple(added[e.key] for e in new),
        existing=tuple(
            found[e.key].id for e in batch.entries if e.key in found and e.key not in updated
        ),
        skipped=skipped,
        updated=tuple(updated.values()),
        closed=closed,
        held=len(held),
        follows=batch.follows,
    )


def _held(new: Sequence[Entry], blocked: frozenset[str]) -> set[str]:
    """The new entries held back: those blocked on nothing the file names (blocked for a
    reason the source does not record), and -- as they would wait on one -- every new
    entry that waits on one, directly or not. A task already posted is not held back."""
    held = {e.key for e in new if e.key in blocked}
    while more := {e.key for e in new if e.key not in held and held & set(e.depends_on)}:
        held |= more
    return held


def _close(fleet: Fleet, closing: Sequence[Closing]) -> tuple[tuple[int, ...], int]:
    """Cancel the unfinished tasks of closed issues, with their notes; the rest (never
    imported, or already finished) are skipped."""
    closed: list[int] = []
    skipped = 0
    for key, note in closing:
        task = fleet.by_key(key)
        if task is None or task.state.finished:
            skipped += 1
            continue
        try:
            closed.append(fleet.cancel(task.id, note=note, met=True).id)
        except InvalidTransition:  # it finished meanwhile
            skipped += 1
    return tuple(closed), skipped


def _update(fleet: Fleet, entries: Sequence[Entry], found: Mapping[str, Task]) -> dict[str, int]:
    """Edit each unfinished task whose issue changed, to what its entry says now; a held
    task keeps its routing fields. Returns the ids edited, by key."""
    updated: dict[str, int] = {}
    for entry in entries:
        task = found.get(entry.key)
        if task is None or task.state.finished:
            continue
        wanted = check_edit({n: entry.fields.get(n, _UNSET.get(n)) for n in EDIT_FIELDS})
        changes = {n: v for n, v in wanted.items() if getattr(task, n) != v}
        if task.state is TaskState.CLAIMED:
            changes = {n: v for n, v in changes.items() if n not in policy.ROUTING_FIELDS}
        if changes:
            try:
                updated[entry.key] = fleet.edit(task.id, **changes).id
            except InvalidTransition:  # it was claimed or finished meanwhile: next time
                continue
    return updated


def _routed(fleet: Fleet, entry: Entry) -> dict[str, Any]:
    """An entry's fields, sent to its assignee's queue if that agent is in the fleet,
    present, and has the skills (else to the pool: nobody would be there to take it)."""
    if entry.assignee is None:
        return dict(entry.fields)
    try:
        agent = fleet.agent(entry.assignee)
    except ShoalError:  # not an agent of this fleet (or not an agent id at all)
        return dict(entry.fields)
    skills = draft_of({**entry.fields, "after": None}, 0).skills
    if policy.is_present(agent) and policy.can_do(agent.skills, skills):
        return {**entry.fields, "to": agent.id}
    return dict(entry.fields)


def _outside(fleet: Fleet, entries: Sequence[Entry]) -> dict[str, Task]:
    """The tasks that keys depended on but not in the file name; unknown ones are refused."""
    in_file = {e.key for e in entries}
    tasks: dict[str, Task] = {}
    for entry in entries:
        for key in entry.depends_on:
            if key in in_file or key in tasks:
                continue
            task = fleet.by_key(key)
            if task is None:
                raise BadInput(
                    f"{entry.where}: depends on {key!r}, which is neither in this file "
                    "nor in the fleet",
                    hint="add that task too, or drop it from the dependencies",
                )
            tasks[key] = task
    return tasks


def _refuse_ended(entries: Sequence[Entry], tasks: Mapping[str, Task]) -> None:
    """Waiting on a dead or cancelled task would wait forever: refuse it up front, not
    half-way through the levels."""
    ended = (TaskState.DEAD, TaskState.CANCELLED)
    for entry in entries:
        for key in entry.depends_on:
            task = tasks.get(key)
            if task is not None and task.state in ended:
                raise BadInput(
                    f"{entry.where}: depends on {key!r}, task {task.id}, which is "
                    f"{task.state.value} and will never finish",
                    hint=f"retry it first (`shoal retry {task.id}`), or drop the dependency",
                )


def _refuse_too_large(entries: Sequence[Entry], settings: Settings) -> None:
    """A payload or body past the fleet's caps would be refused by its level's post, after
    the earlier levels were added: refuse it up front instead."""
    for entry in entries:
        draft = draft_of({**entry.fields, "after": None}, 0)
        caps = (settings.max_payload_bytes, settings.max_body_bytes)
        check_sizes(draft, *caps, where=f"{entry.where}: ")


def import_jsonl(fleet: Fleet, text: str) -> ImportReport:
    """``shoal add --file``: post the tasks of shoal JSON Lines ``text``."""
    return post_entries(fleet, parse_jsonl(text))
