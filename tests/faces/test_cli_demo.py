# ruff: noqa: F811 -- the tests take the CLI fixtures as parameters
"""``shoal demo``: it runs, every task gets done, its worker processes all leave, and the
fleet in SHOAL_STORE is left alone.

See cli_support.py for how these tests run the CLI."""

from __future__ import annotations

import re
from pathlib import Path

from shoal import Fleet
from shoal.faces.cli.runtime import worker_line
from tests.faces.cli_support import Shoal, fleet, shoal, url  # noqa: F401 (fixtures)
from tests.helpers import snapshot

# ---------------------------------------------------------------------- the demo


def test_demo_runs_and_every_task_gets_done(tmp_path: Path) -> None:
    sh = Shoal(tmp_path, {"TMPDIR": str(tmp_path)})  # the demo's fleet goes in a temp folder
    result = sh("demo", "--quiet", "--tasks", "12", "--speed", "20", "--json")
    assert result.code == 0, result
    data = result.data
    assert data["tasks"] == 12
    assert data["done"] == 12
    assert sum(a["done"] for a in data["agents"]) == 12
    assert data["workers_started"] >= 1


def test_demo_supervises_worker_processes_that_all_leave_and_nothing_is_left_running(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "demo"
    result = Shoal(tmp_path)("demo", "--tasks", "40", "--speed", "2", "--dir", str(folder))
    assert result.code == 0, result
    assert "40/40 tasks done" in result.text and "stolen at claim time" in result.text
    # The closing suggestion is one command to paste (it once read like a pipeline).
    look = re.search(r"Look around: shoal --store (\S+) status", " ".join(result.out.split()))
    assert look, result.out[-400:]
    assert Shoal(tmp_path)("--store", look.group(1), "status").code == 0
    with Fleet.open(f"sqlite://{folder / 'fleet.db'}") as fleet:
        agents = fleet.agents()
        assert len(agents) >= 2  # the supervisor grew the fleet
        assert {a.status.value for a in agents} == {"terminated"}  # and every worker left
        assert fleet.status().counts.get("done") == 40
        # (How much is stolen depends on how fast the workers start on a loaded machine;
        # the claim's stealing itself is tested in tests/contract.)
    leftovers = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if str(folder).encode() in cmdline:
            leftovers.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
    assert leftovers == []


# ---------------------------------------------------------------------- once bugs, now fixed


def test_demo_leaves_the_fleet_in_shoal_store_alone(
    shoal: Shoal, fleet: Fleet, tmp_path: Path
) -> None:
    fleet.configure(lease_ttl="2h")
    fleet.register("ada")
    before = snapshot(fleet)
    args = ("demo", "--quiet", "--tasks", "3", "--speed", "20", "--json")
    result = shoal(*args, env={"TMPDIR": str(tmp_path)})
    after = snapshot(fleet)
    assert after["settings"] == before["settings"], after["settings"]
    assert after["agents"] == before["agents"], [a["id"] for a in after["agents"]]
    assert after["tasks"] == before["tasks"]
    assert result.code in (0, 2), result  # it ran elsewhere, or refused this fleet


def test_a_claim_from_the_pool_is_not_said_to_come_from_the_agents_own_pool() -> None:
    """The pool is the fleet's, a queue an agent's own: the lines of the demo and of
    `shoal worker` said "claims #1 from its pool"."""
    said = {
        source: worker_line("claimed", {"agent": "ada", "task": 1, "source": source, "title": "t"})
        for source in ("pool", "queue")
    }
    assert said == {
        "pool": "ada claims #1 from the pool: t",
        "queue": "ada claims #1 from its queue: t",
    }
