# ruff: noqa: F811 -- the tests take the CLI fixtures as parameters
"""The ``shoal`` group itself: finding the fleet (``--store``, SHOAL_STORE, the nearest
``.shoal/fleet.db``), help and version, ``--json`` on either side of the command name,
errors as one JSON document, and the exit codes of a store that is locked or not a fleet.

See cli_support.py for how these tests run the CLI."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from shoal import Fleet, __version__
from shoal.stores import find_fleet
from tests.faces.cli_support import (  # noqa: F401 (fixtures)
    ERROR_KEYS,
    Result,
    Shoal,
    cli,
    files_under,
    fleet,
    shoal,
    url,
)
from tests.helpers import snapshot

# ---------------------------------------------------------------------- finding the fleet


def test_init_creates_dot_shoal_here_and_commands_in_subfolders_find_it(tmp_path: Path) -> None:
    if find_fleet(tmp_path) is not None:
        pytest.skip("a .shoal/fleet.db above tmp_path would be found first")
    project = tmp_path / "project"
    deep = project / "src" / "pkg"
    deep.mkdir(parents=True)
    sh = Shoal(project)

    first = sh("init")
    assert first.code == 0, first
    assert "created a fleet" in first.text
    assert "shoal register" in first.text  # it says what to do next
    assert (project / ".shoal" / "fleet.db").is_file()

    again = sh("init", "--json")
    assert again.code == 0, again
    assert again.data["created"] is False
    assert again.data["store"].endswith("/project/.shoal/fleet.db")

    assert sh("register", "ada", cwd=deep).code == 0
    added = sh("add", "fix the parser", "--json", cwd=deep)
    assert added.code == 0, added
    listed = sh("list", "--json", cwd=deep)
    assert listed.code == 0, listed
    assert [t["title"] for t in listed.data] == ["fix the parser"]
    assert not (deep / ".shoal").exists()
    assert not (project / "src" / ".shoal").exists()
    with Fleet.open(f"sqlite://{project / '.shoal' / 'fleet.db'}") as found:
        assert [a.id for a in found.agents()] == ["ada"]


def test_store_option_wins_over_shoal_store_and_init_creates_missing_folders(
    tmp_path: Path,
) -> None:
    env_url = f"sqlite://{tmp_path / 'env' / 'fleet.db'}"
    opt_url = f"sqlite://{tmp_path / 'nested' / 'deeper' / 'fleet.db'}"
    sh = Shoal(tmp_path, {"SHOAL_STORE": env_url})
    made = sh("--store", opt_url, "init", "--json")
    assert made.code == 0, made
    assert made.data == {"store": opt_url, "created": True}
    assert not (tmp_path / "env").exists()  # --store won over SHOAL_STORE

    Fleet.init(env_url).close()
    assert sh("--store", opt_url, "add", "for the option's fleet").code == 0
    assert sh("add", "for the env's fleet").code == 0
    with Fleet.open(opt_url) as by_option, Fleet.open(env_url) as by_env:
        assert [t.title for t in by_option.tasks()] == ["for the option's fleet"]
        assert [t.title for t in by_env.tasks()] == ["for the env's fleet"]


def test_without_any_fleet_commands_exit_2_and_say_to_run_shoal_init(tmp_path: Path) -> None:
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()
    if find_fleet(nowhere) is not None:
        pytest.skip("a .shoal/fleet.db above tmp_path would be found")
    sh = Shoal(nowhere)
    human = sh("list")
    assert human.code == 2, human
    assert "no fleet found" in human.text
    assert "shoal init" in human.text
    as_json = sh("--json", "add", "a task")
    assert as_json.code == 2, as_json
    assert as_json.data["error"]["code"] == "store_not_found"
    assert "shoal init" in as_json.data["error"]["hint"]
    assert files_under(tmp_path) == [nowhere]  # nothing was created


def test_a_store_path_that_does_not_exist_is_refused_and_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "missing" / "fleet.db"
    sh = Shoal(tmp_path)
    human = sh("--store", f"sqlite://{missing}", "register", "ada")
    assert human.code == 2, human
    assert "there is no fleet at" in human.text
    assert f"shoal init --store sqlite://{missing}" in human.text
    as_json = sh("--store", f"sqlite://{missing}", "add", "a task", "--json")
    assert as_json.code == 2, as_json
    assert as_json.data["error"]["code"] == "store_not_found"
    assert not missing.parent.exists()
    assert files_under(tmp_path) == []


@pytest.mark.parametrize(
    ("store", "words", "code"),
    [
        ("mysql://x", "is not one shoal understands", "invalid_store_url"),
        ("sqlite://host/x.db", "has a host", "invalid_store_url"),
        ("sqlite:///", "names no file", "invalid_store_url"),
        ("memory://", "lives inside one process", "bad_input"),
    ],
)
def test_a_broken_store_url_exits_2_with_a_clear_message(
    tmp_path: Path, store: str, words: str, code: str
) -> None:
    sh = Shoal(tmp_path)
    human = sh("--store", store, "list")
    assert human.code == 2, human
    assert words in human.text
    assert "hint" in human.text
    as_json = sh("--store", store, "--json", "add", "a task")
    assert as_json.code == 2, as_json
    assert as_json.data["error"]["code"] == code
    assert files_under(tmp_path) == []


def test_help_and_version_exit_0(tmp_path: Path) -> None:
    sh = Shoal(tmp_path)
    top = sh("--help")
    assert top.code == 0, top
    for word in ("claim", "done", "register", "exit codes", "--store", "--json"):
        assert word in top.text
    claim = sh("claim", "--help")
    assert claim.code == 0, claim
    for word in ("--agent", "--wait", "--n", "token", "exits 1"):
        assert word in claim.text
    version = sh("--version")
    assert version.code == 0
    assert __version__ in version.out


def test_help_names_every_exit_code_of_the_readme_and_every_kind_of_store(
    tmp_path: Path,
) -> None:
    """`shoal --help` is where a newcomer looks first: the exit codes it lists are the
    README's table (5, a damaged store, was once missing), and --store names every store."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text("utf-8")
    table = readme.split("### Exit codes", 1)[1].split("\n\n", 2)[1]
    codes = re.findall(r"^\| (\d+) \|", table, re.M)
    assert codes[:3] == ["0", "1", "2"] and "70" in codes, codes
    top = Shoal(tmp_path)("--help")
    listed = " ".join(top.out.split("Exit codes:", 1)[1].split("\n\n", 1)[0].split())
    for code in codes:
        assert re.search(rf"(^|, ){code} ", listed), f"`shoal --help` lists no exit code {code}"
    option = " ".join(top.out.split("--store URL", 1)[1].split("--json", 1)[0].split())
    for scheme in ("sqlite://", "postgresql://", "git+file://", "memory://", "https://"):
        assert scheme in option, f"--store's help names no {scheme} store"


