"""``shoal doctor``, run as a real process against real fleets, healthy and broken.

Each broken fleet is made the way it happens in the field -- a truncated file, a server
that is not there, a task that ran out of attempts, an agent the circuit breaker paused, a
lease nobody reaped, a lock file anyone may write -- and the test checks the exit code and
that the report names the problem and the command that fixes it. Setup goes through the
Fleet API in this process; an expired lease is made with a clock set an hour back, so no
test waits for time to pass.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from shoal import AgentStatus, Fleet
from shoal.clock import ManualClock
from tests.faces.cli_support import Result, Shoal
from tests.helpers import plant_agent

#: The real CLI in a real process, with doctor registered if the CLI does not do it yet.
DOCTOR_CLI = (
    "from shoal.faces.cli import cli, main; "
    "from shoal.faces.cli.doctor import add_doctor_commands; "
    "'doctor' in cli.commands or add_doctor_commands(cli); main()"
)
CHECK_NAMES = ["store", "schema", "lock_file", "disk_space", "file_modes", "integrity"]
STATE_NAMES = ["stale_leases", "paused_agents", "dead_tasks", "stalled_tasks", "agent_ids"]


class Doctor(Shoal):
    """``Shoal`` for doctor: the same environment and results, through the CLI's ``main``
    in a new process (with doctor registered, should the CLI not do it yet)."""

    def __call__(self, *args: str, env: Mapping[str, str] | None = None, **_: object) -> Result:  # type: ignore[override]
        proc = subprocess.run(
            [sys.executable, "-c", DOCTOR_CLI, *args],
            cwd=self.cwd,
            env=self._env(env),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A new, empty SQLite fleet's file (made here: setup, not under test)."""
    path = tmp_path / "fleet.db"
    Fleet.init(f"sqlite://{path}").close()
    return path


@pytest.fixture
def doctor(tmp_path: Path, db: Path) -> Doctor:
    return Doctor(tmp_path, {"SHOAL_STORE": f"sqlite://{db}"})


def lines_of(result: Result, name: str) -> list[str]:
    """The report's line for check ``name`` and its fix line, if any."""
    lines = result.out.splitlines()
    for i, line in enumerate(lines):
        if line[2:].startswith(name.replace("_", " ") + ":"):
            return lines[i : i + 2] if i + 1 < len(lines) and "fix:" in lines[i + 1] else [line]
    raise AssertionError(f"no {name} line in:\n{result.out}")


def test_a_healthy_fleet_passes_every_check(doctor: Doctor) -> None:
    result = doctor("doctor")
    assert result.code == 0, result
    checks = [line for line in result.out.splitlines() if line[:2] in ("✔ ", "✘ ")]
    assert len(checks) == len(CHECK_NAMES + STATE_NAMES), result.out
    assert all(line.startswith("✔ ") for line in checks), result.out
    assert result.out.splitlines()[-1] == "all 11 checks passed"
    assert "\x1b" not in result.out and "│" not in result.out  # plain lines: it pipes


def test_json_is_one_document_of_named_checks(doctor: Doctor) -> None:
    result = doctor("doctor", "--json")
    assert result.code == 0, result
    data = result.data
    assert data["ok"] is True
    assert [c["name"] for c in data["checks"]] == CHECK_NAMES + STATE_NAMES
    for check in data["checks"]:
        assert set(check) == {"name", "ok", "finding", "fix"}
        assert check["ok"] is True and check["fix"] is None and check["finding"]
    again = doctor("--json", "doctor").data["checks"]  # --json before or after the command

    def steady(checks: list[dict[str, object]]) -> list[dict[str, object]]:
        # The free space of a shared disk moves between two runs; its check's verdict must not.
        return [{**c, "finding": None} if c["name"] == "disk_space" else c for c in checks]

    assert steady(again) == steady(data["checks"])


