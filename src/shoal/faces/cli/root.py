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

import importlib
import os
import sys
import traceback
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any, NoReturn

import click

from shoal import __version__
from shoal.errors import BadInput, ShoalError, exit_code_for
from shoal.faces import output
from shoal.faces.cli.app import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_OK,
    App,
    json_option,
    store_option,
)

__all__ = ["COMMANDS", "REGISTRARS", "LazyGroup", "cli", "fail_on", "main"]


class LazyGroup(click.Group):
    """The ``shoal`` group, which imports a command's module only when that command runs
    (click's lazy-group pattern). Agents call ``shoal claim`` and ``shoal done`` in loops,
    each call a new process: importing every command's module up front -- the simulator,
    the runtime, the MCP and web faces, rich -- cost each call many times what starting
    Python costs. ``shoal --help`` lists the commands from COMMANDS, importing none."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            # A name COMMANDS does not know (a typo, mostly): look in every module.
            modules = [COMMANDS[cmd_name][0]] if cmd_name in COMMANDS else list(REGISTRARS)
            for module in modules:
                self.load(module)
        return self.commands.get(cmd_name)

    def load(self, module: str) -> None:
        """Put the commands of ``shoal.faces.cli.<module>`` on this group."""
        found = importlib.import_module(f"shoal.faces.cli.{module}")
        register: Callable[[click.Group], None] = getattr(found, REGISTRARS[module])
        register(self)

    def load_all(self) -> MutableMapping[str, click.Command]:
        """Every command, loaded (for what walks them all: the tests of every command)."""
        for module in REGISTRARS:
            self.load(module)
        return self.commands

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their short help from COMMANDS, whole (wrapped, not cut)."""
        rows = []
        for name in self.list_commands(ctx):
            loaded = self.commands.get(name)
            if name in COMMANDS:
                rows.append((name, COMMANDS[name][1]))
            elif loaded is not None and not loaded.hidden:
                rows.append((name, loaded.get_short_help_str(limit=formatter.width)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(
    cls=LazyGroup,
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


# The commands, by module: loaded by LazyGroup when one of them runs.

#: Each module of commands (``shoal.faces.cli.<module>``) and its function that puts its
#: commands on a group.
REGISTRARS: Mapping[str, str] = {
    "tasks": "add_task_commands",  # add, list, show, ready, cancel, retry, set-priority
    "edits": "add_edit_commands",  # edit
    "why": "add_why_commands",  # why TASK, why --agent AGENT
    "groups": "add_group_commands",  # group set|list|clear
    "schedules": "add_schedule_commands",  # schedule list|pause|resume|cancel
    "imports": "add_import_commands",  # import beads|github|jsonl
    "leases": "add_lease_commands",  # claim, done, fail, release, defer, heartbeat
    "agents": "add_agent_commands",  # register, agents, agent resume|set-status, set-status
    "hub": "add_hub_commands",  # init, status, assess, rebalance, reap, events, config
    "prune": "add_prune_commands",  # prune
    "doctor": "add_doctor_commands",  # doctor
    "prime": "add_prime_commands",  # prime
    "mcp": "add_mcp_commands",  # mcp, mcp config
    "serve": "add_serve_commands",  # serve, token create|list|revoke
    "runtime": "add_runtime_commands",  # worker, monitor, supervise
    "demo": "add_demo_commands",  # demo
    "sim": "add_sim_commands",  # sim: the scheduling simulator (shoal.sim)
}

#: Every command: its module (in REGISTRARS) and the short help ``shoal --help`` shows, so
#: that the help lists every command without importing any. A test
#: (tests/faces/test_cli_startup.py) holds this to the commands themselves.
COMMANDS: Mapping[str, tuple[str, str]] = {
    "add": ("tasks", "Post a task to the pool (or to an agent's queue with --to); or many "
            "from JSON Lines with --file; or again and again with --every or --cron (see "
            "`shoal schedule`)."),
    "agent": ("agents", "Act on an agent: pause or resume it, set its status."),
    "agents": ("agents", "The agents the fleet knows, by id, 100 at a time (--limit N, --all); "
               "--after ID goes on from the last one shown, and a line on stderr says when "
               "there are more."),
    "assess": ("hub", "Recommend spawning or retiring agents."),
    "cancel": ("tasks", "Cancel tasks that have not finished."),
    "claim": ("leases", "Claim the best task(s) an agent can do."),
    "config": ("hub", "Read or change fleet settings."),
    "defer": ("leases", "Set a held task aside until others are done."),
    "demo": ("demo", "Watch a small fleet work, steal and finish."),
    "doctor": ("doctor", "Check the fleet's health and say how to fix what is wrong."),
    "done": ("leases", "Complete a task you hold."),
    "edit": ("edits", "Change a task that has not finished."),
    "events": ("hub", "The event log (one event per state change)."),
    "fail": ("leases", "Report that a task you hold failed."),
    "group": ("groups", "Concurrency groups: at most N tasks of a group held at once, fleet-wide."),
    "heartbeat": ("leases", "Say an agent is alive and extend its leases."),
    "import": ("imports", "Add tasks from beads, GitHub issues or JSON Lines."),
    "init": ("hub", "Create (or upgrade) a fleet."),
    "list": ("tasks", "Tasks, newest first, 50 at a time (--limit N, --all); --before ID goes "
             "on from the last one shown, and a line on stderr says when there are more."),
    "mcp": ("mcp", "Serve the fleet to LLM agents over MCP."),
    "monitor": ("runtime", "The hub: reap, rebalance and assess on an interval."),
    "prime": ("prime", "A briefing for a coding agent joining the fleet."),
    "prune": ("prune", "Delete old history: finished tasks and their events."),
    "ready": ("tasks", "Pending tasks, in the order a claim would take them."),
    "reap": ("hub", "Expire leases, mark silent agents offline..."),
    "rebalance": ("hub", "Move queued work to agents idle for a while."),
    "register": ("agents", "Register an agent (or update a live one)."),
    "release": ("leases", "Give a task back untouched (not counted as a failure)."),
    "retry": ("tasks", "Retry tasks: dead or cancelled ones, or skip a retry's wait."),
    "schedule": ("schedules", "Recurring tasks: list, pause, resume, cancel."),
    "serve": ("serve", "Serve the dashboard, the HTTP API and /metrics."),
    "set-priority": ("tasks", "Change a task's priority."),
    "set-status": ("agents", "Set an agent's status (e.g. terminated)."),
    "show": ("tasks", "One task in full: fields, dependencies and history."),
    "sim": ("sim", "Simulate scheduling policies on workloads, in virtual time."),
    "status": ("hub", "The fleet at a glance."),
    "supervise": ("runtime", "Run local workers, as many as the work calls for."),
    "token": ("serve", "Make, list and revoke access tokens for `shoal serve`."),
    "why": ("why", "Why a task is not running, or why an agent gets nothing."),
    "worker": ("runtime", "Be an agent: run a command for every task claimed."),
}  # fmt: skip


# ---------------------------------------------------------------------- entry point


def main(argv: list[str] | None = None) -> NoReturn:
    """Run the CLI; turn shoal errors into a message with a hint and a documented exit code."""
    args = sys.argv[1:] if argv is None else argv
    app = App(None, as_json=False)
    try:
        cli.main(args=args, prog_name="shoal", standalone_mode=False, obj=app)
    except Exception as exc:
        fail_on(exc, app, args)
    sys.exit(EXIT_OK)


def fail_on(raised: BaseException, app: App, args: list[str]) -> NoReturn:
    """Exit as ``shoal`` does when a command raised ``exc`` (main's, and ``fast``'s): a shoal
    error's message, hint and exit code; click's usage errors; an internal error (exit 70)
    for anything else. (Not for a KeyboardInterrupt: it is raised again.)"""
    try:
        raise raised
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
        click.echo(output.json_text({"error": data}, pretty=app.is_terminal))
    else:
        from shoal.faces import render

        render.print_error(app.err, message, hint)
    sys.exit(code)
