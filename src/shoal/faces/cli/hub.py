"""The hub's commands, for the fleet as a whole: ``init`` it, look at it (``status``,
``events``), steer it (``assess``, ``rebalance``, ``reap``) and tune it (``config``). ``shoal
monitor`` runs reap, rebalance and assess on an interval (see runtime.py)."""

from __future__ import annotations

from typing import Any

import click

from shoal.errors import BadInput
from shoal.faces import output
from shoal.faces.cli import loop, paging
from shoal.faces.cli.app import App, agent_option, json_option, pass_app, render
from shoal.fleet import Fleet
from shoal.validation import parse_duration

__all__ = ["add_hub_commands"]


@click.command(short_help="Create (or upgrade) a fleet.")
@json_option
@pass_app
def init(app: App) -> None:
    """Create a fleet (.shoal/fleet.db here, or --store), or upgrade an existing one, e.g.
    `shoal init`, `shoal init --store postgresql://host/db`."""
    app.refuse_memory()
    fleet = Fleet.init(app.store)
    app.adopt(fleet)
    created = fleet.created
    app.emit(
        {"store": fleet.where, "created": created},
        f"{'created a fleet' if created else 'fleet ready'} at {fleet.where}\n"
        "next: `shoal register AGENT --skill ...` and `shoal add TITLE`",
    )


@click.command(short_help="The fleet at a glance.")
@click.option("--watch", "-w", is_flag=True, help="Redraw in place until Ctrl-C (a terminal).")
@click.option(
    "--interval", default="2s", show_default=True, help="With --watch: redraw at least this often."
)
@json_option
@pass_app
def status(app: App, watch: bool, interval: str) -> None:
    """The fleet at a glance: agents, load, queues, counts, capacity, last assessment.
    `shoal status --watch` keeps it on screen, live."""
    if watch:
        from shoal.faces.cli.watch import watch_status

        watch_status(app.fleet(read_only=True), app.out, parse_duration(interval, "--interval"))
        return
    loop.status(app)


@click.command(short_help="Recommend spawning or retiring agents.")
@json_option
@pass_app
def assess(app: App) -> None:
    """Assess the workload: spawn, terminate_idle or maintain (recommends only), e.g.
    `shoal assess`."""
    result = app.fleet().assess()
    app.emit(result.to_dict(), render.assessment_panel(result, result.at))


@click.command(short_help="Move queued work to agents idle for a while.")
@click.option("--dry-run", is_flag=True, help="Show what would move; change nothing.")
@json_option
@pass_app
def rebalance(app: App, dry_run: bool) -> None:
    """Move queued tasks from overloaded agents to agents idle for a while, e.g.
    `shoal rebalance --dry-run`."""
    moves = app.fleet().rebalance(dry_run=dry_run)
    app.emit(
        {"dry_run": dry_run, "moves": [m.to_dict() for m in moves]},
        render.moves_table(moves, dry_run),
    )


@click.command(short_help="Expire leases, mark silent agents offline...")
@json_option
@pass_app
def reap(app: App) -> None:
    """Expire leases, mark silent agents offline, end idle ephemeral agents, flag stalls,
    e.g. `shoal reap` (`shoal monitor` does it on an interval)."""
    report = app.fleet().reap()
    app.emit(report.to_dict(), render.reap_text(report))


