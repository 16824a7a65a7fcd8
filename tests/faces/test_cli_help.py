"""Every command says what it does with an example, and every option says what it is for:
a newcomer (or an agent) learns the CLI from `--help` alone."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest

from shoal.faces.cli import cli


def commands(
    group: click.Group, path: tuple[str, ...] = ("shoal",)
) -> Iterator[tuple[str, click.Command]]:
    for name, command in sorted(group.commands.items()):
        if name != command.name:  # an alias (config list): checked under its own name
            continue
        yield " ".join((*path, name)), command
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))


cli.load_all()  # the lazy group loads every command's module
EVERY = list(commands(cli))


@pytest.mark.parametrize(("path", "command"), EVERY, ids=[p for p, _ in EVERY])
def test_every_command_has_an_example_and_every_option_a_help(
    path: str, command: click.Command
) -> None:
    assert path in (command.help or ""), f"`{path} --help` shows no example of itself"
    assert command.get_short_help_str(limit=70).strip()
    bare = [p.name for p in command.params if isinstance(p, click.Option) and not p.help]
    assert bare == [], f"{path}: options without help: {bare}"


@pytest.mark.parametrize(("path", "command"), EVERY, ids=[p for p, _ in EVERY])
def test_every_command_is_listed_with_a_whole_sentence(path: str, command: click.Command) -> None:
    """`shoal --help` lists each command by its first sentence; click cuts that sentence at
    an abbreviation followed by a capital or a backquote, so an example written inline
    ("... knows. e.g. `shoal agents`") was listed as "... knows. e.g." -- the examples go
    in a paragraph of their own."""
    short = command.get_short_help_str(limit=200).strip()
    assert not short.endswith(("e.g.", "i.e.", "e.g", "i.e")), f"{path} is listed as {short!r}"
