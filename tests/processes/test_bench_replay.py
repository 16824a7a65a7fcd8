"""bench/replay.py, very small: a batch replayed by real `shoal worker` processes on SQLite
under shoal and pull+wake finishes every task, lands near the simulator's makespan, and
says so in its table and JSON; what it cannot replay is refused. The real run is
`make replay`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parents[2] / "bench" / "replay.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(BENCH), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)


def test_a_small_batch_replays_near_the_simulator(tmp_path: Path) -> None:
    out = tmp_path / "replay.json"
    done = run("lognormal", "--tasks", "18", "--agents", "3", "--compress", "600",
               "--json", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())
    assert [(r["workload"], r["policy"]) for r in rows] == [
        ("lognormal", "shoal"),
        ("lognormal", "pull+wake"),
    ]
    for row in rows:
        assert row["tasks"] == 18 and row["compress"] == 600
        # Real work takes a little longer than virtual work (each task's claim, its
        # process and its completion), never less; at 600x on a busy machine, not much.
        assert row["sim_ratio"] - 0.02 <= row["real_ratio"] <= row["sim_ratio"] + 0.3, row
        assert 0 < row["overhead_p50_ms"] < 1000
        assert 0 <= row["real_eligible"] < 0.2
    assert "lognormal  shoal" in done.stdout and "time compressed" in done.stdout


def test_what_it_cannot_replay_is_refused() -> None:
    cases = [
        (["lognormal", "--policy", "push"], "invalid choice: 'push'"),
        (["--compress", "0.5"], "at least 1"),
        (["nightly"], "no workload called 'nightly'"),
        (["overnight", "--agents", "3"], "takes no --agents"),
    ]
    for args, says in cases:
        refused = run(*args)
        assert refused.returncode == 2 and says in refused.stderr, refused.stderr
