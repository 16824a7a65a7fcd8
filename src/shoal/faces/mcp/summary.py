"""The fleet as plain text for a language model: what ``read_state`` and ``shoal://status`` say.

Short lines, the product's words, numbers a model can act on (live agents against
max_agents, pending work, who is idle since when, the last recommendation) and no table
art: a model reads this inside its context window, where every character costs.
"""

from __future__ import annotations

from collections.abc import Sequence

from shoal.faces.render import ago
from shoal.model import FleetStatus, Task

__all__ = ["fleet_summary"]

_ORDER = ("blocked", "pending", "claimed", "done", "dead", "cancelled")


def fleet_summary(status: FleetStatus, ready: Sequence[Task], you: str | None, url: str) -> str:
    """The fleet at a glance; ``ready`` is the head of what claims would take next."""
    now = status.at
    lines = [f"shoal fleet at {url}" + (f" -- you are agent {you}" if you else "")]
    counts = status.counts
    parts = []
    for state in _ORDER:
        count = counts.get(state, 0)
        if not count:
            continue
        text = f"{count} {state}"
        if state == "pending":
            text += f" ({status.pool} in the pool, {count - status.pool} in agents' queues)"
        parts.append(text)
    lines.append("Tasks: " + (", ".join(parts) if parts else "none yet"))
    if ready:
        lines.append("Next up (in claim order):")
        for task in ready:
            where = f"queue of {task.agent}" if task.agent else "pool"
            needs = f"; skills {','.join(task.skills)}" if task.skills else ""
            domain = f"; domain {task.domain}" if task.domain else ""
            lines.append(f"  #{task.id} [p{task.priority}] {task.title} ({where}{needs}{domain})")
    idle = sum(1 for a in status.agents if a.agent.status.value == "idle")
    lines.append(
        f"Agents: {status.live}/{status.max_agents} live (managers not counted), {idle} idle"
    )
    for line in status.agents:
        agent = line.agent
        if agent.status.value == "terminated" and not line.held:
            continue
        role = agent.role + (" (manager)" if agent.manager else "")
        state = agent.status.value
        if agent.idle_since is not None:
            state += f" for {ago(agent.idle_since, now).removesuffix(' ago')}"
        held = "; ".join(f"task {t.id}: {t.title}" for t in line.held)
        text = f"  {agent.id}: {role} [{state}] {len(line.held)}/{agent.max_concurrent}"
        if held:
            text += f" | {held}"
        if agent.queued:
            text += f" | {agent.queued} queued"
        text += f" | seen {ago(agent.last_seen, now)}"
        lines.append(text)
    gone = sum(1 for a in status.agents if a.agent.status.value == "terminated")
    if gone:
        lines.append(f"  ({gone} terminated agents not shown)")
    if status.stalled:
        stalled = ", ".join(f"#{t.id} ({t.agent})" for t in status.stalled)
        lines.append(f"Stalled (running far past their expected duration): {stalled}")
    if status.expired:
        expired = ", ".join(f"#{t.id} ({t.agent})" for t in status.expired)
        lines.append(f"Leases run out, not running (the next claim takes them back): {expired}")
    if status.stuck:
        stuck = ", ".join(f"#{i}" for i in status.stuck)
        lines.append(f"Blocked on dead or cancelled tasks (retry those): {stuck}")
    a = status.assessment
    if a is None:
        lines.append("Work distribution: not assessed yet (call assess_workload)")
    else:
        lines.append(
            f"Work distribution: {a.workload.upper()}, recommendation {a.recommendation} "
            f"({a.reason}) -- assessed {ago(a.at, now)}"
        )
        if a.missing_skills:
            lines.append(f"  an agent spawned now should bring: {', '.join(a.missing_skills)}")
    return "\n".join(lines)
