"""The tasks: post them (``add``), look at them (``list``, ``show``, ``ready``), and clean up
after trouble (``cancel``, ``retry``, one task or many). ``shoal import`` is in imports.py.

A bulk action names what it touches by state (and domain or agent) and says how many it
touched. More than ``CONFIRM_ABOVE`` tasks need ``--yes`` (or a yes at a terminal's prompt),
so a mistyped filter cannot cancel a backlog. Each task is its own transaction: a task that
changed under the command (a retry racing a claim) is reported and skipped, never fatal.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import click

from shoal.errors import BadInput, InvalidTransition, ShoalError, exit_code_for
from shoal.faces import output, posting
from shoal.faces.cli import loop, paging
from shoal.faces.cli.app import App, agent_option, json_arg, json_option, pass_app, render
from shoal.model import Task, TaskState
from shoal.settings import MAX_DURATION
from shoal.times import parse_moment
from shoal.validation import parse_duration
from shoal.vocabulary import CANCELLABLE_STATES, RETRIABLE_STATES, names

if TYPE_CHECKING:
    from shoal.fleet import Fleet

__all__ = ["CONFIRM_ABOVE", "add_task_commands"]


@click.command()
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
@click.option("--label", "-l", "labels", multiple=True, help="A label to find it by (repeat).")
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
@click.option("--group", "group", metavar="NAME", help="Its concurrency group (shoal group).")
@click.option("--every", metavar="DURATION", help="Recurring: post it again every 30m, 1d...")
@click.option("--cron", metavar="EXPR", help='Recurring: at cron times ("0 3 * * *").')
@click.option("--tz", metavar="ZONE", help="--cron's time zone (Europe/Paris; default UTC).")
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
    labels: tuple[str, ...],
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
    group: str | None,
    every: str | None = None,
    cron: str | None = None,
    tz: str | None = None,
) -> None:
    """Post a task to the pool (or to an agent's queue with --to); or many from JSON Lines
    with --file; or again and again with --every or --cron (see `shoal schedule`).

    e.g. `shoal add "fix the parser" --skill python -p high`,
    `shoal add "check the sensors" --every 30m`.
    """

    def task_fields() -> dict[str, Any]:
        """The task's fields as given, for one task or a schedule's every occurrence."""
        return {
            "body": sys.stdin.read() if body == "-" else body,
            "payload": json_arg(payload, "payload", text_ok=False),
            "priority": priority,
            "skills": skills,
            "domain": domain,
            "to": to,
            "after": after,
            "parent": parent,
            "pinned": pinned,
            "expected_duration": expected_duration,
            "lease_ttl": lease_ttl,
            "max_attempts": max_attempts,
            "key": key,
            "retry_delay": retry_delay,
            "group": group,
            "labels": labels,
        }

    if every is not None or cron is not None or tz is not None:
        if from_file is not None or title is None:
            raise BadInput(
                "a recurring task is one TITLE, not --file",
                hint='e.g. shoal add "check the sensors" --every 30m',
            )
        from shoal.faces.cli.schedules import add_schedule  # schedules load only here

        add_schedule(
            app,
            title,
            every=every,
            cron=cron,
            tz=tz,
            delay=delay,
            at=at,
            **task_fields(),
        )
        return
    if from_file is not None:
        given = [name for name, value in (("TITLE", title), ("--to", to), ("--after", after),
                 ("--parent", parent), ("--skill", skills), ("--domain", domain),
                 ("--key", key), ("--in", delay), ("--at", at), ("--body", body),
                 ("--payload", payload), ("--pinned", pinned), ("--retry-delay", retry_delay),
                 ("--expected-duration", expected_duration), ("--lease-ttl", lease_ttl),
                 ("--max-attempts", max_attempts), ("--group", group),
                 ("--label", labels)) if value]  # fmt: skip
        if priority != "5":
            given.append("--priority")
        if given:
            raise BadInput(
                f"--file takes every field from the file; {', '.join(given)} would be ignored",
                hint="put the fields on each line of the file (see `shoal import --help`)",
            )
        from shoal.faces.cli.imports import add_from_file  # the importers load only here

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
    task, created = posting.post(fleet, title, not_before=not_before, **task_fields())
    message = posting.post_message(task, created, key, fleet.clock.now())
    app.emit(
        {**task.to_dict(), "created": created},
        f"{message}: {output.one_line(task.title)}" if created else message,
        env={"SHOAL_TASK": task.id},
    )


@click.command()
@agent_option("Preview what this agent would claim.")
@click.option("--limit", "-n", default=20, show_default=True, help="Show at most this many.")
@json_option
@pass_app
def ready(app: App, agent: str | None, limit: int) -> None:
    """Pending tasks, in the order a claim would take them.

    e.g. `shoal ready --agent ada`.
    """
    tasks = app.fleet(read_only=True).ready(agent, limit=limit)
    title = f"ready for {agent}" if agent else "ready"
    none = f"nothing is ready for {agent}" if agent else "nothing is ready"
    app.emit(
        [t.to_dict() for t in tasks],
        lambda: render.tasks_table(tasks, app.now(), title),
        empty=none,
    )


@click.command()
@click.argument("task_id", type=int)
@json_option
@pass_app
def show(app: App, task_id: int) -> None:
    """One task in full: fields, dependencies and history.

    e.g. `shoal show 12`.
    """
    detail = app.fleet(read_only=True).show(task_id)
    app.emit(detail.to_dict(), lambda: render.task_panel(detail, app.now()))


@click.command("list")
@click.option("--state", type=click.Choice(names(TaskState)), help="Only this state.")
@agent_option("Only tasks of this agent.", from_env=False)
@click.option("--label", "-l", help="Only tasks carrying this label.")
@paging.limit_option(50, "-n")
@paging.all_option
@paging.id_option("--before", "Only tasks older than task ID (the next page: the last shown).")
@paging.no_header_option
@json_option
@pass_app
def list_tasks(
    app: App,
    state: str | None,
    agent: str | None,
    label: str | None,
    limit: int | None,
    show_all: bool,
    before: int | None,
    no_header: bool,
) -> None:
    """Tasks, newest first, 50 at a time (--limit N, --all); --before ID goes on from the
    last one shown, and a line on stderr says when there are more.

    e.g. `shoal list --state dead`, `shoal list --agent ada`, `shoal list --label backend`,
    `shoal list --before 120`.
    """
    loop.list_tasks(app, state, agent, label, limit, show_all, before, no_header)


# ---------------------------------------------------------------------- cleaning up

#: Bulk actions on more tasks than this ask for --yes.
CONFIRM_ABOVE = 10
#: Tasks read per page while selecting.
_PAGE = 1000


def _selected(
    fleet: Fleet, state: TaskState, domain: str | None, agent: str | None
) -> Iterator[Task]:
    """Every task in ``state`` (of ``domain`` and ``agent``, if given), oldest first."""
    pages: list[list[Task]] = []
    before: int | None = None
    while True:
        page = fleet.tasks(state=state, agent=agent, limit=_PAGE, before=before)
        pages.append([t for t in page if domain is None or t.domain == domain])
        if len(page) < _PAGE:
            break
        before = page[-1].id
    for page in reversed(pages):
        yield from reversed(page)


def _confirm(app: App, verb: str, count: int, yes: bool) -> None:
    """Refuse a bulk action on more than CONFIRM_ABOVE tasks unless confirmed."""
    if count <= CONFIRM_ABOVE or yes:
        return
    if not app.json and sys.stdin.isatty() and sys.stderr.isatty():
        if click.confirm(f"{verb} {count} tasks?", err=True):
            return
        raise click.exceptions.Abort
    raise BadInput(
        f"this would {verb} {count} tasks; nothing was changed",
        hint="pass --yes to confirm, or narrow it with --domain or --agent",
    )


def _bulk(
    app: App,
    verb: str,
    ids: tuple[int, ...],
    chosen: list[Task],
    act: Callable[[int], Task],
    yes: bool,
) -> None:
    """Apply ``act`` to the listed ``ids`` or the selected tasks, and report."""
    targets = list(dict.fromkeys(ids)) or [t.id for t in chosen]  # each id once, in order
    if not targets:
        app.emit({"count": 0, "tasks": [], "skipped": []}, f"no tasks to {verb}")
        return
    _confirm(app, verb, len(targets), yes)
    done: list[Task] = []
    skipped: list[dict[str, Any]] = []
    exit_code = 0
    for task_id in targets:
        try:
            done.append(act(task_id))
        except ShoalError as exc:
            if len(targets) == 1:
                raise
            skipped.append({"id": task_id, "code": exc.code, "message": exc.message})
            exit_code = exit_code or exit_code_for(exc)
    past = {"cancel": "cancelled", "retry": "retried"}[verb]
    if len(targets) == 1 and done:
        task = done[0]
        words = f"task {task.id} {past}"
        if verb == "retry":
            words = f"task {task.id} is {task.state.value} again, ready now"
        app.emit(task.to_dict(), words)
        return
    lines = [f"{past} {len(done)} task{'s' if len(done) != 1 else ''}"]
    lines += [f"  skipped {s['id']}: {s['message']}" for s in skipped]
    data = {"count": len(done), "tasks": [t.id for t in done], "skipped": skipped}
    app.emit(data, "\n".join(lines))
    if exit_code:  # some were not changed: say so to scripts too
        sys.exit(exit_code)


def _check_selection(
    ids: tuple[int, ...], state: str | None, verb: str, *filters: str | None
) -> None:
    example = "dead" if verb == "retry" else "pending"
    if ids and any(f is not None for f in filters):
        raise BadInput(
            f"--domain and --agent narrow --state; they do not apply to task ids ({verb} "
            "takes the ids as given)",
            hint=f"e.g. `shoal {verb} 12 13` or `shoal {verb} --state {example} --domain web`",
        )
    if ids and state:
        raise BadInput(
            f"give task ids or --state, not both, to say what to {verb}",
            hint=f"e.g. `shoal {verb} 12 13` or `shoal {verb} --state {example} --domain web`",
        )
    if not ids and not state:
        raise BadInput(
            f"say what to {verb}: task ids, or --state (with --domain or --agent to narrow it)",
            hint=f"e.g. `shoal {verb} 12` or `shoal {verb} --state {example}`",
        )


_FILTERS = [
    click.option("--domain", "-d", help="With --state: only tasks of this domain."),
    agent_option("With --state: only tasks of this agent.", from_env=False),
    click.option("--yes", "-y", is_flag=True, help=f"Confirm acting on more than {CONFIRM_ABOVE}."),
]


def _filters(fn: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_FILTERS):
        fn = option(fn)
    return fn


@click.command(short_help="Cancel tasks that have not finished.")
@click.argument("task_ids", nargs=-1, type=int, metavar="[ID]...")
@click.option(
    "--state",
    type=click.Choice(names(CANCELLABLE_STATES)),
    help="Cancel every task in this state.",
)
@_filters
@json_option
@click.pass_obj
def cancel(
    app: App,
    task_ids: tuple[int, ...],
    state: str | None,
    domain: str | None,
    agent: str | None,
    yes: bool,
) -> None:
    """Cancel tasks that have not finished (a holder's lease is revoked): the listed IDs, or
    every task in --state (narrowed by --domain, --agent).

    \b
    e.g. shoal cancel 12 13
         shoal cancel --state pending --domain web --yes
    """
    _check_selection(task_ids, state, "cancel", domain, agent)
    fleet = app.fleet()
    chosen = list(_selected(fleet, TaskState(state), domain, agent)) if state else []
    _bulk(app, "cancel", task_ids, chosen, fleet.cancel, yes)


@click.command(short_help="Retry tasks: dead or cancelled ones, or skip a retry's wait.")
@click.argument("task_ids", nargs=-1, type=int, metavar="[ID]...")
@click.option(
    "--state",
    type=click.Choice(names(RETRIABLE_STATES)),
    help="Retry every task in this state (pending: those waiting to be ready).",
)
@_filters
@json_option
@click.pass_obj
def retry(
    app: App,
    task_ids: tuple[int, ...],
    state: str | None,
    domain: str | None,
    agent: str | None,
    yes: bool,
) -> None:
    """Make tasks claimable now: a dead or cancelled task comes back with fresh attempts; a
    pending one waiting out its retry backoff or its --in/--at skips the wait. The listed
    IDs, or every task in --state (narrowed by --domain, --agent).

    \b
    e.g. shoal retry 12
         shoal retry --state dead --domain web --yes
    """
    _check_selection(task_ids, state, "retry", domain, agent)
    fleet = app.fleet()
    chosen: list[Task] = []
    if state:
        now = fleet.clock.now()
        chosen = [
            t
            for t in _selected(fleet, TaskState(state), domain, agent)
            if t.state is not TaskState.PENDING or t.waiting(now)
        ]
    _bulk(app, "retry", task_ids, chosen, functools.partial(_retry, fleet, state), yes)


def _retry(fleet: Fleet, state: str | None, task_id: int) -> Task:
    """``fleet.retry``; a task picked as waiting whose wait ended meanwhile is ready: done."""
    try:
        return fleet.retry(task_id)
    except InvalidTransition:
        if state == "pending":
            task = fleet.get(task_id)
            if task.state is TaskState.PENDING and not task.waiting(fleet.clock.now()):
                return task
        raise


@click.command("set-priority", short_help="Change a task's priority.")
@click.argument("task_id", type=int)
@click.argument("priority")
@json_option
@click.pass_obj
def set_priority(app: App, task_id: int, priority: str) -> None:
    """Give a task that has not finished a new PRIORITY: 1 (most urgent) to 9, or critical,
    high, medium, low. Claims rank it by the new one from now on, with the age it had.

    \b
    e.g. shoal set-priority 12 critical
    """
    task = app.fleet().set_priority(task_id, priority)
    app.emit(task.to_dict(), f"task {task.id} now has priority {task.priority}")


def add_task_commands(group: click.Group) -> None:
    """Register add, list, show, ready, cancel, retry and set-priority on the ``shoal``
    group (``edit`` is in edits.py)."""
    for command in (add, list_tasks, show, ready, cancel, retry, set_priority):
        group.add_command(command)
