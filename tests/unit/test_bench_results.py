"""The benchmarks' results file is read by scripts, so its names must not drift: the same
measurement gets the same name in every run, no two figures share one, and what the
writer writes the reader reads back. The figures here come from the benchmarks' own
report code fed with made-up measurements, so a renamed figure fails here, not in someone's
dashboard."""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))  # bench/ is scripts, not a package
results = importlib.import_module("_results")
harness = importlib.import_module("_harness")
sqlite_side = importlib.import_module("_sqlite_side")
pg_side = importlib.import_module("_pg_side")

STATS = ("p50", "p99", "max")
META = {
    "command": "python bench/claims.py --quick",
    "started": "2026-11-23T10:00:00+00:00",
    "cpus": 2,
    "cpus_usable": 2,
    "loadavg_start": [1.5, 1.0, 0.5],
    "python": "3.11.7",
    "shoal": "0.1.0 git 997840e",
    "store": "sqlite",
    "peers": {"huey": "3.5.4"},
    "repeat": 3,
}


def run(rate: float, latency: float = 0.001) -> Any:
    """A made-up median of three runs."""
    return harness.Processing(
        rate, 1.0, [latency, 2 * latency], cpu_per_task=1e-4, runs=(0.9 * rate, rate, 1.1 * rate)
    )


def test_the_documented_names_are_what_figure_name_makes() -> None:
    name = results.figure_name
    assert name("sqlite", batch=1, procs=4, quantity="shoal_per_s") == (
        "sqlite.batch1.procs4.shoal_per_s"
    )
    assert name("postgres", batch=10, procs=8, quantity="ratio_vs_pgqueuer") == (
        "postgres.batch10.procs8.ratio_vs_pgqueuer"
    )
    assert name("sqlite", batch=1, quantity="share_of_raw") == "sqlite.batch1.share_of_raw"
    assert name("sqlite", "claim", batch=1, procs=16, quantity="p99_ms") == (
        "sqlite.claim.batch1.procs16.p99_ms"
    )
    assert name("postgres", "idle_to_work", waiters=2, quantity="p99_ms") == (
        "postgres.idle_to_work.waiters2.p99_ms"
    )
    # The configuration comes in one order, whatever order it is given in.
    assert name("sqlite", "backlog", pending=1000, quantity="huey_p50_ms") == (
        "sqlite.backlog.pending1000.huey_p50_ms"
    )


@pytest.mark.parametrize(
    ("store", "measurement", "quantity"),
    [("SQLite", None, "x"), ("sqlite", "claim.p99", "x"), ("sqlite", None, "batch1")],
)
def test_a_name_part_that_would_read_back_wrong_is_refused(
    store: str, measurement: str | None, quantity: str
) -> None:
    with pytest.raises(ValueError, match="lower-case words"):
        results.figure_name(store, measurement, quantity=quantity)


def test_a_name_comes_apart_into_what_made_it() -> None:
    parsed = results.parse_name("postgres.claim.batch10.procs64.pgqueuer_p99_ms")
    assert parsed == results.Name(
        "postgres", "claim", {"batch": 10, "procs": 64}, "pgqueuer_p99_ms"
    )
    assert results.parse_name("sqlite.batch1.share_of_raw").config == {"batch": 1}
    with pytest.raises(ValueError, match="not a figure name"):
        results.parse_name("sqlite.procs4.batch1.shoal_per_s")  # out of order


