"""The ``shoal`` command: every Fleet verb, for people (rich tables) and agents (``--json``).

Exit codes (the same for every command):

    0  ok
    1  nothing to do: a claim found no work (or the agent is at capacity, or paused)
    2  bad input: a malformed priority, an unknown agent or task, a broken store URL...
    3  lease lost or conflict: a stale token, a full fleet, a finished task
    4  the store is unavailable; nothing changed and the command may be retried
   70  an internal error: a bug in shoal (SHOAL_DEBUG=1 shows the traceback)

With ``--json`` (before or after the command name) every command prints one JSON document
on stdout, errors included: ``{"error": {"code", "message", "hint"}}``.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from shoal import __version__
from shoal.errors import BadInput, LeaseLost, ShoalError, exit_code_for
from shoal.faces import output, posting, render
from shoal.faces.cli.app import App, json_option, pass_app
from shoal.faces.cli.doctor import add_doctor_commands
from shoal.faces.cli.imports import add_from_file, add_import_commands
from shoal.faces.cli.mcp import SESSION_TTL_OPTION
from shoal.faces.cli.prime import add_prime_commands, mcp_config_command
from shoal.faces.cli.runtime import add_runtime_commands
from shoal.faces.cli.sim import sim_command
from shoal.faces.cli.tasks import add_cleanup_commands
from shoal.fleet import Fleet
from shoal.model import Lease, TaskState, parse_duration, parse_moment
from shoal.settings import MAX_DURATION

__all__ = ["cli", "main"]

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK, EXIT_NOTHING, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 70


def _lease(task_id: int, token: str | None) -> Lease:
    token = _token_for(task_id, token)
    if not token:
        raise BadInput(
            f"this command needs the lease token of task {task_id} from `shoal claim`",
            hint="pass --token TOKEN (or set SHOAL_LEASE; SHOAL_TOKEN is read too), or "
            'eval "$(shoal claim --agent AGENT --format env)" first',
        )
    return Lease(task_id=task_id, agent="", token=token, expires=0.0)


def _token_for(task_id: int, token: str | None) -> str | None:
    """The token to use for ``task_id``: one from the environment (SHOAL_LEASE) counts only
    for the task it came with (SHOAL_TASK), so a leftover lease is not tried on another."""
    ctx = click.get_current_context(silent=True)
    from_env = ctx is not None and (
        ctx.get_parameter_source("token") is click.core.ParameterSource.ENVIRONMENT
    )
    if from_env and os.environ.get("SHOAL_TASK", str(task_id)) != str(task_id):
        return None
    return token


def _json_arg(value: str | None, what: str, *, text_ok: bool) -> Any:
    """A JSON value from the command line; ``@file`` reads a file, ``-`` stdin."""
    if value is None:
        return None
    if value == "-":
        value = sys.stdin.read()
    elif value.startswith("@"):
        try:
            value = Path(value[1:]).read_text("utf-8")
        except OSError as exc:
            raise BadInput(f"cannot read {what} file {value[1:]!r}: {exc.strerror}") from None
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        if text_ok:
            return value
        raise BadInput(
            f"{what} is not valid JSON: {exc.msg} at position {exc.pos}",
            hint=f'quote it for the shell, e.g. --{what} \'{{"key": "value"}}\', or use @file.json',
        ) from None


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    no_args_is_help=True,
)
@click.option(
    "--store",
    envvar="SHOAL_STORE",
    metavar="URL",
    help="The fleet: sqlite:///path/fleet.db or memory:// (default: $SHOAL_STORE, else the "
    "nearest .shoal/fleet.db).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (for agents and scripts).")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(output.FORMATS),
    help="table (a terminal's default), tsv (a pipe's), json, or env (export NAME=value).",
)
@click.option("-v", "--verbose", count=True, help="Log more on stderr: -v info, -vv debug.")
@click.option("-q", "--quiet", count=True, help="Log less: -q errors only, -qq critical only.")
@click.version_option(__version__, prog_name="shoal")
@click.pass_context
def cli(
    ctx: click.Context,
    store: str | None,
    as_json: bool,
    output_format: str | None,
    verbose: int,
    quiet: int,
) -> None:
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
    4 store unavailable (retry).

    Logs go to stderr: -v/-vv or -q, else $SHOAL_LOG_LEVEL (DEBUG, INFO, WARNING, ERROR).
    """
    from shoal.faces.cli.logs import configure_logging

    configure_logging(verbose, quiet)
    app = ctx.ensure_object(App)
    app.store = store
    app.json = app.json or as_json or output_format == "json"
    app.format = app.format or output_format
    ctx.call_on_close(app.close)


