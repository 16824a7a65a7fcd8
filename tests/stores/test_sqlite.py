"""What is particular to the SQLite store: URLs, schema versions, errors, and query plans."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from shoal import (
    Fleet,
    InvalidStoreURL,
    SchemaMismatch,
    StoreError,
    StoreNotFound,
    StoreUnavailable,
    UnknownAgent,
)
from shoal.errors import exit_code_for
from shoal.policy import JOIN_TOP
from shoal.stores import find_fleet, open_store
from shoal.stores._sql import load_migrations, load_queries
from shoal.stores.sqlite import APPLICATION_ID, SCHEMA_VERSION, SqliteStore


def url_of(path: Path, query: str = "") -> str:
    return f"sqlite://{path}{query}"


# ------------------------------------------------------------------ URLs


@pytest.mark.parametrize(
    "form", ["sqlite://{abs}", "sqlite:///{abs_no_slash}", "sqlite:////{abs_no_slash}"]
)
def test_absolute_path_forms(tmp_path: Path, form: str) -> None:
    target = tmp_path / "f.db"
    url = form.format(abs=target, abs_no_slash=str(target).lstrip("/"))
    store = open_store(url)
    assert isinstance(store, SqliteStore) and store.path == target
    store.close()


def test_relative_paths_are_from_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for url in ("sqlite:rel.db", "sqlite://./rel2.db"):
        store = open_store(url)
        assert isinstance(store, SqliteStore) and store.path.parent == tmp_path
        store.close()


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("mysql://localhost/db", "not one shoal understands"),
        ("fleet.db", "not one shoal understands"),
        ("sqlite://somehost/x.db", "has a host"),
        ("sqlite://", "names no file"),
        ("sqlite:///tmp/", "names no file"),
        ("sqlite:///tmp/x.db?journal=off", "unknown option"),
        ("sqlite:///tmp/x.db?synchronous=sometimes", "durability"),
        ("sqlite:///tmp/x.db?busy_timeout=soon", "busy_timeout"),
    ],
)
def test_malformed_store_urls_are_refused_clearly(url: str, words: str) -> None:
    with pytest.raises(InvalidStoreURL, match=words) as err:
        open_store(url)
    assert err.value.hint and exit_code_for(err.value) == 2


def test_durability_is_set_from_the_url(tmp_path: Path) -> None:
    for level, number in (("off", 0), ("normal", 1), ("full", 2)):
        store = open_store(url_of(tmp_path / f"{level}.db", f"?synchronous={level}"))
        assert isinstance(store, SqliteStore)
        assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == number
        store.close()


def test_the_default_fleet_is_found_like_git_finds_dot_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SHOAL_STORE", raising=False)
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    assert find_fleet() is None
    with pytest.raises(StoreNotFound, match="shoal init"):
        Fleet.open()
    monkeypatch.chdir(tmp_path)
    created = Fleet.init()
    assert created.created and (tmp_path / ".shoal" / "fleet.db").is_file()
    created.close()
    monkeypatch.chdir(deep)
    found = Fleet.open()
    assert found.url == url_of(tmp_path / ".shoal" / "fleet.db")
    found.close()
    monkeypatch.setenv("SHOAL_STORE", "memory://elsewhere")
    assert Fleet.open().url == "memory://elsewhere"


# ------------------------------------------------------------------ schema and files


def test_a_fresh_fleet_is_marked_and_versioned(tmp_path: Path) -> None:
    Fleet.open(url_of(tmp_path / "f.db")).close()
    raw = sqlite3.connect(tmp_path / "f.db")
    assert raw.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    raw.close()


def test_migrations_are_numbered_without_gaps() -> None:
    versions = [number for number, _, _ in load_migrations("sqlite")]
    assert versions == list(range(1, SCHEMA_VERSION + 1))


def test_a_missing_fleet_is_not_created_by_accident(tmp_path: Path) -> None:
    target = tmp_path / "nope" / "f.db"
    with pytest.raises(StoreNotFound, match="shoal init"):
        Fleet.open(url_of(target), create=False)
    assert not target.exists() and not target.parent.exists()


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    Fleet.open(url_of(tmp_path / "f.db")).close()
    raw = sqlite3.connect(tmp_path / "f.db")
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    raw.close()
    with pytest.raises(SchemaMismatch, match="newer") as err:
        Fleet.open(url_of(tmp_path / "f.db"))
    assert "upgrade shoal" in str(err.value)


def test_an_older_schema_needs_init_unless_created(tmp_path: Path) -> None:
    raw = sqlite3.connect(tmp_path / "f.db")
    raw.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    raw.close()
    with pytest.raises(SchemaMismatch, match="shoal init"):
        Fleet.open(url_of(tmp_path / "f.db"), create=False)
    fleet = Fleet.init(url_of(tmp_path / "f.db"))
    assert fleet.created
    fleet.post("works")
    fleet.close()


def test_another_programs_database_is_not_touched(tmp_path: Path) -> None:
    raw = sqlite3.connect(tmp_path / "app.db")
    raw.execute("CREATE TABLE users (id INTEGER PRIMARY KEY)")
    raw.commit()
    raw.close()
    with pytest.raises(StoreError, match="not a shoal fleet"):
        Fleet.open(url_of(tmp_path / "app.db"))
    raw = sqlite3.connect(tmp_path / "app.db")
    tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    raw.close()
    assert tables == {"users"}


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "notes.db").write_text("these are my notes, not a database\n" * 100)
    with pytest.raises(StoreError, match="not a usable shoal fleet"):
        Fleet.open(url_of(tmp_path / "notes.db"))


def test_a_locked_database_fails_as_retryable_and_changes_nothing(tmp_path: Path) -> None:
    fleet = Fleet.open(url_of(tmp_path / "f.db", "?busy_timeout=0.05"))
    outsider = sqlite3.connect(tmp_path / "f.db", isolation_level=None)
    outsider.execute("BEGIN EXCLUSIVE")  # another program holds the database
    with pytest.raises(StoreUnavailable, match="locked") as err:
        fleet.post("t")
    assert exit_code_for(err.value) == 4
    outsider.execute("ROLLBACK")
    outsider.close()
    assert fleet.tasks() == []
    fleet.post("now it works")
    fleet.close()


# ------------------------------------------------------------------ query plans

PARAMS = {
    "id": 1,
    "agent": "a",
    "victim": "v",
    "now": 0.0,
    "limit": 5,
    "skillset": 1,
    "domain": "d",
    "skillsets": "[1]",
    "domains": '["d"]',
    "min_priority": 5,
    "cross_domain_priority": 8,
    "free_skillset": 1,
    "since": 0.0,
    "until": 100,
    "task": 1,
    "ids": "[1]",
    "tokens": '["t"]',
    "results": "[null]",
    "expires": 1.0,
    "stolen": 0,
    "token": "t",
    "result": None,
    "own_domains": '["d"]',
    "local_since": 0.0,
    "domain_since": 0.0,
    "reserved_domains": '["e"]',
    "reserved_skillsets": "[1]",
    "full_groups": '["g"]',
    "place_low": JOIN_TOP + 1,  # the queue without its ready joins
    "place_high": 2**63 - 1,
    "silent_before": 0.0,
}


def plan(store: SqliteStore, name: str) -> str:
    sql = load_queries("sqlite")[name]
    wanted = set(re.findall(r":([a-z_]+)", sql))
    rows = store._conn.execute(f"EXPLAIN QUERY PLAN {sql}", {k: PARAMS[k] for k in wanted})
    return "\n".join(str(r[-1]) for r in rows)


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
        ("held_leases", "tasks_held"),
        ("claim_context", "tasks_held"),
        ("claim_context", "tasks_expiry"),
        ("claim_context", "agents_heard"),
        ("window_thieves", "events_steals"),
        ("held_by_group", "tasks_group_held"),
        ("events_of_task", "events_by_task"),
        ("next_schedule_at", "schedules_due"),  # the claim's look (recurring tasks)
        ("due_schedules", "schedules_due"),
    ],
)
def test_claim_path_queries_read_their_partial_index(tmp_path: Path, name: str, index: str) -> None:
    """A claim's cost must not grow with the pending tasks: every step is an index range."""
    store = open_store(url_of(tmp_path / "f.db"))
    assert isinstance(store, SqliteStore)
    text = plan(store, name)
    assert f"INDEX {index}" in text, text
    assert not re.search(r"\bSCAN tasks\b(?! USING)", text), text
    store.close()


