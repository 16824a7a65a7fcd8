"""bench/scale.py, very small: it runs end to end on SQLite (its claiming processes, the
history written straight into the tables, the prune) and writes its figures in the shared
--json format; bad arguments are refused. The real run is `make bench-scale`."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "scale.py"
if str(BENCH.parent) not in sys.path:
    sys.path.insert(0, str(BENCH.parent))  # bench/ is scripts, not a package
results = importlib.import_module("_results")
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
    assert set(report["meta"]) >= set(results.REQUIRED_META) and report["meta"]["store"] == "sqlite"
    figures = report["figures"]
    for name in (
        "scale.procs2.claim_p50_ms",
        "scale.procs2.claim_p99_ms",
        "scale.procs2.claim_p99_empty_ms",
        "scale.procs2.claim_p99_ratio_vs_empty",
        "scale.steal_p50_ratio_vs_empty",
        "scale.status_ms",
        "scale.assess_ms",
        "scale.ready_ms",
        "scale.agents_ms",
        "scale.prune_batch_ms",
        "scale.procs2.prune_claim_p99_ratio_vs_history",
    ):
        assert isinstance(figures[f"sqlite.{name}"], float), name
    assert report["meta"]["history"]["tasks"] == 2000
    assert len(report["targets"]) == 7
    for name, target in report["targets"].items():
        assert name in figures and set(target) == {"target", "pass"}
    assert results.read_results(out).figures == figures  # the shared reader takes it
    assert "PASS" in done.stdout or "MISS" in done.stdout
    assert list(tmp_path.iterdir()) == [out], "the fleet was left behind"


def test_bad_arguments_are_refused() -> None:
    for args in (["--agents", "5"], ["--procs", "20", "--agents", "30"], ["--store", "redis"]):
        refused = run(*args)
        assert refused.returncode == 2 and "error" in refused.stderr, args
