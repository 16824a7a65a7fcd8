"""History that ends: what a prune deletes, what it must keep, and in what steps.

A fleet keeps every finished task and every event until someone prunes them; a busy fleet
finishes millions. The claim never reads history (its indexes are partial, over live work
only), but the store's files grow without end, and so do counts and listings. A prune
(``Fleet.prune``; ``shoal prune``; the monitor each pass when ``history_retention`` is set)
deletes what finished before a cutoff.

What goes
---------
Tasks that finished -- done, dead or cancelled -- before the cutoff, with all their events
and their dependency rows (both ways), and the events of no task (an agent's, the fleet's)
logged before it. A task's history goes with the task, never before it: a live task keeps
every event it ever had.

What stays, and why
-------------------
* Live work. A pending, blocked or claimed task is never deleted; the store's delete itself
  refuses a task that has not finished, whatever list it is given.
* The steal window. The steal caps count the steals of the last ``rebalance_interval`` in
  the log (``window_thieves``), so the cutoff is never later than that far back: a prune
  cannot hand a thief a second helping (``prune_cutoff``).
* Dead or cancelled dependencies that still matter. A done task goes: its dependents have
  counted it off, and a task retried later counts a dependency that is gone as done --
  which it was. A dead or cancelled task stays while a task still in the fleet, and not
  done, waits on it: that task is stuck on it now, or would wait on it again if retried,
  and retrying the dependency is how it is freed. Once the waiters go (or are done), so
  may it, in a later batch of the same prune.
* ``parent`` holds nothing. It is lineage, read when the child is posted (the parent must be
  held then) and never after; a child outliving its parent's record keeps the number.
* Idempotency keys last as long as their task. Once a keyed task is pruned, a post with
  the same key makes a new task: the retention is how long idempotency holds.
* The newest task and the newest event. SQLite numbers a new row one past the largest id,
  so deleting the newest would hand its id out again; every store keeps them, alike.

In what steps
-------------
A prune runs in batches of at most ``batch`` tasks (``limits.PRUNE_BATCH``), each one short
write transaction (``prune_batch_in``), fleet-wide (``write(exclusive=True)``) so that
nothing changes under it: on PostgreSQL no post can make a task it is deleting a
dependency meanwhile. Claims take their turns between batches, so a prune of millions never
holds them up for more than one batch. Each batch that deletes something logs one
``pruned`` event in the same transaction. A dry run counts, in one read transaction, what
all the batches would delete (``prune_preview``).

Afterwards a pruned task's id is unknown: ``show`` and ``after=`` refuse it, a late
``complete`` with a lease on it is refused as ``UnknownTask`` (nothing changes), the counts
of ``status`` hold only what is kept, and the log has gaps in its ids.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, cast

from shoal.errors import BadInput, WriteConflict
from shoal.limits import SQUASH_TRIES
from shoal.settings import Settings
from shoal.stores.base import Store, StoreTx
from shoal.validation import parse_duration
from shoal.vocabulary import EventKind

__all__ = ["Pruned", "prune_age", "prune_batch_in", "prune_cutoff", "squasher"]


class Pruned(NamedTuple):
    """What one batch deleted, and whether more may be left: it was full, or it deleted
    tasks, which may have freed the dead or cancelled tasks they waited on."""

    tasks: int
    events: int  # the tasks' events and the events of no task
    untasked: int  # events of no task, among ``events``
    more: bool


def prune_age(value: object) -> float:
    """``older_than`` in seconds: a duration above zero (what a prune keeps)."""
    age = parse_duration(value, "older_than")
    if age <= 0:
        raise BadInput(
            "older_than must be more than zero: a prune keeps what finished within it",
            hint="e.g. 30d, 12h; `shoal config set history_retention 30d` prunes on every "
            "monitor pass",
        )
    return age


def prune_cutoff(now: float, older_than: float, settings: Settings) -> float:
    """The moment before which history goes: ``older_than`` ago, but never inside the steal
    window, whose steals the caps count in the log."""
    return now - max(older_than, settings.rebalance_interval)


def prune_batch_in(tx: StoreTx, now: float, cutoff: float, batch: int) -> Pruned:
    """One batch of a prune, inside the caller's transaction: up to ``batch`` tasks that
    may go, with their events, then up to ``batch`` old events of no task.

    The ``pruned`` event is appended before the tasks go, so the store writes it first and
    the log's newest entry is one that stays (see "What stays")."""
    older_than = round(now - cutoff, 3)
    task_ids = tx.prunable_tasks(cutoff, batch)
    tasks = events = 0
    if task_ids:
        data = {"tasks": len(task_ids), "older_than": older_than}
        tx.append_event(now, EventKind.PRUNED, None, None, data)
        tasks, events = tx.prune_tasks(task_ids)
    untasked = tx.prune_events(cutoff, batch)
    if untasked and not task_ids:
        data = {"tasks": 0, "events": untasked, "older_than": older_than}
        tx.append_event(now, EventKind.PRUNED, None, None, data)
    more = bool(task_ids) or untasked >= batch
    return Pruned(tasks, events + untasked, untasked, more)


def squasher(store: Store) -> Callable[[], str]:
    """What squashes ``store``'s history (``prune --squash``): a store that keeps one --
    the git store -- has ``squash_history``; any other is refused before anything is
    pruned. The call retries while agents push in between, and returns the new tip."""
    squash_history = cast(Callable[[], str | None] | None, getattr(store, "squash_history", None))
    if squash_history is None:
        raise BadInput(
            "only the git store keeps a history to squash",
            hint="drop --squash: on this store a prune already frees the room",
        )

    def squash() -> str:
        for _ in range(SQUASH_TRIES):
            commit = squash_history()
            if commit is not None:
                return commit
        raise WriteConflict(
            f"the history was not squashed: agents pushed in between {SQUASH_TRIES} times",
            hint="run it again when the fleet is quieter; nothing else changed",
        )

    return squash
