"""Real processes racing on one fleet -- a SQLite file, or a PostgreSQL database that each
process reaches through its own connections, as separate hosts would: every task done
exactly once, none lost."""

from __future__ import annotations

import statistics
from collections import Counter

import pytest

from shoal import Fleet
from tests import procs
from tests.soak import sized, soak

#: (processes, tasks, tasks queued for the first agent, to be stolen) per store; `make
#: soak` drains 5,000 on SQLite and 10,000 on PostgreSQL (tests/soak.py).
RACES = {
    "sqlite": (8, sized(2000, 5000), 0),
    "postgres": (16, sized(3000, 10_000), sized(300, 1000)),
}


@soak
def test_processes_drain_thousands_of_tasks_exactly_once(
    shared_store: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    kind, url = shared_store
    workers, total, queued = RACES[kind]
    fleet = Fleet.open(url)
    fleet.configure(max_agents=workers)
    if queued:  # a deep queue on one agent: the others steal from its tail as they run dry
        fleet.register("w0", max_concurrent=4)
        fleet.post_many([{"title": f"queued {i}", "to": "w0"} for i in range(queued)])
    fleet.post_many([{"title": f"task {i}", "payload": {"i": i}} for i in range(total - queued)])
    # half claim one at a time, half in batches
    args = [(url, f"w{i}", 1 if i % 2 == 0 else 4) for i in range(workers)]
    reports = procs.race(procs.drain, args)

    done = Counter(task for r in reports for task in r["done"])
    assert sum(done.values()) == total, "a task was handed out twice"
    assert set(done) == set(range(1, total + 1)), "a task was lost"
    assert all(r["lost"] == 0 for r in reports)
    status = fleet.status()
    assert status.counts["done"] == total and status.counts["pending"] == 0
    completions = Counter(
        e.task_id for e in fleet.events(limit=10 * total) if e.kind == "completed"
    )
    assert len(completions) == total and set(completions.values()) == {1}
    if queued:  # the busy agent was robbed at claim time, each task at most once, within caps
        steals = [e for e in fleet.events(limit=10 * total) if e.kind == "stolen"]
        assert steals and set(Counter(e.task_id for e in steals).values()) == {1}
        settings = fleet.settings()
        for e in steals:  # no window of rebalance_interval holds more than the fleet cap
            window = [s for s in steals if e.at - settings.rebalance_interval < s.at <= e.at]
            assert len(window) <= settings.max_steals_per_cycle
    done = fleet.tasks(state="done", limit=total)  # a listing: the results are read one by one
    results = {t.id: fleet.get(t.id).result for t in done}
    by_agent = {t: r["agent"] for r in reports for t in r["done"]}
    assert all(results[t] in (None, {"by": by_agent[t]}) for t in results)

    waits = sorted(w for r in reports for w in r["waits"])
    with capsys.disabled():
        print(f"\n  {workers} processes, {total} tasks on one {kind} fleet:")
        for r in sorted(reports, key=lambda r: r["agent"]):
            print(f"    {r['agent']}: {len(r['done'])} tasks")
        p50 = statistics.median(waits) * 1e3
        p99 = waits[int(len(waits) * 0.99)] * 1e3
        print(f"    claim wait p50 {p50:.2f} ms, p99 {p99:.2f} ms, worst {waits[-1] * 1e3:.1f} ms")
    # Nobody starves while others work. (How evenly writers take turns depends on the
    # machine's load as much as on the queue, so the figures are printed, not asserted;
    # bench/claims.py measures the waits.)
    assert min(len(r["done"]) for r in reports) > 0
    fleet.close()


def test_processes_racing_for_the_last_place_admit_exactly_one(
    shared_store: tuple[str, str],
) -> None:
    _, url = shared_store
    fleet = Fleet.open(url)
    for name in ("a", "b", "c"):
        fleet.register(name)
    racers = 8
    outcomes = sorted(procs.race(procs.register_once, [(url, f"racer{i}") for i in range(racers)]))
    assert outcomes == ["full"] * (racers - 1) + ["ok"]
    assert sum(1 for a in fleet.agents() if a.status.live) == 4
    fleet.close()
