"""The agent loop without click: ``shoal claim``, ``done``, ``status`` and ``list`` as
agents and scripts call them, read here and run by the same bodies (``loop``) as the click
commands.

An agent calls the CLI in a loop (``eval "$(shoal claim --agent ada --format env)" && ...
&& shoal done``), each call a new process, so what a call imports is what it costs.
Importing click (with what it pulls in: inspect, typing, uuid, gettext...) cost as much as
the rest of such a call, measured (docs/benchmarks.md, *The CLI's start*). So ``main``
first offers the arguments to ``run``, which takes them only when it reads them exactly
as click would and the command needs nothing click does: the options below, each at most
as click accepts it (``--agent ada``, ``--agent=ada``, ``-a ada``, ``-aada``; the last
given wins), the same environment variables, no ``--help``. Anything else -- another
command or option, a value that click would refuse or convert, ``--`` -- goes to click
untouched, before anything has run, and click says what is wrong as it always did. An
error raised by a command here is reported by ``root.fail_on``, as under click.

tests/faces/test_cli_fast.py runs each form both ways and compares what they print, exit
with and change; tests/faces/test_cli_startup.py checks these calls never load click.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from shoal import _log
from shoal.faces.cli.context import EXIT_OK, App, echo

__all__ = ["run"]

#: Options of the ``shoal`` group and of every command here: name -> (takes a value, key).
_OUTPUT = {"--json": (False, "json"), "--format": (True, "format")}
_GLOBAL = {"--store": (True, "store"), **_OUTPUT}
_OPTIONS: dict[str, dict[str, tuple[bool, str]]] = {
    "claim": {"--agent": (True, "agent"), "-a": (True, "agent"), "--n": (True, "n"),
              "-n": (True, "n"), "--wait": (True, "wait"), **_OUTPUT},
    "done": {"--token": (True, "token"), "-t": (True, "token"), "--result": (True, "result"),
             "-r": (True, "result"), **_OUTPUT},
    "status": dict(_OUTPUT),
    "list": {"--no-header": (False, "no_header"), **_OUTPUT},
}  # fmt: skip
_FORMATS = ("table", "tsv", "json", "env")


class _NotMine(Exception):
    """These arguments are for click."""


def _env(*names: str) -> str | None:
    """The first of these environment variables that is set and not empty (click's rule)."""
    for name in names:
        if os.environ.get(name):
            return os.environ[name]
    return None


def _read(
    args: Sequence[str], options: dict[str, tuple[bool, str]], seen: dict[str, object]
) -> int:
    """Read ``options`` from ``args`` into ``seen`` (a flag: True; the last value wins) up
    to the first positional argument; return its index (``len(args)``: none). Raises
    _NotMine at anything click might read differently."""
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("-") or arg == "-":
            return i
        i += 1
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg[:2], "", arg[2:])
        if name not in options:
            raise _NotMine
        takes, key = options[name]
        if not takes:
            if eq or value:
                raise _NotMine
            seen[key] = True
            continue
        if not (eq or value):
            if i >= len(args):
                raise _NotMine
            value = args[i]
            i += 1
        if value.startswith("-") or (key == "format" and value not in _FORMATS):
            raise _NotMine  # click would take it, or refuse it: let it say so
        seen[key] = value
        if key == "format" and value == "json":
            seen["json"] = True  # as click's callback does: json stays on
    return len(args)


def _words(
    args: Sequence[str], options: dict[str, tuple[bool, str]], seen: dict[str, object]
) -> list[str]:
    """The positional arguments of a command's ``args``, its options read into ``seen``
    (click reads a command's options on either side of them)."""
    words: list[str] = []
    while args:
        at = _read(args, options, seen)
        words += args[at : at + 1]
        args = args[at + 1 :]
    return words


