"""PostgreSQL's one-statement claim (``direct_claim``) does exactly what the general path
does: the same histories, run on two fleets -- one that may claim directly and one that
never does -- give the same answers at every step and leave the same rows and events.
And it refuses, changing nothing, what it leaves to the general path."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import psycopg
import pytest

from shoal import Fleet, ManualClock, ShoalError
from shoal.model import BatchCompletion, Claim, Completion, Lease, Task
from shoal.stores.base import DirectOutcome, Finishing
from tests import pg

AGENTS = {
    "a": {"skills": ["py"], "domains": ["x"], "max_concurrent": 3},
    "b": {"skills": [], "domains": ["y"], "max_concurrent": 2},
    "c": {"skills": ["py", "sql"], "domains": [], "max_concurrent": 1},
}


class Counted:
    """Counts what the store's direct claim answered (the call itself is the real one)."""

    def __init__(self, fleet: Fleet) -> None:
        self.direct = self.refused = 0
        store = fleet._store
        real = store.claim_directly

        def counting(*args: Any, **kwargs: Any) -> DirectOutcome | None:
            outcome = real(*args, **kwargs)
            if outcome is None:
                self.refused += 1
            else:
                self.direct += 1
            return outcome

        store.claim_directly = counting  # type: ignore[method-assign]


def open_pair(server: str, seed: int) -> Iterator[tuple[Fleet, ManualClock]]:
    """The same fleet twice: the first may claim directly, the second never does."""
    for direct in (True, False):
        url = pg.fleet_url(server)
        clock = ManualClock()
        fleet = Fleet.open(url, clock=clock, rng=random.Random(seed))
        if not direct:
            store = fleet._store
            store.capabilities = replace(store.capabilities, direct_claims=False)
        yield fleet, clock


def claim_view(claim: Claim | None) -> Any:
    if claim is None:
        return None
    grants = [(g.source.value, g.origin, g.lease.expires, task_view(g.task)) for g in claim.grants]
    return (claim.reason, claim.retry_at, grants)


def task_view(task: Task) -> Any:
    """Every field of a task as a claim or a completion returns it (tokens are not there)."""
    return dataclasses.astuple(task)


def view(outcome: Any) -> Any:
    """What a caller sees, without the tokens (random, so never the same twice)."""
    if isinstance(outcome, Claim):
        return claim_view(outcome)
    if isinstance(outcome, Completion):
        return (
            "done",
            task_view(outcome.task),
            outcome.already_done,
            outcome.released,
            claim_view(outcome.next),
        )
    if isinstance(outcome, BatchCompletion):
        return (
            "batch",
            outcome.completed,
            outcome.already_done,
            [i for i, _ in outcome.lost],
            outcome.released,
            claim_view(outcome.next),
        )
    return outcome


def dump(url: str) -> tuple[list[Any], list[Any], list[Any]]:
    """Every task (tokens as present or not), agent and event of a fleet, in id order."""
    target, schema, _ = pg.postgres_target(url)
    with psycopg.connect(target, options=f"-c search_path={schema}") as conn:
        tasks = conn.execute(
            "SELECT id, title, state, agent_id, pinned, stolen, attempts, lease_expires, result,"
            " error, waiting_on, updated_at, claimed_at, finished_at, stalled_at, ready_at,"
            " token IS NOT NULL, seq, group_name, labels, posted_by FROM tasks ORDER BY id"
        ).fetchall()
        agents = conn.execute(
            "SELECT id, status, idle_since, last_seen, failures, paused_until FROM agents"
            " ORDER BY id"
        ).fetchall()
        events = conn.execute(
            "SELECT id, at, kind, task_id, agent_id, data FROM events ORDER BY id"
        ).fetchall()
    return tasks, agents, events


