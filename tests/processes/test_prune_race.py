"""A prune running beside a claim race loses nothing: real processes claim and complete on
one fleet (a SQLite file, or PostgreSQL) while another prunes in a loop, its clock a day
ahead so that every task is history the moment it finishes. Afterwards every posted task
was done exactly once and is either still there or was pruned exactly once, and the work
that stayed live the whole time -- never claimable, blocked, or a dead task a blocked one
waits on -- is all still there."""

from __future__ import annotations

import multiprocessing as mp
import time
from collections import Counter
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from multiprocessing.synchronize import Event as StopEvent

from shoal import Fleet, ManualClock, TaskState
from tests import procs

CTX = mp.get_context("spawn")
#: (claiming processes, tasks) per store.
RACES = {"sqlite": (4, 3000), "postgres": (6, 3000)}
DAY = 86400.0


def prune_loop(url: str, start: Barrier, stop: StopEvent, out: Connection) -> None:
    """Prune everything finished, over and over, until told to stop; report the totals."""
    fleet = Fleet.open(url, clock=ManualClock(time.time() + DAY), create=False)
    start.wait()
    tasks = events = passes = 0
    while not stop.is_set():
        report = fleet.prune("1h", batch=50)
        tasks, events, passes = tasks + report.tasks, events + report.events, passes + 1
    fleet.close()
    out.send({"tasks": tasks, "events": events, "passes": passes})
    out.close()


def live_work(fleet: Fleet) -> dict[int, TaskState]:
    """Tasks no claimer can finish, in every live state a prune must leave alone: pending
    (a skill nobody has), blocked on it, and blocked on a dead task."""
    never = fleet.post("needs a skill nobody has", skills=["unobtainium"])
    waiting = fleet.post("waits on it", after=[never.id])
    fleet.register("doomed", skills=["doom"])
    dead = fleet.post("fails for good", skills=["doom"], max_attempts=1)
    stuck = fleet.post("waits on the dead one", after=[dead.id])
    fleet.fail(fleet.claim("doomed").leases[0], "broken", retry=False)
    fleet.set_status("doomed", "terminated")
    states = {t.id: t.state for t in (never, waiting, stuck)}
    return {**states, dead.id: TaskState.DEAD}


def test_a_prune_beside_a_claim_race_loses_nothing(shared_store: tuple[str, str]) -> None:
    kind, url = shared_store
    workers, total = RACES[kind]
    fleet = Fleet.open(url)
    fleet.configure(max_agents=workers + 1)
    live = live_work(fleet)
    posted = fleet.post_many([{"title": f"task {i}"} for i in range(total)])
    start = CTX.Barrier(workers + 1)
    stop = CTX.Event()
    pipes, children = [], []
    for i in range(workers):
        receiver, sender = CTX.Pipe(duplex=False)
        batch = 1 if i % 2 == 0 else 3
        child = CTX.Process(target=procs.drain, args=(url, f"w{i}", batch, start, sender))
        child.start()
        sender.close()
        pipes.append(receiver)
        children.append(child)
    pruner_pipe, sender = CTX.Pipe(duplex=False)
    pruner = CTX.Process(target=prune_loop, args=(url, start, stop, sender))
    pruner.start()
    sender.close()
    reports = [pipe.recv() for pipe in pipes]
    stop.set()
    pruned = pruner_pipe.recv()
    for child in [*children, pruner]:
        child.join(timeout=120)
        assert child.exitcode == 0

    done = Counter(task for r in reports for task in r["done"])
    assert sum(done.values()) == total, "a task was handed out twice"
    assert set(done) == set(posted), "a task was lost"
    assert all(r["lost"] == 0 for r in reports)
    assert pruned["tasks"] > 0, f"the pruner never caught a finished task: {pruned}"
    left = {t.id: t for t in fleet.tasks(limit=10 * total)}
    for task_id, state in live.items():
        assert left[task_id].state is state, f"live task {task_id} changed or went"
    remaining_done = {i for i, t in left.items() if t.state is TaskState.DONE}
    assert remaining_done <= set(posted)
    assert pruned["tasks"] + len(remaining_done) == total, "a task was pruned twice, or not done"
    log = fleet.events(limit=100 * total)
    completions = Counter(e.task_id for e in log if e.kind == "completed")
    assert set(completions) == remaining_done and set(completions.values()) <= {1}
    # What is left of the history goes once the race is over, but never the live work.
    with Fleet.open(url, clock=ManualClock(time.time() + DAY)) as later:
        later.prune("1h")
    assert {t.id for t in fleet.tasks(limit=10 * total)} >= set(live)
    fleet.close()
