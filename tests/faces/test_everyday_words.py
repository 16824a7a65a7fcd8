"""Small things a first trial tripped on, each through the face it was seen in: the status
line's bracket belongs to pending, doctor counts leases in the right number, `shoal sim`
piped is TSV, a missing extra is named as the extra, and MCP results carry their JSON once
compactly, with no ``created`` where nothing was created."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from shoal import Fleet
from shoal.clock import ManualClock
from tests.faces.cli_support import Result, Shoal, base_env, shoal, url

__all__ = ["shoal", "url"]  # the fixtures, imported to be used

#: `shoal ARGS...` where the web extra's libraries cannot be imported (as if not installed).
WITHOUT_WEB = (
    "import sys\n"
    "for name in ('anyio', 'fastapi', 'starlette', 'uvicorn', 'jinja2', 'sse_starlette'):\n"
    "    sys.modules[name] = None\n"
    "from shoal.faces.cli import main\n"
    "sys.argv[0] = 'shoal'\n"
    "main()\n"
)


def test_the_status_line_puts_where_pending_tasks_are_next_to_their_count(
    shoal: Shoal, url: str
) -> None:
    with Fleet.open(url) as fleet:
        fleet.register("ada")
        for title in ("one", "two", "three"):
            fleet.post(title)
        for _ in range(2):
            (lease,) = fleet.claim("ada").leases
            fleet.complete(lease)
    result = shoal("status", "--format", "table")
    assert result.code == 0, result
    assert "pending 1 (1 in the pool, 0 queued)  done 2" in result.out, result.out


def test_doctor_says_leases_in_the_plural_when_there_are_two(tmp_path: Path, url: str) -> None:
    clock = ManualClock(time.time() - 3600)  # claimed an hour ago: the leases ran out
    with Fleet.open(url, clock=clock) as fleet:
        fleet.register("bob", max_concurrent=2)
        for title in ("index the docs", "index the code"):
            fleet.post(title, lease_ttl=60)
        assert len(fleet.claim("bob", 2).leases) == 2
    done = subprocess.run(
        [sys.executable, "-m", "shoal.faces.cli", "doctor"],
        cwd=tmp_path, env=base_env({"SHOAL_STORE": url}), capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 3, done
    (line,) = [x for x in done.stdout.splitlines() if "stale leases:" in x]
    assert "2 claimed tasks are past their leases" in line, line
    assert "takes them back" in line and "its lease" not in line


def test_sim_piped_prints_tsv_with_every_row_naming_its_workload(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "shoal.faces.cli", "sim", "lognormal", "forkjoin", "-p", "push",
         "-p", "shoal", "--tasks", "20", "--agents", "3"],
        cwd=tmp_path, env=base_env({}), capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.split("\t")[:3] == ["workload", "policy", "hours"]
    assert len(rows) == 4
    width = len(header.split("\t"))
    for row in rows:
        cells = row.split("\t")
        assert len(cells) == width and cells[0] in ("lognormal", "forkjoin"), row
    assert not any(c in done.stdout for c in "─━│")  # no table drawing


def test_serve_without_the_web_extra_names_the_extra_and_the_install_line(
    shoal: Shoal,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_WEB, "serve", "--port", "1"],  # never bound
        cwd=shoal.cwd, env=base_env(shoal.env), capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    result = Result(done.returncode, done.stdout, done.stderr)
    assert result.code == 2, result
    assert "web extra" in result.text and "[web]'" in result.err
    assert "anyio" not in result.text


# ---------------------------------------------------------------------- over MCP


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_mcp_results_are_compact_and_cancel_and_retry_create_nothing(url: str) -> None:
    pytest.importorskip("mcp")
    from tests.faces.mcp_support import memory_session

    async def text_and_data(session: Any, tool: str, **arguments: Any) -> tuple[str, Any]:
        result = await session.call_tool(tool, arguments)
        assert not result.is_error, result
        (block,) = result.content
        return block.text, result.structured_content

    async with memory_session(url, "--agent", "boss", "--manager") as session:
        text, posted = await text_and_data(session, "add_task", title="sweep the logs")
        assert "\n" not in text and json.loads(text) == posted  # one line, the same data
        assert posted["created"] is True
        task_id = posted["task"]["id"]
        for tool in ("cancel_task", "retry_task"):
            text, data = await text_and_data(session, tool, task_id=task_id)
            assert "\n" not in text and json.loads(text) == data
            assert "created" not in data, (tool, data)
        text, listed = await text_and_data(session, "list_tasks")
        assert "\n" not in text and json.loads(text) == listed