def act(fleet: Fleet, held: list[Lease], step: random.Random, op: str) -> Any:
    """One operation of a history; ``held`` is this fleet's leases, in the order granted."""
    agent = step.choice(sorted(AGENTS))
    try:
        if op == "post":
            return fleet.post(
                f"t{step.random():.6f}",
                priority=step.randint(1, 9),
                domain=step.choice([None, "x", "y", "z"]),
                skills=step.choice([None, "py", "sql", "py,sql"]),
                to=step.choice([None, None, None, agent]),
                lease_ttl=step.choice([None, None, 30.0]),
                group=step.choice([None] * 8 + ["limited", "free"]),
                labels=step.choice([None, None, ["bug"], ["bug", "ui"]]),
                posted_by=step.choice([None, None, agent]),
            ).id
        if op == "defer" and held:  # a join: back to its holder's queue once its child is done
            lease = held.pop(step.randrange(len(held)))
            child = fleet.post(f"child{step.random():.6f}", parent=lease.task_id).id
            return fleet.defer(lease, [child]).state
        if op == "claim":
            result: Any = fleet.claim(agent, n=step.randint(1, 3))
        elif op == "complete" and held:
            lease = held.pop(step.randrange(len(held)))
            result = fleet.complete(lease, {"n": step.randint(0, 9)}, then_claim=step.randint(0, 2))
        elif op == "many" and held:
            mine = [x for x in held if x.agent == held[0].agent][: step.randint(1, 3)]
            for x in mine:
                held.remove(x)
            result = fleet.complete_many([(x, None) for x in mine], then_claim=step.randint(0, 3))
        elif op == "fail" and held:
            return fleet.fail(held.pop(step.randrange(len(held))), "boom").state
        elif op.startswith("settings"):
            return fleet.configure(
                aging=step.choice([0.0, 1.0, 5.0]),
                domain_wait=step.choice([0.0, 120.0, 120.0]),
                locality_wait=step.choice([0.0, 0.0, 30.0]),
                order="longest_first" if op == "settings-longest" else "priority",
            ).aging
        else:
            return None
    except ShoalError as exc:  # refused input is an answer too
        return (type(exc).__name__, exc.message)
    nexts = [getattr(result, "next", None), result if isinstance(result, Claim) else None]
    for claim in nexts:
        if claim is not None:
            held.extend(claim.leases)
    return view(result)


@pytest.mark.parametrize("seed", range(6))
def test_the_direct_claim_does_what_the_general_path_does(postgres_server: str, seed: int) -> None:
    (direct, direct_clock), (general, general_clock) = list(open_pair(postgres_server, seed))
    counted = Counted(direct)
    try:
        for fleet in (direct, general):
            for name, spec in AGENTS.items():
                fleet.register(name, **spec)  # type: ignore[arg-type]
            fleet.set_group("limited", 1)  # "free" has no limit: the direct claim takes it
        steps = random.Random(seed)
        held: dict[int, list[Lease]] = {id(direct): [], id(general): []}
        ops = ["post"] * 4 + ["claim"] * 3 + ["complete"] * 4 + ["many", "fail", "defer"]
        changes = {40: "settings", 80: "settings-longest", 100: "settings"}
        for number in range(240):
            op = changes.get(number) or steps.choice(ops)
            state = steps.getstate()
            answers = []
            for fleet in (direct, general):
                steps.setstate(state)  # both fleets draw the same choices
                answers.append(act(fleet, held[id(fleet)], steps, op))
            assert answers[0] == answers[1], (number, op)
            seconds = steps.choice([0.0, 0.0, 0.5, 2.0, 40.0])
            direct_clock.advance(seconds)
            general_clock.advance(seconds)
        assert dump(direct.url) == dump(general.url)
        # both paths really ran (with order = longest_first, from 80 to 100, only the general)
        assert counted.direct >= 15 and counted.refused >= 10, (counted.direct, counted.refused)
    finally:
        for fleet in (direct, general):
            fleet.close()
            pg.drop_fleet(fleet.url)


@pytest.fixture
def fleet(postgres_url: str) -> Iterator[tuple[Fleet, ManualClock, Counted]]:
    clock = ManualClock()
    fleet = Fleet.open(postgres_url, clock=clock)
    yield fleet, clock, Counted(fleet)
    fleet.close()


