"""Every face offers the fleet's own words: the CLI's choices and the MCP tools' argument
schemas are the members of the enums in shoal.vocabulary, so a state or status added there
reaches every face, and no face offers a word the fleet would refuse."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest

from shoal import Fleet
from shoal.faces.cli import root
from shoal.vocabulary import (
    CANCELLABLE_STATES,
    REPORTED_STATUSES,
    RETRIABLE_STATES,
    AgentStatus,
    TaskState,
    names,
)
from tests.faces.mcp_support import memory_session

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def choices(path: list[str], param: str) -> list[str]:
    """The choices the installed CLI offers for ``param`` of the command at ``path``."""
    command: click.Command = root.cli
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), name)
        assert found is not None, f"no command {' '.join(path)}"
        command = found
    option = next(p for p in command.params if p.name == param)
    assert isinstance(option.type, click.Choice)
    return list(option.type.choices)


def test_the_cli_offers_the_words_of_the_enums() -> None:
    assert choices(["list"], "state") == names(TaskState)
    assert choices(["cancel"], "state") == names(CANCELLABLE_STATES)
    assert choices(["retry"], "state") == names(RETRIABLE_STATES)
    assert choices(["agent", "set-status"], "status") == names(REPORTED_STATUSES)
    assert AgentStatus.PAUSED not in REPORTED_STATUSES  # the breaker's alone


async def test_the_mcp_tools_offer_the_words_of_the_enums(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    Fleet.init(url).close()
    async with memory_session(url) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}

    def enum_of(tool: str, arg: str) -> Any:
        prop = tools[tool].input_schema["properties"][arg]
        options = prop.get("anyOf", [prop])
        return next(o["enum"] for o in options if "enum" in o)

    assert enum_of("list_tasks", "state") == names(TaskState)
    assert enum_of("set_agent_status", "status") == names(REPORTED_STATUSES)
