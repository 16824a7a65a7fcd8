"""``shoal worker``, ``shoal monitor`` and ``shoal supervise``: the long-running commands.

``root.py`` registers them with ``add_runtime_commands``; they use only what every command
shares, the ``App``: the store URL, the output mode, the consoles and the open fleet. Each
prints one readable line per thing that happens (or one JSON object per line with
``--json``), and stops cleanly on SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.live import Live
from rich.text import Text

from shoal.errors import BadInput
from shoal.faces.cli.app import App, agent_option, json_flag, pass_app
from shoal.faces.cli.live import supervisor_view
from shoal.faces.output import clean, one_line
from shoal.runtime.command import check_command
from shoal.runtime.hub import Hub, HubAction
from shoal.runtime.supervisor import Supervisor, SupervisorEvent, WorkerSpec
from shoal.runtime.worker import CommandHandler, Worker
from shoal.times import iso_time
from shoal.validation import parse_duration, positive_duration

__all__ = ["add_runtime_commands", "claimed_from", "worker_argv"]

F = TypeVar("F", bound=Callable[..., Any])

#: How a process runs the shoal CLI (the installed script may not be on PATH).
SHOAL = [sys.executable, "-c", "from shoal.faces.cli import main; main()"]


#: ``--json`` here: the commands run until stopped, so one JSON object per line, not one
#: document.
_json_lines = json_flag("Print one JSON object per line.")


def _above_zero(value: str, what: str) -> float:
    """A duration option that must be above zero (and at most a year)."""
    seconds = positive_duration(value, what)
    assert seconds is not None  # the option has a default
    return seconds


def _stamp() -> str:
    return time.strftime("%H:%M:%S")


def _line(kind: str, text: str) -> Text:
    """A line for people: the time, then the words in the style of their kind."""
    line = Text(f"{_stamp()}  ", style="dim")
    line.append(clean(text), style=_STYLE.get(kind, ""))  # may quote a task's title
    return line


class _Printer:
    """One line per happening: text for people, a JSON object per line with --json."""

    def __init__(self, console: Console, as_json: bool) -> None:
        self.console, self.json = console, as_json
        self.lock = threading.RLock()

    def __call__(self, kind: str, text: str, data: dict[str, Any]) -> None:
        with self.lock:
            if self.json:
                at = iso_time(time.time())
                click.echo(json.dumps({"at": at, "kind": kind, **data}, default=str))
            else:
                self.console.print(_line(kind, text), soft_wrap=True)


_STYLE = {
    "stolen": "bold red",
    "failed": "red",
    "crashed": "bold red",
    "lost": "red",
    "done": "green",
    "spawned": "bold cyan",
    "restarted": "cyan",
    "stopping": "yellow",
    "exited": "yellow",
    "idle": "yellow",
    "moved": "bold blue",
    "assessed": "magenta",
}


@contextmanager
def _on_signals(first: Callable[[], None], again: Callable[[], None]) -> Iterator[None]:
    """SIGTERM/SIGINT: ``first()`` the first time, ``again()`` after that."""
    count = [0]

    def handler(_signum: int, _frame: object) -> None:
        count[0] += 1
        (first if count[0] == 1 else again)()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


# ---------------------------------------------------------------------- worker


def claimed_from(source: object) -> str:
    """Where a claim found its task, in words: the pool is everyone's, a queue the agent's
    own ("from its pool" read as if each agent had a pool)."""
    return "from the pool" if source == "pool" else f"from its {source}"


def worker_line(kind: str, data: dict[str, Any]) -> str | None:
    """Words for one thing a worker did (None: not worth a line)."""
    agent, task = data.get("agent", ""), data.get("task")
    title = one_line(str(data.get("title", "")))  # from agents: one safe line
    if kind == "registered":
        skills = ",".join(data.get("skills", [])) or "none"
        domains = ",".join(data.get("domains", [])) or "none"
        return f"{agent} registered (skills {skills}; domains {domains})"
    if kind == "claimed":
        if data.get("source") == "steal":
            return f"{agent} STEALS #{task} from {data.get('origin')}: {title}"
        return f"{agent} claims #{task} {claimed_from(data.get('source'))}: {title}"
    if kind == "done":
        return f"{agent} done #{task} in {data.get('seconds', 0):.2f}s"
    if kind == "failed":
        return f"{agent} failed #{task} ({data.get('state')} now): {data.get('error')}"
    if kind == "released":
        return f"{agent} released #{task}: {data.get('why')}"
    if kind == "fault":
        return f"{agent} cannot run #{task}, stopping: {data.get('error')}"
    if kind == "lost":
        return f"{agent} lost #{task}: {data.get('error')}"
    if kind == "deferred":
        return f"{agent} deferred #{task} until its children are done"
    if kind == "paused":
        return (
            f"{agent} is paused by the circuit breaker (it failed task after task) until "
            f"{data.get('until')}; fix what fails, then `shoal agent resume {agent}`"
        )
    if kind == "idle":
        grace = data.get("grace")
        tail = f"; leaves after {grace:g}s without work" if grace is not None else ""
        return f"{agent} is idle{tail}"
    if kind == "draining":
        return f"{agent} draining {len(data.get('running', []))} task(s) for {data['seconds']:g}s"
    if kind == "signal":
        if data.get("again"):
            return f"{agent} got {data.get('signal')} again: releasing running tasks now"
        return f"{agent} got {data.get('signal')}: no more claims; finishing what runs"
    if kind == "left":
        why = {"idle": "idle past its grace", "stopped": "stopped", "terminated": "terminated",
               "fault": "its command cannot run"}  # fmt: skip
        return (
            f"{agent} left ({why.get(data.get('reason', ''), data.get('reason'))}): "
            f"{data.get('done')} done, {data.get('failed')} failed, "
            f"{data.get('released')} released, {data.get('stolen')} stolen"
        )
    if kind in ("error", "heartbeat-failed", "store-unavailable", "terminated"):
        return f"{agent} {kind}: {data.get('error') or data.get('why')}"
    return None


def worker_argv(
    spec: WorkerSpec,
    command: list[str],
    *,
    max_concurrent: int = 1,
    timeout: float | None = None,
    drain: float | None = None,
    as_json: bool = False,
) -> list[str]:
    """The command line of a ``shoal worker`` process for ``spec``, run by a ``Supervisor``
    (which gives it the store in its environment: a command line is public, and a store's
    URL may hold a password)."""
    argv = [*SHOAL, "worker", "--supervised", "--agent", spec.agent]
    for skill in spec.skills:
        argv += ["--skill", skill]
    for domain in spec.domains:
        argv += ["--domain", domain]
    argv += ["--max-concurrent", str(max_concurrent)]
    if spec.ephemeral:
        argv.append("--ephemeral")
    if timeout is not None:
        argv += ["--timeout", f"{timeout:g}"]
    if drain is not None:
        argv += ["--drain", f"{drain:g}"]
    if as_json:
        argv.append("--json")
    return [*argv, "--", *command]


@click.command(short_help="Be an agent: run a command for every task claimed.")
@agent_option("The agent id.", required=True)
@click.option("--skill", "-s", "skills", multiple=True, help="A skill it has (repeat).")
@click.option("--domain", "-d", "domains", multiple=True, help="A domain it knows (repeat).")
@click.option("--role", default="worker", show_default=True, help="What it does (free text).")
@click.option(
    "--max-concurrent", default=1, show_default=True, type=click.IntRange(1),
    help="Tasks run at once.",
)  # fmt: skip
@click.option("--ephemeral", is_flag=True, help="Leave the fleet after idle_timeout without work.")
@click.option("--timeout", metavar="DURATION", help="Stop and fail a task running this long.")
@click.option(
    "--drain", default="30s", show_default=True, metavar="DURATION", help="On SIGTERM, wait this "
    "long for running tasks before releasing them."
)  # fmt: skip
@click.option(
    "--supervised", is_flag=True, hidden=True, help="stdin is a pipe from the supervisor "
    "that started this worker: its end means the supervisor died; stop at once.",
)  # fmt: skip
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@_json_lines
@pass_app
def worker(
    app: App,
    agent: str,
    skills: tuple[str, ...],
    domains: tuple[str, ...],
    role: str,
    max_concurrent: int,
    ephemeral: bool,
    timeout: str | None,
    drain: str,
    supervised: bool,
    command: tuple[str, ...],
) -> None:
    """Register AGENT and run COMMAND once per task it claims, until stopped (or, with
    --ephemeral, until idle past the fleet's idle_timeout).

    \b
    The task reaches COMMAND as:
      environment  SHOAL_TASK_ID, SHOAL_TASK_TITLE, SHOAL_TASK_PRIORITY, SHOAL_TASK_SKILLS,
                   SHOAL_TASK_DOMAIN, SHOAL_TASK_ATTEMPT, SHOAL_TASK_PAYLOAD(_FILE),
                   SHOAL_TOKEN, SHOAL_AGENT, SHOAL_STORE (so `shoal add --parent
                   $SHOAL_TASK_ID ...` inside it just works)
      stdin        the task's body
      arguments    {id} {title} {priority} {domain} {skills} {agent} {payload[key]}

    Exit 0 completes the task with stdout (JSON if it parses, else text; 64 KiB at most)
    as the result; any other exit fails it with the tail of stderr (retried while attempts
    remain). SIGTERM or Ctrl-C: no more claims, running tasks get --drain to finish, then
    are released; a second signal releases them at once. If the worker dies, even by
    kill -9, its command's whole process group ends within a second; if its lease is lost
    (a heartbeat finds it gone, or none renews it before it could run out: the store out
    of reach, the clock jumped), the command is stopped: the task is another agent's now.

    A COMMAND that is not found or not executable is refused before anything is claimed
    (exit 2). One that cannot be started for a task (or exits 126/127, a shell's "cannot
    run" and "not found") is the worker's fault, not the task's: the task is released
    untouched, and the worker stops as on SIGTERM, then exits 2.

    \b
    Example:  shoal worker --agent ada --skill python -- ./run-task.sh {id}
    """
    if not command:
        raise BadInput(
            "shoal worker needs a command to run for each task",
            hint="put it after --, e.g. shoal worker --agent ada -- ./do-task.sh {id}",
        )
    handler = CommandHandler(list(command))  # refuses a command that cannot run, first
    fleet = app.fleet()
    printer = _Printer(app.out, app.json)

    def listener(kind: str, data: dict[str, Any]) -> None:
        text = worker_line(kind, data)
        if text is not None or app.json:
            printer(kind, text or kind, data)

    runner = Worker(
        fleet,
        agent,
        handler,
        skills=skills,
        domains=domains,
        role=role,
        max_concurrent=max_concurrent,
        ephemeral=ephemeral,
        timeout=positive_duration(timeout, "--timeout"),
        drain=parse_duration(drain, "--drain"),
        listener=listener,
    )
    if supervised:
        _follow_supervisor(runner)
    report = runner.run(handle_signals=True)
    if report.reason == "fault":  # the work is intact; the command needs fixing
        raise BadInput(f"{agent}: {report.why}", hint=report.hint)


def _follow_supervisor(runner: Worker) -> None:
    """End with the supervisor: its pipe on our stdin closes when it dies, however it dies
    (the kernel closes a dead process's files). Then stop at once, releasing what runs,
    with our output (its pipes, read by nobody now) sent to /dev/null."""
    supervisor = os.getppid()

    def watch() -> None:
        with suppress(OSError):
            while os.read(0, 4096):
                pass
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            os.dup2(devnull, fd)
        os.close(devnull)
        runner.stop(now=True, why=f"its supervisor (pid {supervisor}) died")

    threading.Thread(target=watch, name="shoal-supervisor", daemon=True).start()


# ---------------------------------------------------------------------- monitor


@click.command(short_help="The hub: reap, rebalance and assess on an interval.")
@click.option(
    "--interval", default="5s", show_default=True, metavar="DURATION", help="Time between passes."
)
@click.option("--once", is_flag=True, help="One pass, then exit.")
@_json_lines
@pass_app
def monitor(app: App, interval: str, once: bool) -> None:
    """Reap, rebalance and assess every --interval, one line per thing done (Ctrl-C stops),
    e.g. `shoal monitor`, `shoal monitor --once --json`.

    Expired leases go back to pending, silent agents offline (their queues to the pool),
    idle ephemeral agents are terminated, stalled tasks flagged; queued work moves to
    agents idle for a while; the assessment is logged when it changes.
    """
    every = _above_zero(interval, "--interval")
    hub = Hub(app.fleet())
    printer = _Printer(app.out, app.json)

    def on_action(action: HubAction) -> None:
        printer(action.kind, action.text, action.to_dict())

    if once:
        for action in hub.step().actions:
            on_action(action)
        return
    stop = threading.Event()
    if not app.json:
        app.out.print(f"{_stamp()}  monitoring {app.fleet().where} every {every:g}s", style="dim")
    with _on_signals(stop.set, stop.set):
        hub.run(every, stop, on_action)


# ---------------------------------------------------------------------- supervise


@click.command(short_help="Run local workers, as many as the work calls for.")
@click.option("--max-agents", "maximum", type=int, required=True, help="Hard cap on workers.")
@click.option("--min", "minimum", type=int, default=0, show_default=True, help="Workers kept.")
@click.option(
    "--interval", default="2s", show_default=True, metavar="DURATION", help="Time between passes."
)
@click.option(
    "--cooldown", default="10s", show_default=True, metavar="DURATION",
    help="Least time between two scaling changes.",
)  # fmt: skip
@click.option("--skill", "-s", "skills", multiple=True, help="A skill every worker has.")
@click.option("--domain", "-d", "domains", multiple=True, help="A domain every worker knows.")
@click.option("--prefix", help="Agent ids are PREFIX-1, PREFIX-2... (default: host-pid).")
@click.option(
    "--max-concurrent", default=1, show_default=True, type=click.IntRange(1),
    help="Tasks per worker at once.",
)  # fmt: skip
@click.option("--timeout", metavar="DURATION", help="Per-task timeout of each worker.")
@click.option(
    "--drain",
    default="30s",
    show_default=True,
    metavar="DURATION",
    help="On stop, how long workers may finish what they run.",
)
@click.option(
    "--log-dir", type=click.Path(file_okay=False), metavar="DIR",
    help="Keep each worker's stdout and stderr in DIR/AGENT.log (private, rotated at 10 MB, "
    "3 old files kept); e.g. --log-dir .shoal/logs",
)  # fmt: skip
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@_json_lines
@pass_app
def supervise(
    app: App,
    maximum: int,
    minimum: int,
    interval: str,
    cooldown: str,
    skills: tuple[str, ...],
    domains: tuple[str, ...],
    prefix: str | None,
    max_concurrent: int,
    timeout: str | None,
    drain: str,
    log_dir: str | None,
    command: tuple[str, ...],
) -> None:
    """Start and stop `shoal worker -- COMMAND` processes to follow the assessment.

    Every --interval: reap, rebalance and assess (no monitor needed besides), then start a
    worker when the work calls for one (with the skills the pending work needs, up to
    --max-agents) or stop one that sits idle (down to --min), one change per --cooldown.
    Workers above --min are ephemeral and also leave by themselves once idle. Crashed
    workers are restarted with a growing delay. Ctrl-C drains and stops them all.
    With --log-dir each worker's output is kept in its own file (logging at the level of
    this command's -v/-q or $SHOAL_LOG_LEVEL).

    \b
    Example:  shoal supervise --max-agents 4 --skill python -- ./run-task.sh {id}
              shoal -v supervise --max-agents 4 --log-dir .shoal/logs -- ./run-task.sh {id}
    """
    if not command:
        raise BadInput(
            "shoal supervise needs the command its workers run",
            hint="put it after --, e.g. shoal supervise --max-agents 4 -- ./do-task.sh {id}",
        )
    # Checked here, once: a value a worker refused would crash every worker it started.
    check_command(command)
    task_timeout = positive_duration(timeout, "--timeout")
    drain_s = parse_duration(drain, "--drain")
    fleet = app.fleet()
    live = sys.stdout.isatty() and not app.json
    log: deque[Text] = deque(maxlen=12)
    printer = _Printer(app.out, app.json)

    def listener(event: SupervisorEvent) -> None:
        if live:
            log.append(_line(event.kind, event.text))
        else:
            printer(event.kind, event.text, event.to_dict())

    sup = Supervisor(
        fleet,
        lambda spec: worker_argv(
            spec,
            list(command),
            max_concurrent=max_concurrent,
            timeout=task_timeout,
            drain=drain_s,
        ),
        maximum=maximum,
        minimum=minimum,
        interval=parse_duration(interval, "--interval"),
        cooldown=parse_duration(cooldown, "--cooldown"),
        skills=skills,
        domains=domains,
        prefix=prefix or _default_prefix(),
        drain=drain_s,
        listener=listener,
        # The workers log at this command's level, into their files.
        env=None if log_dir is None else {"SHOAL_LOG_LEVEL": _log_level()},
        log_dir=log_dir,
    )
    stop = threading.Event()

    def hurry() -> None:
        sup.hurry()

    with _on_signals(stop.set, hurry):
        if live:
            with Live(supervisor_view(sup, log), console=app.out, refresh_per_second=4) as view:
                sup.run(stop, on_pass=lambda: view.update(supervisor_view(sup, log)))
        else:
            sup.run(stop)
    if sup.fault is not None:
        raise BadInput(
            f"the supervisor stopped: {sup.fault}",
            hint="fix the command after -- (install what it runs, correct its name or path, "
            "or chmod +x it); the task it could not run is back in the pool, untouched",
        )


def _log_level() -> str:
    """The level the ``shoal`` loggers log at here, as SHOAL_LOG_LEVEL spells it."""
    level = logging.getLogger("shoal").getEffectiveLevel()
    name = logging.getLevelName(level)
    return name if isinstance(name, str) and not name.startswith("Level ") else str(level)


def _default_prefix() -> str:
    import socket

    return f"{socket.gethostname().split('.')[0]}-{os.getpid()}"


def add_runtime_commands(group: click.Group) -> None:
    """Register the runtime's commands on the ``shoal`` group."""
    for command in (worker, monitor, supervise):
        group.add_command(command)
