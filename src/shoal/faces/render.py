"""How the CLI shows fleet data to people: rich tables and short relative times.

Machine output (``--json``) never goes through here; it is each record's ``to_dict()``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from rich import box
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from shoal.faces.output import clean, one_line
from shoal.faces.words import TASK_COLUMNS, ago, nothing_claimed, task_cells
from shoal.faces.words import span as _span
from shoal.model import (
    Agent,
    Assessment,
    Claim,
    Event,
    FleetStatus,
    Move,
    ReapReport,
    Registration,
    Task,
    TaskDetail,
)
from shoal.model import Group as GroupInfo
from shoal.policy import lease_due
from shoal.settings import SETTINGS, Settings, format_setting
from shoal.vocabulary import AgentStatus

__all__ = [
    "agents_table",
    "ago",
    "assessment_panel",
    "claim_text",
    "event_line",
    "events_table",
    "moves_table",
    "print_error",
    "reap_text",
    "registration_text",
    "settings_table",
    "status_view",
    "task_panel",
    "tasks_table",
]

STATE_STYLE = {
    "blocked": "magenta",
    "pending": "yellow",
    "claimed": "cyan",
    "done": "green",
    "dead": "red",
    "cancelled": "dim",
}
STATUS_STYLE = {
    "idle": "yellow",
    "working": "green",
    "waiting": "cyan",
    "offline": "red",
    "paused": "bold red",
    "terminated": "dim",
}


def _cells(*values: str | Text) -> list[Text]:
    """Table cells as plain text: a ``str`` cell would be read as rich markup, and a role,
    an id or a name from an older fleet could then restyle the table or break it."""
    return [v if isinstance(v, Text) else Text(one_line(v)) for v in values]


def _state(value: str) -> Text:
    return Text(value, style=STATE_STYLE.get(value, ""))


def _status(value: str) -> Text:
    return Text(value, style=STATUS_STYLE.get(value, ""))


def tasks_table(tasks: Sequence[Task], now: float, title: str | None = None) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAVY, title_justify="left")
    for column in TASK_COLUMNS:
        table.add_column(column, justify="right" if column in ("id", "p") else "left")
    for t in tasks:
        cells = task_cells(t, now)
        table.add_row(
            *_cells(*cells[:1]), _state(cells[1]), *_cells(cells[2]), Text(cells[3]),
            *_cells(*cells[4:])
        )  # fmt: skip
    return table


def task_panel(detail: TaskDetail, now: float) -> Panel:
    t = detail.task
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    rows: list[tuple[str, str | Text]] = [
        ("state", _state(t.state.value)),
        ("priority", str(t.priority)),
        ("agent", t.agent or "(pool)"),
        ("skills", ", ".join(t.skills) or "-"),
        ("domain", t.domain or "-"),
        ("group", t.group or "-"),
        ("labels", Text(one_line(", ".join(t.labels))) if t.labels else "-"),
        ("posted by", Text(one_line(t.posted_by)) if t.posted_by else "-"),
        ("attempts", f"{t.attempts}" + (f" of {t.max_attempts}" if t.max_attempts else "")),
        ("created", ago(t.created_at, now)),
    ]
    if t.ready_at is not None:
        waiting = " (waiting out a retry backoff or its not_before)" if t.waiting(now) else ""
        rows.append(("ready", ago(t.ready_at, now) + waiting))
    if t.expected_duration is not None:
        rows.append(("expected", _span(t.expected_duration)))
    if t.lease_expires is not None and lease_due(t, now):
        not_running = " (not running: the next claim takes it back)"
        rows.append(("lease expired", ago(t.lease_expires, now) + not_running))
    elif t.lease_expires is not None:
        rows.append(("lease expires", ago(t.lease_expires, now)))
    if detail.after:
        rows.append(("after", ", ".join(map(str, detail.after))))
    if detail.dependents:
        rows.append(("dependents", ", ".join(map(str, detail.dependents))))
    if t.parent is not None:
        rows.append(("parent", str(t.parent)))
    if t.waiting_on:
        rows.append(("waiting on", f"{t.waiting_on} unfinished dependencies"))
    flags = [f for f, on in (("pinned", t.pinned), ("stolen", t.stolen)) if on]
    if t.stalled_at is not None:
        flags.append("STALLED")
    if flags:
        rows.append(("flags", ", ".join(flags)))
    if t.error:
        rows.append(("error", Text(clean(t.error), style="red")))
    if t.result is not None:
        rows.append(("result", Text(shown(t.result))))
    if t.payload is not None:
        rows.append(("payload", Text(shown(t.payload))))
    for name, value in rows:
        grid.add_row(name, *_cells(value))
    parts: list[Table | Text] = [grid]
    if t.body:
        parts.append(Text("\n" + clean(t.body)))
    if detail.events:
        parts.append(events_table(detail.events, now, title="history"))
    title = Text(f"task {t.id}: {one_line(t.title)}")
    return Panel(Group(*parts), title=title, title_align="left")


def agents_table(agents: Sequence[Agent], now: float) -> Table:
    table = Table(box=box.SIMPLE_HEAVY)
    for column in ("agent", "status", "role", "skills", "domains", "max", "queued", "seen"):
        table.add_column(column)
    for a in agents:
        role = (
            a.role + (" (manager)" if a.manager else "") + (" (ephemeral)" if a.ephemeral else "")
        )
        status = _status(a.status.value)
        if a.idle_since is not None:
            status.append(f" {ago(a.idle_since, now)}", style="dim")
        status.append(pause_note(a, now), style="dim")
        table.add_row(
            *_cells(
                a.id,
                status,
                role,
                ",".join(a.skills) or "-",
                ",".join(a.domains) or "-",
                str(a.max_concurrent),
                str(a.queued),
                ago(a.last_seen, now),
            )
        )
    return table


def status_view(status: FleetStatus) -> Group:
    now = status.at
    pending = status.counts.get("pending", 0)
    # Where the pending tasks are, said right after their count (not after the last state).
    where = f" ({status.pool} in the pool, {pending - status.pool} queued)"
    counts = "  ".join(
        f"[{STATE_STYLE.get(k, '')}]{k}[/] {v}{where if k == 'pending' else ''}"
        for k, v in status.counts.items()
        if v
    )
    waiting = ""
    if status.waiting and status.next_ready is not None:
        waiting = f"; {status.waiting} waiting, the first ready {ago(status.next_ready, now)}"
    header = Text.from_markup(
        f"[bold]Agents[/] {status.live}/{status.max_agents} live   "
        f"[bold]Tasks[/] {counts or 'none yet'}{waiting}"
    )
    table = Table(box=box.SIMPLE_HEAVY)
    for column in ("agent", "status", "load", "queued", "current tasks", "seen"):
        table.add_column(column)
    for line in status.agents:
        a = line.agent
        if a.status.value == "terminated" and not line.held:
            continue
        # Titles come from agents: plain text, never read as markup.
        current = Text(", ".join(f"{t.id} {one_line(t.title)}" for t in line.held) or "-")
        table.add_row(
            *_cells(
                a.id + (" *" if a.manager else ""),
                _status(a.status.value).append(pause_note(a, now), style="dim"),
                f"{len(line.held)}/{a.max_concurrent}",
                str(a.queued),
                current,
                ago(a.last_seen, now),
            )
        )
    parts: list[Text | Table | Panel] = [header, table]
    if status.stalled:
        stalled = ", ".join(f"{t.id} ({t.agent})" for t in status.stalled)
        parts.append(Text(f"stalled: {stalled}", style="bold red"))
    if status.expired:
        expired = ", ".join(f"{t.id} ({t.agent})" for t in status.expired)
        parts.append(
            Text(f"leases run out, not running (the next claim takes them back): {expired}")
        )
    if status.stuck:
        stuck = ", ".join(map(str, status.stuck))
        parts.append(
            Text(f"blocked on dead or cancelled tasks (retry those): {stuck}", style="yellow")
        )
    if status.groups:
        parts.append(Text(f"groups: {groups_line(status.groups)}"))
    if status.assessment is not None:
        parts.append(assessment_panel(status.assessment, now))
    return Group(*parts)


def groups_line(groups: Sequence[GroupInfo]) -> str:
    """Each concurrency group's tasks held of its limit: ``deploy 1/1 full, api 0/3``."""
    return ", ".join(
        f"{g.name} {g.held}/{'-' if g.max is None else g.max}{' full' if g.full else ''}"
        for g in groups
    )


