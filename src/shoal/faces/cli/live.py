"""The live terminal views: ``shoal supervise`` (workers, queues, recent steals, the log)
and ``shoal status --watch`` (the fleet's agents as lanes, the pool, counts, recent steals).

Everything that agents wrote (task titles, agent ids, skills, reasons) goes in as rich
``Text``, never markup, with control characters stripped: a title cannot style the view,
move the cursor or break the frame.
"""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Iterable, Sequence

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from shoal.faces.render import STATE_STYLE, STATUS_STYLE, ago, pause_note
from shoal.model import AgentLoad, Event, FleetStatus
from shoal.runtime.supervisor import Supervisor

__all__ = ["fleet_view", "safe_text", "supervisor_view"]

#: How many of the latest steals the fleet view lists.
STEALS_SHOWN = 8
#: The widest queue bar, in cells; deeper queues are drawn to scale.
BAR_WIDTH = 12
#: The widest a held task's title is drawn before it is cut with an ellipsis.
TITLE_WIDTH = 40
_WORKLOAD_STYLE = {"overloaded": "red", "balanced": "green", "underutilized": "yellow"}


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


def safe_text(value: object, limit: int | None = None) -> str:
    """``value`` as one line of plain text fit for a terminal: newlines, tabs and line
    separators become spaces; every other control or format character (escape, bidi
    overrides, zero-width joiners) is dropped; then it is cut to ``limit`` characters with
    an ellipsis."""
    out = []
    for char in str(value):
        category = unicodedata.category(char)
        if category in ("Zl", "Zp") or (category == "Cc" and char in "\t\n\r\v\f"):
            out.append(" ")
        elif category not in ("Cc", "Cf", "Cs"):
            out.append(char)
    text = "".join(out)
    if limit is not None and len(text) > limit:
        text = text[: max(limit - 1, 0)] + "\u2026"
    return text


def queue_bar(depth: int, deepest: int, width: int = BAR_WIDTH) -> Text:
    """A queue's depth as a small bar (one cell a task, or to scale against the deepest
    queue when that does not fit), then the number."""
    cells = depth if deepest <= width else round(depth * width / deepest)
    if depth and not cells:
        cells = 1
    bar = Text("\u2588" * cells, style="cyan" if depth < deepest or deepest < 2 else "bold cyan")
    bar.append("\u00b7" * (min(width, max(deepest, 1)) - cells), style="dim")
    bar.append(f" {depth}")
    return bar


def fleet_view(status: FleetStatus, steals: Sequence[Event], now: float) -> Group:
    """One frame of ``shoal status --watch``: a header with the capacity and the counts by
    state (dead, stalled, waiting and paused included), every agent as a lane (status, load,
    queue bar, what it holds), the pool, stalled tasks, the latest ``steals`` (events of kind
    ``stolen``, newest last) and the last assessment. ``now`` is the fleet clock's time."""
    lanes = [line for line in status.agents if line.agent.status.value != "terminated" or line.held]
    paused = [line.agent for line in status.agents if line.agent.paused(now)]
    parts: list[Text | Table] = [_header(status, now, len(paused))]
    parts.append(_lanes(lanes, now) if lanes else Text("no agents yet", style="dim"))
    parts.append(_pool_line(status, now))
    if paused:
        line = Text("paused: ", style="bold red")
        line.append(
            ", ".join(safe_text(a.id, 24) + pause_note(a, now) for a in paused), style="red"
        )
        parts.append(line)
    if status.stalled:
        line = Text("stalled: ", style="bold red")
        line.append(
            ", ".join(
                f"#{t.id} {safe_text(t.title, TITLE_WIDTH)} ({safe_text(t.agent or '-', 24)})"
                for t in status.stalled
            )
        )
        parts.append(line)
    if status.stuck:
        ids = ", ".join(f"#{i}" for i in status.stuck[:20])
        more = f" and {len(status.stuck) - 20} more" if len(status.stuck) > 20 else ""
        parts.append(Text(f"blocked on dead or cancelled tasks: {ids}{more}", style="yellow"))
    parts.append(_steals_line(steals, now))
    parts.append(_assessment_line(status, now))
    return Group(*parts)


