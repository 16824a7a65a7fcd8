"""Claiming and leases: ``claim``, ``done``, ``fail``, ``release``, ``defer`` and
``heartbeat`` -- the loop an agent runs from the shell.

A held task is named by TASK_ID and its lease token, or by the environment ``eval "$(shoal
claim --format env)"`` leaves: SHOAL_TASK and SHOAL_LEASE (SHOAL_TOKEN is read too). A token
from the environment counts only for the task it came with, so a leftover lease is never
tried on another task.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

from shoal.errors import BadInput, LeaseLost
from shoal.faces import words
from shoal.faces.cli import loop
from shoal.faces.cli.app import (
    App,
    agent_argument,
    agent_option,
    json_option,
    pass_app,
)
from shoal.model import Lease

__all__ = ["add_lease_commands"]

F = TypeVar("F", bound=Callable[..., Any])


def _lease(task_id: int, token: str | None) -> Lease:
    return loop.lease_for(task_id, token, _token_from_env())


def _token_from_env() -> bool:
    """Whether --token was read from the environment (SHOAL_LEASE or SHOAL_TOKEN)."""
    ctx = click.get_current_context(silent=True)
    return ctx is not None and (
        ctx.get_parameter_source("token") is click.core.ParameterSource.ENVIRONMENT
    )


def _token_for(task_id: int, token: str | None) -> str | None:
    """The token to use for ``task_id``: one from the environment (SHOAL_LEASE) counts only
    for the task it came with (SHOAL_TASK), so a leftover lease is not tried on another."""
    if _token_from_env() and os.environ.get("SHOAL_TASK", str(task_id)) != str(task_id):
        return None
    return token


@click.command(short_help="Claim the best task(s) an agent can do.")
@agent_option("Who is claiming.", show_envvar=True)
@click.option(
    "--n", "-n", "n", default=1, show_default=True, help="How many tasks to claim at once."
)
@click.option(
    "--wait",
    default="0",
    metavar="DURATION",
    help="Wait this long for work if none: 60, 30s, 5m.",
)
@json_option
@pass_app
def claim(app: App, agent: str | None, n: int, wait: str) -> None:
    """Claim the best task(s) this agent can do; prints each task and its lease token.
    e.g. `shoal claim --agent ada --json`, or for the shell
    eval "$(shoal claim --agent ada --format env)" (then `shoal done`).

    Exits 1 when nothing was claimed (reason "empty", "busy", or "paused": the circuit
    breaker holds the agent after failure_streak failures in a row).
    """
    loop.claim(app, agent, n, wait)


def _token_option(fn: F) -> F:
    return click.option(
        "--token",
        "-t",
        envvar=["SHOAL_LEASE", "SHOAL_TOKEN"],
        show_envvar=True,
        help='The lease token from `shoal claim` (eval "$(shoal claim --format env)").',
    )(fn)


def _task_argument(fn: F) -> F:
    """TASK_ID, or $SHOAL_TASK (set by eval "$(shoal claim --format env)")."""
    return click.argument("task_id", type=int, envvar="SHOAL_TASK")(fn)


@click.command()
@_task_argument
@_token_option
@click.option("--result", "-r", help="The result: JSON, or plain text; '@file' or '-' to read.")
@json_option
@pass_app
def done(app: App, task_id: int, token: str | None, result: str | None) -> None:
    """Complete a task you hold.

    e.g. `shoal done 12 --token T --result '{"ok": true}'`, or just `shoal done` after
    eval "$(shoal claim --agent ada --format env)".
    """
    loop.done(app, task_id, token, result, _token_from_env())


@click.command(short_help="Report that a task you hold failed.")
@_task_argument
@_token_option
@click.option("--error", "-e", default="", help="What went wrong.")
@click.option("--no-retry", is_flag=True, help="Do not retry: the task is dead at once.")
@json_option
@pass_app
def fail(app: App, task_id: int, token: str | None, error: str, no_retry: bool) -> None:
    """Report that a task you hold failed (it is retried, after a backoff, while attempts
    remain), e.g. `shoal fail 12 --token T --error "tests fail"`."""
    fleet = app.fleet()
    task = fleet.fail(_lease(task_id, token), error, retry=not no_retry)
    note = words.ready_note(task, fleet.clock.now())
    app.emit(
        task.to_dict(),
        f"task {task.id} failed; it is {task.state.value} now" + (f", {note}" if note else ""),
    )


@click.command()
@_task_argument
@_token_option
@agent_option("The agent holding it (then no token needed).")
@json_option
@pass_app
def release(app: App, task_id: int, token: str | None, agent: str | None) -> None:
    """Give a task back untouched (not counted as a failure). The holding agent may give
    its token, or just its name: `shoal release 12 --agent ada`."""
    fleet = app.fleet()
    token = _token_for(task_id, token)
    if not token and agent:
        held = {lease.task_id: lease for lease in fleet.leases(agent)}
        if task_id not in held:
            raise LeaseLost(
                f"agent {agent!r} holds no lease on task {task_id}"
                + (f"; it holds {', '.join(map(str, held))}" if held else ""),
                hint="check the task id (`shoal list --agent AGENT --state claimed`)",
            )
        lease = held[task_id]
    else:
        lease = _lease(task_id, token)
    task = fleet.release(lease)
    app.emit(task.to_dict(), f"task {task.id} released; it is {task.state.value} again")


@click.command(short_help="Set a held task aside until others are done.")
@_task_argument
@_token_option
@click.option("--after", multiple=True, type=int, required=True, metavar="ID", help="Wait for ID.")
@json_option
@pass_app
def defer(app: App, task_id: int, token: str | None, after: tuple[int, ...]) -> None:
    """Set a task you hold aside until other tasks are done (it returns to your queue),
    e.g. `shoal defer 12 --token T --after 13 --after 14`."""
    task = app.fleet().defer(_lease(task_id, token), after)
    app.emit(task.to_dict(), f"task {task.id} deferred; it is {task.state.value}")


@click.command()
@agent_argument(from_env=False, required=False)
@agent_option("The agent.", dest="agent_opt")
@json_option
@pass_app
def heartbeat(app: App, agent: str | None, agent_opt: str | None) -> None:
    """Say an agent is alive and extend its leases.

    e.g. `shoal heartbeat ada` (or with SHOAL_AGENT set, `shoal heartbeat`).
    """
    who = agent or agent_opt
    if not who:
        raise BadInput("heartbeat needs an agent", hint="shoal heartbeat AGENT (or --agent)")
    leases = app.fleet().heartbeat(who)
    app.emit(
        {"agent": who, "leases": [lease.to_dict(app.now()) for lease in leases]},
        f"{who} is alive; {len(leases)} lease(s) extended",
    )


def add_lease_commands(group: click.Group) -> None:
    """Register claim, done, fail, release, defer and heartbeat on the ``shoal`` group."""
    for command in (claim, done, fail, release, defer, heartbeat):
        group.add_command(command)
