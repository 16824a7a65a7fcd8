"""The walker: docs/SECURITY.md's table "Who may do what", tried cell by cell (issue 28).

Agents read untrusted text and may be steered by it, so an agent's face -- an agent token,
an MCP worker's session -- may do its own work and no more; managers and people do the
rest, and nobody gets in without a token, on loopback too. The table says so for every
power and every role on every face; this module reads that table (so the two cannot drift
apart) and, for each cell:

- refused: tries the power through every face the column names -- the HTTP API and the
  dashboard through a real HTTP client, the CLI through a hub, MCP through the SDK's
  client over stdio and HTTP -- each way the power has, and checks the refusal's code (and
  HTTP status or exit code), that it says why, and that the fleet is exactly as it was;
- allowed: tries it once.

One fleet serves each group of faces (a refusal changes nothing, and each try readies
what it needs), so the whole table is walked in seconds.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp")
pytest.importorskip("fastapi")

from shoal import Fleet
from shoal.faces.cli import main
from shoal.faces.exposure import Exposure, allowed_hosts
from shoal.faces.web import create_app
from tests.faces import roles_http_support as web
from tests.faces import roles_mcp_support as mcp
from tests.faces.roles_support import (
    COLUMNS,
    DOC,
    Cell,
    Outcome,
    TableError,
    Try,
    Verdict,
    Verdicts,
    read_table,
    snapshot,
    the_table,
)
from tests.web.remote_support import hub_thread

#: The MCP faces of each column walked through MCP (the rest: roles_http_support.FACES).
MCP_FACES = {"worker": ("stdio", "http"), "manager": ("stdio", "http"), "anyone": ("http",)}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def table() -> dict[tuple[str, str], Cell]:
    return the_table()


def first_of_each_face(tries: list[tuple[str, Try]]) -> list[tuple[str, Try]]:
    """An allowed cell is tried once on each face: the first way it has there."""
    firsts: dict[str, Try] = {}
    for face, attempt in tries:
        firsts.setdefault(face, attempt)
    return list(firsts.items())


# ---------------------------------------------------------------------- the table itself


def test_the_table_is_whole_and_the_walker_knows_every_row_and_column(
    table: dict[tuple[str, str], Cell],
) -> None:
    rows = {row for row, _ in table}
    for name, powers in (("HTTP", web.POWERS), ("MCP", mcp.POWERS)):
        assert rows == set(powers), (
            f"rows of the table the {name} walker does not know: {sorted(rows - set(powers))}; "
            f"rows it knows the table has not: {sorted(set(powers) - rows)}"
        )
    walked = set(web.FACES) | set(MCP_FACES)
    assert walked == set(COLUMNS), f"columns not walked: {set(COLUMNS) - walked}"
    # The principle, read off the table: no agent's face acts on others' work or the fleet.
    for power in (
        "Cancel, retry or reprioritise a task",
        "Pause or resume an agent",
        "Change the settings",
        "Set or lift a group's limit",
        "Assess the workload",
        "Make an agent a manager",
        "Act as another agent",
    ):
        for column in ("agent", "worker", "viewer", "anyone"):
            assert table[(power, column)].verdict is Verdict.REFUSED, table[(power, column)]


def test_a_table_the_walker_cannot_read_fails_saying_where() -> None:
    text = DOC.read_text(encoding="utf-8")
    broken = text.replace("| ✗ 403 `foreign_agent` |", "| refused |", 1)
    with pytest.raises(TableError, match=r"Act as another agent.*'refused'"):
        read_table(broken)
    with pytest.raises(TableError, match="the columns are"):
        read_table(text.replace("admin<br>dashboard", "admins<br>dashboard", 1))
    with pytest.raises(TableError, match="no section"):
        read_table(text.replace("## Who may do what", "## Who does what", 1))


# ---------------------------------------------------------------------- the HTTP faces


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[web.HttpWorld]:
    url = f"sqlite://{tmp_path_factory.mktemp('roles') / 'fleet.db'}"
    fleet = Fleet.init(url)
    exposure = Exposure("127.0.0.1", 8765, None, allowed_hosts("127.0.0.1", ()))
    app = create_app(fleet, exposure, local_secret="the-owners-sign-in-secret-0123456789")
    with hub_thread(fleet) as hub:
        world = web.make_world(fleet, url, hub, app)
        yield world
        web.close_world(world)
    fleet.close()


@pytest.fixture
def walking(
    world: web.HttpWorld, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> web.HttpWorld:
    """The world, with its CLI run in this process: on the store, or through the hub."""
    for name in ("SHOAL_STORE", "SHOAL_AGENT", "SHOAL_TOKEN", "SHOAL_LEASE", "SHOAL_API_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "200")

    def run(args: list[str], token: str | None) -> tuple[int, str]:
        store = world.url if token is None else world.hub
        with monkeypatch.context() as env:
            if token:
                env.setenv("SHOAL_API_TOKEN", token)
            with pytest.raises(SystemExit) as stop:
                main(["--store", store, "--json", *args])
        return int(stop.value.code or 0), capsys.readouterr().out

    world.cli = run
    return world


@pytest.mark.parametrize("column", list(web.FACES))
def test_each_cell_through_the_http_faces(
    column: str, table: dict[tuple[str, str], Cell], walking: web.HttpWorld
) -> None:
    """Every refused cell of ``column``, each way each of its faces has, and every
    allowed cell once (the API, the dashboard, the CLI through a hub or on the store)."""
    who, faces = web.FACES[column]
    found = Verdicts()
    cells = 0
    for (row, col), cell in table.items():
        if col != column or cell.verdict is Verdict.NA:
            continue
        tries = [(face, t) for face in faces for t in web.POWERS[row](walking, who, face)]
        assert tries, f"{cell}: no face of the column has a way to try it"
        cells += 1
        if cell.verdict is Verdict.ALLOWED:
            tries = first_of_each_face(tries)
        for face, attempt in tries:
            act = attempt.setup()
            before = snapshot(walking.fleet)
            got = act()
            assert not inspect.isawaitable(got)
            found.judge(cell, face, attempt, got, snapshot(walking.fleet) != before)
    found.check(tried_at_least=cells)


def test_an_agent_token_on_the_dashboard_is_a_viewer(walking: web.HttpWorld) -> None:
    """The table's note: an agent token signed in to the dashboard reads, and its forms
    are refused as a viewer's are."""
    task = web.pending(walking)
    assert walking.dash["agent"].get("/").status_code == 200
    before = snapshot(walking.fleet)
    form = {"csrf": walking.csrf["agent"], "back": "/"}
    refused = walking.dash["agent"].post(f"/tasks/{task}/cancel", data=form)
    assert refused.status_code == 403 and 'data-code="forbidden"' in refused.text
    assert snapshot(walking.fleet) == before


