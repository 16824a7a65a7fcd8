"""``shoal why``: why a task waits, why an agent sits idle (``Fleet.why_task``/``why_agent``)."""

from __future__ import annotations

import click

from shoal.errors import BadInput
from shoal.faces.cli.app import App, json_option, pass_app

__all__ = ["add_why_commands"]


@click.command()
@click.argument("task_id", type=int, required=False)
@click.option("--agent", "-a", "agent", help="Explain this agent instead: why it is idle.")
@json_option
@pass_app
def why(app: App, task_id: int | None, agent: str | None) -> None:
    """Why a task is not running, or why an agent gets nothing.

    For a task: every reason that holds it, in the order the claim applies them, each with
    when it ends, and who could take it next (and by which claim step). For an agent: what
    its claim would take now, or why nothing. Read only.

    e.g. `shoal why 12`, `shoal why --agent ada`.
    """
    if (task_id is None) == (agent is None):
        raise BadInput(
            "give a task id or --agent, not both and not neither",
            hint="e.g. `shoal why 12` or `shoal why --agent ada`",
        )
    from shoal.faces import explain  # only when asked: the CLI starts light

    fleet = app.fleet(read_only=True)
    if agent is not None:
        said = fleet.why_agent(agent)
        app.emit(said.to_dict(), "\n".join(explain.agent_lines(said)))
    else:
        assert task_id is not None
        told = fleet.why_task(task_id)
        app.emit(told.to_dict(), "\n".join(explain.task_lines(told)))


def add_why_commands(group: click.Group) -> None:
    """Register ``why`` on the ``shoal`` group."""
    group.add_command(why)
