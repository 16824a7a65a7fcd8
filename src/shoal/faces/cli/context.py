"""What a ``shoal`` command runs with, without click: the ``App`` (the store, the output
mode, the open fleet, how a result is printed) and the exit codes.

Apart from ``app`` (the click options) so that the commands of an agent's loop can run
without importing click at all (``fast``): each call is a new process, and click's import
cost more than the rest of such a call (docs/benchmarks.md, *The CLI's start*).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from shoal.errors import BadInput
from shoal.faces import output

if TYPE_CHECKING:  # rich and the Fleet load when a command first needs them (see output.py)
    from rich.console import Console

    from shoal.faces import render
    from shoal.fleet import Fleet
else:

    class _Render:
        """``shoal.faces.render`` (and so rich), imported when a command first draws a
        view: commands call ``render.tasks_table(...)`` as before, and one that prints
        JSON, env lines or plain text never pays for rich."""

        def __getattr__(self, name: str) -> Any:
            from shoal.faces import render

            return getattr(render, name)

    render = _Render()

__all__ = ["EXIT_BAD_INPUT", "EXIT_INTERNAL", "EXIT_NOTHING", "EXIT_OK", "App", "echo",
           "json_arg", "render"]  # fmt: skip

#: The exit codes the CLI sets itself (see root.py); the others come from
#: ``shoal.errors.exit_code_for``.
EXIT_OK, EXIT_NOTHING, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 70


class App:
    """What every command shares: the store URL, the output mode and the open fleet.

    Its consoles (rich) are made on first use: a command whose output is JSON, env lines
    or tab-separated text never imports rich, and starts that much sooner."""

    def __init__(self, store: str | None = None, as_json: bool = False) -> None:
        self.store = store
        self.json = as_json
        self.format: str | None = None  # --format; None: table on a terminal, else tsv
        self._fleet: Fleet | None = None

    @functools.cached_property
    def out(self) -> Console:
        from rich.console import Console

        return Console(highlight=False, soft_wrap=False)

    @functools.cached_property
    def err(self) -> Console:
        from rich.console import Console

        # Errors never wrap: a hint's command must stay one line to be copied.
        return Console(stderr=True, highlight=False, soft_wrap=True)

    @property
    def is_terminal(self) -> bool:
        """Whether stdout is a terminal, as rich decides it (output.is_terminal)."""
        if "out" in self.__dict__:
            return self.out.is_terminal
        return output.is_terminal(sys.stdout)

    def fleet(self, create: bool = False, *, read_only: bool = False) -> Fleet:
        """The fleet, opened on first use. Commands that only look pass ``read_only``: on
        SQLite they then take no writer's turn, so a stuck writer cannot hold up `list` or
        `status`, and they work on a read-only disk."""
        if self._fleet is None:
            self.refuse_memory()
            from shoal.remote import is_remote

            if is_remote(self.store):
                self._fleet = _remote_fleet(self.store or "")
            else:
                from shoal.fleet import Fleet

                self._fleet = Fleet.open(self.store, create=create, read_only=read_only)
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
        return self.format or ("table" if self.is_terminal else "tsv")

    def emit(
        self,
        data: Any,
        human: Any = None,
        env: Mapping[str, object] | None = None,
        empty: str | None = None,
    ) -> None:
        """Print a result (see shoal/faces/output.py): ``data`` as JSON, ``human`` (a rich
        renderable or text, or a function that makes one, so that JSON never pays for it)
        as a table or as plain lines, ``env`` as NAME=value lines. An empty list is said in
        words (``empty``) on a terminal, not as a bare header."""
        shape = self.output_format()
        if empty is not None and data == [] and shape == "table":
            from rich.text import Text

            self.out.print(Text(output.clean(empty), style="dim"))
            return
        if callable(human) and shape in ("table", "tsv"):
            human = human()  # built only for people: JSON and env need no rich renderable
        if shape == "json":
            echo(output.json_text(data, pretty=self.is_terminal))
        elif shape == "env":
            if env is None:
                raise BadInput(
                    "--format env is for commands that yield ids: claim and add",
                    hint="use --format tsv or --json here",
                )
            if env:
                echo(output.env_lines(env))
        elif human is not None and shape == "table":
            from rich.text import Text

            # A message is plain text, never markup: it may quote a title an agent wrote.
            self.out.print(Text(output.clean(human)) if isinstance(human, str) else human)
        elif human is not None:
            for line in output.plain_lines(human):
                echo(line)

    def close(self) -> None:
        if self._fleet is not None:
            self._fleet.close()


def _remote_fleet(url: str) -> Fleet:
    """The fleet a hub serves at ``url`` (``shoal serve``), through its HTTP API; httpx is
    loaded only now, so a local fleet never needs it."""
    from shoal.extras import install_hint

    try:
        from shoal.remote.fleet import RemoteFleet
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] == "shoal":
            raise
        raise BadInput(
            f"an http(s):// fleet needs the remote extra, which is not installed here ({exc.name})",
            hint=install_hint("remote"),
        ) from None
    return RemoteFleet.open(url)


def echo(text: str, err: bool = False) -> None:
    """``text`` and a line break on stdout (stderr with ``err``), flushed: what
    ``click.echo`` does with a line of text, without importing click. (click would also
    strip escape sequences from text bound for a pipe; a command's lines have none to
    strip: JSON escapes them, and text from agents is made safe first.)"""
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


def json_arg(value: str | None, what: str, *, text_ok: bool) -> Any:
    """A JSON value from the command line (a payload, a result); ``@file`` reads a file,
    ``-`` stdin. With ``text_ok``, text that is not JSON is taken as a string."""
    if value is None:
        return None
    from pathlib import Path

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
