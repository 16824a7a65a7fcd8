# ruff: noqa: F811 -- the tests take the CLI fixtures as parameters
"""Task text on a terminal (docs/SECURITY.md, "Untrusted text"): `shoal add` refuses
escape sequences and direction overrides; what a fleet already holds (written by an older
shoal, or inside a JSON payload) is printed escaped by `list`, `show` and `events`, never
raw and never as rich markup; `--json` keeps it exact."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

from shoal import Fleet
from tests.faces.cli_support import Result, cli, fleet, url  # noqa: F401 (its fixtures)

RAW_TITLE = "x \x1b[2J\x1b]0;pwned\x07 \u202eevil"
RAW_BODY = "first\n\x1b[31mred\x1b[0m \x9b"
RAW_ERROR = "boom \x1b[2J"
CONTROL = ("\x1b", "\x07", "\u202e", "\x9b")


def _written_by_an_older_shoal(url: str, task_id: int) -> None:
    """Put raw control characters in the fleet as a version without the input checks did."""
    path = Path(url.removeprefix("sqlite://"))
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE tasks SET title = ?, body = ?, error = ? WHERE id = ?",
            (RAW_TITLE, RAW_BODY, RAW_ERROR, task_id),
        )
        db.execute(
            "UPDATE events SET data = ? WHERE task_id = ?",
            (json.dumps({"error": RAW_ERROR}), task_id),
        )
    db.close()


def _shows_escapes(result: Result) -> None:
    assert result.code == 0, result
    printed = result.out + result.err
    for char in CONTROL:
        assert char not in printed
    assert "\\x1b[2J" in printed and "\\u202e" in printed and "\\x07" in printed


def test_list_show_and_events_print_escapes_never_raw_control_characters(
    cli: Callable[..., Result], fleet: Fleet, url: str
) -> None:
    task = fleet.post("placeholder", payload={"note": "\x1b[2J in JSON"})
    _written_by_an_older_shoal(url, task.id)
    for shape in ("tsv", "table"):
        listed = cli("list", "--format", shape)
        _shows_escapes(listed)
        shown = cli("show", str(task.id), "--format", shape)
        _shows_escapes(shown)
        assert "\\x1b[31mred" in shown.out and "\\x9b" in shown.out
        assert "boom \\x1b[2J" in shown.out
    events = cli("events", "--format", "tsv")
    assert events.code == 0 and "\x1b" not in events.out and "boom \\x1b[2J" in events.out
    exact = cli("show", str(task.id), "--json")  # JSON keeps the text exactly
    assert exact.code == 0 and "\x1b" not in exact.out
    assert exact.data["title"] == RAW_TITLE
    assert exact.data["body"] == RAW_BODY
    assert exact.data["payload"] == {"note": "\x1b[2J in JSON"}


def test_add_refuses_an_escape_sequence_naming_the_field_and_stores_nothing(
    cli: Callable[..., Result], fleet: Fleet
) -> None:
    refused = cli("add", "x \x1b[2J\x1b]0;pwned\x07")
    assert refused.code == 2
    assert "title holds the control character u+001b at position 3" in refused.text
    assert "\x1b" not in refused.out + refused.err
    refused = cli("add", "t", "--body", "a\x00b")
    assert refused.code == 2 and "body holds the nul character u+0000" in refused.text
    refused = cli("add", "t", "--skill", "")
    assert refused.code == 2 and "skill name is empty" in refused.text
    refused = cli("add", "t", "--domain", "")
    assert refused.code == 2 and "domain name is empty" in refused.text
    assert fleet.tasks() == []


def test_markup_in_a_title_is_printed_as_written(cli: Callable[..., Result], fleet: Fleet) -> None:
    for title in ("[/]", "[bold red]loud[/bold red]", "[link=http://evil.example]x[/link]"):
        added = cli("add", title, "--format", "table")
        assert added.code == 0, added
        assert title in added.out
    listed = cli("list", "--format", "table")
    assert "[/]" in listed.out and "[bold red]loud[/bold red]" in listed.out
    assert cli("register", "bob", "--role", "[/]", "--format", "table").code == 0
    agents = cli("agents", "--format", "table")
    assert agents.code == 0 and "[/]" in agents.out, agents


def test_a_wrong_token_at_the_cli_names_neither_the_holder_nor_the_token(
    cli: Callable[..., Result], fleet: Fleet
) -> None:
    fleet.register("holder-agent")
    task = fleet.post("t")
    held = fleet.claim("holder-agent").grants[0]
    refused = cli("done", str(task.id), "--token", "0000")
    assert refused.code == 3
    assert "not held under that token" in refused.text
    assert "holder-agent" not in refused.text
    assert held.lease.token not in refused.text and "0000" not in refused.text