def test_every_sqlite_figure_has_the_name_scripts_expect_and_no_other() -> None:
    plan = sqlite_side.Plan("normal", 100, (1, 16), 10, 100_000, 10, 2, 3, Path("/tmp"))
    runs = {name: harness.rated(1_000, 0.05) for name in sqlite_side.ENQUEUE}
    for procs in plan.procs:
        runs[sqlite_side.run_name("huey", procs)] = run(15_000.0)
        for batch in (1, 10):
            runs[sqlite_side.run_name(f"shoal b{batch}", procs)] = run(5_000.0 * batch)
            runs[sqlite_side.run_name(f"raw b{batch}", procs)] = run(30_000.0 * batch)
    backlog = {
        count: {"claim": [1e-4], "complete_then_claim": [1.2e-4], "huey": [2e-5]}
        for count in (1_000, 100_000)
    }
    figures = results.Figures()  # refuses a name twice: the names are unique
    sqlite_side.report(plan, sqlite_side.Measured(runs, backlog), figures)

    rate = ["per_s", "per_s_min", "per_s_max", "cpu_per_task_ms"]
    expected = {
        *(f"sqlite.enqueue.{s}_{q}" for s in ("shoal", "huey") for q in rate[:3]),
        "sqlite.enqueue.ratio_vs_huey",
        *(f"sqlite.post_many.shoal_{q}" for q in rate[:3]),
        *(
            f"sqlite.batch{b}.procs{n}.{q}"
            for b in (1, 10)
            for n in (1, 16)
            for q in [
                *(f"{s}_{r}" for s in ("shoal", "huey", "raw") for r in rate),
                "ratio_vs_huey",
                "share_of_raw",
            ]
        ),
        "sqlite.batch1.share_of_raw",
        "sqlite.batch10.share_of_raw",
        *(
            f"sqlite.claim.batch{b}.procs16.{s}{stat}_ms"
            for b in (1, 10)
            for s in ("", "huey_", "raw_")
            for stat in STATS
        ),
        *(
            f"sqlite.backlog.pending{c}.{k}_p50_ms"
            for c in (1_000, 100_000)
            for k in ("claim", "complete_then_claim", "huey")
        ),
        *(f"sqlite.backlog.{k}_growth" for k in ("claim", "complete_then_claim", "huey")),
    }
    assert set(figures.values) == expected
    assert figures.targets == {
        **{
            f"sqlite.batch{b}.procs{n}.ratio_vs_huey": {"target": target, "pass": passed}
            for b, target, passed in ((1, ">= 0.6", False), (10, ">= 2", True))  # 0.33x, 3.3x
            for n in (1, 16)
        },
        **{
            f"sqlite.batch1.procs{n}.share_of_raw": {"target": ">= 0.5", "pass": False}
            for n in (1, 16)
        },
        "sqlite.claim.batch1.procs16.p99_ms": {"target": "<= 10", "pass": True},
        "sqlite.claim.batch1.procs16.max_ms": {"target": "<= 100", "pass": True},
        "sqlite.backlog.claim_growth": {"target": "<= 1.5", "pass": True},
        "sqlite.backlog.complete_then_claim_growth": {"target": "<= 1.5", "pass": True},
    }
    assert figures.values["sqlite.batch1.procs16.share_of_raw"] == pytest.approx(5_000 / 30_000)
    assert figures.values["sqlite.batch10.procs1.shoal_per_s_max"] == pytest.approx(55_000)
    assert figures.values["sqlite.claim.batch1.procs16.p99_ms"] == pytest.approx(2.0)


def test_every_postgres_figure_has_the_name_scripts_expect_and_no_other() -> None:
    plan = pg_side.PgPlan("postgresql://h/db", 100, (1, 8), 10, 2, 3)
    processing = {
        pg_side.run_name(system, batch, procs): run(300.0 * batch, latency=0.004)
        for system in ("shoal", "pgqueuer")
        for batch in (1, 10)
        for procs in plan.procs
    }
    idle = {w: {"shoal": [0.005, 0.06], "pgqueuer": [0.004]} for w in (1, 2)}
    figures = results.Figures()
    pg_side.report(plan, processing, idle, figures)

    rate = ["per_s", "per_s_min", "per_s_max", "cpu_per_task_ms"]
    expected = {
        *(
            f"postgres.batch{b}.procs{n}.{q}"
            for b in (1, 10)
            for n in (1, 8)
            for q in [
                *(f"{s}_{r}" for s in ("shoal", "pgqueuer") for r in rate),
                "ratio_vs_pgqueuer",
            ]
        ),
        *(
            f"postgres.claim.batch{b}.procs8.{s}{stat}_ms"
            for b in (1, 10)
            for s in ("", "pgqueuer_")
            for stat in STATS
        ),
        *(
            f"postgres.idle_to_work.waiters{w}.{s}{stat}_ms"
            for w in (1, 2)
            for s in ("", "pgqueuer_")
            for stat in STATS
        ),
    }
    assert set(figures.values) == expected
    assert figures.targets["postgres.batch10.procs8.ratio_vs_pgqueuer"] == {
        "target": ">= 1.2",
        "pass": False,
    }
    assert figures.targets["postgres.idle_to_work.waiters2.p99_ms"] == {
        "target": "<= 50",
        "pass": False,  # 60 ms
    }
    assert len(figures.targets) == 4 + 2


def test_a_figure_is_recorded_once_and_judged_by_its_target() -> None:
    figures = results.Figures()
    assert figures.put("sqlite.batch1.procs1.share_of_raw", 0.62, ">= 0.5") is True
    assert figures.put("sqlite.claim.batch1.procs16.p99_ms", 12.0, "<= 10") is False
    assert figures.put("sqlite.batch1.procs1.shoal_per_s", 5_000.0) is None
    assert figures.put("postgres.batch1.procs1.shoal_cpu_per_task_ms", None) is None
    assert "postgres.batch1.procs1.shoal_cpu_per_task_ms" not in figures.values
    with pytest.raises(ValueError, match="recorded twice"):
        figures.put("sqlite.batch1.procs1.shoal_per_s", 6_000.0)
    with pytest.raises(ValueError, match="'>= N' or '<= N'"):
        figures.put("sqlite.batch1.procs4.shoal_per_s", 1.0, "at least 1")


