"""The commands a person runs to clean up after trouble: cancel and retry, one task or many,
and the agent commands (``shoal agent resume``, ``shoal agent set-status``).

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
from shoal.faces.cli.app import App, json_option
from shoal.model import Task, TaskState

if TYPE_CHECKING:
    from shoal.fleet import Fleet

__all__ = ["CONFIRM_ABOVE", "add_cleanup_commands"]

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
    click.option("--agent", "-a", help="With --state: only tasks of this agent."),
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
    type=click.Choice(["blocked", "pending", "claimed"]),
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
    type=click.Choice(["dead", "cancelled", "pending"]),
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


@click.group(short_help="Act on an agent: resume it, set its status.")
def agent() -> None:
    """Act on one agent: `shoal agent resume AGENT`, `shoal agent set-status AGENT idle`."""


@agent.command(short_help="Let an agent the circuit breaker paused claim again.")
@click.argument("agent_id", metavar="AGENT")
@json_option
@click.pass_obj
def resume(app: App, agent_id: str) -> None:
    """Let AGENT claim again now. The circuit breaker pauses an agent that failed
    failure_streak tasks in a row (status overloaded) for pause_cooldown; resume it once
    whatever made it fail is fixed, e.g. `shoal agent resume ada`."""
    fleet = app.fleet()
    before = fleet.agent(agent_id)
    updated = fleet.resume(agent_id)
    words = f"agent {agent_id} is not paused ({updated.status.value}); nothing to resume"
    if before.paused_until is not None:
        words = f"agent {agent_id} resumed: it may claim again ({updated.status.value})"
    app.emit(updated.to_dict(), words)


def _set_status_command(name: str) -> click.Command:
    @click.command(name, short_help="Set an agent's status (e.g. terminated).")
    @click.argument("agent_id", metavar="AGENT", envvar="SHOAL_AGENT")
    @click.argument(
        "status", type=click.Choice(["idle", "working", "waiting", "offline", "terminated"])
    )
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


def add_cleanup_commands(group: click.Group) -> None:
    """Register cancel, retry, agent and set-status on the ``shoal`` group."""
    for command in (cancel, retry, agent, _set_status_command("set-status")):
        group.add_command(command)
