"""``why`` in words: one text for the CLI, the MCP tool ``explain`` and the dashboard.

The explanation itself is ``policy_why``'s; this only says it. A task's title is untrusted
(an agent wrote it) and goes out through ``output.one_line``; so does every reason's line,
though it is made of ids, skills and domains the fleet checked, because a face should not
have to know which text is which. Times are said relative to the snapshot's own ``at``
("in 1m 58s"), with the moment itself in ``--json``.
"""

from __future__ import annotations

from shoal.faces.output import one_line
from shoal.faces.render import ago
from shoal.policy_why import AgentWhy, Reason, TaskWhy

__all__ = ["agent_lines", "reason_line", "task_headline", "task_lines"]

_STEP_WORDS = {"queue": "from its own queue", "pool": "from the pool", "steal": "by a steal"}


def reason_line(reason: Reason, now: float) -> str:
    """``code: text (until in 1m 58s)``."""
    line = f"{reason.code}: {one_line(reason.text)}"
    times = []
    if reason.since is not None:
        times.append(f"since {ago(reason.since, now)}")
    if reason.until is not None:
        word = "ended" if reason.until <= now else "until"
        times.append(f"{word} {ago(reason.until, now)}")
    return f"{line} ({', '.join(times)})" if times else line


def task_headline(why: TaskWhy) -> str:
    """``task 2 "needs go": pending in the pool``."""
    where = ""
    if why.state.value in ("pending", "blocked"):
        where = f" in {one_line(why.agent)}'s queue" if why.agent else " in the pool"
    elif why.state.value == "claimed" and why.agent:
        where = f" by {one_line(why.agent)}"
    return f'task {why.task} "{one_line(why.title)}": {why.state.value}{where}'


def task_lines(why: TaskWhy) -> list[str]:
    """The explanation of a task, a line each: the headline, the reasons in the order they
    apply, and who could take it now."""
    now = why.at
    lines = [task_headline(why)]
    lines += [f"  {n}. {reason_line(r, now)}" for n, r in enumerate(why.reasons, 1)]
    if why.takers:
        first, *rest = why.takers
        lines.append(
            f"next: {one_line(first.agent)} ({first.status.value}) could take it "
            f"{_STEP_WORDS[first.step.value]} at its next claim"
        )
        if rest:
            others = ", ".join(f"{one_line(t.agent)} ({t.step.value})" for t in rest[:8])
            more = f" and {len(rest) - 8} more" if len(rest) > 8 else ""
            lines.append(f"also: {others}{more}")
    elif why.state.value in ("pending", "blocked"):
        lines.append("next: no agent can take it now")
    return lines


def agent_lines(why: AgentWhy) -> list[str]:
    """The explanation of an agent: what its claim would take now, or why nothing."""
    head = f"agent {one_line(why.agent)}: {why.status.value}"
    if why.next is not None and why.step is not None:
        return [head, f"next: task {why.next} {_STEP_WORDS[why.step.value]} at its next claim"]
    lines = [head, "its claim would get nothing now:"]
    lines += [f"  {n}. {reason_line(r, why.at)}" for n, r in enumerate(why.reasons, 1)]
    return lines
