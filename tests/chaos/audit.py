"""The chaos suite's audit: after a run, read the whole fleet -- every task and every event --
and say whether it kept its promises, whatever was killed, restarted or starved of disk.

What it checks, each from the store alone (plus the posts the driver saw acknowledged):

* **Done exactly once.** No task has two ``completed`` events (a *duplicate*), and a task
  is ``done`` exactly when it has one.
* **Nothing lost.** Every acknowledged post is a task; every task the log speaks of exists;
  every task not done is *recoverable*: pending or blocked (live), or claimed under a lease
  that either runs or has run out (claimable again). A dead task is not lost (``shoal
  retry`` brings it back) but is counted.
* **The claim identity.** Every claim takes a waiting task, and a task waits once posted
  and again after each expiry, failure and release; so, from the log alone,
  ``claims = posted + expiries + failures + releases`` (minus what is still waiting at the
  end; plus retries, less cancellations of waiting tasks, which the chaos run makes none of).
* **The log agrees with the states.** Each task's events, replayed in order from
  ``posted``, are legal moves of its state machine and end in the state the task is in,
  held by the agent that claimed it last.

The functions are pure over the tasks and events so the planted-fault tests
(``test_audit.py``) can show each kind of fault is found.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from shoal import Fleet
from shoal.model import Event, Task

#: state -> event kind -> the state it moves to. An event kind missing from a state's row
#: is an illegal move there.
_MOVES: dict[str, dict[str, str]] = {
    "new": {"posted": "pending"},
    "pending": {
        "claimed": "claimed",
        "stolen": "claimed",
        "moved": "pending",  # a rebalance's "stolen" (by=rebalance) moves a queued task
        "returned": "pending",
        "retried": "pending",
        "cancelled": "cancelled",
    },
    "blocked": {
        "ready": "pending",
        "returned": "blocked",
        "cancelled": "cancelled",
        "retried": "pending",
    },
    "claimed": {
        "completed": "done",
        "failed": "pending",
        "expired": "pending",
        "released": "pending",
        "dead": "dead",
        "deferred": "blocked",
        "cancelled": "cancelled",
    },
    "done": {},
    "dead": {"retried": "pending"},
    "cancelled": {"retried": "pending"},
}
#: Event kinds that are about a task but do not move it.
_NOTES = {"stuck", "stalled"}


@dataclass
class Audit:
    """What the audit found: totals, and the problems by kind (empty when all is well)."""

    tasks: int = 0
    posted: int = 0
    done: int = 0
    waiting: int = 0
    claimed: int = 0
    dead: int = 0
    claims: int = 0
    expiries: int = 0
    failures: int = 0
    releases: int = 0
    completions: int = 0
    duplicates: list[int] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    inconsistent: list[str] = field(default_factory=list)
    identity: str = ""

    @property
    def ok(self) -> bool:
        return not (self.duplicates or self.lost or self.inconsistent or self.identity)

    def problems(self) -> list[str]:
        """Every problem, one line each."""
        found = [f"task {i} completed more than once" for i in self.duplicates]
        found += [f"lost: {why}" for why in self.lost]
        found += [f"inconsistent: {why}" for why in self.inconsistent]
        if self.identity:
            found.append(f"claim identity broken: {self.identity}")
        return found

    def totals(self) -> dict[str, Any]:
        return {
            "tasks": self.tasks,
            "posted": self.posted,
            "done": self.done,
            "waiting": self.waiting,
            "claimed": self.claimed,
            "dead": self.dead,
            "claims": self.claims,
            "expiries": self.expiries,
            "failures": self.failures,
            "releases": self.releases,
            "duplicates": len(self.duplicates),
            "lost": len(self.lost),
            "inconsistent": len(self.inconsistent),
        }


def read_fleet(fleet: Fleet, page: int = 50_000) -> tuple[list[Task], list[Event]]:
    """Every task and every event of ``fleet``, oldest first."""
    tasks: list[Task] = []
    before: int | None = None
    while True:
        batch = fleet.tasks(limit=page, before=before)
        tasks.extend(batch)
        if len(batch) < page:
            break
        before = batch[-1].id
    events: list[Event] = []
    since = 0
    while True:
        got = fleet.events(since, limit=page)
        events.extend(got)
        if len(got) < page:
            break
        since = got[-1].id
    return sorted(tasks, key=lambda t: t.id), events


def audit_fleet(fleet: Fleet, acknowledged: Iterable[str] = ()) -> Audit:
    """Audit a fleet as it is now; ``acknowledged`` are the keys of posts that succeeded."""
    tasks, events = read_fleet(fleet)
    return audit(tasks, events, acknowledged)


def audit(
    tasks: Sequence[Task], events: Sequence[Event], acknowledged: Iterable[str] = ()
) -> Audit:
    """The audit of a fleet's tasks and event log (module docstring)."""
    found = Audit(tasks=len(tasks))
    by_id = {task.id: task for task in tasks}
    history: dict[int, list[Event]] = {}
    for event in events:
        if event.task_id is not None:
            history.setdefault(event.task_id, []).append(event)
    _count(found, events)
    keys = {task.key for task in tasks if task.key is not None}
    found.lost += [f"the acknowledged post {key!r} is no task" for key in acknowledged
                   if key not in keys]  # fmt: skip
    found.lost += [f"task {i} has events but no longer exists" for i in sorted(history)
                   if i not in by_id]  # fmt: skip
    completed = Counter(e.task_id for e in events if e.kind == "completed")
    found.duplicates = sorted(i for i, n in completed.items() if i is not None and n > 1)
    for task in tasks:
        state = task.state.value
        found.done += state == "done"
        found.waiting += state in ("pending", "blocked")
        found.claimed += state == "claimed"
        found.dead += state == "dead"
        if state == "claimed" and task.lease_expires is None:
            found.lost.append(f"task {task.id} is claimed without a lease (never claimable)")
        if state == "cancelled":
            found.inconsistent.append(f"task {task.id} was cancelled (nobody cancels here)")
        _replay(found, task, history.get(task.id, []))
    expected = found.posted + found.expiries + found.failures + found.releases - found.waiting
    if found.claims != expected:
        found.identity = (
            f"{found.claims} claims, but posted {found.posted} + expiries {found.expiries} + "
            f"failures {found.failures} + releases {found.releases} - still waiting "
            f"{found.waiting} = {expected}"
        )
    return found