# ---------------------------------------------------------------------- --json and errors


def test_json_works_before_and_after_the_command_name(shoal: Shoal, fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.post("fix the parser")
    for args in (("list",), ("show", "1"), ("agents",), ("show", "99")):
        before = shoal("--json", *args)
        after = shoal(*args, "--json")
        assert before.code == after.code, args
        assert before.out == after.out, args
        json.loads(before.out)  # one JSON document, errors included


@pytest.mark.parametrize(
    ("args", "code", "exit_code"),
    [
        (("--json", "show", "99"), "unknown_task", 2),
        (("add", "fix it", "-p", "urgentish", "--json"), "invalid_priority", 2),
        (("--json", "claim", "--agent", "ghost"), "unknown_agent", 2),
        (("list", "--state", "bogus", "--json"), "usage", 2),
        (("--json", "nonsense"), "usage", 2),
        (("register", "ada", "--max-concurrent", "0", "--json"), "bad_input", 2),
        (("--json", "done", "1", "--token", "0123456789abcdef"), "lease_lost", 3),
        (("--json", "cancel", "2"), "invalid_transition", 3),
        (("--json", "register", "carl"), "fleet_full", 3),
    ],
)
def test_errors_in_json_mode_are_one_error_document_on_stdout(
    shoal: Shoal, fleet: Fleet, args: tuple[str, ...], code: str, exit_code: int
) -> None:
    fleet.configure(max_agents=1)
    fleet.register("ada")
    fleet.post("fix the parser")
    fleet.claim("ada")
    fleet.cancel(fleet.post("cancelled already").id)
    before = snapshot(fleet)

    result = shoal(*args)
    assert result.code == exit_code, result
    assert result.err == ""
    assert set(result.data) == {"error"}
    error = result.data["error"]
    assert set(error) == ERROR_KEYS
    assert error["code"] == code
    assert error["message"]
    assert error["hint"]
    assert snapshot(fleet) == before


@pytest.mark.parametrize(
    ("args", "page"),
    [
        (("done", "abc"), "shoal done --help"),
        (("claim", "--agnet", "ada"), "shoal claim --help"),
        (("config", "set"), "shoal config set --help"),
        (("nonsense",), "shoal --help"),
    ],
)
def test_a_usage_error_names_the_help_page_of_its_command(
    tmp_path: Path, args: tuple[str, ...], page: str
) -> None:
    """A mistyped command points at its own --help, not at "shoal COMMAND --help"."""
    result = Shoal(tmp_path)(*args, "--json")
    assert result.code == 2, result
    assert result.data["error"]["code"] == "usage"
    assert result.data["error"]["hint"] == f"see `{page}`"


@pytest.mark.parametrize(
    ("args", "opening"),
    [
        (("prune", "--older-than", "0s"), "--older-than must be more than zero"),
        (("add", "x", "--expected-duration", "-3"), "--expected-duration '-3' is not"),
        (("register", "zed", "--max-concurrent", "0"), "--max-concurrent must be"),
        (("--store", "{url}", "config", "set", "max_agents", "0"), "max_agents must be"),
        (("claim", "--agent", "ada", "--wait", "forever"), "--wait 'forever' is not"),
        (("add", "x", "-p", "urgentest"), "--priority 'urgentest' is not"),
    ],
)
def test_a_bad_value_is_named_by_the_flag_that_was_typed(
    cli: Callable[..., Result], url: str, args: tuple[str, ...], opening: str
) -> None:
    """The Fleet names a bad value by its field (older_than), as the API and MCP do; the
    CLI names it by its flag. A setting's name, typed as an argument, stays as typed."""
    cli("register", "ada")
    for as_json in (False, True):
        typed = [arg.format(url=url) for arg in args]
        result = cli(*typed, *(["--json"] if as_json else []))
        assert result.code == 2, result
        said = result.data["error"]["message"] if as_json else result.err
        assert opening in said, said


def test_a_locked_store_exits_4_and_changes_nothing(tmp_path: Path, url: str) -> None:
    sh = Shoal(tmp_path)
    db = tmp_path / "fleet.db"
    other = sqlite3.connect(db, isolation_level=None)  # "another program" holding the file
    try:
        other.execute("BEGIN EXCLUSIVE")
        result = sh("--store", f"sqlite://{db}?busy_timeout=0.2", "add", "locked out")
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert result.code == 4, result
    assert "locked" in result.text
    assert "try again" in result.text
    with Fleet.open(url) as fleet:
        assert fleet.tasks() == []


# ---------------------------------------------------------------------- once bugs, now fixed


def test_a_store_file_that_is_not_a_fleet_is_bad_input(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n", "utf-8")
    result = Shoal(tmp_path)("--store", f"sqlite://{notes}", "list")
    assert notes.read_text("utf-8") == "my notes\n"
    assert "not a usable shoal fleet" in result.text
    assert result.code == 2, result
