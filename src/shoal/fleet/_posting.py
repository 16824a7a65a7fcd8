"""Posting work: where a new task goes, and whether it waits.

``Fleet.post`` and ``Fleet.post_many`` check their input first (``task_checks.check_post``);
``insert_task`` then routes the checked draft inside the transaction: to the queue it was
sent to (if that agent is there to work it), to the queue of the agent that holds its parent
(work-first: an agent finishes what it spawns), or to the pool; ``blocked`` while any task
it comes after is not done. One ``posted`` event says where it went.

Its place in a queue (``policy.queue_place``): a child of the task its agent holds is that
agent's own work, in front and newest first (depth-first); anything else sent to an agent
goes behind, in the order it was posted -- so ``add "step 1" --to ada; add "step 2" --to
ada`` runs step 1 first.
"""

from __future__ import annotations

from typing import Any

from shoal import policy
from shoal._values import replace
from shoal.errors import BadInput, UnknownTask
from shoal.fleet._transitions import live_agent, refuse_ended
from shoal.model import NewTask
from shoal.settings import Settings
from shoal.stores.base import StoreTx
from shoal.times import iso_time
from shoal.vocabulary import EventKind, TaskState

__all__ = ["Moment", "insert_task"]


class Moment:
    """Tasks posted in one call (``post_many``) are one moment: in a queue they come in the
    order they are listed, whether they go in front (own work, newest first) or behind
    (work sent to the agent, oldest first). The batch draws its numbers at once; the first
    listed gets the number that puts it nearest the head either way."""

    def __init__(self, numbers: list[int]) -> None:
        self.numbers = numbers  # increasing

    def number(self, index: int, own: bool) -> int:
        return self.numbers[len(self.numbers) - 1 - index] if own else self.numbers[index]


def insert_task(
    tx: StoreTx,
    draft: NewTask,
    now: float,
    settings: Settings,
    moment: tuple[Moment, int] | None = None,
    note: dict[str, Any] | None = None,
) -> int:
    """Route, block and insert one checked task, with its event; ``moment``: the batch it
    was posted in and its index there (None: posted alone); ``note``: more for the event
    (the schedule an occurrence comes from)."""
    dest = draft.agent
    if dest is not None:
        agent = live_agent(tx, dest)
        if not policy.is_present(agent) and not draft.pinned:
            away = "paused" if agent.paused(now) else "offline"
            raise BadInput(
                f"agent {dest!r} is {away}; nothing would work its queue",
                hint="post to the pool or to a present agent, or pin it to wait for this one",
            )
        if not policy.can_do(agent.skills, draft.skills):
            lacking = sorted(set(draft.skills) - set(agent.skills))
            raise BadInput(
                f"agent {dest!r} lacks the skills this task requires: {', '.join(lacking)}",
                hint="route it to an agent with those skills, or post it to the pool",
            )
    spawner: str | None = None  # the agent holding its parent
    if draft.parent is not None:
        parent_task = tx.get_task(draft.parent)
        if parent_task is None:
            raise UnknownTask(
                f"parent task {draft.parent} does not exist",
                hint="give the id of a task in this fleet (see `shoal list`)",
            )
        if parent_task.state is TaskState.CLAIMED:
            spawner = parent_task.agent
        if dest is None and spawner is not None:
            holder = tx.get_agent(spawner)
            # Work-first: the spawner's own queue, in front -- if it can do the child and
            # is there to (a paused spawner's children go to the pool).
            if (
                holder is not None
                and policy.is_present(holder)
                and policy.can_do(holder.skills, draft.skills)
            ):
                dest = holder.id
    waiting = 0
    if draft.after:
        deps = tx.get_tasks(draft.after, share=True)
        missing = [d for d in draft.after if d not in deps]
        if missing:
            raise UnknownTask(
                f"unknown dependencies: {', '.join(map(str, missing))}",
                hint="`after` must list ids of tasks already in this fleet",
            )
        refuse_ended(deps.values())
        waiting = sum(1 for d in deps.values() if d.state is not TaskState.DONE)
    new = replace(
        draft,
        agent=dest,
        state=TaskState.BLOCKED if waiting else TaskState.PENDING,
        waiting_on=waiting,
        created_at=now,
        # Aging counts from when it is ready: a task posted for later gains nothing
        # while it waits for its moment.
        pool_key=policy.pool_key(draft.priority, max(now, draft.ready_at or now), settings.aging),
        # A place in a queue matters only in a queue; the pool orders by pool_key.
        seq=_place(tx, dest == spawner, moment) if dest is not None else 0,
        # Ready now, or at its not_before; blocked, it keeps only the not_before.
        ready_at=draft.ready_at if waiting else max(now, draft.ready_at or now),
    )
    task_id = tx.insert_task(new)
    if draft.after:
        tx.add_deps(task_id, draft.after)
    data: dict[str, Any] = {"priority": new.priority, "state": new.state.value}
    if dest is not None:
        data["to"] = dest
    if new.ready_at is not None and new.ready_at > now:
        data["not_before"] = iso_time(new.ready_at)
    if draft.after:
        data["after"] = list(draft.after)
    data.update(note or {})
    tx.append_event(now, EventKind.POSTED, task_id, dest, data)
    return task_id


def _place(tx: StoreTx, own: bool, moment: tuple[Moment, int] | None) -> int:
    """A queue-bound task's place: its agent's own work if it is a child of the task that
    agent holds, else work sent to it (``policy.queue_place``)."""
    number = tx.next_seq() if moment is None else moment[0].number(moment[1], own)
    return policy.queue_place(own, number)
