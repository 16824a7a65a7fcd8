"""The bodies of the agent loop's commands -- ``claim``, ``done``, ``status`` and ``list``
-- without click: the click commands (``leases``, ``hub``, ``tasks``) call them once their
options are read, and so does ``fast``, which reads those options itself for the common
calls (``eval "$(shoal claim --format env)" && ... && shoal done``) so that they never
import click. One body each, whichever way in: what they print, raise and exit with is
the same.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from shoal.errors import BadInput
from shoal.faces import output, words
from shoal.faces.cli import paging
from shoal.faces.cli.context import EXIT_NOTHING, App, echo, json_arg, render
from shoal.model import Lease

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["claim", "done", "lease_for", "list_tasks", "status"]


def lease_for(task_id: int, token: str | None, from_env: bool) -> Lease:
    """The lease to act on ``task_id`` with: ``token``, which, when it came from the
    environment (SHOAL_LEASE), counts only for the task it came with (SHOAL_TASK), so that a
    leftover lease is not tried on another."""
    if from_env and os.environ.get("SHOAL_TASK", str(task_id)) != str(task_id):
        token = None
    if not token:
        raise BadInput(
            f"this command needs the lease token of task {task_id} from `shoal claim`",
            hint="pass --token TOKEN (or set SHOAL_LEASE; SHOAL_TOKEN is read too), or "
            'eval "$(shoal claim --agent AGENT --format env)" first',
        )
    return Lease(task_id=task_id, agent="", token=token, expires=0.0)


def claim(app: App, agent: str | None, n: int, wait: str) -> None:
    """``shoal claim``: see its help (``leases.claim``)."""
    if not agent:
        raise BadInput("claim needs an agent", hint="pass --agent ID (or set SHOAL_AGENT)")
    fleet = app.fleet()
    result = fleet.claim(agent, n, wait=wait)
    now = fleet.clock.now()
    data = result.to_dict(now)
    if app.json and n == 1 and result:
        # One task: also at the top level, so agents can read .task.id and .lease.token.
        data = {**data, **data["claimed"][0]}
    held: list[int] = []
    if result.reason == "busy":  # say what it holds: that is why
        held = [lease.task_id for lease in fleet.leases(agent)]
        data = {**data, "held": held}

    def human() -> Any:  # for people only (rich): --json and --format env never build it
        text = render.claim_text(result, now)
        if held:
            text.append(f" (it holds {', '.join(map(str, held))})", style="yellow")
        return text

    if not result and app.output_format() == "env":
        # For `eval "$(shoal claim --format env)" && work`: fail the eval, and forget any
        # task from before, so that nothing acts on it again. Why, on stderr: plain words
        # unless a person is watching it.
        echo("unset SHOAL_TASK SHOAL_LEASE; false")
        if output.is_terminal(sys.stderr):
            app.err.print(human(), soft_wrap=True)
        else:
            holds = f" (it holds {', '.join(map(str, held))})" if held else ""
            echo(output.one_line(words.nothing_claimed(result, now) + holds), err=True)
        sys.exit(EXIT_NOTHING)
    env: dict[str, object] = {}
    if result:  # for eval: the first task and its lease, and who holds it
        env = {"SHOAL_AGENT": agent}
        for i, grant in enumerate(result.grants):
            suffix = "" if i == 0 else f"_{i + 1}"
            env[f"SHOAL_TASK{suffix}"] = grant.task.id
            env[f"SHOAL_LEASE{suffix}"] = grant.lease.token
    app.emit(data, human, env=env)
    if not result:
        sys.exit(EXIT_NOTHING)


def done(app: App, task_id: int, token: str | None, result: str | None, from_env: bool) -> None:
    """``shoal done``: see its help (``leases.done``). ``from_env``: the token came from
    SHOAL_LEASE (or SHOAL_TOKEN)."""
    fleet = app.fleet()  # first: a missing store is said before a missing token
    outcome = fleet.complete(
        lease_for(task_id, token, from_env), json_arg(result, "result", text_ok=True)
    )
    said = "was already done; nothing changed" if outcome.already_done else "done"
    if outcome.released:
        said += f"; now ready: {', '.join(map(str, outcome.released))}"
    app.emit(outcome.to_dict(app.now()), f"task {task_id} {said}")


def status(app: App) -> None:
    """``shoal status`` (not ``--watch``): see its help (``hub.status``)."""
    snapshot = app.fleet(read_only=True).status()
    app.emit(snapshot.to_dict(), lambda: render.status_view(snapshot))


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
    """``shoal list``: see its help (``tasks.list_tasks``)."""
    fleet = app.fleet(read_only=True)
    size = paging.page_size(limit, show_all, 50)
    tasks, more = paging.page_of(
        lambda n, below: fleet.tasks(state=state, agent=agent, limit=n, before=below, label=label),
        size,
        before,
        lambda t: t.id,
    )
    none = "no tasks" + (f" {state}" if state else "") + (f" of {agent}" if agent else "")
    none += f" labelled {output.one_line(label)}" if label else ""
    note = None
    if more:
        command = ["shoal", "list", *(["--state", state] if state else [])]
        command += [*(["--agent", agent] if agent else []), *(["--label", label] if label else [])]
        command += ["--json"] if app.json else []
        command += [*(["--limit", str(limit)] if limit else []), "--before", str(tasks[-1].id)]
        note = paging.more_line(command, more, "tasks", "not shown", f"shows the next {size}")

    def table() -> Table:
        return render.tasks_table(tasks, app.now())

    def rows() -> tuple[Sequence[str], Iterable[Sequence[str]]]:
        now = app.now()
        return words.TASK_COLUMNS, (words.task_cells(t, now) for t in tasks)

    data = [t.to_dict() for t in tasks]
    paging.emit_rows(app, data, table, empty=none, no_header=no_header, note=note, rows=rows)
