# ruff: noqa: F811 -- the tests take the CLI fixtures as parameters
"""Least privilege from the command line (issue 28): a payload or body past the fleet's caps
is refused with exit 2 and adds nothing (M5), ``list`` never loads a payload, however large
(M5), and a new agent's id is one of the safe set (L5).

See cli_support.py for how these tests run the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from shoal import Fleet
from tests.faces.cli_support import COMMAND, Shoal, base_env, fleet, shoal, url  # noqa: F401 (fixtures)
from tests.helpers import plant_agent, snapshot

MIB = 1024 * 1024


def test_add_refuses_a_payload_or_body_past_the_cap_with_exit_2(
    shoal: Shoal, fleet: Fleet, tmp_path: Path
) -> None:
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"blob": "x" * (7 * 1000 * 1000)}), "utf-8")
    before = snapshot(fleet)
    refused = shoal("add", "huge", "--payload", f"@{big}")
    assert refused.code == 2, refused
    assert "payload is 7,000,011 bytes as json" in refused.text
    assert "max_payload_bytes" in refused.text  # the hint names the cap
    as_json = shoal("add", "huge", "--body", "-", "--json", stdin="y" * (MIB + 1))
    assert as_json.code == 2, as_json
    error = as_json.data["error"]
    assert error["code"] == "too_large" and "body is 1,048,577 bytes" in error["message"]
    assert snapshot(fleet) == before

    raised = shoal("config", "set", "max_payload_bytes", "8MiB")
    assert raised.code == 0, raised
    assert shoal("config", "get", "max_payload_bytes").out.startswith("8MiB")
    assert shoal("add", "huge", "--payload", f"@{big}").code == 0


def test_list_never_loads_the_payloads_and_show_does(shoal: Shoal, fleet: Fleet) -> None:
    """The attack of the issue: 13 tasks with 7 MB payloads. ``shoal list`` used 852 MB
    reading them; now it reads none, so its peak memory stays far below their 91 MB."""
    fleet.configure(max_payload_bytes="8MiB")
    blob = {"blob": "x" * (7 * 1000 * 1000)}
    posted = [fleet.post(f"big {i}", payload=blob).id for i in range(13)]
    fleet.post("small", payload={"n": 1})

    listed = shoal("list", "--json")
    assert listed.code == 0, listed
    assert len(listed.out) < 20_000
    assert all("payload" not in t and "result" not in t for t in listed.data)
    assert [t["has_payload"] for t in listed.data] == [True] * 14
    shown = shoal("show", str(posted[0]), "--json")
    assert shown.data["payload"] == blob and shown.data["has_payload"]

    for args in (("list",), ("list", "--json")):
        peak = _peak_rss(shoal, *args)
        assert peak < 120 * MIB, f"shoal {' '.join(args)} peaked at {peak // MIB} MiB"


#: Runs a command and prints its peak resident memory in KiB. A small process of its own
#: starts it: a process keeps the peak of the one it was forked from (Linux records the old
#: memory's high-water mark at exec), and this test's process holds the payloads.
_MEASURE = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
_, status, usage = os.wait4(proc.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def _peak_rss(shoal: Shoal, *args: str) -> int:
    """The peak resident memory, in bytes, of one ``shoal`` process running ``args``."""
    measured = subprocess.run(
        [sys.executable, "-c", _MEASURE, *COMMAND, *args],
        cwd=shoal.cwd,
        env=base_env(shoal.env),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    code, kib = measured.stdout.split()
    assert code == "0", f"shoal {' '.join(args)} exited {code}"
    return int(kib) * 1024


def test_register_refuses_an_id_outside_the_safe_set_with_exit_2(
    shoal: Shoal, fleet: Fleet
) -> None:
    before = snapshot(fleet)
    for agent_id in ("x/../../agents/bob", "a" * 65, "a b"):
        refused = shoal("register", agent_id)
        assert refused.code == 2, refused
        assert f"agent id {agent_id!r} is not valid" in refused.text
        assert "letters, digits or . _ - @ :" in refused.text
    worker = shoal("worker", "--agent", "team/ann", "--", "true")
    assert worker.code == 2, worker
    assert snapshot(fleet) == before
    assert shoal("register", "ann@host-1:2.x_y").code == 0


def test_an_agent_an_older_version_registered_works_from_the_cli(
    shoal: Shoal, fleet: Fleet
) -> None:
    plant_agent(fleet, "team/bob")
    assert shoal("register", "team/bob").code == 0  # its own registration, renewed
    task = shoal("add", "for bob", "--to", "team/bob", "--json").data["id"]
    claimed = shoal("claim", "--agent", "team/bob", "--json")
    assert claimed.code == 0 and claimed.data["task"]["id"] == task, claimed
    token = claimed.data["lease"]["token"]
    assert shoal("done", str(task), "--token", token).code == 0
    assert shoal("list", "--agent", "team/bob", "--json").data[0]["id"] == task
    assert shoal("set-status", "team/bob", "terminated").code == 0
    assert shoal("register", "team/bob").code == 2  # gone: the id is not taken again


def test_an_import_with_one_task_past_the_cap_adds_none_of_the_file(
    shoal: Shoal, fleet: Fleet, tmp_path: Path
) -> None:
    """Its tasks are posted a dependency level at a time: the big one, on the second level,
    must be refused before the first level is written."""
    lines = [
        {"title": "schema", "key": "schema"},
        {"title": "backfill", "key": "backfill", "depends_on": ["schema"],
         "payload": {"rows": "x" * (2 * MIB)}},
    ]  # fmt: skip
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("\n".join(json.dumps(line) for line in lines) + "\n", "utf-8")
    before = snapshot(fleet)
    refused = shoal("import", "jsonl", str(tasks))
    assert refused.code == 2, refused
    assert "line 2" in refused.text and "payload is 2,097,1" in refused.text
    assert "nothing of the file was added" in refused.text
    assert snapshot(fleet) == before
