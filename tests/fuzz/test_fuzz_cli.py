"""Every `shoal` command's arguments under random input, through the CLI's own entry point
in this process (``shoal.faces.cli.main``, as the `shoal` script runs it): the exit code is
one the README documents (never 70, "a bug in shoal"), nothing prints a traceback or
reaches the terminal unescaped, and a refused command leaves the fleet as it was.

The commands and their options are read from the CLI itself, so a new command is fuzzed
without touching this file. Left out: the ones that run until stopped (servers, workers,
the monitor, the supervisor, ``--watch``, ``--follow``, ``claim --wait``), the demo and the
simulator (minutes of work for any input) and ``prime --agents-md`` (it writes a file).
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shoal import Fleet
from shoal.faces.cli import main
from shoal.faces.cli.root import cli as shoal_cli
from tests.fuzz.strategies import FUZZ, SPECIALS, numbers, texts, word
from tests.helpers import snapshot

SKIPPED_COMMANDS = {"demo", "sim", "monitor", "supervise", "worker", "mcp serve", "mcp"}
SKIPPED_OPTIONS = {"--watch", "--follow", "--wait", "--agents-md", "--store", "--dir"}
#: What an exit code may be: ok, nothing to do, and the README's error codes; 130 is a
#: bulk action's confirmation prompt meeting the end of stdin.
DOCUMENTED_EXITS = {0, 1, 2, 3, 4, 5, 130}


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in sorted(group.commands.items()):
        full = (*path, name)
        if " ".join(full) in SKIPPED_COMMANDS and not isinstance(command, click.Group):
            continue
        if isinstance(command, click.Group):
            if name == "mcp":  # `shoal mcp` serves; its `config` subcommand only prints
                yield (*full, "config")
                continue
            yield from _commands(command, full)
        else:
            yield full


shoal_cli.load_all()  # the lazy group loads every command's module
COMMANDS = list(_commands(shoal_cli))


def _command(path: tuple[str, ...]) -> click.Command:
    command: click.Command = shoal_cli
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    return command


def _value(param: click.Parameter) -> st.SearchStrategy[str]:
    """A token for one value: the parameter's own choices now and then, else anything."""
    choices = getattr(param.type, "choices", None)
    fuzz = st.one_of(word(), texts(), numbers().map(str))
    return st.one_of(st.sampled_from(list(choices)), fuzz) if choices else fuzz


@st.composite
def invocations(draw: st.DrawFn) -> list[str]:
    """A command and some of its options and arguments, each value fuzzed."""
    path = draw(st.sampled_from(COMMANDS))
    tokens: list[str] = list(path)
    for param in _command(path).params:
        if isinstance(param, click.Option):
            if param.opts[0] in SKIPPED_OPTIONS or not draw(st.booleans()):
                continue
            if param.is_flag:
                tokens.append(param.opts[0])
                continue
            for _ in range(draw(st.integers(1, 2)) if param.multiple else 1):
                tokens += [draw(st.sampled_from(param.opts)), draw(_value(param))]
        elif isinstance(param, click.Argument) and (param.required or draw(st.booleans())):
            count = draw(st.integers(1, 2)) if param.nargs == -1 else 1
            tokens += [draw(_value(param)) for _ in range(count)]
    return tokens


@pytest.fixture(scope="module")
def fleet_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fleet with some work in it, for the commands to find (or not)."""
    url = f"sqlite://{Path(tmp_path_factory.mktemp('cli-fuzz')) / 'fleet.db'}"
    with Fleet.open(url, create=True) as fleet:
        fleet.register("ada", skills=["python"], max_concurrent=5)
        for title in ("first", "second", "third"):
            fleet.post(title, skills=["python"])
        fleet.claim("ada")
    return url


def _run(argv: list[str], stdin: str) -> tuple[int, str]:
    """``shoal ARGV`` in this process, its streams strict UTF-8 as a real pipe's are (a
    lone surrogate reaching them fails there as it would in a terminal)."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)
    code: Any = 0
    saved_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main(argv)
    except SystemExit as stop:
        code = stop.code
    finally:
        sys.stdin = saved_stdin
    printed = b"".join(stream.buffer.getvalue() for stream in (out, err))  # type: ignore[attr-defined]
    return int(code or 0), printed.decode("utf-8")


@FUZZ
@given(argv=invocations(), stdin=st.sampled_from(SPECIALS))
def test_every_command_with_any_arguments(
    fleet_url: str, argv: list[str], stdin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("SHOAL_STORE", "SHOAL_AGENT", "SHOAL_TOKEN", "SHOAL_LEASE", "SHOAL_TASK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(Path(fleet_url.removeprefix("sqlite://")).parent)  # files land there
    with Fleet.open(fleet_url) as fleet:
        before = snapshot(fleet)
    code, printed = _run(["--store", fleet_url, *argv], stdin)
    assert code in DOCUMENTED_EXITS, f"exit {code}: {printed[-2000:]}"
    assert "Traceback" not in printed and "internal error" not in printed, printed[-2000:]
    assert "\x1b" not in printed, "an escape sequence reached the terminal"
    if code >= 2:
        with Fleet.open(fleet_url) as fleet:
            assert snapshot(fleet) == before, f"exit {code} yet the fleet changed: {printed}"