# ---------------------------------------------------------------------- setup


@cli.command(short_help="Create (or upgrade) a fleet.")
@json_option
@pass_app
def init(app: App) -> None:
    """Create a fleet (.shoal/fleet.db here, or --store), or upgrade an existing one, e.g.
    `shoal init`, `shoal init --store postgresql://host/db`."""
    app.refuse_memory()
    fleet = Fleet.init(app.store)
    app.adopt(fleet)
    created = fleet.store.created
    app.emit(
        {"store": fleet.url, "created": created},
        f"{'created a fleet' if created else 'fleet ready'} at {fleet.url}\n"
        "next: `shoal register AGENT --skill ...` and `shoal add TITLE`",
    )


# ---------------------------------------------------------------------- tasks


@cli.command()
@click.argument("title", required=False)
@click.option(
    "--file",
    "from_file",
    metavar="FILE",
    help="Post many: JSON Lines, one task per line ('-' reads stdin); see `shoal import`.",
)
@click.option("--body", "-b", default="", help="Longer description; '-' reads stdin.")
@click.option("--payload", help="JSON data for the agent; '@file.json' reads a file.")
@click.option(
    "--priority",
    "-p",
    default="5",
    show_default=True,
    help="1 (most urgent) to 9, or critical/high/medium/low.",
)
@click.option("--skill", "-s", "skills", multiple=True, help="A skill the task requires (repeat).")
@click.option("--domain", "-d", help="The domain the task belongs to (affinity).")
@click.option("--to", "to", metavar="AGENT", help="Route it to this agent's queue.")
@click.option("--after", "after", multiple=True, type=int, metavar="ID", help="Wait for task ID.")
@click.option("--parent", type=int, metavar="ID", help="The task this one was spawned by.")
@click.option("--pinned", is_flag=True, help="Only --to AGENT may run it; never stolen.")
@click.option("--expected-duration", metavar="DURATION", help="e.g. 10m; for stall detection.")
@click.option("--lease-ttl", metavar="DURATION", help="Lease length for this task (e.g. 2h).")
@click.option("--max-attempts", type=int, help="Claims before the task is dead.")
@click.option("--key", help="Idempotency key: posting the same key again returns the first task.")
@click.option(
    "--in", "delay", metavar="DURATION", help="Not claimable until this much later (30m)."
)
@click.option(
    "--at", "at", metavar="TIME", help="Not claimable before this time (2026-12-01T09:00Z)."
)
@click.option(
    "--retry-delay", metavar="DURATION", help="Its first retry backoff (default: fleet's)."
)
@json_option
@pass_app
def add(
    app: App,
    title: str | None,
    from_file: str | None,
    body: str,
    payload: str | None,
    priority: str,
    skills: tuple[str, ...],
    domain: str | None,
    to: str | None,
    after: tuple[int, ...],
    parent: int | None,
    pinned: bool,
    expected_duration: str | None,
    lease_ttl: str | None,
    max_attempts: int | None,
    key: str | None,
    delay: str | None,
    at: str | None,
    retry_delay: str | None,
) -> None:
    """Post a task to the pool (or to an agent's queue with --to), e.g. `shoal add "fix the
    parser" --skill python -p high`; or many from JSON Lines with --file."""
    if from_file is not None:
        given = [name for name, value in (("TITLE", title), ("--to", to), ("--after", after),
                 ("--parent", parent), ("--skill", skills), ("--domain", domain),
                 ("--key", key), ("--in", delay), ("--at", at), ("--body", body),
                 ("--payload", payload), ("--pinned", pinned), ("--retry-delay", retry_delay),
                 ("--expected-duration", expected_duration), ("--lease-ttl", lease_ttl),
                 ("--max-attempts", max_attempts)) if value]  # fmt: skip
        if priority != "5":
            given.append("--priority")
        if given:
            raise BadInput(
                f"--file takes every field from the file; {', '.join(given)} would be ignored",
                hint="put the fields on each line of the file (see `shoal import --help`)",
            )
        add_from_file(app, from_file)
        return
    if title is None:
        raise BadInput(
            "add needs a title (or --file FILE)", hint='e.g. shoal add "fix the parser" -p high'
        )
    fleet = app.fleet()
    not_before = parse_moment(at, "--at") if at is not None else None
    if delay is not None:
        if at is not None:
            raise BadInput(
                "give --in or --at, not both", hint="--in 30m, or --at 2026-12-01T09:00Z"
            )
        wait = parse_duration(delay, "--in")
        if wait > MAX_DURATION:
            raise BadInput(f"--in {delay} is more than ten years", hint="give a nearer time")
        not_before = fleet.clock.now() + wait
    task, created = posting.post(
        fleet,
        title,
        body=sys.stdin.read() if body == "-" else body,
        payload=_json_arg(payload, "payload", text_ok=False),
        priority=priority,
        skills=skills,
        domain=domain,
        to=to,
        after=after,
        parent=parent,
        pinned=pinned,
        expected_duration=expected_duration,
        lease_ttl=lease_ttl,
        max_attempts=max_attempts,
        key=key,
        not_before=not_before,
        retry_delay=retry_delay,
    )
    message = posting.post_message(task, created, key, fleet.clock.now())
    app.emit(
        {**task.to_dict(), "created": created},
        f"{message}: {output.one_line(task.title)}" if created else message,
        env={"SHOAL_TASK": task.id},
    )


