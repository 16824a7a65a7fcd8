"""What every ``shoal`` command shares: the store it opens, how it prints (``App``), and the
``--json``/``--format`` options. Kept apart from ``cli`` so that command modules can use it
without importing the whole command set."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import click
from rich.console import Console

from shoal.errors import BadInput
from shoal.faces import output
from shoal.fleet import Fleet

__all__ = ["App", "json_option", "pass_app"]

F = TypeVar("F", bound=Callable[..., Any])


class App:
    """What every command shares: the store URL, the output mode and the open fleet."""

    def __init__(self, store: str | None, as_json: bool) -> None:
        self.store = store
        self.json = as_json
        self.format: str | None = None  # --format; None: table on a terminal, else tsv
        self.out = Console(highlight=False, soft_wrap=False)
        # Errors never wrap: a hint's command must stay one line to be copied.
        self.err = Console(stderr=True, highlight=False, soft_wrap=True)
        self._fleet: Fleet | None = None

    def fleet(self, create: bool = False) -> Fleet:
        if self._fleet is None:
            self.refuse_memory()
            self._fleet = Fleet.open(self.store, create=create)
        return self._fleet

    def refuse_memory(self) -> None:
        """Each command is a new process: a memory:// fleet would be new and empty each time."""
        if (self.store or os.environ.get("SHOAL_STORE", "")).strip().startswith("memory:"):
            raise BadInput(
                "a memory:// fleet lives inside one process and ends with it, so each "
                "shoal command would see a new, empty fleet",
                hint="use a fleet on disk: shoal init, or --store sqlite:///path/fleet.db",
            )

    def adopt(self, fleet: Fleet) -> None:
        self._fleet = fleet

    def now(self) -> float:
        return self.fleet().clock.now()

    def output_format(self) -> str:
        """table, tsv, json or env: as asked, else table on a terminal and tsv in a pipe."""
        if self.json:
            return "json"
        return self.format or ("table" if self.out.is_terminal else "tsv")

    def emit(
        self,
        data: Any,
        human: Any = None,
        env: Mapping[str, object] | None = None,
        empty: str | None = None,
    ) -> None:
        """Print a result (see faces/output.py): ``data`` as JSON, ``human`` (a rich
        renderable or text) as a table or as plain lines, ``env`` as NAME=value lines. An
        empty list is said in words (``empty``) on a terminal, not as a bare header."""
        shape = self.output_format()
        if empty is not None and data == [] and shape == "table":
            self.out.print(empty, style="dim", highlight=False)
            return
        if shape == "json":
            click.echo(output.json_text(data, pretty=self.out.is_terminal))
        elif shape == "env":
            if env is None:
                raise BadInput(
                    "--format env is for commands that yield ids: claim and add",
                    hint="use --format tsv or --json here",
                )
            if env:
                click.echo(output.env_lines(env))
        elif human is not None and shape == "table":
            self.out.print(human)
        elif human is not None:
            for line in output.plain_lines(human):
                click.echo(line)

    def close(self) -> None:
        if self._fleet is not None:
            self._fleet.close()


def json_option(fn: F) -> F:
    """``--json`` and ``--format`` on a command, as ``shoal --json COMMAND`` would."""

    def turn_on(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if value:
            ctx.ensure_object(App).json = True

    def set_format(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
        if value:
            app = ctx.ensure_object(App)
            app.format, app.json = value, value == "json" or app.json

    fn = click.option(
        "--format",
        "output_format",
        type=click.Choice(output.FORMATS),
        expose_value=False,
        callback=set_format,
        help="table (a terminal's default), tsv (a pipe's), json, or env (export NAME=value).",
    )(fn)
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        expose_value=False,
        callback=turn_on,
        help="Print JSON (for agents and scripts).",
    )(fn)


pass_app = click.make_pass_decorator(App)
