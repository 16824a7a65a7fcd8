"""Onboarding an agent: ``shoal prime`` stays true to the CLI and the MCP server, and
``shoal mcp config`` prints JSON a client can use to start a working server.

Every ``shoal ...`` command line in the briefing and the AGENTS.md snippet is parsed by the
real click commands (options, arguments and their types; nothing is executed), and every
``tool(args)`` call it shows is checked against the tools and input schemas of a real
``shoal mcp`` server. The commands themselves run in real processes.
"""

from __future__ import annotations

import copy
import importlib
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import click
import pytest

from shoal import Fleet
from shoal.errors import BadInput
from shoal.faces.cli.prime import (
    AGENTS_MD,
    BRIEFING,
    add_prime_commands,
    mcp_config,
    mcp_config_command,
)
from tests.faces.cli_support import COMMAND, Result, base_env

#: Until the CLI registers `prime` and `mcp config`, run them through a shim that does.
_SHIM = (
    "import click\n"
    "from shoal.faces.cli import cli, main\n"
    "from shoal.faces.cli import prime as p\n"
    "if 'prime' not in cli.commands: p.add_prime_commands(cli)\n"
    "m = cli.commands.get('mcp')\n"
    "if not (isinstance(m, click.Group) and 'config' in m.commands):\n"
    "    cli.add_command(click.Group('mcp', commands={'config': p.mcp_config_command}))\n"
    "main()\n"
)

CORE_COMMANDS = {"register", "claim", "heartbeat", "done", "fail", "release"}
CORE_TOOLS = {
    "register_agent",
    "claim_best_task",
    "wait_for_task",
    "heartbeat",
    "complete_task",
    "fail_task",
    "release_task",
}
#: Placeholders in the texts that need a value of the right type to parse.
PLACEHOLDERS = {"ID": "7"}

_LINE = re.compile(r"^\s*(shoal\s.*)$", re.MULTILINE)
_INLINE = re.compile(r"`(shoal\s[^`]*)`|\$\((shoal\s[^)]*)\)")
_CALL = re.compile(r"\b([a-z]+(?:_[a-z]+)*)\(([^()]*)\)")


def _cli() -> click.Group:
    from shoal.faces.cli import cli

    cli.load_all()  # the lazy group loads every command's module
    return cli


def _registered() -> bool:
    cli = _cli()
    mcp = cli.commands.get("mcp")
    return "prime" in cli.commands and isinstance(mcp, click.Group) and "config" in mcp.commands