def test_what_the_writer_writes_the_reader_reads_back(tmp_path: Path) -> None:
    figures = results.Figures()
    figures.put("sqlite.batch1.procs1.ratio_vs_huey", 0.33, ">= 1")
    figures.put("sqlite.batch1.procs1.huey_per_s", 21_692.5)
    figures.put("sqlite.batch1.procs1.shoal_per_s", 7_247)
    path = tmp_path / "out" / "sqlite.json"
    results.write_results(path, META, figures)

    back = results.read_results(path)
    assert back.meta == META
    assert back.figures == figures.values
    assert back.targets == {"sqlite.batch1.procs1.ratio_vs_huey": {"target": ">= 1", "pass": False}}
    assert list(json.loads(path.read_text())) == ["meta", "figures", "targets"]
    assert list(back.figures) == sorted(back.figures)  # two runs diff line by line


def test_the_writer_refuses_a_file_without_the_meta_scripts_rely_on(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    with pytest.raises(ValueError, match="'peers'"):
        results.write_results(
            path, {k: v for k, v in META.items() if k != "peers"}, results.Figures()
        )
    assert not path.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not a readable results file"),
        ('{"meta": {}, "figures": {}}', "has 'meta', 'figures' and 'targets'"),
        ('{"meta": {}, "figures": {"a.b": "fast"}, "targets": {}}', "must be a number"),
        (
            '{"meta": {}, "figures": {}, "targets": {"a.b": {"target": ">= 1", "pass": true}}}',
            "targets for figures it does not have",
        ),
    ],
)
def test_the_reader_says_what_is_wrong_with_a_file_it_cannot_use(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(SystemExit, match=message):
        results.read_results(path)


def test_every_git_figure_has_the_name_scripts_expect_and_no_other() -> None:
    spec = importlib.util.spec_from_file_location("bench_git", BENCH / "git.py")
    assert spec is not None and spec.loader is not None
    git_bench = importlib.util.module_from_spec(spec)  # not "git": that is GitPython's name
    sys.modules["bench_git"] = git_bench
    spec.loader.exec_module(git_bench)
    plan = git_bench.Plan(100, (1, 3), 1000, 3, None, "postgresql://h/db")
    runs = {
        git_bench.run_name(system, procs): run(rate, latency=latency)
        for system, rate, latency in (("git", 8.0, 0.05), ("sqlite", 2000.0, 0.001))
        for procs in plan.procs
    } | {git_bench.run_name("postgres", p): run(500.0, latency=0.002) for p in plan.procs}
    sizes = {
        "git": {
            "start": 150_000,
            "pushed": 90e6,
            "gc": 1.5e6,
            "squashed": 4096,
            "clone": 9e7,
            "commits": 2003,
        },
        "sqlite": {"start": 150_000, "written": 6e6, "checkpoint": 1e6, "vacuumed": 0},
    }
    figures = results.Figures()
    for peer in ("sqlite", "postgres"):
        git_bench.throughput_rows(plan, runs, peer, figures)
    git_bench.size_rows(plan, sizes, figures)

    rate = ["per_s", "per_s_min", "per_s_max", "cpu_per_task_ms"]
    systems = ("git", "sqlite", "postgres")
    expected = {
        *(
            f"git.procs{n}.{q}"
            for n in (1, 3)
            for q in [
                *(f"{s}_{r}" for s in systems for r in rate),
                *(f"{s}_claim_calls_per_s" for s in systems),
                "ratio_vs_sqlite",
                "ratio_vs_postgres",
                "lost_pushes",
                "lost_pushes_per_claim",
                "gave_up",
            ]
        ),
        *(
            f"git.claim.procs{n}.{s}{stat}_ms"
            for n in (1, 3)
            for s in ("", "sqlite_", "postgres_")
            for stat in STATS
        ),
        *(
            f"git.size.{q}_kb"
            for q in (
                *("start", "pushed", "gc", "squashed", "clone"),
                *("sqlite_start", "sqlite_written", "sqlite_checkpoint", "sqlite_vacuumed"),
            )
        ),
        "git.size.commits",
    }
    assert set(figures.values) == expected
    assert figures.values["git.size.pushed_kb"] == pytest.approx(90e6 / 1024)
    assert figures.values["git.procs3.ratio_vs_sqlite"] == pytest.approx(8.0 / 2000.0)