def groups_table(groups: Sequence[GroupInfo]) -> Table:
    table = Table(box=box.SIMPLE_HEAVY)
    for column in ("group", "max", "held"):
        table.add_column(column)
    for g in groups:
        most = "-" if g.max is None else str(g.max)
        table.add_row(*_cells(g.name, most, f"{g.held}" + (" (full)" if g.full else "")))
    return table


def assessment_panel(a: Assessment, now: float) -> Panel:
    style = {"overloaded": "red", "balanced": "green", "underutilized": "yellow"}.get(
        a.workload, "dim"
    )
    lines = [
        f"Agents: {a.live_agents}/{a.max_agents} live, {a.working_agents} working, "
        f"{a.idle_agents} idle",
        f"Tasks:  {a.pending} pending, {a.in_progress} in progress, {a.blocked} blocked",
        f"Status: [{style}]{a.workload.upper()}[/]   Recommendation: [bold]{a.recommendation}[/]",
        f"Why:    {a.reason}",
    ]
    if a.missing_skills:
        lines.append(f"Spawn with skills: {', '.join(a.missing_skills)}")
    title = f"workload assessment ({ago(a.at, now)})"
    return Panel(Text.from_markup("\n".join(lines)), title=title, title_align="left")


def registration_text(reg: Registration) -> str:
    """What the CLI and the MCP server say after ``Fleet.register``."""
    verb = "registered" if reg.created else "updated"
    return (
        f"agent {reg.agent.id} {verb} as {reg.agent.role}. "
        f"Active agents: {reg.live}/{reg.max_agents}"
    )