def shoal(
    *args: str, cwd: Path, env: Mapping[str, str] | None = None, timeout: float = 60
) -> Result:
    """Run `shoal ARGS` in a real process (through the shim until the CLI registers us)."""
    command = COMMAND if _registered() else [sys.executable, "-c", _SHIM]
    proc = subprocess.run(
        [*command, *args],
        cwd=cwd,
        env=base_env(env or {}),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


# ---------------------------------------------------------------------- the CLI, parsed


def _full_cli() -> click.Group:
    """The real `shoal` group, with `prime` and `mcp config` added if the CLI has not yet."""
    cli = _cli()
    if _registered():
        return cli
    group = copy.copy(cli)
    group.commands = dict(cli.commands)
    if "prime" not in group.commands:
        add_prime_commands(group)
    group.add_command(
        click.Group("mcp", commands={"config": mcp_config_command}, invoke_without_command=True)
    )
    return group


def _app() -> Any:
    """The context object `shoal.faces.cli.main` gives the commands."""
    module = importlib.import_module("shoal.faces.cli")
    app_class = getattr(module, "App", None)
    if app_class is None:
        app_class = importlib.import_module("shoal.faces.cli.app").App
    return app_class(None, as_json=False)


def parse(argv: list[str]) -> list[str]:
    """Parse `shoal ARGV` with the real click commands without running anything: the
    command path (e.g. ["agent", "resume"]); a click error if a command, option or
    argument does not exist or does not convert."""
    group = _full_cli()
    ctx = click.Context(group, info_name="shoal", obj=_app())
    command: click.Command = group
    args, path = list(argv), []
    while isinstance(command, click.Group) and args and not args[0].startswith("-"):
        name, sub, args = command.resolve_command(ctx, args)
        assert name is not None and sub is not None
        path.append(name)
        ctx = click.Context(sub, info_name=name, parent=ctx)
        command = sub
    command.make_context(ctx.info_name, args, parent=ctx.parent)
    return path


def command_lines(text: str) -> list[str]:
    """Every `shoal ...` command in ``text``: on a line of its own, in backticks, or in a
    shell's ``$(...)``."""
    inline = [m.group(1) or m.group(2) for m in _INLINE.finditer(text)]
    return [m.group(1) for m in _LINE.finditer(text)] + inline


def argv_of(line: str) -> list[str]:
    words = shlex.split(line, comments=True)
    assert words[0] == "shoal", line
    return [PLACEHOLDERS.get(word, word) for word in words[1:]]


@pytest.mark.parametrize("text", [BRIEFING, AGENTS_MD], ids=["briefing", "agents-md"])
def test_every_command_prime_mentions_exists_and_its_flags_parse(text: str) -> None:
    lines = command_lines(text)
    used = set()
    for line in lines:
        try:
            path = parse(argv_of(line))
        except click.ClickException as exc:
            pytest.fail(f"`{line}` does not parse: {exc.format_message()}")
        used.add(path[0] if path else "")
    assert used >= CORE_COMMANDS, f"the loop is incomplete: {CORE_COMMANDS - used} missing"


def test_the_parser_catches_what_drifts() -> None:
    """The check above is not vacuous: a wrong flag, command or type is caught."""
    for wrong in (
        "shoal claim --agnet ada --json",
        "shoal finish 7 --token t",
        "shoal done ID --token t",  # ID left unreplaced: not an int
        "shoal release 7 --token",
    ):
        with pytest.raises(click.ClickException):
            parse(shlex.split(wrong)[1:])


# ---------------------------------------------------------------------- the MCP tools


def _tools() -> dict[str, set[str]]:
    """Each tool of an unpinned `shoal mcp` server (the real one, built in this process)
    and its parameters."""
    pytest.importorskip("mcp")
    from shoal.faces.mcp.server import FleetDesk, build_server

    async def listing() -> dict[str, set[str]]:
        server = build_server(FleetDesk(Fleet.open("memory://")))
        tools = await server.list_tools()
        return {t.name: set(t.input_schema.get("properties", {})) for t in tools}

    return anyio.run(listing)


def test_every_mcp_tool_prime_mentions_exists_with_those_parameters() -> None:
    tools = _tools()
    for text in (BRIEFING, AGENTS_MD):
        calls = _CALL.findall(text)
        for name, arguments in calls:
            assert name in tools, f"{name}() is not a tool of `shoal mcp`"
            for argument in filter(None, (a.split("=")[0].strip() for a in arguments.split(","))):
                assert argument in tools[name], f"{name}() takes no {argument!r}"
        mentioned = {name for name, _ in calls}
        assert CORE_TOOLS - {"register_agent"} <= mentioned, CORE_TOOLS - mentioned
    assert {name for name, _ in _CALL.findall(BRIEFING)} >= CORE_TOOLS


# ---------------------------------------------------------------------- shoal prime


def test_prime_prints_a_short_briefing_and_the_agents_md_snippet(tmp_path: Path) -> None:
    briefing = shoal("prime", cwd=tmp_path)  # no fleet needed
    assert briefing.code == 0, briefing.err
    assert briefing.out == BRIEFING
    assert len(briefing.out.splitlines()) <= 60
    for words in (
        "0 ok",
        "1 nothing to do",
        "2 bad input",
        "3 lease lost",
        "4 store unavailable",
        "5 store damaged",
    ):
        assert words in " ".join(briefing.out.split()), words
    for words in ("heartbeat", "release", "stale_lease", "circuit breaker", "lease_ttl"):
        assert words in briefing.out, words

    snippet = shoal("prime", "--agents-md", cwd=tmp_path)
    assert snippet.code == 0, snippet.err
    assert snippet.out.startswith("## ") and snippet.out == AGENTS_MD
    assert "--json" in snippet.out and "`.lease.token`" in snippet.out


@pytest.mark.parametrize("where", ["command", "group"])
def test_prime_json_is_one_object_with_the_briefing(tmp_path: Path, where: str) -> None:
    args = ("prime", "--json") if where == "command" else ("--json", "prime")
    result = shoal(*args, cwd=tmp_path)
    assert result.code == 0, result.err
    assert result.data == {"briefing": BRIEFING}
    snippet = shoal(*args, "--agents-md", cwd=tmp_path)
    assert snippet.data == {"briefing": AGENTS_MD}


# ---------------------------------------------------------------------- shoal mcp config


def _server(data: dict[str, Any], key: str = "mcpServers") -> dict[str, Any]:
    assert set(data) == {key}, data
    server: dict[str, Any] = data[key]["shoal"]
    assert Path(server["command"]).name == "shoal"
    assert server["args"][0] == "mcp"
    return server


@pytest.fixture
def fleet_dir(tmp_path: Path) -> Path:
    """A project folder with a fleet (.shoal/fleet.db) and a subfolder to run in."""
    Fleet.init(f"sqlite://{tmp_path / '.shoal' / 'fleet.db'}").close()
    (tmp_path / "src").mkdir()
    return tmp_path


def test_mcp_config_for_each_client_names_the_fleet_found_like_git(fleet_dir: Path) -> None:
    url = f"sqlite://{(fleet_dir / '.shoal' / 'fleet.db').resolve()}"
    for client, key in (("claude", "mcpServers"), ("cursor", "mcpServers"), ("vscode", "servers")):
        result = shoal("mcp", "config", "--client", client, cwd=fleet_dir / "src")
        assert result.code == 0, result.err
        server = _server(result.data, key)
        assert server["args"] == ["mcp"]
        assert server["env"] == {"SHOAL_STORE": url}
        assert ("type" in server) == (client == "vscode")
        if client == "vscode":
            assert server["type"] == "stdio"


def test_mcp_config_with_an_agent_and_a_store(fleet_dir: Path, tmp_path: Path) -> None:
    result = shoal(
        "mcp", "config", "--client", "cursor", "--agent", "cursor-1", "--skill", "python",
        cwd=fleet_dir, env={"SHOAL_STORE": "sqlite:.shoal/fleet.db"},
    )  # fmt: skip
    assert result.code == 0, result.err
    server = _server(result.data)
    assert server["args"] == ["mcp", "--agent", "cursor-1", "--skill", "python"]
    absolute = f"sqlite://{(fleet_dir / '.shoal' / 'fleet.db').resolve()}"
    assert server["env"] == {"SHOAL_STORE": absolute}  # a relative path made absolute

    pinned = shoal("--store", absolute, "mcp", "config", cwd=Path("/"))
    assert pinned.code == 0, pinned.err
    assert _server(pinned.data)["env"] == {"SHOAL_STORE": absolute}  # claude by default


def test_mcp_config_without_a_fleet_leaves_it_to_the_server(tmp_path: Path) -> None:
    result = shoal("mcp", "config", "--client", "vscode", cwd=tmp_path)
    assert result.code == 0, result.err
    assert "env" not in _server(result.data, "servers")


def test_mcp_config_refuses_what_cannot_work(tmp_path: Path) -> None:
    for args, env in (
        (("mcp", "config", "--client", "emacs"), {}),
        (("mcp", "config"), {"SHOAL_STORE": "memory://"}),
        (("--store", f"sqlite://{tmp_path / 'nowhere.db'}", "mcp", "config"), {}),
        (("mcp", "config", "--skill", "python"), {}),  # a skill for no agent
    ):
        result = shoal(*args, cwd=tmp_path, env=env)
        assert result.code == 2, (args, result)
        assert result.out == "" or "error" in result.out
    assert not (tmp_path / "nowhere.db").exists()


def test_the_config_starts_a_working_server(fleet_dir: Path) -> None:
    """What a client would do with the JSON: start the server it names and list its tools."""
    pytest.importorskip("mcp")
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from tests.faces.mcp_support import server_env

    result = shoal("mcp", "config", "--agent", "claude-1", "--skill", "python", cwd=fleet_dir)
    server = _server(result.data)
    command = server["command"]
    if command == "shoal":  # on the PATH of this process, as a client would find it
        command = COMMAND[0] if len(COMMAND) == 1 else command

    async def tools() -> set[str]:
        params = StdioServerParameters(
            command=command, args=server["args"], env=server_env(server["env"]), cwd="/"
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            listed = (await session.list_tools()).tools
        return {tool.name for tool in listed}

    names = anyio.run(tools)
    assert CORE_TOOLS - {"register_agent"} <= names
    assert "register_agent" not in names  # the server registered claude-1 itself
    with Fleet.open(server["env"]["SHOAL_STORE"]) as fleet:
        assert fleet.agent("claude-1").skills == ("python",)


def test_mcp_config_in_process() -> None:
    assert mcp_config("vscode", None, None)["servers"]["shoal"]["args"] == ["mcp"]
    claude = mcp_config("claude", "sqlite:///f.db", "a", skills=["x"], domains=["d"])
    assert claude["mcpServers"]["shoal"]["args"] == [
        "mcp", "--agent", "a", "--skill", "x", "--domain", "d",
    ]  # fmt: skip
    with pytest.raises(BadInput):
        mcp_config("emacs", None, None)
