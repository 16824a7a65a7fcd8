"""What every ``shoal`` command shares: the store it opens, how it prints (``App``), and the
options more than one command takes -- ``--store``, ``--json``/``--format`` and ``--agent``
-- each declared here once, so that a flag reads the same and does the same everywhere.

The output options do not reach the command's function: they set the ``App``, whichever
side of the command name they were given on (``shoal --json claim`` = ``shoal claim
--json``), and the command asks the ``App`` how to print.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from shoal.faces import output
from shoal.faces.cli.context import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_NOTHING,
    EXIT_OK,
    App,
    json_arg,
    render,
)

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INTERNAL",
    "EXIT_NOTHING",
    "EXIT_OK",
    "App",
    "agent_argument",
    "agent_option",
    "format_option",
    "json_arg",
    "json_flag",
    "json_option",
    "pass_app",
    "render",
    "store_option",
]

F = TypeVar("F", bound=Callable[..., Any])

#: The help of ``--json`` wherever it prints one JSON document.
JSON_HELP = "Print JSON (for agents and scripts)."


def store_option(fn: F) -> F:
    """``--store URL`` (or $SHOAL_STORE): the fleet every command opens."""

    def keep(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
        ctx.ensure_object(App).store = value

    return click.option(
        "--store",
        envvar="SHOAL_STORE",
        metavar="URL",
        expose_value=False,
        callback=keep,
        help="The fleet: sqlite:///path/fleet.db, postgresql://HOST/DB, "
        "git+file:///path/repo.git (or git+ssh://, git+https://; #BRANCH), memory://, or a "
        "hub's https://HOST:PORT (shoal serve; token in $SHOAL_API_TOKEN) (default: "
        "$SHOAL_STORE, else the nearest .shoal/fleet.db).",
    )(fn)


def json_flag(help: str = JSON_HELP, *, hidden: bool = False) -> Callable[[F], F]:
    """``--json``: the command prints JSON (``App.json``). ``help`` says what JSON, for the
    commands whose JSON is not one document (``worker``: one object per line)."""

    def turn_on(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if value:
            ctx.ensure_object(App).json = True

    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        expose_value=False,
        callback=turn_on,
        hidden=hidden,
        help=help,
    )


def format_option(fn: F) -> F:
    """``--format``: table, tsv, json or env (``App.format``; json turns on ``App.json``)."""

    def set_format(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
        if value:
            app = ctx.ensure_object(App)
            app.format, app.json = value, value == "json" or app.json

    return click.option(
        "--format",
        "output_format",
        type=click.Choice(output.FORMATS),
        expose_value=False,
        callback=set_format,
        help="table (a terminal's default), tsv (a pipe's), json, or env (export NAME=value).",
    )(fn)


def json_option(fn: F) -> F:
    """``--json`` and ``--format`` on a command, as ``shoal --json COMMAND`` would."""
    return json_flag()(format_option(fn))


def agent_option(
    help: str,
    *,
    dest: str = "agent",
    from_env: bool = True,
    show_envvar: bool = False,
    required: bool = False,
) -> Callable[[F], F]:
    """``--agent``/``-a``: the agent that acts, filled in from $SHOAL_AGENT; with
    ``from_env=False`` a filter (``list --agent``), which the environment must not narrow."""
    return click.option(
        "--agent",
        "-a",
        dest,
        envvar="SHOAL_AGENT" if from_env else None,
        show_envvar=show_envvar,
        required=required,
        help=help,
    )


def agent_argument(
    dest: str = "agent", *, from_env: bool = True, required: bool = True
) -> Callable[[F], F]:
    """AGENT as an argument (``shoal register ada``), filled in from $SHOAL_AGENT unless
    ``from_env`` is off."""
    return click.argument(
        dest,
        metavar=None if dest == "agent" else "AGENT",
        envvar="SHOAL_AGENT" if from_env else None,
        required=required,
    )


pass_app = click.make_pass_decorator(App)