def test_a_truncated_sqlite_file_is_named_damaged_and_exits_5(doctor: Doctor, db: Path) -> None:
    os.truncate(db, 100)
    result = doctor("doctor")
    assert result.code == 5, result
    (line, fix) = lines_of(result, "store")
    assert line.startswith("✘ ") and str(db) in line and "is damaged" in line
    assert "integrity check below" in fix
    (line, fix) = lines_of(result, "integrity")
    assert line.startswith("✘ ") and "from a backup" in fix
    as_json = doctor("doctor", "--json")
    assert as_json.code == 5 and as_json.data["ok"] is False
    assert as_json.data["checks"][0]["name"] == "store"


def test_a_fleet_marked_damaged_is_sent_to_the_integrity_check_not_to_doctor_again(
    doctor: Doctor, db: Path
) -> None:
    """The mark a failed command leaves says "run `shoal doctor`"; inside doctor that
    advice goes round in a circle, so the store check points at the integrity check."""
    image = bytearray(db.read_bytes())
    image[5000:9000] = b"\xff" * 4000
    db.write_bytes(bytes(image))
    assert doctor("status").code == 5  # the command that meets the damage marks the file
    result = doctor("doctor")
    assert result.code == 5, result
    (_line, fix) = lines_of(result, "store")
    assert "shoal doctor" not in fix and "integrity check below" in fix
    (line, fix) = lines_of(result, "integrity")
    assert line.startswith("✘ ") and "from a backup" in fix


def test_a_file_that_is_not_there_exits_2_saying_how_to_create_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.db"
    result = Doctor(tmp_path, {"SHOAL_STORE": f"sqlite://{missing}"})("doctor")
    assert result.code == 2, result
    assert f"there is no fleet at {missing}" in result.out and "shoal init" in result.out
    assert not missing.exists()  # doctor creates nothing


def test_a_postgres_url_with_a_wrong_port_is_named(tmp_path: Path) -> None:
    """Nothing listens on port 1: the store does not answer, which `shoal` reports with
    its usual code for that (4: retrying may help once the server is up)."""
    pytest.importorskip("psycopg")
    url = "postgresql://127.0.0.1:1/x?connect_timeout=5"
    started = time.monotonic()
    result = Doctor(tmp_path, {"SHOAL_STORE": url})("doctor", "--json")
    assert result.code == 4, result
    (store,) = result.data["checks"]
    assert store["name"] == "store" and store["ok"] is False
    assert "cannot reach the fleet" in store["finding"] and "port 1" in store["finding"]
    assert "check the host and port" in store["fix"]
    assert time.monotonic() - started < 30


def test_a_healthy_postgres_fleet_checks_the_server_clock(
    tmp_path: Path, postgres_url: str
) -> None:
    """On PostgreSQL the write probe and the server's clock are checked (this host and the
    server share a clock here: well within the skew allowed)."""
    Fleet.init(postgres_url).close()
    result = Doctor(tmp_path, {"SHOAL_STORE": postgres_url})("doctor", "--json")
    assert result.code == 0, result
    checks = {c["name"]: c for c in result.data["checks"]}
    assert checks["store"]["ok"] and checks["clock_skew"]["ok"]
    assert "the server's clock is" in checks["clock_skew"]["finding"]
    assert "lock_file" not in checks  # SQLite's files only


def test_dead_tasks_and_a_paused_agent_exit_3_with_their_fixes(doctor: Doctor, db: Path) -> None:
    with Fleet.open(f"sqlite://{db}") as fleet:
        fleet.configure(failure_streak=1)
        fleet.register("ada", skills=["python"])
        fleet.post("fix the parser", skills=["python"], max_attempts=1)
        (lease,) = fleet.claim("ada").leases
        fleet.fail(lease, "it broke")
    result = doctor("doctor")
    assert result.code == 3, result
    dead, dead_fix = lines_of(result, "dead_tasks")
    assert dead.startswith("✘ ") and "1 task is dead" in dead
    assert "`shoal retry --state dead`" in dead_fix
    paused, paused_fix = lines_of(result, "paused_agents")
    assert paused.startswith("✘ ") and "ada" in paused
    assert "`shoal agent resume ada`" in paused_fix
    assert lines_of(result, "store")[0].startswith("✔ ")
    assert result.out.splitlines()[-1] == "2 of 11 checks failed"
    data = doctor("doctor", "--json").data
    assert data["ok"] is False
    assert {c["name"] for c in data["checks"] if not c["ok"]} == {"dead_tasks", "paused_agents"}


