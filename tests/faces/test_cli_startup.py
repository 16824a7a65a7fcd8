"""A ``shoal`` call costs little more than starting Python: agents call the CLI in loops
(``eval "$(shoal claim --format env)" && ... && shoal done``), each call a new process, so
what a command imports is what it costs. The commands of that loop import no face they do
not use -- no rich, no web, no MCP, no PostgreSQL driver, no plotting -- and ``shoal
--help`` lists every command without importing any. bench/cli_startup.py measures the
time (docs/benchmarks.md, *The CLI's start*)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

from shoal import Fleet, ManualClock
from shoal.faces.cli import cli
from shoal.faces.cli.root import COMMANDS, REGISTRARS
from tests.faces.cli_support import base_env

#: What the everyday commands must never import (each name and its submodules).
HEAVY = ("rich", "fastapi", "starlette", "uvicorn", "jinja2", "mcp", "psycopg", "httpx",
         "matplotlib")  # fmt: skip

#: Runs the CLI's own entry point in a fresh interpreter, then writes the names of every
#: module loaded to the file named by the first argument.
PROBE = """
import json, sys
from shoal.faces.cli import main
out, args = sys.argv[1], sys.argv[2:]
try:
    main(args)
except SystemExit:
    pass
with open(out, "w") as f:
    json.dump(sorted(sys.modules), f)
