"""The ``shoal`` command: every Fleet verb, for people (rich tables) and agents (``--json``).

Exit codes (the same for every command):

    0  ok
    1  nothing to do: a claim found no work (or the agent is at capacity, or paused)
    2  bad input: a malformed priority, an unknown agent or task, a broken store URL...
    3  lease lost or conflict: a stale token, a full fleet, a finished task
    4  the store is unavailable; nothing changed and the command may be retried
    5  the store is damaged or unsafe to open; nothing was written (see `shoal doctor`)
   70  an internal error: a bug in shoal (SHOAL_DEBUG=1 shows the traceback)

With ``--json`` (before or after the command name) every command prints one JSON document
on stdout, errors included: ``{"error": {"code", "message", "hint"}}``.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any, NoReturn

import click

from shoal import __version__
from shoal.errors import BadInput, ShoalError, exit_code_for
from shoal.faces import output, render
from shoal.faces.cli.agents import add_agent_commands
from shoal.faces.cli.app import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_OK,
    App,
    json_option,
    store_option,
)
from shoal.faces.cli.demo import add_demo_commands
from shoal.faces.cli.doctor import add_doctor_commands
from shoal.faces.cli.hub import add_hub_commands
from shoal.faces.cli.imports import add_import_commands
from shoal.faces.cli.leases import add_lease_commands
from shoal.faces.cli.mcp import add_mcp_commands
from shoal.faces.cli.prime import add_prime_commands
from shoal.faces.cli.prune import add_prune_commands
from shoal.faces.cli.runtime import add_runtime_commands
from shoal.faces.cli.serve import add_serve_commands
from shoal.faces.cli.sim import add_sim_commands
from shoal.faces.cli.tasks import add_task_commands
from shoal.faces.cli.why import add_why_commands

__all__ = ["cli", "main"]


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    no_args_is_help=True,
)
@store_option
@json_option
@click.option("-v", "--verbose", count=True, help="Log more on stderr: -v info, -vv debug.")
@click.option("-q", "--quiet", count=True, help="Log less: -q errors only, -qq critical only.")
@click.version_option(__version__, prog_name="shoal")
@click.pass_context
def cli(ctx: click.Context, verbose: int, quiet: int) -> None:
    """shoal: a work-stealing task coordinator for fleets of agents.

    Agents register, then claim the best task they can do under a lease, and complete
    or fail it. Idle agents steal queued work from busy ones; the work of agents that die
    comes back when their lease expires.

    \b
    Start:   shoal init && shoal register ada --skill python
    Work:    shoal add "fix the parser" --skill python -p high
             shoal claim --agent ada --json      # prints the task and its lease token
             shoal done 1 --token TOKEN --result '{"ok": true}'
    Watch:   shoal status, shoal events --follow, shoal assess

    Exit codes: 0 ok, 1 nothing to do, 2 bad input, 3 lease lost or conflict,
    4 store unavailable (retry), 5 store damaged (run shoal doctor), 70 a bug in shoal
    (SHOAL_DEBUG=1 prints the traceback).

    Logs go to stderr: -v/-vv or -q, else $SHOAL_LOG_LEVEL (DEBUG, INFO, WARNING, ERROR).
    """
    from shoal.faces.cli.logs import configure_logging

    configure_logging(verbose, quiet)
    # --store, --json and --format have set the App already (see app.py).
    ctx.call_on_close(ctx.ensure_object(App).close)


# The commands, by group (``shoal --help`` lists them by name).
add_task_commands(cli)  # add, list, show, ready, cancel, retry
add_import_commands(cli)  # import beads|github|jsonl
add_lease_commands(cli)  # claim, done, fail, release, defer, heartbeat
add_agent_commands(cli)  # register, agents, agent resume|set-status, set-status
add_hub_commands(cli)  # init, status, assess, rebalance, reap, events, config
add_why_commands(cli)  # why TASK, why --agent AGENT
add_prune_commands(cli)  # prune
add_doctor_commands(cli)  # doctor
add_prime_commands(cli)  # prime
add_mcp_commands(cli)  # mcp, mcp config
add_serve_commands(cli)  # serve, token create|list|revoke
add_runtime_commands(cli)  # worker, monitor, supervise
add_demo_commands(cli)  # demo
add_sim_commands(cli)  # sim: the scheduling simulator (shoal.sim)


# ---------------------------------------------------------------------- entry point


def main(argv: list[str] | None = None) -> NoReturn:
    """Run the CLI; turn shoal errors into a message with a hint and a documented exit code."""
    args = sys.argv[1:] if argv is None else argv
    app = App(None, as_json=False)
    try:
        cli.main(args=args, prog_name="shoal", standalone_mode=False, obj=app)
    except ShoalError as exc:
        data = exc.to_dict()
        message = _in_flags(exc.message, args) if isinstance(exc, BadInput) else exc.message
        data["message"] = message
        _fail(app, args, data, message, exc.hint, exit_code_for(exc))
    except click.exceptions.Abort:
        sys.exit(130)
    except click.exceptions.NoArgsIsHelpError as exc:  # bare `shoal`: the help, not an error
        click.echo(exc.ctx.get_help() if exc.ctx else cli.get_help(click.Context(cli)))
        sys.exit(EXIT_OK)
    except click.ClickException as exc:
        hint = f"see `{_usage_of(exc)} --help`"
        data = {"code": "usage", "message": exc.format_message(), "hint": hint}
        _fail(app, args, data, exc.format_message(), hint, EXIT_BAD_INPUT)
    except SystemExit as exc:
        sys.exit(exc.code)
    except Exception as exc:  # a bug in shoal: say so, and never exit 1 ("nothing to do")
        if os.environ.get("SHOAL_DEBUG"):
            traceback.print_exc()
        message = f"internal error: {type(exc).__name__}: {exc}"
        hint = "this is a bug in shoal; run with SHOAL_DEBUG=1 for the traceback and report it"
        _fail(app, args, {"code": "internal", "message": message, "hint": hint}, message, hint,
              EXIT_INTERNAL)  # fmt: skip
    sys.exit(EXIT_OK)


def _usage_of(exc: click.ClickException) -> str:
    """The command whose usage went wrong (``shoal done``), so that the hint names the one
    help page to read; ``shoal COMMAND`` when click did not say."""
    ctx = getattr(exc, "ctx", None)
    return ctx.command_path if isinstance(ctx, click.Context) else "shoal COMMAND"


def _in_flags(message: str, args: list[str]) -> str:
    """``message`` with a value's name as the command line spells it. The Fleet names a
    bad value by its field (``older_than must be more than zero``), the word the API, MCP
    and JSON use; a person at the terminal typed ``--older-than``, so that is what the CLI
    says. Only a message that opens with an option's field name, then ``must`` or the
    quoted value, is changed."""
    command = _command_in(args)
    for param in command.params if command is not None else []:
        if isinstance(param, click.Option) and param.name and param.opts:
            flag = max(param.opts, key=len)
            for tail in (" must ", " '"):
                if message.startswith(param.name + tail):
                    return flag + message[len(param.name) :]
    return message


def _command_in(args: list[str]) -> click.Command | None:
    """The command ``args`` ran (``shoal config set`` is ``set``), found the way click
    found it, without running anything (no callbacks, no prompts)."""
    try:
        ctx = cli.make_context("shoal", list(args), resilient_parsing=True)
        command: click.Command = cli
        while isinstance(command, click.Group):
            # the subcommand's name and what follows (click 9 keeps all of it in args)
            words = [*getattr(ctx, "_protected_args", ()), *ctx.args]
            if not words:
                return command
            name, found, rest = command.resolve_command(ctx, words)
            if found is None or name is None:
                return command
            ctx = found.make_context(name, rest, parent=ctx, resilient_parsing=True)
            command = found
        return command
    except click.ClickException:
        return None


def _fail(
    app: App, args: list[str], data: dict[str, Any], message: str, hint: str | None, code: int
) -> NoReturn:
    if app.json or "--json" in args:
        click.echo(output.json_text({"error": data}, pretty=app.out.is_terminal))
    else:
        render.print_error(app.err, message, hint)
    sys.exit(code)
