"""``shoal mcp config`` writes a config that works when pasted: the command is the absolute
path of the shoal that ran (a client started without the user's PATH finds it, and another
``shoal`` on the PATH is not taken instead), and there is no config at all where the
``mcp`` extra is missing (the server it names would exit at once)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from shoal import Fleet
from tests.faces.cli_support import COMMAND, Result, base_env

#: `shoal mcp config ...` in a Python where the MCP SDK cannot be imported (as if the extra
#: were not installed): ``sys.modules['mcp'] = None`` makes every import of it fail.
WITHOUT_MCP = (
    "import sys; sys.modules['mcp'] = None; "
    "from shoal.faces.cli import main; sys.argv[0] = 'shoal'; main()"
)


def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Result:
    done = subprocess.run(
        args,
        cwd=cwd,
        env=base_env(env or {}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return Result(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    Fleet.init(f"sqlite://{tmp_path / '.shoal' / 'fleet.db'}").close()
    return tmp_path


def _command(result: Result, key: str = "mcpServers") -> list[str]:
    assert result.code == 0, result
    server = result.data[key]["shoal"]
    return [server["command"], *server["args"]]


def test_the_command_is_the_absolute_path_of_the_shoal_that_ran(project: Path) -> None:
    decoy = project / "bin"
    decoy.mkdir()
    (decoy / "shoal").write_text("#!/bin/sh\nexit 1\n")
    (decoy / "shoal").chmod(0o755)
    path = f"{decoy}{os.pathsep}{os.environ.get('PATH', '')}"  # another shoal comes first
    for client, key in (("claude", "mcpServers"), ("cursor", "mcpServers"), ("vscode", "servers")):
        found = run(*COMMAND, "mcp", "config", "--client", client, cwd=project, env={"PATH": path})
        command, *args = _command(found, key)
        assert Path(command).is_absolute() and Path(command).is_file(), command
        assert Path(command).parent != decoy
        assert args[-1] == "mcp" or "mcp" in args
    if len(COMMAND) == 1:  # run as the installed script: that very script
        assert _command(run(*COMMAND, "mcp", "config", cwd=project))[0] == COMMAND[0]


def test_run_as_a_module_the_command_is_still_absolute(project: Path) -> None:
    found = run(sys.executable, "-m", "shoal.faces.cli", "mcp", "config", cwd=project)
    command, *args = _command(found)
    assert Path(command).is_absolute() and Path(command).is_file(), command
    assert "mcp" in args


def test_without_the_mcp_extra_no_config_is_written(project: Path) -> None:
    for transport in ("stdio", "http"):
        refused = run(
            sys.executable, "-c", WITHOUT_MCP, "mcp", "config", "--transport", transport,
            cwd=project,
        )  # fmt: skip
        assert refused.code == 2, refused
        assert refused.out == ""
        assert "mcp extra" in refused.text
        assert "[mcp]'" in refused.err  # the install line
