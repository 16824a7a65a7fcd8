"""Posting work: where a new task goes, and whether it waits.

``Fleet.post`` and ``Fleet.post_many`` check their input first (``validation.check_post``);
``insert_task`` then routes the checked draft inside the transaction: to the queue it was
sent to (if that agent is there to work it), to the head of the queue of the agent that
holds its parent (work-first: an agent finishes what it spawns), or to the pool; ``blocked``
while any task it comes after is not done. One ``posted`` event says where it went.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from shoal import policy
from shoal._transitions import live_agent, refuse_ended
from shoal.errors import BadInput, UnknownTask
from shoal.model import NewTask
from shoal.settings import Settings
from shoal.stores.base import StoreTx
from shoal.times import iso_time
from shoal.vocabulary import EventKind, TaskState

__all__ = ["insert_task"]


def insert_task(
    tx: StoreTx, draft: NewTask, now: float, settings: Settings, place: int | None = None
) -> int:
    """Route, block and insert one checked task, with its event; a queue-bound task goes
    to ``place`` in its queue (default: the head)."""
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
    if draft.parent is not None:
        parent_task = tx.get_task(draft.parent)
        if parent_task is None:
            raise UnknownTask(
                f"parent task {draft.parent} does not exist",
                hint="give the id of a task in this fleet (see `shoal list`)",
            )
        if dest is None and parent_task.state is TaskState.CLAIMED and parent_task.agent:
            spawner = tx.get_agent(parent_task.agent)
            # Work-first: the spawner's own queue, at the head -- if it can do the child
            # and is there to (a paused spawner's children go to the pool).
            if (
                spawner is not None
                and policy.is_present(spawner)
                and policy.can_do(spawner.skills, draft.skills)
            ):
                dest = spawner.id
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
        seq=(place if place is not None else tx.next_seq()) if dest is not None else 0,
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
    tx.append_event(now, EventKind.POSTED, task_id, dest, data)
    return task_id
