"""The advice to install an extra names a command that fits how this shoal was installed:
from a clone, there is no ``shoal`` on any index to install by name."""

from __future__ import annotations

import json
import sys
from importlib import metadata
from pathlib import Path

import pytest

from shoal.extras import install_hint

ROOT = Path(__file__).resolve().parents[2]


def installed_from_here() -> bool:
    recorded = metadata.distribution("shoal").read_text("direct_url.json") or "{}"
    found = json.loads(recorded)
    return bool(found.get("dir_info", {}).get("editable")) and found.get("url") == ROOT.as_uri()


def test_an_editable_install_from_this_clone_is_told_to_reinstall_it_editable() -> None:
    if not installed_from_here():
        pytest.skip("shoal is not installed editable from this clone (make test installs it so)")
    assert install_hint("web") == f"{sys.executable} -m pip install -e '{ROOT}[web]'"


@pytest.mark.parametrize(
    ("prefix", "command"),
    [
        ("/home/ada/.local/share/pipx/venvs/shoal", "pipx install --force"),
        ("/home/ada/.local/pipx/venvs/shoal", "pipx install --force"),
        ("/home/ada/.local/share/uv/tools/shoal", "uv tool install --force"),
    ],
)
def test_a_tool_install_is_told_the_tools_own_command(prefix: str, command: str) -> None:
    hint = install_hint("postgres", prefix=prefix)
    assert hint.startswith(command + " '")
    assert hint.endswith("[postgres]'")
    assert "pip install" not in hint