@click.command(short_help="The event log (one event per state change).")
@paging.id_option("--since", "Only events after this id (with --limit: the next page).")
@click.option("--task", type=int, help="Only events of this task.")
@agent_option("Only events of this agent.", from_env=False)
@click.option("--tail", "-n", type=click.IntRange(min=1), help="The newest N events (default 100).")
@paging.limit_option(100)
@paging.all_option
@click.option("--follow", "-f", is_flag=True, help="Keep printing new events (Ctrl-C stops).")
@paging.no_header_option
@json_option
@pass_app
def events(
    app: App,
    since: int | None,
    task: int | None,
    agent: str | None,
    tail: int | None,
    limit: int | None,
    show_all: bool,
    follow: bool,
    no_header: bool,
) -> None:
    """The event log: the newest --tail events, newest last (every state change is one
    event); --limit N reads it forward a page at a time (--since the last id shown), --all
    all of it. A line on stderr says when events were left out. e.g. `shoal events -n 20
    --follow`, `shoal events --task 12`, `shoal events --since 0 --limit 500 --json`."""
    if tail is not None and limit is not None:
        raise BadInput(
            "--tail reads the log's end and --limit its start (or from --since)",
            hint="give one of them",
        )
    fleet = app.fleet(read_only=True)
    start = since or 0
    size = paging.page_size(limit, show_all, 100, "--tail" if tail is not None else "")
    command = ["shoal", "events", *(["--task", str(task)] if task is not None else [])]
    command += [*(["--agent", agent] if agent else []), *(["--json"] if app.json else [])]
    note = None
    if limit is not None or show_all:  # forward, from --since
        found, more = paging.page_of(
            lambda n, after: fleet.events(after or 0, task=task, agent=agent, limit=n),
            size,
            start,
            lambda e: e.id,
        )
        if more and found:
            command += ["--since", str(found[-1].id), "--limit", str(size)]
            note = paging.more_line(
                command, more, "events", "after these", f"shows the next {size}"
            )
    else:  # the log's end
        newest = tail or 100
        found = fleet.events(start, task=task, agent=agent, limit=newest, newest=True)
        if len(found) == newest:
            earlier = fleet.events(start, task=task, agent=agent, limit=paging.AHEAD)
            more = sum(1 for e in earlier if e.id < found[0].id)
            if more:
                command += [*(["--since", str(since)] if since else []), "--limit", str(newest)]
                note = paging.more_line(
                    command, more, "events", "before these", f"shows the first {newest}"
                )
    if not follow:

        def table() -> Any:
            return render.events_table(found, app.now())

        data = [e.to_dict() for e in found]
        paging.emit_rows(app, data, table, empty="no events", no_header=no_header, note=note)
        return
    since = start
    try:
        while True:
            for event in found:
                if app.json:
                    click.echo(output.json_text(event.to_dict(), pretty=False))
                elif app.output_format() == "tsv":  # the columns of `shoal events`, piped
                    row = render.events_table([event], app.now())
                    click.echo(list(output.plain_lines(row))[-1])
                else:
                    app.out.print(render.event_line(event, app.now()))
                since = event.id
            fleet.wait_for_change(1.0)
            found = fleet.events(since, task=task, agent=agent, limit=10_000)
    except KeyboardInterrupt:
        return


@click.group()
def config() -> None:
    """Read or change fleet settings.

    e.g. `shoal config list`, `shoal config get lease_ttl`, `shoal config set lease_ttl 15m`.
    """


@config.command("get")
@click.argument("name", required=False)
@json_option
@pass_app
def config_get(app: App, name: str | None) -> None:
    """Show all settings with their defaults and meaning, or one: `shoal config get
    lease_ttl`. Durations read 10m, 1h30m; JSON gives seconds."""
    settings = app.fleet(read_only=True).settings()
    if name is None:
        app.emit(settings.to_dict(), render.settings_table(settings))
        return
    from shoal.settings import Settings, format_setting, parse_setting

    parse_setting(name, getattr(settings, name, 0))  # refuses unknown names with a hint
    value = getattr(settings, name)
    default = getattr(Settings(), name)
    words = format_setting(value, name)
    if value != default:
        words += f" (default {format_setting(default, name)})"
    app.emit({name: value}, words)


config.add_command(config_get, "list")  # `shoal config list`: the same, every setting


@config.command("set", context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.argument("value")
@json_option
@pass_app
def config_set(app: App, name: str, value: str) -> None:
    """Change a setting.

    e.g. `shoal config set lease_ttl 15m`.
    """
    from shoal.settings import format_setting

    settings = app.fleet().configure(**{name: value})
    new = getattr(settings, name)
    app.emit({name: new}, f"{name} = {format_setting(new, name)}")


def add_hub_commands(group: click.Group) -> None:
    """Register init, status, assess, rebalance, reap, events and config on the ``shoal``
    group."""
    for command in (init, status, assess, rebalance, reap, events, config):
        group.add_command(command)