@pytest.mark.parametrize(
    "name", ["state_counts", "finished_counts", "pending_demand", "stuck_tasks"]
)
def test_status_and_assess_never_read_the_whole_history(tmp_path: Path, name: str) -> None:
    """`status` and `assess` must not slow down as finished tasks pile up: none of their
    queries reads every task (a SCAN without an index; p is the pending tasks' tally)."""
    store = open_store(url_of(tmp_path / "f.db"))
    assert isinstance(store, SqliteStore)
    text = plan(store, name)
    scanned = set(re.findall(r"\bSCAN (\w+)\b(?! USING)", text)) - {"p", "CONSTANT"}
    assert not scanned, text
    store.close()


def test_finishing_and_leasing_find_tasks_by_primary_key(tmp_path: Path) -> None:
    store = open_store(url_of(tmp_path / "f.db"))
    assert isinstance(store, SqliteStore)
    for name in ("finish_leased_one", "finish_leased", "lease_task", "lease_tasks"):
        assert "INTEGER PRIMARY KEY" in plan(store, name)
    store.close()


def test_a_fleet_used_across_a_fork_says_to_open_it_again(tmp_path: Path) -> None:
    import multiprocessing

    fleet = Fleet.open(url_of(tmp_path / "f.db"))
    receiver, sender = multiprocessing.get_context("fork").Pipe(duplex=False)

    def child() -> None:
        try:
            fleet.post("from the child")
            sender.send("no error")
        except StoreError as exc:
            sender.send(str(exc))

    proc = multiprocessing.get_context("fork").Process(target=child)
    proc.start()
    proc.join(timeout=30)
    assert "open the fleet again" in receiver.recv()
    assert fleet.tasks() == []
    fleet.close()