# ---------------------------------------------------------------------- MCP


async def walk_mcp(w: mcp.McpWorld, table: dict[tuple[str, str], Cell], found: Verdicts) -> int:
    """Try each cell of the MCP columns; how many cells were walked."""
    cells = 0
    for (row, column), cell in table.items():
        if column not in MCP_FACES or cell.verdict is Verdict.NA:
            continue
        tries: list[tuple[str, Try]] = []
        for face in MCP_FACES[column]:
            if column == "anyone":
                tries.append((face, Try("initialize with no token", lambda: lambda: mcp_anyone(w))))
                continue
            tries += [(face, t) for t in mcp.POWERS[row](w, (column, face))]
        assert tries, f"{cell}: no MCP server has a way to try it"
        cells += 1
        if cell.verdict is Verdict.ALLOWED:
            tries = first_of_each_face(tries)
        for face, attempt in tries:
            act = attempt.setup()
            before = snapshot(w.fleet)
            got = act()
            if inspect.isawaitable(got):
                got = await got
            after = snapshot(w.fleet)
            found.judge(cell, f"MCP {face}", attempt, got, after != before)
    return cells


async def mcp_anyone(w: mcp.McpWorld) -> Outcome:
    return mcp.without_token(w)


@pytest.mark.anyio
async def test_each_cell_through_mcp_over_stdio_and_http(
    table: dict[tuple[str, str], Cell], tmp_path: Path
) -> None:
    """A worker's servers (pinned over stdio, unpinned over HTTP) and a manager's (over
    both), each tried for every refused cell of its column, each way; allowed cells once."""
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    found = Verdicts()
    with Fleet.init(url) as fleet:
        async with mcp.mcp_world(fleet, url) as world:
            cells = await walk_mcp(world, table, found)
    found.check(tried_at_least=cells)
