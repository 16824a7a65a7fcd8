"""The words of a result for people, as plain text: durations (``4m 10s``), moments
(``12s ago``), when a waiting task is ready, and why a claim found nothing.

``render`` dresses these in rich styles for a terminal; they live apart, without rich, so
that a command printing plain text (``shoal claim --format env`` finding no work, in an
agent's loop) and the web and MCP faces use the same words without importing rich.
"""

from __future__ import annotations

from shoal.model import Claim, Task
from shoal.policy import lease_due
from shoal.text import safe

__all__ = ["TASK_COLUMNS", "ago", "nothing_claimed", "ready_note", "span", "task_cells"]

#: The columns of a list of tasks (``shoal list``, ``shoal ready``...).
TASK_COLUMNS = ("id", "state", "p", "title", "agent", "skills", "domain", "age")


def ago(then: float | None, now: float) -> str:
    """``12s ago`` / ``in 4m`` / ``-``."""
    if then is None:
        return "-"
    delta = now - then
    if abs(delta) < 0.05:
        return "just now"
    text = span(abs(delta))
    return f"{text} ago" if delta >= 0 else f"in {text}"


def span(seconds: float) -> str:
    """A duration for people, two units at most, as precise as it is useful: 0.4s, 45s,
    4m 10s; from 5 minutes to the minute (29m, 2h 5m); from a day to the hour (3d 4h)."""
    if seconds < 1:
        return f"{max(seconds, 0.0):.1f}s"
    step = 1 if seconds < 300 else 60 if seconds < 86400 else 3600
    whole = round(seconds / step) * step
    for unit, size, small, small_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60),
                                          ("m", 60, "s", 1)):  # fmt: skip
        if whole >= size:
            major, rest = divmod(whole, size)
            minor = rest // small_size
            return f"{major}{unit} {minor}{small}" if minor else f"{major}{unit}"
    return f"{whole}s"


def task_cells(t: Task, now: float) -> tuple[str, ...]:
    """A task's row under TASK_COLUMNS, as text: ``render.tasks_table`` styles it for a
    terminal, and a pipe gets it as a tab-separated line without loading rich. The title
    (with its flags) is already on one line; the other cells come as they are."""
    agent = t.agent or ("(pool)" if t.state.value == "pending" else "-")
    flags = " [pinned]" if t.pinned else ""
    flags += " [stolen]" if t.stolen else ""
    flags += " [stalled]" if t.stalled_at is not None else ""
    flags += " [lease expired: not running]" if lease_due(t, now) else ""
    flags += f" [{note}]" if (note := ready_note(t, now)) else ""
    title = " ".join(safe(t.title.replace("\t", " ")).splitlines()) + flags
    return (str(t.id), t.state.value, str(t.priority), title, agent,
            ",".join(t.skills) or "-", t.domain or "-", ago(t.created_at, now))  # fmt: skip


def ready_note(task: Task, now: float) -> str:
    """``ready in 4m`` for a pending task still waiting out a retry backoff or a
    not_before; empty for every other task."""
    if task.waiting(now) and task.ready_at is not None:
        return f"ready in {span(task.ready_at - now)}"
    return ""


def nothing_claimed(claim: Claim, now: float) -> str:
    """Why ``claim`` (which claimed nothing) came back empty, and when to try again."""
    if claim.reason == "paused" and claim.retry_at is not None:
        return (
            f"nothing claimed: this agent is paused for {span(max(claim.retry_at - now, 0.0))} "
            "more (by the circuit breaker after failing task after task, or by a person: "
            "`shoal events --agent AGENT` says which); `shoal agent resume AGENT` ends it early"
        )
    text = f"nothing claimed: {claim.reason}"
    if claim.retry_at is not None:
        text += (
            f"; work it passed over (left to its domain's agents, or not ready yet) "
            f"is free to take {ago(claim.retry_at, now)}"
        )
    return text + " (`shoal why --agent AGENT` says why)"