def test_a_refused_batch_leaves_no_skill_set_behind(tmp_path: Path) -> None:
    """A skill set added by a transaction that rolls back must not be remembered: its id
    goes to the next one committed, and tasks would be stored with the wrong skills."""
    url = url_of(tmp_path / "f.db")
    setup = Fleet.open(url)
    setup.post("seed")
    setup.close()
    producer = Fleet.open(url)
    with pytest.raises(UnknownAgent):
        producer.post_many(
            [
                {"title": "needs zeta", "skills": ["zeta"]},
                {"title": "after the seed", "after": [1]},  # reads task 1 mid-transaction
                {"title": "to a ghost", "to": "ghost"},  # refused: the batch rolls back
            ]
        )
    omega = producer.post("needs omega", skills=["omega"])
    zeta = producer.post("needs zeta", skills=["zeta"])
    other = Fleet.open(url)
    assert other.get(omega.id).skills == ("omega",)
    assert other.get(zeta.id).skills == ("zeta",)
    other.register("z", skills=["zeta"], max_concurrent=5)
    assert sorted(t.id for t in other.claim("z", 5).tasks) == [1, zeta.id]  # never omega
    producer.close()
    other.close()


# ------------------------------------------------------------------ checkpoints


def test_the_wal_is_checkpointed_by_what_waits_in_it_not_by_its_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a checkpoint SQLite writes the WAL again from its start and the file keeps its
    size, so the size cannot say when the next checkpoint is due: what waits to be copied
    back can."""
    store = open_store(url_of(tmp_path / "f.db"))
    assert isinstance(store, SqliteStore)
    dialect = store._d
    fleet = Fleet(store)
    fleet.post_many([{"title": "x" * 200} for _ in range(2000)])
    wal = tmp_path / "f.db-wal"
    size = wal.stat().st_size
    assert 0 < dialect._wal_backlog() <= size

    assert dialect._checkpoint() is None  # below the threshold: nothing happens
    assert dialect._wal_backlog() > 0
    monkeypatch.setattr("shoal.stores.sqlite._CHECKPOINT_BYTES", 1)
    checkpointer = dialect._checkpoint()  # on a thread of its own, off the writers' path
    assert checkpointer is not None
    checkpointer.join(30)
    assert dialect._wal_backlog() == 0

    fleet.post("one more")  # written from the WAL's start again; the file keeps its size
    assert 0 < dialect._wal_backlog() < size / 10
    assert wal.stat().st_size == size
    fleet.close()