@cli.command()
@click.option("--agent", "-a", envvar="SHOAL_AGENT", help="Preview what this agent would claim.")
@click.option("--limit", "-n", default=20, show_default=True, help="Show at most this many.")
@json_option
@pass_app
def ready(app: App, agent: str | None, limit: int) -> None:
    """Pending tasks, in the order a claim would take them. e.g. `shoal ready --agent ada`."""
    tasks = app.fleet().ready(agent, limit=limit)
    title = f"ready for {agent}" if agent else "ready"
    none = f"nothing is ready for {agent}" if agent else "nothing is ready"
    app.emit([t.to_dict() for t in tasks], render.tasks_table(tasks, app.now(), title), empty=none)


@cli.command()
@click.argument("task_id", type=int)
@json_option
@pass_app
def show(app: App, task_id: int) -> None:
    """One task in full: fields, dependencies and history, e.g. `shoal show 12`."""
    detail = app.fleet().show(task_id)
    app.emit(detail.to_dict(), render.task_panel(detail, app.now()))


@cli.command("list")
@click.option("--state", type=click.Choice([s.value for s in TaskState]), help="Only this state.")
@click.option("--agent", "-a", help="Only tasks of this agent.")
@click.option("--limit", "-n", default=50, show_default=True, help="Show at most this many.")
@json_option
@pass_app
def list_tasks(app: App, state: str | None, agent: str | None, limit: int) -> None:
    """Tasks, newest first. e.g. `shoal list --state dead`, `shoal list --agent ada`."""
    tasks = app.fleet().tasks(state=state, agent=agent, limit=limit)
    none = "no tasks" + (f" {state}" if state else "") + (f" of {agent}" if agent else "")
    app.emit([t.to_dict() for t in tasks], render.tasks_table(tasks, app.now()), empty=none)


# ---------------------------------------------------------------------- claiming and leases