def _header(status: FleetStatus, now: float, paused: int) -> Text:
    line = Text("shoal ", style="bold")
    line.append(f"agents {status.live}/{status.max_agents} live")
    line.append(f"   {time.strftime('%H:%M:%S', time.localtime(now))}", style="dim")
    line.append("\ntasks ", style="bold")
    for state, style in STATE_STYLE.items():
        count = status.counts.get(state, 0)
        line.append(f" {state} {count} ", style=style if count else "dim")
    extra = (("stalled", len(status.stalled)), ("waiting", status.waiting), ("paused", paused))
    for name, count in extra:
        alarm = count and name != "waiting"
        line.append(f" {name} {count} ", style="bold red" if alarm else "" if count else "dim")
    return line


def _lanes(lanes: Sequence[AgentLoad], now: float) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("agent", no_wrap=True, overflow="ellipsis", max_width=24)
    table.add_column("status", no_wrap=True)
    table.add_column("load", justify="right", no_wrap=True)
    table.add_column("queue", no_wrap=True)
    table.add_column("holds", overflow="ellipsis", no_wrap=True)
    deepest = max((line.agent.queued for line in lanes), default=0)
    for line in lanes:
        a = line.agent
        status = Text(a.status.value, style=STATUS_STYLE.get(a.status.value, ""))
        if a.paused(now) and a.paused_until is not None:
            status.append(f" {ago(a.paused_until, now).replace('in ', 'for ')}", style="dim")
        holds = Text()
        for i, task in enumerate(line.held):
            if i:
                holds.append(", ")
            holds.append(f"#{task.id} ", style="bold")
            holds.append(safe_text(task.title, TITLE_WIDTH))
            if task.stalled_at is not None:
                holds.append(" stalled", style="bold red")
            if task.stolen:
                holds.append(" stolen", style="red")
        table.add_row(
            Text(safe_text(a.id) + (" *" if a.manager else "")),
            status,
            f"{len(line.held)}/{a.max_concurrent}",
            queue_bar(a.queued, deepest),
            holds if line.held else Text("-", style="dim"),
        )
    return table


def _pool_line(status: FleetStatus, now: float) -> Text:
    pending = status.counts.get("pending", 0)
    line = Text("pool ", style="bold")
    line.append(str(status.pool))
    line.append(f"   queued {max(pending - status.pool, 0)}")
    if status.waiting:
        line.append(f"   waiting {status.waiting}", style="cyan")
        if status.next_ready is not None:
            line.append(f" (the first ready {ago(status.next_ready, now)})", style="dim")
    return line


def _steals_line(steals: Sequence[Event], now: float) -> Text:
    line = Text("recent steals: ", style="bold")
    shown = list(steals)[-STEALS_SHOWN:]
    if not shown:
        line.append("none", style="dim")
        return line
    for i, e in enumerate(shown):
        if i:
            line.append(", ")
        victim = safe_text(e.data.get("from") or "pool", 24)
        line.append(f"#{e.task_id} {victim}->{safe_text(e.agent or '-', 24)}", style="red")
        line.append(f" {ago(e.at, now)}", style="dim")
    return line


def _assessment_line(status: FleetStatus, now: float) -> Text:
    a = status.assessment
    line = Text("assessment: ", style="bold")
    if a is None:
        line.append("none yet (`shoal assess` or a running monitor makes one)", style="dim")
        return line
    line.append(a.workload, style=_WORKLOAD_STYLE.get(a.workload, "magenta"))
    line.append(" -> ")
    line.append(a.recommendation, style="bold")
    line.append(f": {safe_text(a.reason, 300)}")
    if a.missing_skills:
        line.append(f" (skills wanted: {safe_text(', '.join(a.missing_skills), 60)})")
    line.append(f"  {ago(a.at, now)}", style="dim")
    return line
