"""Logging: `shoal -v/-q` and SHOAL_LOG_LEVEL on real CLI processes (stderr only, one line
per record, never a lease token), and `shoal supervise --log-dir` keeping each worker's
output in a private, rotated file."""

from __future__ import annotations

import logging
import os
import re
import signal
import stat
import subprocess
from pathlib import Path

import pytest

from shoal import Fleet, TaskState
from shoal.errors import BadInput
from shoal.faces.cli.logs import resolve_level
from tests.helpers import wait_until
from tests.workers import SHOAL, running

#: One record: UTC time, level, logger (the shoal hierarchy), message.
RECORD = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"shoal(\.\w+)*: \S"
)


@pytest.fixture
def url(tmp_path: Path) -> str:
    store = f"sqlite://{tmp_path / 'fleet.db'}"
    Fleet.init(store).close()
    return store


def shoal(url: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    return subprocess.run(
        [*SHOAL, *args],
        capture_output=True,
        text=True,
        env={**clean, "SHOAL_STORE": url, **env},
        timeout=60,
        check=False,
    )


def records(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if RECORD.match(line)]


def test_verbose_logs_on_stderr_one_line_per_record_and_the_level_variable_rules(
    url: str, tmp_path: Path
) -> None:
    debug = shoal(url, "-vv", "list")
    assert debug.returncode == 0, debug.stderr
    lines = debug.stderr.splitlines()
    assert lines, "-vv logged nothing"
    assert all(RECORD.match(line) for line in lines), debug.stderr
    assert any(" DEBUG shoal.stores.sqlite: opened the fleet at " in line for line in lines)
    assert not records(debug.stdout)  # logs never reach stdout (it pipes)

    # -v is INFO: a new fleet says which migrations it applied, the open is not said.
    fresh = shoal(f"sqlite://{tmp_path / 'new.db'}", "-v", "init")
    assert fresh.returncode == 0, fresh.stderr
    assert any(" INFO shoal.stores.sqlite: applied migrations " in r for r in records(fresh.stderr))
    assert " DEBUG " not in fresh.stderr

    by_env = shoal(url, "list", SHOAL_LOG_LEVEL="debug")
    assert any(" DEBUG shoal." in line for line in records(by_env.stderr))
    assert any(" DEBUG " in r for r in records(shoal(url, "list", SHOAL_LOG_LEVEL="10").stderr))
    silent = shoal(url, "list", SHOAL_LOG_LEVEL="ERROR")
    assert silent.returncode == 0
    assert silent.stderr == ""
    assert shoal(url, "list").stderr == ""  # the default, WARNING: a quiet fleet is quiet

    bad = shoal(url, "list", SHOAL_LOG_LEVEL="loud")
    assert bad.returncode == 2
    assert "SHOAL_LOG_LEVEL='loud' is not a log level" in bad.stderr


def test_quiet_silences_warnings(url: str) -> None:
    with Fleet.open(url) as fleet:
        writer = fleet._store._writer  # type: ignore[attr-defined]
        assert writer.acquire(5.0)  # every other writer of the fleet now waits
        try:
            busy = f"{url}?busy_timeout=0.2"
            loud = shoal(busy, "add", "a task")
            quiet = shoal(busy, "-q", "add", "a task")
        finally:
            writer.release()
    assert loud.returncode == quiet.returncode == 4, loud.stderr  # store unavailable
    warned = [r for r in records(loud.stderr) if " WARNING " in r]
    assert warned, loud.stderr
    assert "waited 0.2s for the other writers" in warned[0]
    assert not records(quiet.stderr), quiet.stderr
    assert "error:" in quiet.stderr  # the error itself is not a log record: it stays


def test_no_lease_token_in_any_log_line_of_a_claim_and_its_completion(url: str) -> None:
    title = "fix it [now]"  # untrusted text (a title holds no line break: refused at input)
    assert shoal(url, "register", "ada", "--skill", "py").returncode == 0
    assert (
        shoal(
            url, "add", title, "--skill", "py", "--payload", '{"secret": "payload-words"}'
        ).returncode
        == 0
    )
    claim = shoal(url, "-vv", "claim", "--agent", "ada", "--format", "env")
    assert claim.returncode == 0, claim.stderr
    env = dict(
        line.removeprefix("export ").split("=", 1) for line in claim.stdout.split() if "=" in line
    )
    token, task = env["SHOAL_LEASE"], env["SHOAL_TASK"]
    assert len(token) >= 8
    done = shoal(
        url, "-vv", "done", task, "--token", token, "--result", '{"answer": "result-words"}'
    )
    assert done.returncode == 0, done.stderr
    beat = shoal(url, "-vv", "events")
    for run in (claim, done, beat):
        assert records(run.stderr), run.stderr  # it did log, at DEBUG
        assert all(RECORD.match(line) for line in run.stderr.splitlines()), run.stderr
        assert token not in run.stderr
        assert "payload-words" not in run.stderr  # neither payloads nor results are logged
        assert "result-words" not in run.stderr  # (a timestamp may hold any digits)


@pytest.mark.slow
def test_supervise_log_dir_keeps_each_workers_output_in_a_private_file(
    url: str, tmp_path: Path
) -> None:
    logs, seen = tmp_path / "logs", tmp_path / "seen"
    seen.mkdir()
    with Fleet.open(url) as fleet:
        task = fleet.post("the 'quoted' job", skills=["py"]).id
        # The command notes the token it was given, to look for it in the logs after.
        with running(url, "-vv", "supervise", "--max-agents", "1", "--min", "1",
                     "--interval", "0.1", "--prefix", "w", "--skill", "py", "--drain", "2",
                     "--log-dir", str(logs), "--json", "--",
                     "sh", "-c", f'printf %s "$SHOAL_TOKEN" > {seen}/token; echo done',
                     ) as sup:  # fmt: skip
            wait_until(lambda: fleet.get(task).state is TaskState.DONE, "the task done", 30)
            sup.signal(signal.SIGTERM)
            assert sup.wait() == 0, sup.text()
    token = (seen / "token").read_text()
    assert len(token) >= 8
    assert stat.S_IMODE(logs.stat().st_mode) == 0o700
    assert sorted(p.name for p in logs.iterdir()) == ["w-1.log"]
    log_file = logs / "w-1.log"
    assert stat.S_IMODE(log_file.stat().st_mode) == 0o600
    text = log_file.read_text()
    # stdout: the worker's own lines; stderr: its log records at the supervisor's level.
    assert re.search(rf"Z stdout: .*#{task}\b", text), text
    assert re.search(rf"Z stderr: .* DEBUG shoal\.runtime\.worker: w-1 claimed #{task} ", text)
    assert "\"the 'quoted' job\"" in text  # the title as a repr
    assert token not in text
    assert token not in sup.text()
    assert records(sup.text())  # the supervisor's own records are on its stderr


def test_resolve_level_flags_first_then_the_variable_then_warning() -> None:
    assert resolve_level() == logging.WARNING
    assert resolve_level(1) == logging.INFO
    assert resolve_level(5) == logging.DEBUG
    assert resolve_level(0, 1) == logging.ERROR
    assert resolve_level(0, 9) == logging.CRITICAL
    assert resolve_level(1, 0, "ERROR") == logging.INFO  # a flag wins over the variable
    assert resolve_level(0, 0, "info") == logging.INFO
    assert resolve_level(0, 0, "WARN") == logging.WARNING
    assert resolve_level(0, 0, "25") == 25
    assert resolve_level(0, 0, " ") == logging.WARNING
    with pytest.raises(BadInput):
        resolve_level(0, 0, "chatty")