@cli.command(short_help="Claim the best task(s) an agent can do.")
@click.option("--agent", "-a", envvar="SHOAL_AGENT", show_envvar=True, help="Who is claiming.")
@click.option(
    "--n", "-n", "n", default=1, show_default=True, help="How many tasks to claim at once."
)
@click.option("--wait", default="0", metavar="SECONDS", help="Wait this long for work if none.")
@json_option
@pass_app
def claim(app: App, agent: str | None, n: int, wait: str) -> None:
    """Claim the best task(s) this agent can do; prints each task and its lease token.
    e.g. `shoal claim --agent ada --json`, or for the shell
    eval "$(shoal claim --agent ada --format env)" (then `shoal done`).

    Exits 1 when nothing was claimed (reason "empty", "busy", or "paused": the circuit
    breaker holds the agent after failure_streak failures in a row).
    """
    if not agent:
        raise BadInput("claim needs an agent", hint="pass --agent ID (or set SHOAL_AGENT)")
    fleet = app.fleet()
    result = fleet.claim(agent, n, wait=wait)
    data = result.to_dict(fleet.clock.now())
    if app.json and n == 1 and result:
        # One task: also at the top level, so agents can read .task.id and .lease.token.
        data = {**data, **data["claimed"][0]}
    human = render.claim_text(result, fleet.clock.now())
    if result.reason == "busy":  # say what it holds: that is why
        held = [lease.task_id for lease in fleet.leases(agent)]
        data = {**data, "held": held}
        human.append(f" (it holds {', '.join(map(str, held))})", style="yellow")
    if not result and app.output_format() == "env":
        # For `eval "$(shoal claim --format env)" && work`: fail the eval, and forget any
        # task from before, so that nothing acts on it again.
        click.echo("unset SHOAL_TASK SHOAL_LEASE; false")
        app.err.print(human, soft_wrap=True)
        sys.exit(EXIT_NOTHING)
    env: dict[str, object] = {}
    if result:  # for eval: the first task and its lease, and who holds it
        env = {"SHOAL_AGENT": agent}
        for i, (task, lease) in enumerate(result.items()):
            suffix = "" if i == 0 else f"_{i + 1}"
            env[f"SHOAL_TASK{suffix}"], env[f"SHOAL_LEASE{suffix}"] = task.id, lease.token
    app.emit(data, human, env=env)
    if not result:
        sys.exit(EXIT_NOTHING)


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


@cli.command()
@_task_argument
@_token_option
@click.option("--result", "-r", help="The result: JSON, or plain text; '@file' or '-' to read.")
@json_option
@pass_app
def done(app: App, task_id: int, token: str | None, result: str | None) -> None:
    """Complete a task you hold. e.g. `shoal done 12 --token T --result '{"ok": true}'`, or
    just `shoal done` after eval "$(shoal claim --agent ada --format env)"."""
    outcome = app.fleet().complete(
        _lease(task_id, token), _json_arg(result, "result", text_ok=True)
    )
    words = "was already done; nothing changed" if outcome.already_done else "done"
    if outcome.released:
        words += f"; now ready: {', '.join(map(str, outcome.released))}"
    app.emit(outcome.to_dict(app.now()), f"task {task_id} {words}")


@cli.command(short_help="Report that a task you hold failed.")
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
    note = render.ready_note(task, fleet.clock.now())
    app.emit(
        task.to_dict(),
        f"task {task.id} failed; it is {task.state.value} now" + (f", {note}" if note else ""),
    )


@cli.command()
@_task_argument
@_token_option
@click.option(
    "--agent", "-a", envvar="SHOAL_AGENT", help="The agent holding it (then no token needed)."
)
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


@cli.command(short_help="Set a held task aside until others are done.")
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


@cli.command()
@click.argument("agent", required=False)
@click.option("--agent", "-a", "agent_opt", envvar="SHOAL_AGENT", help="The agent.")
@json_option
@pass_app
def heartbeat(app: App, agent: str | None, agent_opt: str | None) -> None:
    """Say an agent is alive and extend its leases. e.g. `shoal heartbeat ada` (or with
    SHOAL_AGENT set, `shoal heartbeat`)."""
    who = agent or agent_opt
    if not who:
        raise BadInput("heartbeat needs an agent", hint="shoal heartbeat AGENT (or --agent)")
    leases = app.fleet().heartbeat(who)
    app.emit(
        {"agent": who, "leases": [lease.to_dict(app.now()) for lease in leases]},
        f"{who} is alive; {len(leases)} lease(s) extended",
    )


# ---------------------------------------------------------------------- agents


@cli.command()
@click.argument("agent", envvar="SHOAL_AGENT")
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


@cli.command()
@json_option
@pass_app
def agents(app: App) -> None:
    """Every agent the fleet knows. e.g. `shoal agents`, `shoal agents --json`."""
    found = app.fleet().agents()
    none = "no agents yet: `shoal register AGENT --skill ...`"
    app.emit([a.to_dict() for a in found], render.agents_table(found, app.now()), empty=none)


