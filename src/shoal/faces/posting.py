"""Posting a task from a face (the CLI's ``add``, the MCP ``add_task`` tool).

Both tell a new task from the one an idempotency key already names, and say where it went
in the same words.
"""

from __future__ import annotations

from typing import Any

from shoal.faces.words import ready_note
from shoal.fleet import Fleet
from shoal.model import Task

__all__ = ["post", "post_message"]


def post(fleet: Fleet, title: str, *, key: str | None = None, **fields: Any) -> tuple[Task, bool]:
    """``fleet.post(title, key=key, **fields)``, and whether it added a task (False when
    ``key`` named one already)."""
    existing = fleet.by_key(key) if key is not None else None
    task = fleet.post(title, key=key, **fields)
    return task, existing is None or existing.id != task.id


def post_message(task: Task, created: bool, key: str | None, now: float | None = None) -> str:
    """What a face says about a posted task: where it went (and, at ``now``, when it is
    ready, if it was posted for later), or that the key matched."""
    if not created:
        return f"task {task.id} already exists for key {key!r}; nothing added"
    where = f"agent {task.agent}'s queue" if task.agent else "the pool"
    later = f", {note}" if now is not None and (note := ready_note(task, now)) else ""
    return f"task {task.id} {task.state.value} in {where}{later}"
