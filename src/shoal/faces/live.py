"""The live terminal view of ``shoal supervise``: workers, queues, recent steals, the log."""

from __future__ import annotations

import time
from collections.abc import Iterable

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from shoal.faces.render import STATUS_STYLE
from shoal.runtime.supervisor import Supervisor

__all__ = ["supervisor_view"]


def supervisor_view(sup: Supervisor, log: Iterable[Text]) -> Group:
    """One frame: the supervisor's workers with their agents, the fleet's queues and
    counts, the last assessment, the latest steals, and the latest log lines."""
    workers = Table(box=box.SIMPLE_HEAD, title="workers", title_justify="left")
    for column in ("agent", "pid", "process", "status", "queue", "skills"):
        workers.add_column(column)
    for slot, agent in sup.workers():
        status = agent.status.value if agent is not None else "starting"
        process = slot.state
        if slot.restart_at is not None:
            process = f"restart in {max(0.0, slot.restart_at - time.monotonic()):.0f}s"
        workers.add_row(
            slot.spec.agent,
            str(slot.pid or "-"),
            process,
            Text(status, style=STATUS_STYLE.get(status, "")),
            str(agent.queued if agent is not None else 0),
            ",".join(slot.spec.skills) or "-",
        )
    parts: list[Text | Table] = [workers]
    a = sup.assessment
    if a is not None:
        parts.append(
            Text.from_markup(
                f"pending [bold]{a.pending}[/]  running [bold]{a.in_progress}[/]  "
                f"blocked {a.blocked}  agents {a.live_agents}/{a.max_agents} "
                f"(cap here {sup.maximum}, floor {sup.minimum})\n"
                f"assessment: [magenta]{a.workload}[/] -> {a.recommendation}: {a.reason}"
            )
        )
    queues = {agent.id: agent.queued for agent in sup.agents.values() if agent.queued}
    if queues:
        parts.append(Text("queues: " + ", ".join(f"{k} {v}" for k, v in sorted(queues.items()))))
    if sup.steals:
        steals = Text("recent steals: ", style="bold red")
        steals.append(
            ", ".join(f"#{e.task_id} {e.data.get('from')}->{e.agent}" for e in sup.steals)
        )
        parts.append(steals)
    parts.append(Text(""))
    parts.extend(log)
    return Group(*parts)