def pause_note(agent: Agent, now: float) -> str:
    """`` (9m more, after 5 failures)`` for a paused agent, `` (paused 9m more)`` for one
    offline with a pause still running; else empty."""
    if not agent.paused(now) or agent.paused_until is None:
        return ""
    left = _span(agent.paused_until - now)
    failures = f", after {agent.failures} failures" if agent.failures else ""
    if agent.status is AgentStatus.PAUSED:
        return f" ({left} more{failures})"
    return f" (paused {left} more{failures})"


def claim_text(claim: Claim, now: float) -> Text:
    if not claim:
        return Text(nothing_claimed(claim, now), style="yellow")
    out = Text()
    for grant in claim.grants:
        task = grant.task
        out.append(f"claimed task {task.id}", style="bold green")
        out.append(f" ({grant.source}, p{task.priority}) {one_line(task.title)}\n")
        out.append(f"  token {grant.lease.token}\n", style="dim")
    return out


def shown(value: object) -> str:
    """A value for people: text (made safe), anything else as JSON (never a Python repr)."""
    if isinstance(value, str):
        return clean(value)
    return clean(json.dumps(value, ensure_ascii=False, default=str))


def details_of(e: Event) -> str:
    """An event's data as ``key=value`` pairs, values as ``shown``."""
    pairs = (f"{k}={shown(v)}" for k, v in e.data.items() if v not in (None, ""))
    return one_line(" ".join(pairs))


def event_line(e: Event, now: float) -> Text:
    who = f" {e.agent}" if e.agent else ""
    task = f" task {e.task_id}" if e.task_id is not None else ""
    data = details_of(e)
    text = Text(f"{e.id:>6} ", style="dim")
    text.append(f"{ago(e.at, now):>9} ", style="dim")
    text.append(e.kind, style="bold")
    text.append(f"{task}{who}")
    if data:
        text.append(f"  {data}", style="dim")
    return text


def events_table(events: Sequence[Event], now: float, title: str | None = None) -> Table:
    table = Table(title=title, box=box.SIMPLE, title_justify="left")
    for column in ("id", "when", "event", "task", "agent", "details"):
        table.add_column(column)
    for e in events:
        details = details_of(e)
        table.add_row(
            *_cells(
                str(e.id),
                ago(e.at, now),
                e.kind,
                "-" if e.task_id is None else str(e.task_id),
                e.agent or "-",
                Text(details),  # error texts come from agents: never read as markup
            )
        )
    return table


def moves_table(moves: Sequence[Move], dry_run: bool) -> Table | Text:
    if not moves:
        return Text("nothing to rebalance", style="yellow")
    table = Table(title="would move" if dry_run else "moved", box=box.SIMPLE, title_justify="left")
    for column in ("task", "p", "title", "from", "to"):
        table.add_column(column)
    for m in moves:
        table.add_row(
            *_cells(
                str(m.task_id), str(m.priority), Text(one_line(m.title)), m.from_agent, m.to_agent
            )
        )
    return table


def reap_text(report: ReapReport) -> Text:
    if not report:
        return Text("nothing to reap", style="dim")
    parts = []
    for name, values in report.to_dict().items():
        if values:
            parts.append(f"{name}: {', '.join(map(str, values))}")
    return Text("\n".join(parts))


def settings_table(settings: Settings) -> Table:
    table = Table(box=box.SIMPLE_HEAVY)
    for column in ("setting", "value", "default", "meaning"):
        table.add_column(column)
    defaults = Settings()
    for name, spec in SETTINGS.items():
        value = getattr(settings, name)
        default = getattr(defaults, name)
        style = "bold" if value != default else ""
        table.add_row(
            *_cells(
                name,
                Text(format_setting(value, name), style=style),
                format_setting(default, name),
                spec.help,
            )
        )
    return table


def print_error(console: Console, message: str, hint: str | None) -> None:
    """An error and its hint, as plain text with anything unsafe escaped: a message may
    quote what the caller sent."""
    console.print(Text("error: ", style="bold red") + Text(clean(message)))
    if hint:
        console.print(Text("  hint: ", style="yellow") + Text(clean(hint)))
