# ruff: noqa: F811 -- the tests take the CLI fixtures as parameters
"""Concurrency groups from the command line, in a real subprocess: ``shoal add --group``,
``shoal group set|list|clear`` (tables and --json), ``status``, and bad input refused
with exit 2 and nothing changed."""

from __future__ import annotations

import pytest

from shoal import Fleet
from tests.faces.cli_support import Shoal, fleet, shoal, url  # noqa: F401 (fixtures)
from tests.helpers import snapshot


def test_one_deploy_at_a_time_end_to_end(shoal: Shoal, fleet: Fleet) -> None:
    for title in ("deploy web", "deploy api"):
        added = shoal("add", title, "--group", "deploy", "-p", "high", "--json")
        assert added.code == 0, added
        assert added.data["group"] == "deploy"
    assert shoal("add", "lint").code == 0
    made = shoal("group", "set", "deploy", "--max", "1")
    assert made.code == 0 and "at most 1 held" in made.text, made
    fleet.register("ada")
    fleet.register("bob")
    first = shoal("claim", "--agent", "ada", "--json")
    assert first.code == 0 and first.data["task"]["title"] == "deploy web", first
    second = shoal("claim", "--agent", "bob", "--json")
    assert second.code == 0 and second.data["task"]["title"] == "lint", second
    listed = shoal("group", "list", "--json")
    assert listed.data == [{"name": "deploy", "max": 1, "held": 1, "full": True}]
    table = shoal("group", "list")
    assert "deploy" in table.text and "(full)" in table.text
    status = shoal("status")
    assert "groups: deploy 1/1 full" in status.text, status
    assert shoal("status", "--json").data["groups"] == listed.data
    cleared = shoal("group", "clear", "deploy", "--json")
    assert cleared.code == 0 and cleared.data["max"] is None
    assert shoal("group", "list", "--json").data == [
        {"name": "deploy", "max": None, "held": 1, "full": False}
    ]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("group", "set", "deploy", "--max", "0"), "whole number from 1"),
        (("group", "set", "deploy", "--max", "-3"), "whole number from 1"),
        (("group", "set", "deploy", "--max", "1.5"), "whole number from 1"),
        (("group", "set", "deploy", "--max", "two"), "whole number from 1"),
        (("group", "set", "de\x1b[31mploy", "--max", "1"), "group name"),
        (("group", "set", "a b", "--max", "1"), "group name"),
        (("group", "clear", "deploy"), "has no limit"),
        (("add", "t", "--group", "bad\tname"), "group name"),
    ],
)
def test_bad_input_exits_2_says_why_and_changes_nothing(
    shoal: Shoal, fleet: Fleet, args: tuple[str, ...], words: str
) -> None:
    before = snapshot(fleet)
    result = shoal(*args)
    assert result.code == 2, result
    assert words in result.text and "hint:" in result.text, result
    assert "\x1b" not in result.err  # the name is shown escaped, never as a control
    assert snapshot(fleet) == before and fleet.groups() == []


def test_an_empty_list_says_how_to_make_a_group(shoal: Shoal) -> None:
    assert shoal("group", "list", "--json").data == []
    assert shoal("group", "list").code == 0
