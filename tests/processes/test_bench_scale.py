"""bench/scale.py, very small: it runs end to end on SQLite (its claiming processes, the
history written straight into the tables, the prune) and writes its figures in the shared
--json format; bad arguments are refused. The real run is `make bench-scale`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "scale.py"
META = {
    "command",
    "started",
    "cpus",
    "cpus_usable",
    "loadavg_start",
    "python",
    "shoal",
    "store",
    "peers",
    "repeat",
}
SMALL = ["--agents", "20", "--procs", "2", "--queued", "200", "--finished", "2000"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(BENCH), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def test_a_very_small_run_writes_every_figure_and_target(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    done = run(*SMALL, "--cycles", "10", "--dir", str(tmp_path), "--json", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert set(report) == {"meta", "figures", "targets"}
    assert set(report["meta"]) == META and report["meta"]["store"] == "sqlite"
    figures = report["figures"]
    for name in (
        "claim.p50_ms",
        "claim.p99_ms",
        "claim.p99_empty_ms",
        "claim.p99_ratio_vs_empty",
        "steal.p50_ratio_vs_empty",
        "status_ms",
        "assess_ms",
        "ready_ms",
        "agents_ms",
        "prune.batch_ms",
        "setup.finished",
    ):
        assert isinstance(figures[f"sqlite.scale.{name}"], float), name
    assert figures["sqlite.scale.setup.finished"] == 2000
    assert len(report["targets"]) == 7
    for name, target in report["targets"].items():
        assert name in figures and set(target) == {"target", "pass"}
    assert "PASS" in done.stdout or "MISS" in done.stdout
    assert list(tmp_path.iterdir()) == [out], "the fleet was left behind"


def test_bad_arguments_are_refused() -> None:
    for args in (["--agents", "5"], ["--procs", "20", "--agents", "30"], ["--store", "redis"]):
        refused = run(*args)
        assert refused.returncode == 2 and "error" in refused.stderr, args
