"""The SSE load benchmark (bench/sse_load.py), small: a claim race with dashboards watching
``/live`` loses nothing. Its timing verdict is the full benchmark's (``make bench-sse``);
here only what must hold on any machine: every task done exactly once, every watcher
connected, kept its stream and received events from the race.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parents[2] / "bench" / "sse_load.py"


def test_watchers_on_live_during_a_claim_race_lose_nothing(tmp_path: Path) -> None:
    out = tmp_path / "sse.json"
    args = ["--tasks", "300", "--procs", "4", "--watchers", "10", "--repeat", "1"]
    done = subprocess.run(
        [sys.executable, str(BENCH), *args, "--dir", str(tmp_path), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads(out.read_text())
    assert results["meta"]["problems"] == [], results["meta"]["problems"]
    figures = results["figures"]
    assert figures["sqlite.watched_race.procs4.waiters10.events_per_watcher_min"] >= 1
    for kind in ("race.procs4", "watched_race.procs4.waiters10"):
        assert figures[f"sqlite.{kind}.per_s"] > 0
    assert "every run did each task exactly once" in done.stdout