def test_live_agents_under_ids_new_agents_may_not_take_are_named_with_the_fix(
    doctor: Doctor, db: Path
) -> None:
    """An older version took ids with a ``/`` (issue 28, L5): such an agent keeps working,
    but doctor names it and says how to move it to a new id."""
    with Fleet.open(f"sqlite://{db}") as fleet:
        fleet.register("ada")
        plant_agent(fleet, "x/../../agents/bob")
        plant_agent(fleet, "team/gone", status=AgentStatus.TERMINATED)  # nothing to move
    result = doctor("doctor")
    assert result.code == 3, result
    line, fix = lines_of(result, "agent_ids")
    assert line.startswith("✘ ") and "1 live agent is" in line
    assert "x/../../agents/bob" in line and "team/gone" not in line and "ada" not in line
    assert "under a new id" in fix
    assert "`shoal set-status 'x/../../agents/bob' terminated`" in fix
    checks = doctor("doctor", "--json").data["checks"]
    assert [c["name"] for c in checks if not c["ok"]] == ["agent_ids"]


def test_a_lease_nobody_reaped_says_to_reap(doctor: Doctor, db: Path) -> None:
    """Claimed by a clock an hour back, so the lease ran out long before doctor looks."""
    clock = ManualClock(time.time() - 3600)
    with Fleet.open(f"sqlite://{db}", clock=clock) as fleet:
        fleet.register("bob")
        task_id = fleet.post("index the docs", lease_ttl=60).id
        fleet.claim("bob")
    result = doctor("doctor")
    assert result.code == 3, result
    line, fix = lines_of(result, "stale_leases")
    assert line.startswith("✘ ") and f"task {task_id}" in line and "bob" in line
    assert "`shoal reap`" in fix


def test_a_world_writable_lock_file_is_reported_and_narrowed(doctor: Doctor, db: Path) -> None:
    lock = Path(f"{db}.lock")
    assert lock.exists()
    lock.chmod(0o666)
    result = doctor("doctor")
    assert result.code == 0, result
    line = lines_of(result, "file_modes")[0]
    assert line.startswith("✔ ") and f"{lock} (0666)" in line and "narrowed" in line
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600


def test_another_users_loose_lock_file_fails(doctor: Doctor, db: Path) -> None:
    lock = Path(f"{db}.lock")
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    os.chown(lock, 4321, 4321)
    lock.chmod(0o666)
    result = doctor("doctor")
    assert result.code == 5, result  # no writer opens the fleet through it: unsafe
    assert "belongs to another user (uid 4321)" in lines_of(result, "store")[0]
    line, fix = lines_of(result, "file_modes")
    assert line.startswith("✘ ") and f"{lock} (0666)" in line
    assert "chmod 600" in fix
    assert lines_of(result, "lock_file")[0].startswith("✘ ")
    assert stat.S_IMODE(lock.stat().st_mode) == 0o666  # not ours to change


def test_a_newer_schema_fails_the_schema_check(doctor: Doctor, db: Path) -> None:
    raw = sqlite3.connect(db)
    raw.execute("PRAGMA user_version = 999")
    raw.close()
    result = doctor("doctor")
    assert result.code == 2, result
    assert lines_of(result, "store")[0].startswith("✔ ")
    line, fix = lines_of(result, "schema")
    assert line.startswith("✘ ") and "schema version 999" in line
    assert "upgrade shoal" in fix


def test_the_report_prints_where_stdout_cannot_encode_the_marks(doctor: Doctor) -> None:
    result = doctor("doctor", env={"PYTHONIOENCODING": "ascii"})
    assert result.code == 0, result
    assert result.out.splitlines()[0].startswith("ok store: ")