def test_a_claim_and_a_complete_then_claim_are_one_statement_each(
    fleet: tuple[Fleet, ManualClock, Counted],
) -> None:
    f, _, counted = fleet
    f.register("a")
    first, second = f.post("one").id, f.post("two").id
    claim = f.claim("a")
    done = f.complete(claim.leases[0], then_claim=1)
    assert (claim.tasks[0].id, done.task.id, done.next and done.next.tasks[0].id) == (
        first,
        first,
        second,
    )
    assert (counted.direct, counted.refused) == (2, 0)


def test_a_refusal_keeps_nothing_it_did(fleet: tuple[Fleet, ManualClock, Counted]) -> None:
    """Finishing comes first in the statement; when the claim after it must be the general
    path's (here: nothing left, so the idle step), the finish is rolled back with it."""
    f, clock, _ = fleet
    f.register("a")
    lease = f.claim("a").leases[0] if f.post("only") else None
    assert lease is not None
    store = f._store
    finishing = [Finishing(lease.task_id, lease.token, {"r": 1})]
    assert store.claim_directly("a", 1, clock.now(), ["t1"], finishing) is None
    task = f.get(lease.task_id)
    assert (task.state.value, task.result) == ("claimed", None)
    assert [e.kind for e in f.events(0, limit=100)].count("completed") == 0
    done = f.complete(lease, {"r": 1}, then_claim=1)  # the general path finishes it once
    assert done.task.state.value == "done"
    assert done.next is not None and done.next.reason == "empty"


def test_it_leaves_steals_expiries_and_new_settings_to_the_general_path(
    fleet: tuple[Fleet, ManualClock, Counted], postgres_url: str
) -> None:
    f, clock, counted = fleet
    f.register("a", max_concurrent=2)
    f.register("b", max_concurrent=2)
    f.post("first")
    busy = f.claim("b")  # direct; b is now at work, with room for its queue
    queued = f.post("for b", to="b").id
    stolen = f.claim("a")  # nothing of its own, nothing in the pool: a steal
    assert [(t.id, s.value) for t, s in zip(stolen.tasks, stolen.sources, strict=True)] == [
        (queued, "steal")
    ]
    assert (counted.direct, counted.refused) == (1, 1)
    f.complete(busy.leases[0])  # direct: b is waiting again
    f.complete(stolen.leases[0])
    assert (counted.direct, counted.refused) == (3, 1)

    short = f.post("short", lease_ttl=10).id
    assert f.claim("b").tasks[0].id == short  # direct
    clock.advance(11)  # b's lease is due: the expire step is the general path's
    again = f.claim("b")
    assert [t.id for t in again.tasks] == [short]
    assert again.tasks[0].attempts == 2
    assert (counted.direct, counted.refused) == (4, 2)

    f.post("later")
    f.post("latest")
    with Fleet.open(postgres_url) as other:
        other.configure(aging=3.0)  # this handle's terms are now stale
    f.complete(again.leases[0])  # refused (new settings), done by the general path
    assert counted.refused == 3
    assert f.claim("b")  # the general path read the new settings: direct again
    assert counted.direct == 5


def test_it_leaves_young_work_to_an_idle_agent_of_its_domain(
    fleet: tuple[Fleet, ManualClock, Counted],
) -> None:
    """domain_wait, in the statement: another domain's young task is passed over while an
    idle agent of that domain could take it, and taken once the wait is over."""
    f, clock, counted = fleet
    f.configure(domain_wait=120, heartbeat_timeout=3600)  # xavier is idle, not gone
    f.register("xavier", domains=["x"])
    assert not f.claim("xavier")  # nothing yet: xavier is idle, and x's work is its first
    f.register("b")
    kept = f.post("x work", domain="x").id  # older, so the better score
    clock.advance(1)
    other = f.post("plain work").id
    before = counted.direct
    assert [t.id for t in f.claim("b").tasks] == [other]
    clock.advance(121)
    f.post("more plain work")
    took = f.complete(f.leases("b")[0], then_claim=1)
    assert took.next is not None and [t.id for t in took.next.tasks] == [kept]
    assert counted.direct == before + 2  # both in one statement