"""


def loaded_by(tmp_path: Path, url: str, *args: str) -> set[str]:
    """The modules a fresh ``shoal ARGS`` process had loaded when it finished."""
    out = tmp_path / "modules.json"
    subprocess.run(
        [sys.executable, "-c", PROBE, str(out), *args],
        env=base_env({"SHOAL_STORE": url}),
        capture_output=True,
        check=False,
        timeout=60,
    )
    return set(json.loads(out.read_text()))


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.partition(".")[0] in HEAVY)


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    with Fleet.open(url, create=True) as fleet:
        fleet.register("ada")
        fleet.post("write the parser")
    return url


def test_the_agent_loop_imports_no_heavy_library(tmp_path: Path, url: str) -> None:
    """claim (--format env and --json), done, heartbeat, status --json, list --json, and a
    claim that finds nothing: none loads rich, a web or MCP library, psycopg, httpx
    or matplotlib."""
    claimed = loaded_by(tmp_path, url, "claim", "--agent", "ada", "--format", "env")
    assert "shoal.faces.cli.loop" in claimed  # the probe did run the command
    assert heavy_in(claimed) == []
    with Fleet.open(url) as fleet:
        lease = fleet.leases("ada")[0]
    done = loaded_by(tmp_path, url, "done", str(lease.task_id), "--token", lease.token)
    assert heavy_in(done) == []
    with Fleet.open(url) as fleet:
        assert fleet.get(lease.task_id).state.value == "done"  # done did its work
    for args in (
        ["claim", "--agent", "ada", "--format", "env"],  # nothing left: exit 1
        ["claim", "--agent", "ada", "--json"],
        ["status", "--json"],
        ["list", "--json"],
        ["heartbeat", "ada", "--json"],
    ):
        assert heavy_in(loaded_by(tmp_path, url, *args)) == [], args


def test_the_everyday_calls_do_not_import_click(tmp_path: Path, url: str) -> None:
    """The calls of an agent's loop (and a script's look) run without click (``fast``):
    importing it cost as much as the rest of such a call. Done is checked with its token
    from the environment, as ``eval "$(shoal claim --format env)"`` leaves it."""
    claimed = loaded_by(tmp_path, url, "claim", "--agent", "ada", "--format", "env")
    assert "shoal.faces.cli.loop" in claimed and "click" not in claimed
    with Fleet.open(url) as fleet:
        lease = fleet.leases("ada")[0]
    for args in (
        ["done", str(lease.task_id), "--token", lease.token],
        ["status", "--json"],
        ["list"],
        ["--json", "list"],
        ["claim", "-a", "ada", "--json"],  # nothing left: exit 1, still no click
    ):
        modules = loaded_by(tmp_path, url, *args)
        assert "shoal.faces.cli.loop" in modules and "click" not in modules, args
    with Fleet.open(url) as fleet:
        assert fleet.get(lease.task_id).state.value == "done"
    assert "logging" not in modules  # nothing was logged: logging is not even imported
    # anything else is click's, as before: a bad value, help, another command
    for args in (["claim", "-n", "x"], ["status", "--help"], ["agents"]):
        assert "click" in loaded_by(tmp_path, url, *args), args


def test_a_command_loads_only_its_own_module(tmp_path: Path, url: str) -> None:
    """The group imports a command's module when the command runs: claim does not load
    the simulator, the runtime, the server or the importers."""
    claimed = loaded_by(tmp_path, url, "claim", "--agent", "ada", "--json")
    others = {f"shoal.faces.cli.{m}" for m in REGISTRARS} - {"shoal.faces.cli.leases"}
    assert sorted(claimed & others) == []
    apart = ("shoal.sim", "shoal.runtime", "shoal.faces.web", "shoal.faces.mcp",
             "shoal.stores.postgres")  # fmt: skip
    assert sorted(m for m in claimed if m.startswith(apart)) == []


def test_help_lists_every_command_without_importing_one(tmp_path: Path, url: str) -> None:
    modules = loaded_by(tmp_path, url, "--help")
    assert sorted(m for m in modules if m.startswith("shoal.faces.cli.") and
                  m.rpartition(".")[2] in REGISTRARS) == []  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "shoal.faces.cli", "--help"],
        env=base_env({}),
        capture_output=True,
        text=True,
        check=True,
    )
    listed = proc.stdout.split("Commands:")[1]
    for name, (_module, short) in COMMANDS.items():
        assert f"  {name} " in listed
        assert " ".join(short.split()[:3]) in " ".join(listed.split())


def test_the_command_table_is_the_commands() -> None:
    """COMMANDS (what --help shows and where each command lives) says what the modules
    register: a command added to a module and not to the table fails here."""
    commands = cli.load_all()
    assert set(commands) == set(COMMANDS)
    for name, command in commands.items():
        module, short = COMMANDS[name]
        callback_module = (
            command.callback.__module__ if command.callback else type(command).__module__
        )
        if not isinstance(command, click.Group) or command.callback is not None:
            assert callback_module.rpartition(".")[2] in (module, "mcp_config"), name
        assert command.get_short_help_str(limit=10_000) == short, name


def test_list_in_a_pipe_prints_the_table_s_lines_without_rich(tmp_path: Path) -> None:
    """``shoal list | ...`` writes its tab-separated lines from the task's plain cells, not
    from a rich table: line for line what the table would give (a title with markup, wide
    letters and runs of spaces; every flag), and no rich loaded."""
    from shoal.faces import output, render

    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    # posted and claimed 100 s ago (a manual clock), listed now (the CLI's system clock)
    clock = ManualClock(time.time() - 100)
    with Fleet.open(url, create=True, clock=clock) as fleet:
        fleet.register("ada", skills=["python", "go"])
        held = fleet.post("held, then expired", lease_ttl=10, priority=9)
        fleet.claim("ada")
        fleet.post("plain")
        fleet.post("[bold]markup[/bold] naïve — 日本語  two  spaces ", skills=["python"])
        fleet.post("pinned to ada", to="ada", pinned=True, domain="web")
        fleet.post("later", not_before=clock.now() + 3100)  # ready in 50m
        tasks = fleet.tasks(limit=50)
        table = list(output.plain_lines(render.tasks_table(tasks, time.time())))
    assert held.id in [t.id for t in tasks] and len(table) == len(tasks) + 1
    modules = loaded_by(tmp_path, url, "list")
    assert heavy_in(modules) == []
    proc = subprocess.run(
        [sys.executable, "-m", "shoal.faces.cli", "list"],
        env=base_env({"SHOAL_STORE": url}),
        capture_output=True,
        text=True,
        check=True,
    )
    # the ages differ (the CLI's clock is the system's): compare all but the last column
    assert [line.rsplit("\t", 1)[0] for line in proc.stdout.splitlines()] == [
        line.rsplit("\t", 1)[0] for line in table
    ]


def test_a_log_level_asked_for_still_logs_without_click(tmp_path: Path, url: str) -> None:
    """The fast calls set logging up only when a record needs it (``shoal._log``): with
    SHOAL_LOG_LEVEL=DEBUG the store's debug lines come out as under click; a bad level is
    refused as before."""
    shown = subprocess.run(
        [sys.executable, "-m", "shoal.faces.cli", "status", "--json"],
        env=base_env({"SHOAL_STORE": url, "SHOAL_LOG_LEVEL": "DEBUG"}),
        capture_output=True,
        text=True,
        check=True,
    )
    assert " DEBUG shoal.stores.sqlite: opened the fleet at " in shown.stderr
    refused = subprocess.run(
        [sys.executable, "-m", "shoal.faces.cli", "status", "--json"],
        env=base_env({"SHOAL_STORE": url, "SHOAL_LOG_LEVEL": "LOUD"}),
        capture_output=True,
        text=True,
        check=False,
    )
    assert (
        refused.returncode == 2
        and "SHOAL_LOG_LEVEL='LOUD' is not a log level" in refused.stdout + refused.stderr
    )