def _plan(args: Sequence[str]) -> tuple[dict[str, object], Callable[[App], None]] | None:
    """What to do (the App's settings, and the command), or None: click's to read."""
    seen: dict[str, object] = {}
    try:
        at = _read(args, _GLOBAL, seen)
        if at == len(args) or args[at] not in _OPTIONS:
            return None
        name = args[at]
        opts: dict[str, object] = {}
        positional = _words(args[at + 1 :], _OPTIONS[name], opts)
    except _NotMine:
        return None
    if opts.pop("json", False):
        seen["json"] = True
    if "format" in opts:
        seen["format"] = opts.pop("format")
    command = _COMMANDS[name](opts, positional)
    return (seen, command) if command is not None else None


def _claim(opts: dict[str, object], positional: list[str]) -> Callable[[App], None] | None:
    from shoal.faces.cli import loop

    if positional:
        return None
    n_text = str(opts.get("n", "1"))
    if not n_text.isdecimal():  # click's int() takes more (" 2", "+2", "2_0"): let it
        return None
    agent = opts["agent"] if "agent" in opts else _env("SHOAL_AGENT")
    wait = str(opts.get("wait", "0"))
    return lambda app: loop.claim(app, agent, int(n_text), wait)  # type: ignore[arg-type]


def _done(opts: dict[str, object], positional: list[str]) -> Callable[[App], None] | None:
    from shoal.faces.cli import loop

    if len(positional) > 1:
        return None
    task_text = positional[0] if positional else _env("SHOAL_TASK")
    if task_text is None or not task_text.isdecimal():
        return None
    from_env = "token" not in opts
    token = _env("SHOAL_LEASE", "SHOAL_TOKEN") if from_env else str(opts["token"])
    from_env = from_env and token is not None
    result = opts.get("result")
    return lambda app: loop.done(app, int(task_text), token, result, from_env)  # type: ignore[arg-type]


def _status(opts: dict[str, object], positional: list[str]) -> Callable[[App], None] | None:
    from shoal.faces.cli import loop

    return None if positional else loop.status


def _list(opts: dict[str, object], positional: list[str]) -> Callable[[App], None] | None:
    from shoal.faces.cli import loop

    if positional:
        return None
    no_header = bool(opts.get("no_header"))
    return lambda app: loop.list_tasks(app, None, None, None, None, False, None, no_header)


_COMMANDS = {"claim": _claim, "done": _done, "status": _status, "list": _list}


def run(args: list[str]) -> None:
    """Run ``shoal ARGS`` here and exit, if it is one of the calls this module takes;
    return (having done nothing) if it is not."""
    plan = _plan(args)
    if plan is None:
        return
    seen, command = plan
    store = seen["store"] if "store" in seen else _env("SHOAL_STORE")
    app = App(store, as_json=bool(seen.get("json")))  # type: ignore[arg-type]
    if "format" in seen:
        app.format = str(seen["format"])
        app.json = app.json or app.format == "json"
    try:
        _invoke(app, command)
    except Exception as exc:
        from shoal.faces.cli.root import fail_on

        fail_on(exc, app, args)
    sys.exit(EXIT_OK)


def _invoke(app: App, command: Callable[[App], None]) -> None:
    """The command, as click's group runs it: logging set up first (its level checked now,
    ``logging`` imported when something logs: ``shoal._log``), the fleet closed after (even
    on an exit), Ctrl-C an exit 130 and a closed pipe an exit 1."""
    try:
        try:
            level = _log.resolve_level(0, 0, os.environ.get(_log.LOG_LEVEL_ENV))  # refused now
            _log.when_loaded(level, _configure_logging)  # the rest when a record needs it
            command(app)
        finally:
            app.close()
    except (EOFError, KeyboardInterrupt):
        echo("", err=True)
        sys.exit(130)
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        _quiet_pipes()


def _configure_logging() -> None:
    from shoal.faces.cli.logs import configure_logging

    configure_logging(0, 0)


def _quiet_pipes() -> NoReturn:
    """A closed pipe (``shoal list | head -1``): click's answer, exit 1 with nothing more
    said when the streams are flushed at exit."""
    from click.utils import PacifyFlushWrapper

    wrap: Any = PacifyFlushWrapper
    sys.stdout, sys.stderr = wrap(sys.stdout), wrap(sys.stderr)
    sys.exit(1)
