"""What only the PostgreSQL store has to get right: its URLs and schema checks, wake-ups by
LISTEN/NOTIFY (and their recovery), an event log read while writers commit out of order,
and writers side by side. (A server restart in the middle of the work:
tests/processes/test_postgres_restart.py.)"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

from shoal import (
    Fleet,
    InvalidStoreURL,
    SchemaMismatch,
    StoreError,
    StoreNotFound,
    StoreUnavailable,
)
from shoal.errors import exit_code_for
from shoal.policy import JOIN_TOP
from shoal.stores._sql import load_queries
from tests import pg


@pytest.fixture
def fleet(postgres_url: str) -> Iterator[Fleet]:
    fleet = Fleet.open(postgres_url)
    yield fleet
    fleet.close()


# ---------------------------------------------------------------- URLs and schema checks


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("postgresql://localhost/db?schema=Bad-Name", "not a plain PostgreSQL name"),
        ("postgresql://localhost/db?pool_size=lots", "pool_size"),
        ("postgresql://localhost/db?pool_size=0", "pool_size"),
    ],
)
def test_malformed_postgres_urls_are_refused_before_connecting(url: str, words: str) -> None:
    with pytest.raises(InvalidStoreURL, match=words) as err:
        Fleet.open(url)
    assert err.value.hint and exit_code_for(err.value) == 2


def test_an_unreachable_server_is_a_retryable_error_that_names_it() -> None:
    with pytest.raises(StoreUnavailable, match=r"127\.0\.0\.1:1") as err:
        Fleet.open("postgresql://nobody:secret@127.0.0.1:1/fleet?connect_timeout=3")
    assert exit_code_for(err.value) == 4
    assert "secret" not in err.value.message  # a password never ends up in a message


def test_a_missing_database_says_to_create_it(postgres_server: str) -> None:
    base, _, query = postgres_server.partition("?")
    missing = base.rsplit("/", 1)[0] + "/no_such_database_here" + (f"?{query}" if query else "")
    with pytest.raises(StoreNotFound, match="does not exist") as err:
        Fleet.open(missing)
    assert "createdb" in (err.value.hint or "")


def test_an_empty_schema_is_not_a_fleet_until_init(postgres_url: str) -> None:
    with pytest.raises(StoreNotFound, match="no fleet yet") as err:
        Fleet.open(postgres_url, create=False)
    assert "shoal init" in (err.value.hint or "")
    created = Fleet.init(postgres_url)
    assert created.created
    created.close()
    again = Fleet.open(postgres_url, create=False)
    assert not again.created
    again.close()


def test_a_schema_of_another_program_is_refused_untouched(postgres_url: str) -> None:
    schema = postgres_url.rsplit("schema=", 1)[1]
    with pg.schema_conn(postgres_url) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".invoices (id int)')
    with pytest.raises(StoreError, match="not a shoal fleet"):
        Fleet.open(postgres_url)
    with pg.schema_conn(postgres_url) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
        ).fetchall()
    assert tables == [("invoices",)]


def test_a_fleet_from_a_newer_shoal_is_refused(fleet: Fleet, postgres_url: str) -> None:
    with pg.schema_conn(postgres_url) as conn:
        conn.execute("INSERT INTO schema_migrations (version, name) VALUES (99, 'future')")
    with pytest.raises(SchemaMismatch, match="newer") as err:
        Fleet.open(postgres_url)
    assert "upgrade shoal" in (err.value.hint or "")


def test_fleets_in_two_schemas_of_one_database_are_separate(postgres_server: str) -> None:
    first, second = pg.fleet_url(postgres_server), pg.fleet_url(postgres_server)
    try:
        a, b = Fleet.open(first), Fleet.open(second)
        a.post("only in the first")
        assert [t.title for t in a.tasks()] == ["only in the first"]
        assert b.tasks() == []
        a.close()
        b.close()
    finally:
        pg.drop_fleet(first)
        pg.drop_fleet(second)


# ---------------------------------------------------------------- wake-ups


def _claim_in_thread(fleet: Fleet, agent: str, wait: float) -> tuple[threading.Thread, dict]:
    out: dict[str, object] = {}

    def run() -> None:
        began = time.monotonic()
        out["claim"] = fleet.claim(agent, wait=wait)
        out["seconds"] = time.monotonic() - began

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def _listening(url: str) -> bool:
    with pg.schema_conn(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %%'"
            " AND application_name = 'shoal' AND datname = current_database()"
        ).fetchone()
    return bool(row and row[0])


def test_a_post_wakes_a_waiting_claim_by_notification(fleet: Fleet, postgres_url: str) -> None:
    assert fleet._store.capabilities.notifies
    waiter = Fleet.open(postgres_url)  # another host, in effect
    waiter.register("idle-agent")
    waiter.wait_for_change(0.01)  # the listener is up before the claim starts waiting
    thread, out = _claim_in_thread(waiter, "idle-agent", wait=30)
    deadline = time.monotonic() + 10
    while not _listening(postgres_url) and time.monotonic() < deadline:
        thread.join(0.01)
    posted = fleet.post("new work")
    thread.join(30)
    claim = out["claim"]
    assert claim and claim.tasks[0].id == posted.id  # type: ignore[union-attr]
    # Woken by the notification, not by a timeout: far sooner than the 30 s it may wait.
    assert out["seconds"] < 10  # type: ignore[operator]
    waiter.close()


def test_a_post_during_an_empty_claim_is_not_a_lost_wake_up(
    fleet: Fleet, postgres_url: str
) -> None:
    waiter = Fleet.open(postgres_url)
    waiter.register("idle-agent")
    waiter.wait_for_change(0.01)  # the listener is up
    listener = waiter._store._listener  # type: ignore[attr-defined]
    deadline = time.monotonic() + 10
    while not _listening(postgres_url):
        assert time.monotonic() < deadline
        listener.wait(0.05)
    assert not waiter.claim("idle-agent")  # empty: next it will wait ...
    before = listener.wakeups
    fleet.post("posted between the empty claim and the wait")
    assert listener.wait(10, before), "no notification arrived"  # ... but it arrives first
    began = time.monotonic()
    assert waiter.wait_for_change(20)  # it counts from the claim, so it returns at once
    assert time.monotonic() - began < 5
    assert waiter.claim("idle-agent")
    waiter.close()


def test_the_listener_comes_back_after_its_connection_is_killed(
    fleet: Fleet, postgres_url: str
) -> None:
    waiter = Fleet.open(postgres_url)
    waiter.register("idle-agent")
    waiter.wait_for_change(0.01)
    assert _listening(postgres_url)
    with pg.schema_conn(postgres_url) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE query LIKE 'LISTEN %%' AND application_name = 'shoal'"
            " AND datname = current_database()"
        )
    thread, out = _claim_in_thread(waiter, "idle-agent", wait=30)
    fleet.post("work while the listener was down")
    thread.join(30)
    assert out["claim"]  # found by the polling fallback or by the new listener
    deadline = time.monotonic() + 20
    while not _listening(postgres_url):  # and it listens again
        assert time.monotonic() < deadline, "the listener did not reconnect"
        waiter.wait_for_change(0.05)
    waiter.close()


# ---------------------------------------------------------------- the event log


def test_the_log_never_skips_an_event_committed_out_of_order(
    fleet: Fleet, postgres_url: str
) -> None:
    fleet.post("first")
    since = fleet.events()[-1].id
    slow, fast = pg.schema_conn(postgres_url), pg.schema_conn(postgres_url)
    slow.execute("BEGIN")
    slow.execute("INSERT INTO events (at, kind) VALUES (1, 'slow')")  # takes the next id ...
    fast.execute("INSERT INTO events (at, kind) VALUES (2, 'fast')")  # ... this one commits
    # A follower must not read past the slow writer's id while it may still commit.
    assert fleet.events(since) == []
    slow.execute("COMMIT")
    assert [e.kind for e in fleet.events(since)] == ["slow", "fast"]
    slow.close()
    fast.close()


def test_a_gap_no_writer_can_fill_is_read_past_at_once(fleet: Fleet, postgres_url: str) -> None:
    """A rolled-back writer (or a server restart, which moves the id sequence on) leaves a
    gap for good: once no transaction that could hold a missing id is running, followers
    read past it without waiting out the grace period."""
    fleet.post("first")
    since = fleet.events()[-1].id
    gone, fast = pg.schema_conn(postgres_url), pg.schema_conn(postgres_url)
    gone.execute("BEGIN")
    gone.execute("INSERT INTO events (at, kind) VALUES (1, 'never')")  # takes the next id
    fast.execute("INSERT INTO events (at, kind) VALUES (2, 'fast')")
    assert fleet.events(since) == []  # the gap's writer is still running: wait
    gone.execute("ROLLBACK")
    assert [e.kind for e in fleet.events(since)] == ["fast"]  # at once, not after 10 s
    gone.close()
    fast.close()


# ---------------------------------------------------------------- writers side by side


def test_one_agents_concurrent_claims_never_pass_its_max_concurrent(
    fleet: Fleet, postgres_url: str
) -> None:
    fleet.register("solo", max_concurrent=2)
    fleet.post_many([{"title": f"job {i}"} for i in range(40)])
    handles = [Fleet.open(postgres_url) for _ in range(4)]
    start = threading.Barrier(len(handles))
    taken: list[int] = []

    def grab(handle: Fleet) -> None:
        start.wait()
        for _ in range(10):
            taken.extend(t.id for t in handle.claim("solo", 2).tasks)

    threads = [threading.Thread(target=grab, args=(h,)) for h in handles]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(taken) == 2 and len(set(taken)) == 2
    assert fleet.status().counts["claimed"] == 2
    for handle in handles:
        handle.close()


# ---------------------------------------------------------------- query plans

PLAN_PARAMS = {
    "id": "a",
    "agent": "a",
    "victim": "v",
    "now": 0.0,
    "limit": 5,
    "domain": "d",
    "skillsets": [1, 2],
    "domains": ["d"],
    "min_priority": 5,
    "cross_domain_priority": 8,
    "free_skillset": 1,
    "own_domains": ["d"],
    "local_since": 0.0,
    "domain_since": 0.0,
    "reserved_domains": ["e"],
    "reserved_skillsets": [1],
    "full_groups": ["g"],
    "place_low": JOIN_TOP + 1,  # the queue without its ready joins
    "place_high": 2**63 - 1,
}


@pytest.mark.parametrize(
    ("name", "index"),
    [
        ("queue_head", "tasks_queue"),
        ("queue_head_longest", "tasks_queue"),
        ("pool_best", "tasks_pool"),
        ("pool_best_in_domain", "tasks_pool_domain"),
        ("pool_longest", "tasks_pool_longest"),
        ("steal_tail", "tasks_queue"),
        ("steal_tail_longest", "tasks_queue"),
        ("expired_leases", "tasks_expiry"),
        ("next_ready", "tasks_waiting"),
        ("waiting_tasks", "tasks_waiting"),
        ("pending_demand", "tasks_pool"),
        ("stuck_tasks", "tasks_blocked"),
        ("held_by_group", "tasks_group_held"),
        ("next_schedule_at", "schedules_due"),  # the claim's look (recurring tasks)
        ("due_schedules", "schedules_due"),
    ],
)
def test_claim_path_queries_read_their_partial_index(
    fleet: Fleet, postgres_url: str, name: str, index: str
) -> None:
    """A claim's cost must not grow with the tasks: with sequential scans priced out (the
    test table is tiny, so the planner would rightly scan it), every step reads an index
    and none scans the tasks table."""
    sql = load_queries("postgres")[name]
    wanted = set(re.findall(r"%\(([a-z_]+)\)s", sql))
    with pg.schema_conn(postgres_url) as conn:
        conn.execute("SET enable_seqscan = off")
        cursor = psycopg.ClientCursor(conn)
        cursor.execute(f"EXPLAIN {sql}", {k: PLAN_PARAMS[k] for k in wanted})
        text = "\n".join(row[0] for row in cursor.fetchall())
    assert index in text, text
    assert not re.search(r"Seq Scan on tasks\b", text), text


# ---------------------------------------------------------------- the kept finished counts


def finished_count_rows(postgres_url: str) -> int:
    with pg.schema_conn(postgres_url) as conn:
        row = conn.execute("SELECT count(*) FROM finished_counts").fetchone()
    assert row is not None
    return int(row[0])


def test_the_finished_counts_are_kept_exact_and_folded(fleet: Fleet, postgres_url: str) -> None:
    """status counts finished tasks from kept changes, not from the history: every task that
    finishes (on both claim paths), every delete by a prune, adds a change, and every
    1024th change folds them into one row per state, so reading the counts stays cheap and
    they stay exact."""
    with pg.schema_conn(postgres_url) as conn:  # the next change is the 1024th
        conn.execute("SELECT setval(pg_get_serial_sequence('finished_counts', 'id'), 1020)")
    fleet.register("ada", max_concurrent=5)
    fleet.post_many([{"title": f"t{i}"} for i in range(8)])
    first = fleet.claim("ada").leases[0]
    (second,) = fleet.complete(first, then_claim=1).next.leases  # the direct path
    fleet.complete(second)
    for lease in fleet.claim("ada", n=5).leases:  # several leases: the general path
        fleet.complete(lease)
    assert fleet.status().counts["done"] == 7
    assert finished_count_rows(postgres_url) < 7  # folded at the 1024th change
    (last,) = fleet.claim("ada").leases
    fleet.fail(last, "broken", retry=False)
    assert fleet.status().counts == {
        "blocked": 0,
        "pending": 0,
        "claimed": 0,
        "done": 7,
        "dead": 1,
        "cancelled": 0,
    }
    fleet.retry(last.task_id)  # dead -> pending
    assert (fleet.status().counts["dead"], fleet.status().counts["pending"]) == (0, 1)
    fleet.cancel(last.task_id)
    assert fleet.status().counts == {
        "blocked": 0,
        "pending": 0,
        "claimed": 0,
        "done": 7,
        "dead": 0,
        "cancelled": 1,
    }
    with pg.schema_conn(postgres_url) as conn:  # history a day old, then pruned
        conn.execute("UPDATE tasks SET finished_at = finished_at - 86400")
    assert fleet.prune(3600).tasks >= 7
    assert fleet.status().counts["done"] == 0