# ---------------------------------------------------------------------- the hub


@cli.command(short_help="The fleet at a glance.")
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

        watch_status(app.fleet(), app.out, parse_duration(interval, "--interval"))
        return
    snapshot = app.fleet().status()
    app.emit(snapshot.to_dict(), render.status_view(snapshot))


@cli.command(short_help="Recommend spawning or retiring agents.")
@json_option
@pass_app
def assess(app: App) -> None:
    """Assess the workload: spawn, terminate_idle or maintain (recommends only), e.g.
    `shoal assess`."""
    result = app.fleet().assess()
    app.emit(result.to_dict(), render.assessment_panel(result, result.at))


@cli.command(short_help="Move queued work to agents idle for a while.")
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


@cli.command(short_help="Expire leases, mark silent agents offline...")
@json_option
@pass_app
def reap(app: App) -> None:
    """Expire leases, mark silent agents offline, end idle ephemeral agents, flag stalls,
    e.g. `shoal reap` (`shoal monitor` does it on an interval)."""
    report = app.fleet().reap()
    app.emit(report.to_dict(), render.reap_text(report))


@cli.command(short_help="The event log (one event per state change).")
@click.option("--since", default=0, show_default=True, help="Only events after this id.")
@click.option("--task", type=int, help="Only events of this task.")
@click.option("--agent", "-a", help="Only events of this agent.")
@click.option("--tail", "-n", "limit", default=100, show_default=True, help="The newest N events.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new events (Ctrl-C stops).")
@json_option
@pass_app
def events(
    app: App, since: int, task: int | None, agent: str | None, limit: int, follow: bool
) -> None:
    """The event log: the newest --tail events, newest last (every state change is one
    event). e.g. `shoal events -n 20 --follow`, `shoal events --task 12`."""
    fleet = app.fleet()
    found = fleet.events(since, task=task, agent=agent, limit=limit, newest=True)
    if not follow:
        table = render.events_table(found, app.now())
        app.emit([e.to_dict() for e in found], table, empty="no events")
        return
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


@cli.group()
def config() -> None:
    """Read or change fleet settings. e.g. `shoal config list`, `shoal config get
    lease_ttl`, `shoal config set lease_ttl 15m`."""


@config.command("get")
@click.argument("name", required=False)
@json_option
@pass_app
def config_get(app: App, name: str | None) -> None:
    """Show all settings with their defaults and meaning, or one: `shoal config get
    lease_ttl`. Durations read 10m, 1h30m; JSON gives seconds."""
    settings = app.fleet().settings()
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
    """Change a setting, e.g. `shoal config set lease_ttl 15m`."""
    from shoal.settings import format_setting

    settings = app.fleet().configure(**{name: value})
    new = getattr(settings, name)
    app.emit({name: new}, f"{name} = {format_setting(new, name)}")


@cli.group("mcp", invoke_without_command=True, short_help="Serve the fleet to LLM agents over MCP.")
@click.option("--agent", "-a", help="Act as this agent only (registered at start).")
@click.option("--role", default="worker", show_default=True, help="With --agent: its role.")
@click.option("--skill", "-s", "skills", multiple=True, help="With --agent: a skill (repeat).")
@click.option("--domain", "-d", "domains", multiple=True, help="With --agent: a domain (repeat).")
@click.option("--max-concurrent", default=1, show_default=True, help="With --agent.")
@click.option("--manager", is_flag=True, help="With --agent: a manager.")
@click.option("--ephemeral", is_flag=True, help="With --agent: retired when idle too long.")
@click.option(
    "--transport", type=click.Choice(["stdio", "http"]), default="stdio", help="stdio or http."
)
@click.option("--host", default="127.0.0.1", show_default=True, help="With --transport http.")
@click.option("--port", default=8765, show_default=True, help="With --transport http.")
@SESSION_TTL_OPTION
@pass_app
@click.pass_context
def mcp(
    ctx: click.Context,
    app: App,
    agent: str | None,
    role: str,
    skills: tuple[str, ...],
    domains: tuple[str, ...],
    max_concurrent: int,
    manager: bool,
    ephemeral: bool,
    transport: str,
    host: str,
    port: int,
    session_ttl: str,
) -> None:
    """Serve the fleet to LLM agents over the Model Context Protocol (stdio by default).

    With --agent, this server acts as that one agent (registered at start with the
    --skill/--domain/... given) and refuses to act as any other; without it, tools take
    an `agent` argument. Needs the MCP SDK: pip install 'shoal[mcp]'. `shoal mcp config
    --client claude` prints the JSON that registers it with a client.
    """
    if ctx.invoked_subcommand is not None:  # `shoal mcp config`: not serving
        return
    from shoal.faces.cli.mcp import run_mcp

    spec = {
        "role": role,
        "skills": skills,
        "domains": domains,
        "max_concurrent": max_concurrent,
        "manager": manager,
        "ephemeral": ephemeral,
    }
    app.refuse_memory()
    # The opener, not an open fleet: a store that cannot be opened yet (or a full fleet)
    # must not stop the server before the handshake -- its tools say what is wrong.
    run_mcp(app.fleet, agent, spec, transport, host, port, app.err, session_ttl)


