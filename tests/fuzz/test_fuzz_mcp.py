"""Every MCP tool's parameters under random input, through the official SDK's client
connected to shoal's server in memory (``mcp.Client`` takes the server object itself):
each call succeeds or is refused in shoal's words (a code, what went wrong, what to do
next), never the SDK's bare "Error executing tool" nor an ``internal_error``, and a
refused call changes nothing in the fleet.

The tools and their parameters are read from the server's tool list, so a new tool is
fuzzed without touching this file: an unpinned server's (a worker's), and a manager's
(pinned with ``--manager``), which adds the tools acting on others' work and the fleet.
One client per server serves the whole module: a session is a handshake, the examples
are many. The fleet runs on a manual clock, so a wait_for_task with nothing to claim
passes its (fuzzed) timeout on that clock at once instead of for real: two such calls of
the default 60 s took two of this module's minutes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import assume, given
from hypothesis import strategies as st
from mcp import Client

from shoal import Fleet, ManualClock
from shoal.faces.mcp.server import FleetDesk, build_server
from tests.fuzz.strategies import FUZZ, json_values, numbers, texts, word
from tests.helpers import snapshot


class Connected:
    """A client in memory on a server over one fleet, driven from synchronous tests."""

    def __init__(self, portal: BlockingPortal, client: Client, fleet: Fleet) -> None:
        self.portal, self.client, self.fleet = portal, client, fleet
        listed = portal.call(client.list_tools)
        self.tools = {tool.name: tool.input_schema for tool in listed.tools}

    def call(self, tool: str, arguments: dict[str, Any]) -> tuple[bool, str] | None:
        """(refused, text); None when the client itself cannot send the arguments (the SDK
        refuses to encode a lone surrogate: such text reaches the server only from other
        clients, and the API fuzz covers what the tools pass it to)."""
        try:
            result = self.portal.call(self.client.call_tool, tool, arguments)
        except UnicodeEncodeError:
            return None
        text = " ".join(getattr(block, "text", "") for block in result.content)
        return bool(result.is_error), text


@pytest.fixture(scope="module", params=["worker", "manager"])
def connected(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Connected]:
    url = f"sqlite://{Path(tmp_path_factory.mktemp('mcp-fuzz')) / 'fleet.db'}"
    clock = ManualClock(time.time())
    fleet = Fleet.open(url, create=True, clock=clock)
    fleet.register("ada", skills=["python"])
    fleet.post("some work", skills=["python"])
    if request.param == "manager":
        desk = FleetDesk(Fleet.open(url, clock=clock), "boss", {"manager": True})
        assert desk.start() is None  # as `shoal mcp --agent boss --manager` registers it
    else:
        desk = FleetDesk(Fleet.open(url, clock=clock))
    with start_blocking_portal() as portal:
        client = Client(build_server(desk))
        with portal.wrap_async_context_manager(client) as entered:
            yield Connected(portal, entered, fleet)
    fleet.close()


def _by_type(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A value of the schema's type, fuzzed (the right type is what reaches shoal's own
    checks; the wrong one, the SDK's)."""
    kinds: set[str] = set()
    for part in [schema, *schema.get("anyOf", [])]:
        kind = part.get("type")
        kinds |= set(kind) if isinstance(kind, list) else {kind} if kind else set()
    options: list[st.SearchStrategy[Any]] = [texts()]
    if "integer" in kinds or "number" in kinds:
        options.append(numbers())
    if "array" in kinds:
        options.append(st.lists(st.one_of(word(), numbers()), max_size=3))
    if "boolean" in kinds:
        options.append(st.booleans())
    if "object" in kinds or not kinds:
        options.append(json_values())
    if "enum" in schema:
        options.append(st.sampled_from(schema["enum"]))
    return st.one_of(options)


@st.composite
def tool_calls(draw: st.DrawFn, tools: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    name = draw(st.sampled_from(sorted(tools)))
    properties: dict[str, Any] = tools[name].get("properties", {})
    arguments = {
        key: draw(_by_type(schema))
        for key, schema in properties.items()
        if key in tools[name].get("required", []) or draw(st.booleans())
    }
    if draw(st.integers(0, 9)) == 0:  # now and then a value of any type, or a stray name
        arguments[draw(st.sampled_from([*properties, "tsk"]))] = draw(json_values())
    return name, arguments


@FUZZ
@given(data=st.data())
def test_every_tool_with_any_parameters(connected: Connected, data: st.DataObject) -> None:
    name, arguments = data.draw(tool_calls(connected.tools), label="call")
    before = snapshot(connected.fleet)
    outcome = connected.call(name, arguments)
    assume(outcome is not None)
    assert outcome is not None
    refused, text = outcome
    assert "Error executing tool" not in text and "Traceback" not in text, text
    assert not text.startswith("internal_error"), f"{name}({arguments!r}): {text}"
    if refused:
        assert "\nnext: " in text, f"a refusal says what to do next: {text}"
        assert snapshot(connected.fleet) == before, f"{name} refused ({text}) yet changed"
