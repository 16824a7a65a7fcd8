"""Real processes racing for grouped work, on a SQLite file and on PostgreSQL: every task
done exactly once, and at no moment more tasks of a group held than its limit -- the
limit is kept inside the claim's transaction, not by a check before it
(docs/ARCHITECTURE.md, "Concurrency groups")."""

from __future__ import annotations

from collections import Counter

import pytest

from shoal import Fleet
from tests import procs
from tests.soak import sized, soak

#: What ends a hold, in the log (a claim-time steal is a claim; a rebalance move is not).
ENDS = {"completed", "failed", "expired", "released", "cancelled", "dead"}
LIMITS = {"deploy": 1, "api": 3}


@soak
def test_sixteen_processes_never_hold_more_of_a_group_than_its_limit(
    shared_store: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    kind, url = shared_store
    workers = 16
    fleet = Fleet.open(url)
    fleet.configure(max_agents=workers)
    for name, most in LIMITS.items():
        fleet.set_group(name, most)
    # a deep queue on one agent, half of it grouped: thieves pass over the full groups;
    # 510 tasks in all (1,650 in `make soak`)
    fleet.register("w0", max_concurrent=4)
    queued = [
        {"title": f"queued {i}", "to": "w0", "group": "api" if i % 2 else None}
        for i in range(sized(60, 200))
    ]
    fleet.post_many(queued)
    pool = [
        {"title": f"deploy {i}", "group": "deploy", "priority": 2} for i in range(sized(50, 150))
    ]
    pool += [{"title": f"api {i}", "group": "api", "priority": 3} for i in range(sized(100, 300))]
    pool += [{"title": f"plain {i}", "priority": 5} for i in range(sized(300, 1000))]
    fleet.post_many(pool)
    total = len(queued) + len(pool)
    args = [(url, f"w{i}", 1 if i % 2 == 0 else 4) for i in range(workers)]
    reports = procs.race(procs.drain_grouped, args)

    done = Counter(task for r in reports for task in r["done"])
    assert sum(done.values()) == total, "a task was handed out twice"
    assert set(done) == set(range(1, total + 1)), "a task was lost"
    group_of = {t.id: t.group for t in fleet.tasks(limit=total)}
    held: Counter[str] = Counter()
    most: Counter[str] = Counter()
    events = fleet.events(limit=20 * total)
    for e in events:  # the log in commit order: replay each group's held count
        group = group_of.get(e.task_id) if e.task_id is not None else None
        if group is None:
            continue
        if e.kind == "claimed" or (e.kind == "stolen" and e.data.get("source") == "steal"):
            held[group] += 1
            most[group] = max(most[group], held[group])
            assert held[group] <= LIMITS[group], f"{group} held {held[group]} at event {e.id}"
        elif e.kind in ENDS:
            held[group] -= 1
    assert most == Counter(LIMITS), "the groups ran below their limits throughout"
    assert all(count == 0 for count in held.values())
    completions = Counter(e.task_id for e in events if e.kind == "completed")
    assert len(completions) == total and set(completions.values()) == {1}
    assert [g.held for g in fleet.groups()] == [0, 0]
    with capsys.disabled():
        print(f"\n  {workers} processes, {total} tasks ({kind}); most held: {dict(most)}")
    fleet.close()