@cli.command(short_help="Watch a small fleet work, steal and finish.")
@click.option("--agents", "agent_count", default=4, show_default=True, help="Agents to run.")
@click.option("--tasks", "task_count", default=80, show_default=True, help="Tasks to post.")
@click.option("--speed", default=1.0, show_default=True, help="Run faster (>1) or slower.")
@click.option("--seed", default=7, show_default=True, help="The workload's random seed.")
@click.option(
    "--dir",
    "folder",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to create the demo's fleet (default: a new temporary folder).",
)
@click.option("--quiet", is_flag=True, help="Only the summary.")
@json_option
@pass_app
def demo(
    app: App,
    agent_count: int,
    task_count: int,
    speed: float,
    seed: int,
    folder: Path | None,
    quiet: bool,
) -> None:
    """Watch a fleet work: agents with domains share a skewed workload, steal, finish.
    e.g. `shoal demo`, `shoal demo --agents 6 --speed 4`.

    The demo always runs on a new fleet of its own, never on yours (--store and
    SHOAL_STORE are ignored), and says where it is so you can look around afterwards.
    """
    from shoal.faces.cli.demo import run_demo

    summary = run_demo(
        folder=folder,
        agents=agent_count,
        tasks=task_count,
        speed=speed,
        seed=seed,
        console=None if (quiet or app.json) else app.out,
    )
    app.emit(summary.to_dict(), render_summary(summary))


cli.add_command(sim_command)  # `shoal sim`: the scheduling simulator (shoal.sim)


def render_summary(summary: Any) -> Any:
    from shoal.faces.cli.demo import summary_view

    return summary_view(summary)


add_runtime_commands(cli)  # shoal worker, monitor, supervise
add_cleanup_commands(cli)  # shoal cancel, retry, agent, set-status
add_doctor_commands(cli)  # shoal doctor
add_import_commands(cli)  # shoal import beads|github|jsonl
add_prime_commands(cli)  # shoal prime
mcp.add_command(mcp_config_command)  # shoal mcp config


# ---------------------------------------------------------------------- entry point


def main(argv: list[str] | None = None) -> NoReturn:
    """Run the CLI; turn shoal errors into a message with a hint and a documented exit code."""
    args = sys.argv[1:] if argv is None else argv
    app = App(None, as_json=False)
    try:
        cli.main(args=args, prog_name="shoal", standalone_mode=False, obj=app)
    except ShoalError as exc:
        _fail(app, args, exc.to_dict(), exc.message, exc.hint, exit_code_for(exc))
    except click.exceptions.Abort:
        sys.exit(130)
    except click.exceptions.NoArgsIsHelpError as exc:  # bare `shoal`: the help, not an error
        click.echo(exc.ctx.get_help() if exc.ctx else cli.get_help(click.Context(cli)))
        sys.exit(EXIT_OK)
    except click.ClickException as exc:
        hint = "see `shoal --help` or `shoal COMMAND --help`"
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


def _fail(
    app: App, args: list[str], data: dict[str, Any], message: str, hint: str | None, code: int
) -> NoReturn:
    if app.json or "--json" in args:
        click.echo(output.json_text({"error": data}, pretty=app.out.is_terminal))
    else:
        render.print_error(app.err, message, hint)
    sys.exit(code)


if __name__ == "__main__":
    main()
