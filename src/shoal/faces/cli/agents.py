"""The agents: ``register`` one, list them (``agents``), and act on one -- ``agent resume``
after the circuit breaker paused it, ``agent set-status`` (also ``set-status``) to end one or
set it idle."""

from __future__ import annotations

from typing import Any

import click

from shoal.faces.cli import paging
from shoal.faces.cli.app import App, agent_argument, json_option, pass_app, render
from shoal.times import iso_time
from shoal.validation import check_agent_id
from shoal.vocabulary import REPORTED_STATUSES, names

__all__ = ["add_agent_commands"]


@click.command()
@agent_argument()
@click.option("--role", default="worker", show_default=True, help="What it does (free text).")
@click.option("--skill", "-s", "skills", multiple=True, help="A skill it has (repeat).")
@click.option("--domain", "-d", "domains", multiple=True, help="A domain it knows (repeat).")
@click.option("--max-concurrent", default=1, show_default=True, help="Tasks it may hold at once.")
@click.option("--manager", is_flag=True, help="A manager: exempt from max_agents, never reaped.")
@click.option("--ephemeral", is_flag=True, help="Terminated after idle_timeout without work.")
@json_option
@pass_app
def register(
    app: App,
    agent: str,
    role: str,
    skills: tuple[str, ...],
    domains: tuple[str, ...],
    max_concurrent: int,
    manager: bool,
    ephemeral: bool,
) -> None:
    """Register an agent (or update a live one). Refused when the fleet is full. e.g.
    `shoal register ada --skill python --domain api --max-concurrent 2`."""
    reg = app.fleet().register(
        agent,
        role=role,
        skills=skills,
        domains=domains,
        max_concurrent=max_concurrent,
        manager=manager,
        ephemeral=ephemeral,
    )
    app.emit(reg.to_dict(), render.registration_text(reg))


@click.command()
@paging.limit_option(100, "-n")
@paging.all_option
@click.option("--after", metavar="ID", help="Only agents after agent ID (the next page).")
@paging.no_header_option
@json_option
@pass_app
def agents(app: App, limit: int | None, show_all: bool, after: str | None, no_header: bool) -> None:
    """The agents the fleet knows, by id, 100 at a time (--limit N, --all); --after ID goes
    on from the last one shown, and a line on stderr says when there are more.

    e.g. `shoal agents`, `shoal agents --json --all`.
    """
    if after is not None:
        check_agent_id(after)
    # Sorted here, by code point: the cursor's order must not hang on a database collation.
    found = sorted(app.fleet(read_only=True).agents(), key=lambda a: a.id)
    size = paging.page_size(limit, show_all, 100)
    shown, more = paging.page_of(
        lambda n, last: [a for a in found if last is None or a.id > last][:n],
        size,
        after,
        lambda a: a.id,
    )
    note = None
    if more:
        command = ["shoal", "agents", *(["--json"] if app.json else [])]
        command += [*(["--limit", str(limit)] if limit else []), "--after", shown[-1].id]
        note = paging.more_line(command, more, "agents", "not shown", f"shows the next {size}")
    none = "no agents yet: `shoal register AGENT --skill ...`"

    def table() -> Any:
        return render.agents_table(shown, app.now())

    data = [a.to_dict() for a in shown]
    paging.emit_rows(app, data, table, empty=none, no_header=no_header, note=note)


@click.group(short_help="Act on an agent: pause or resume it, set its status.")
def agent() -> None:
    """Act on one agent: `shoal agent pause AGENT`, `shoal agent resume AGENT`, `shoal agent
    set-status AGENT idle`."""


@agent.command(short_help="Hold an agent: it claims nothing until resumed.")
@agent_argument("agent_id", from_env=False)
@click.option(
    "--for",
    "for_",
    default="1h",
    show_default=True,
    metavar="DURATION",
    help="How long the pause lasts at most: 30m, 2h, 1d.",
)
@json_option
@click.pass_obj
def pause(app: App, agent_id: str, for_: str) -> None:
    """Hold AGENT for --for (or until `shoal agent resume`): its claims get nothing, its
    queue goes back to the pool, and the tasks it holds run on -- to take an agent out of
    the fleet for a while without losing its work in hand, e.g. `shoal agent pause ada
    --for 2h`."""
    paused = app.fleet().pause(agent_id, for_=for_)
    until = iso_time(paused.paused_until)
    app.emit(paused.to_dict(), f"agent {agent_id} paused until {until}: it claims nothing")


@agent.command(short_help="Let a paused agent claim again.")
@agent_argument("agent_id", from_env=False)
@json_option
@click.pass_obj
def resume(app: App, agent_id: str) -> None:
    """Let AGENT claim again now. The circuit breaker pauses an agent that failed
    failure_streak tasks in a row (status paused) for pause_cooldown, and `shoal agent
    pause` for as long as asked; resume it once whatever made it fail is fixed, e.g.
    `shoal agent resume ada`."""
    fleet = app.fleet()
    before = fleet.agent(agent_id)
    updated = fleet.resume(agent_id)
    words = f"agent {agent_id} is not paused ({updated.status.value}); nothing to resume"
    if before.paused_until is not None:
        words = f"agent {agent_id} resumed: it may claim again ({updated.status.value})"
    app.emit(updated.to_dict(), words)


def _set_status_command(name: str) -> click.Command:
    @click.command(name, short_help="Set an agent's status (e.g. terminated).")
    @agent_argument("agent_id")
    @click.argument("status", type=click.Choice(names(REPORTED_STATUSES)))
    @click.option(
        "--release",
        is_flag=True,
        help="With idle: give back the tasks it holds (untouched) instead of refusing.",
    )
    @json_option
    @click.pass_obj
    def set_status(app: App, agent_id: str, status: str, release: bool) -> None:
        """Set an agent's status. terminated releases its work and frees its place; idle is
        refused while it holds tasks, unless --release gives them back.

        \b
        e.g. shoal set-status ada terminated
             shoal agent set-status ada idle --release
        """
        updated = app.fleet().set_status(agent_id, status, release=release)
        app.emit(updated.to_dict(), f"agent {agent_id} is {updated.status.value}")

    return set_status


agent.add_command(_set_status_command("set-status"))


def add_agent_commands(group: click.Group) -> None:
    """Register register, agents, agent and set-status on the ``shoal`` group."""
    for command in (register, agents, agent, _set_status_command("set-status")):
        group.add_command(command)
