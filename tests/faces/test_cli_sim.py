"""The `shoal sim` command, run as a user runs it: JSON and a chart, a table, and bad input
refused with a hint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def shoal_sim(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shoal.faces.cli", "sim", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_command_prints_json_and_writes_a_chart(tmp_path: Path) -> None:
    png = tmp_path / "chart.png"
    done = shoal_sim(
        tmp_path, "forkjoin", "lognormal", "-p", "shoal", "-p", "pull", "--tasks", "40",
        "--agents", "4", "--seeds", "2", "--json", "--png", str(png),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert len(data["runs"]) == 2 * 2 * 2
    assert {(r["workload"], r["policy"]) for r in data["summary"]} == {
        ("forkjoin", "shoal"),
        ("forkjoin", "pull"),
        ("lognormal", "shoal"),
        ("lognormal", "pull"),
    }
    assert all(r["ratio"] >= 1 for r in data["runs"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert data["png"] == str(png)


def test_the_command_shows_a_table(tmp_path: Path) -> None:
    done = shoal_sim(tmp_path, "overnight", "-p", "push", "-p", "shoal")
    assert done.returncode == 0, done.stderr
    assert "overnight" in done.stdout and "push" in done.stdout and "shoal" in done.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["nightly"], "no workload called 'nightly'"),
        (["overnight", "-p", "round-robin"], "no policy called 'round-robin'"),
        (["overnight", "--agents", "9"], "takes no --agents"),
        (["lognormal", "--set", "busy_threshold"], "name=value"),
        (["lognormal", "--set", "busy=1"], "no setting called 'busy'"),
        (["lognormal", "-p", "pull", "--set", "busy=1"], "no setting called 'busy'"),
        (["lognormal", "--set", "order=fastest"], "order must be one of priority, longest_first"),
        (["lognormal", "--set", "steal_threshold=-1"], "steal_threshold must be at least 0"),
        (["lognormal", "--set", "domain_wait=soon"], "domain_wait must be a duration"),
        (["affinity", "--set", "cold_start=lots"], "cold_start must be a fraction from 0 to 10"),
        (["affinity", "-p", "pull+wake", "--set", "cold_start=-5%"], "cold_start must be"),
    ],
)
def test_bad_input_is_refused_with_a_hint(tmp_path: Path, args: list[str], says: str) -> None:
    done = shoal_sim(tmp_path, *args)
    assert done.returncode == 2
    assert says in done.stderr.lower()
    assert "hint" in done.stderr.lower()