def _count(found: Audit, events: Sequence[Event]) -> None:
    """The fleet-wide counts of the claim identity, from the log."""
    for event in events:
        kind = _kind(event)
        if kind == "posted":
            found.posted += 1
        elif kind in ("claimed", "stolen"):
            found.claims += 1
        elif kind == "expired":
            found.expiries += 1
        elif kind == "failed":
            found.failures += 1
        elif kind == "released":
            found.releases += 1
        elif kind == "completed":
            found.completions += 1


def _kind(event: Event) -> str:
    """The event's kind as a move: a rebalance's ``stolen`` moves a queued task, it does
    not claim it."""
    if event.kind == "stolen" and (event.data or {}).get("by") == "rebalance":
        return "moved"
    return event.kind


def _replay(found: Audit, task: Task, events: Sequence[Event]) -> None:
    """Replay one task's events through the state machine; note the first illegal move, or
    a final state (or holder) that is not the task's."""
    state, holder = "new", None
    for event in events:
        kind = _kind(event)
        nxt = _MOVES[state].get(kind)
        if nxt is None and kind in _NOTES:
            continue
        if nxt is None:
            found.inconsistent.append(
                f"task {task.id}: event {event.id} {kind!r} cannot happen to a {state} task"
            )
            return
        state = nxt
        if kind in ("claimed", "stolen"):
            holder = event.agent
    if state != task.state.value:
        found.inconsistent.append(
            f"task {task.id} is {task.state.value} but its events leave it {state}"
        )
    elif state == "claimed" and holder != task.agent:
        found.inconsistent.append(
            f"task {task.id} is held by {task.agent} but was last claimed by {holder}"
        )