def test_each_row_carries_its_tasks_group_labels_and_poster(
    fleet: tuple[Fleet, ManualClock, Counted],
) -> None:
    """The columns no claim changes come back with the task, from the claim and from the
    completion alike, as a read of the task gives them."""
    f, _, counted = fleet
    f.register("a")
    f.set_group("limited", 1)  # another group's limit: "free" is still the direct claim's
    first = f.post("one", group="free", labels=["ui", "bug"], posted_by="a").id
    f.post("two", labels=["docs"])
    claim = f.claim("a")
    assert claim.tasks[0] == f.get(first)
    done = f.complete(claim.leases[0], then_claim=1)
    assert done.task == f.get(first)
    assert done.next is not None and done.next.tasks[0] == f.get(done.next.tasks[0].id)
    assert (done.task.group, done.task.labels, done.task.posted_by) == ("free", ("bug", "ui"), "a")
    assert (done.next.tasks[0].group, done.next.tasks[0].labels) == (None, ("docs",))
    assert (counted.direct, counted.refused) == (2, 0)


def test_it_leaves_limited_groups_and_ready_joins_to_the_general_path(
    fleet: tuple[Fleet, ManualClock, Counted],
) -> None:
    """A task of a group with a limit, and a ready join, are taken by the general path only
    (the group's count under its lock; a join after the pool)."""
    f, _, counted = fleet
    f.register("a")
    f.set_group("limited", 1)
    capped = f.post("capped", group="limited").id
    claim = f.claim("a")
    assert [t.id for t in claim.tasks] == [capped]
    assert (counted.direct, counted.refused) == (0, 1)
    f.complete(claim.leases[0])  # nothing to claim after it: direct
    assert (counted.direct, counted.refused) == (1, 1)

    parent = f.post("parent").id
    held = f.claim("a")  # direct
    child = f.post("child", parent=parent).id
    f.defer(held.leases[0], [child])  # parent waits on child, in a's queue
    took = f.claim("a")  # the child: a plain claim
    assert [t.id for t in took.tasks] == [child]
    assert (counted.direct, counted.refused) == (3, 1)
    f.complete(took.leases[0])  # child has a dependent: the general path frees parent
    assert (counted.direct, counted.refused) == (3, 2)
    again = f.claim("a")  # parent, a ready join, heads a's queue
    assert [t.id for t in again.tasks] == [parent]
    assert (counted.direct, counted.refused) == (3, 3)


def test_its_statements_read_tasks_by_index_however_few_there_are(postgres_url: str) -> None:
    """A claim's work must not grow with the fleet's history. On a table of a few hundred
    tasks the planner, left to itself, would rather read the whole table than look up ten
    ids; the function's plans (made once per connection) then read every task on every
    claim. auto_explain shows the plan of each statement the function runs."""
    fleet = Fleet.open(f"{postgres_url}&pool_size=1")  # one connection: the one explained
    try:
        fleet.register("a", max_concurrent=2)
        fleet.post_many([{"title": f"t{i}"} for i in range(300)])
        plans: list[str] = []
        with fleet._store._d._pool.connection() as conn:  # type: ignore[attr-defined]
            conn.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))
            for setting in (
                "LOAD 'auto_explain'",
                "SET auto_explain.log_min_duration = 0",
                "SET auto_explain.log_nested_statements = on",
                "SET auto_explain.log_level = notice",
            ):
                conn.execute(setting)
        claim = fleet.claim("a", n=2)
        for _ in range(6):  # past psycopg's prepare threshold, and both batch shapes
            done = fleet.complete_many([(x, None) for x in claim.leases], then_claim=2)
            assert done.next is not None
            claim = done.next
        one = fleet.complete(claim.leases[0], then_claim=1)
        assert one.next is not None and len(one.next.leases) == 1
    finally:
        fleet.close()
    explained = [p for p in plans if "direct_claim" not in p.split("\n", 2)[1]]
    assert len(explained) > 100  # every statement of each of the eight claims
    assert [p for p in explained if "Seq Scan on tasks" in p] == []
