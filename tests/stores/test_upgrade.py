"""A fleet made by an older shoal is upgraded by `shoal init`, keeping every task, and until
then it is refused with a message that says so. Schema 1 -> 2 adds ready_at (backfilled by
state) and the longest-first pool index, on SQLite and on PostgreSQL. And a fleet upgraded
from the first schema ends with exactly the schema of a fresh one."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

from shoal import AgentStatus, Fleet, SchemaMismatch, TaskState
from shoal.stores._sql import load_migrations
from shoal.stores.sqlite import APPLICATION_ID, _statements
from tests import pg
from tests.helpers import one

#: (id, state, agent, created_at, updated_at): one task in each state a fleet can hold.
OLD_TASKS = [
    (1, "pending", None, 100.0, 150.0),
    (2, "pending", "ada", 100.0, 160.0),
    (3, "blocked", None, 100.0, 170.0),
    (4, "claimed", "ada", 100.0, 180.0),
    (5, "done", "ada", 100.0, 190.0),
]
INSERT = (
    "INSERT INTO tasks (id, title, priority, skillset, state, agent_id, pool_key, seq, "
    "created_at, updated_at, waiting_on, token, lease_expires) {} "
    "VALUES ({}, 'old', 5, 1, '{}', {}, 0, {}, {}, {}, {}, {}, {})"
)


#: The agent who holds and queues those tasks, as a schema-1 row ({flag}: the dialect's false).
OLD_AGENT = (
    "INSERT INTO agents (id, role, skills, domains, max_concurrent, manager, ephemeral, status, "
    "last_seen, registered_at, incarnation) "
    "VALUES ('ada', 'worker', '[]', '[]', 1, {flag}, {flag}, 'working', 0, 0, 1)"
)


def old_rows(override: str = "") -> list[str]:
    """The tasks as schema-1 rows; PostgreSQL wants OVERRIDING SYSTEM VALUE for their ids."""
    rows = []
    for task_id, state, agent, created, updated in OLD_TASKS:
        rows.append(
            INSERT.format(
                override,
                task_id,
                state,
                "NULL" if agent is None else f"'{agent}'",
                task_id,
                created,
                updated,
                1 if state == "blocked" else 0,
                "'tok'" if state == "claimed" else "NULL",
                "1e12" if state == "claimed" else "NULL",
            )
        )
    return rows


def refused_then_upgraded(url: str) -> None:
    """The schema-1 fleet at ``url`` is refused until `shoal init` upgrades it, tasks kept."""
    with pytest.raises(SchemaMismatch, match="schema version 1") as err:
        Fleet.open(url, create=False)
    assert "shoal init" in (err.value.hint or "")
    fleet = Fleet.init(url)
    assert fleet.created
    check_upgraded(fleet)
    fleet.close()


def check_upgraded(fleet: Fleet) -> None:
    ready = {t.id: t.ready_at for t in fleet.tasks()}
    assert ready == {1: 150.0, 2: 160.0, 3: None, 4: 100.0, 5: 100.0}
    assert [t.id for t in fleet.tasks(state=TaskState.DONE)] == [5]
    assert fleet.status().counts["done"] == 1  # the kept count starts from the history
    fleet.register("bob")
    assert fleet.claim("bob").tasks[0].id == 1  # the pool task, claimable as before
    fleet.configure(order="longest_first")
    fleet.post("estimated", expected_duration="1h")
    assert fleet.ready("bob")[0].title == "estimated"


def test_a_schema_1_sqlite_fleet_is_refused_then_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path, isolation_level=None)
    (_, _, first), *_ = load_migrations("sqlite")
    for statement in _statements(first):
        raw.execute(statement)
    raw.execute("INSERT INTO skillsets (id, skills) VALUES (1, '')")
    raw.execute(OLD_AGENT.format(flag="0"))
    for row in old_rows():
        raw.execute(row)
    raw.execute("PRAGMA user_version = 1")
    raw.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    raw.close()
    refused_then_upgraded(f"sqlite://{path}")


def test_a_schema_1_postgres_fleet_is_refused_then_upgraded(postgres_url: str) -> None:
    schema = postgres_url.rsplit("schema=", 1)[1]
    (_, name, first), *_ = load_migrations("postgres")
    with pg.schema_conn(postgres_url) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(
            "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, "
            "applied_at timestamptz NOT NULL DEFAULT now())"
        )
        conn.execute(first.encode())
        conn.execute("INSERT INTO schema_migrations (version, name) VALUES (1, %s)", (name,))
        conn.execute("INSERT INTO skillsets (id, skills) OVERRIDING SYSTEM VALUE VALUES (1, '')")
        conn.execute(OLD_AGENT.format(flag="false").encode())
        for row in old_rows("OVERRIDING SYSTEM VALUE"):
            conn.execute(row.encode())
        for table in ("tasks", "skillsets"):  # as if the rows had taken their ids
            conn.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), max(id)) FROM {table}"
            )
    refused_then_upgraded(postgres_url)


# ---------------------------------------------------------------- fresh equals migrated
# A fleet created now and one created by the first shoal and upgraded since must end with
# the same schema: every table, column, default, index, constraint, trigger and function.


def sqlite_schema(path: Path) -> list[tuple[str, str, str]]:
    """(type, name, SQL) of everything in sqlite_master, white space normalised, and each
    table's columns as SQLite reads them (types, defaults, nullability, keys)."""
    raw = sqlite3.connect(path)
    rows = raw.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name"
    ).fetchall()
    columns = {
        table: raw.execute(f"SELECT * FROM pragma_table_xinfo('{table}')").fetchall()
        for (kind, table, _) in rows
        if kind == "table"
    }
    raw.close()
    shapes = [(kind, name, " ".join((sql or "").split())) for kind, name, sql in rows]
    return shapes + [("columns", table, repr(cols)) for table, cols in sorted(columns.items())]


def test_a_migrated_sqlite_fleet_has_the_schema_of_a_fresh_one(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.db"
    Fleet.init(f"sqlite://{fresh}").close()
    old = tmp_path / "old.db"
    raw = sqlite3.connect(old, isolation_level=None)
    (_, _, first), *_ = load_migrations("sqlite")
    for statement in _statements(first):
        raw.execute(statement)
    raw.execute("INSERT INTO skillsets (id, skills) VALUES (1, '')")
    raw.execute(OLD_AGENT.format(flag="0"))
    for row in old_rows():
        raw.execute(row)
    raw.execute("PRAGMA user_version = 1")
    raw.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    raw.close()
    Fleet.init(f"sqlite://{old}").close()
    ours, theirs = sqlite_schema(fresh), sqlite_schema(old)
    kinds = {kind for kind, _, _ in ours}
    assert {"table", "index", "trigger", "columns"} <= kinds
    assert ours == theirs


PG_CATALOG = {
    "columns": """
        SELECT table_name, column_name, data_type, column_default, is_nullable,
               is_identity, identity_generation
        FROM information_schema.columns WHERE table_schema = %(schema)s
        ORDER BY table_name, column_name""",
    "indexes": """
        SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = %(schema)s
        ORDER BY tablename, indexname""",
    "constraints": """
        SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint
        WHERE connamespace = %(schema)s::regnamespace ORDER BY 1, 2""",
    "triggers": """
        SELECT tgrelid::regclass::text, tgname, pg_get_triggerdef(oid) FROM pg_trigger
        WHERE NOT tgisinternal AND tgrelid::regclass::text NOT LIKE 'pg_%%'
          AND tgrelid IN (SELECT oid FROM pg_class
                          WHERE relnamespace = %(schema)s::regnamespace)
        ORDER BY 1, 2""",
    "functions": """
        SELECT proname, pg_get_function_arguments(oid), prosrc FROM pg_proc
        WHERE pronamespace = %(schema)s::regnamespace ORDER BY 1, 2""",
    "sequences": """
        SELECT sequence_name, data_type, increment FROM information_schema.sequences
        WHERE sequence_schema = %(schema)s ORDER BY 1""",
}


def postgres_schema(url: str) -> dict[str, list[tuple[object, ...]]]:
    """The schema's catalog, with the schema's own name taken out of definitions."""
    schema = url.rsplit("schema=", 1)[1]
    found: dict[str, list[tuple[object, ...]]] = {}
    with pg.schema_conn(url) as conn:
        for what, query in PG_CATALOG.items():
            rows = conn.execute(query, {"schema": schema}).fetchall()
            found[what] = [
                tuple(str(v).replace(f"{schema}.", "") if v is not None else v for v in row)
                for row in rows
            ]
    return found


def test_a_migrated_postgres_fleet_has_the_schema_of_a_fresh_one(postgres_url: str) -> None:
    old_url = postgres_url
    fresh_url = pg.fleet_url(postgres_url.rsplit("?", 1)[0])
    try:
        Fleet.init(fresh_url).close()
        schema = old_url.rsplit("schema=", 1)[1]
        (_, name, first), *_ = load_migrations("postgres")
        with pg.schema_conn(old_url) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
            conn.execute(
                "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT "
                "NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            conn.execute(first.encode())
            conn.execute("INSERT INTO schema_migrations (version, name) VALUES (1, %s)", (name,))
            conn.execute(
                "INSERT INTO skillsets (id, skills) OVERRIDING SYSTEM VALUE VALUES (1, '')"
            )
            conn.execute(OLD_AGENT.format(flag="false").encode())
            for row in old_rows("OVERRIDING SYSTEM VALUE"):
                conn.execute(row.encode())
        Fleet.init(old_url).close()
        ours, theirs = postgres_schema(fresh_url), postgres_schema(old_url)
        assert len(ours["columns"]) > 30 and ours["indexes"] and ours["constraints"]
        for what in PG_CATALOG:
            assert ours[what] == theirs[what], what
    finally:
        pg.drop_fleet(fresh_url)


# ---------------------------------------------------------------- concurrency groups (11)


def direct_claim_back(conn: psycopg.Connection[tuple[Any, ...]], kept_as: str) -> None:
    """Put back the direct claim a later schema kept under ``kept_as`` when it made its own
    (8, 11, 13 and 14 each renamed the one before, so undoing one is a rename)."""
    conn.execute("DROP FUNCTION direct_claim")
    conn.execute(f"ALTER FUNCTION {kept_as} RENAME TO direct_claim")


def without_flat_claim(kind: str, url: str) -> None:
    """Take away what schema 14 added (PostgreSQL only): the direct claim in one function."""
    if kind == "sqlite":
        return
    with pg.schema_conn(url) as conn:
        direct_claim_back(conn, "direct_claim_nested")
        conn.execute("DELETE FROM schema_migrations WHERE version >= 14")


def without_joins_last(kind: str, url: str) -> None:
    """Take away what schema 14 and 13 added (PostgreSQL only: SQLite's queries read the
    join band with no change to its schema): the direct claim's refusal of a ready join."""
    without_flat_claim(kind, url)
    if kind == "sqlite":
        return
    with pg.schema_conn(url) as conn:
        direct_claim_back(conn, "direct_claim_with_joins")
        conn.execute("DELETE FROM schema_migrations WHERE version >= 13")


def without_poster(kind: str, url: str) -> None:
    """Take away what schema 13 and 12 added: the tasks' poster."""
    without_joins_last(kind, url)
    if kind == "sqlite":
        raw = sqlite3.connect(url.removeprefix("sqlite://"), isolation_level=None)
        raw.execute("ALTER TABLE tasks DROP COLUMN posted_by")
        raw.execute("PRAGMA user_version = 11")
        raw.close()
        return
    with pg.schema_conn(url) as conn:
        conn.execute("ALTER TABLE tasks DROP COLUMN posted_by")
        conn.execute("DELETE FROM schema_migrations WHERE version >= 12")


def without_groups(kind: str, url: str) -> None:
    """Take away what schema 12 and 11 added: the tasks' poster, the groups, the tasks'
    group, and on PostgreSQL the direct claim's refusal of a task of a group with a limit."""
    without_poster(kind, url)
    undo = [
        "DROP TABLE groups",
        "DROP INDEX tasks_group_held",
        "ALTER TABLE tasks DROP COLUMN group_name",
    ]
    if kind == "sqlite":
        raw = sqlite3.connect(url.removeprefix("sqlite://"), isolation_level=None)
        for statement in [*undo, "PRAGMA user_version = 10"]:
            raw.execute(statement)
        raw.close()
        return
    with pg.schema_conn(url) as conn:
        direct_claim_back(conn, "direct_claim_ungrouped")
        for statement in [*undo, "DELETE FROM schema_migrations WHERE version >= 11"]:
            conn.execute(statement)


def test_an_upgraded_fleet_takes_groups_and_keeps_its_tasks(shared_store: tuple[str, str]) -> None:
    """Schema 11: tasks posted before it have no group, and a group's limit holds at once."""
    kind, url = shared_store
    fleet = Fleet.init(url)
    fleet.register("ada", max_concurrent=5)
    old = fleet.post("old")
    fleet.close()
    without_groups(kind, url)
    fleet = Fleet.init(url)
    assert fleet.get(old.id).group is None
    fleet.post("d1", group="deploy")
    fleet.post("d2", group="deploy")
    fleet.set_group("deploy", 1)
    taken = sorted(g.task.title for g in fleet.claim("ada", 5).grants)
    fleet.close()
    assert taken == ["d1", "old"]


# ---------------------------------------------------------------- queue places (version 7)


def as_before_version_7(kind: str, url: str) -> None:
    """Turn a closed fleet back into one that shoal before schema 7 left: every queued
    task's place a number that only grew (the head of a queue the newest), version 6 --
    and so without what schemas 8 and 9 added since (the agents' ``heard`` column, and on
    PostgreSQL the direct claim's refusal of a claim while an agent is silent; the tasks'
    labels)."""
    without_groups(kind, url)
    if kind == "sqlite":
        raw = sqlite3.connect(url.removeprefix("sqlite://"), isolation_level=None)
        raw.execute("UPDATE tasks SET seq = abs(seq)")
        raw.execute("DROP INDEX agents_heard")
        raw.execute("ALTER TABLE agents DROP COLUMN heard")
        raw.execute("UPDATE agents SET status = 'overloaded' WHERE status = 'paused'")
        raw.execute("DROP TABLE schedules")  # schema 10
        raw.execute("ALTER TABLE tasks DROP COLUMN labels")
        raw.execute("PRAGMA user_version = 6")
        raw.close()
        return
    with pg.schema_conn(url) as conn:
        conn.execute("UPDATE tasks SET seq = abs(seq)")
        conn.execute("DROP INDEX agents_heard")
        conn.execute("ALTER TABLE agents DROP COLUMN heard")
        conn.execute("UPDATE agents SET status = 'overloaded' WHERE status = 'paused'")
        direct_claim_back(conn, "direct_claim_steps")
        conn.execute("DROP TABLE schedules")  # schema 10
        conn.execute("ALTER TABLE tasks DROP COLUMN labels")
        conn.execute("DELETE FROM schema_migrations WHERE version >= 7")


def test_an_upgraded_fleet_runs_the_work_queued_before_in_posting_order(
    shared_store: tuple[str, str],
) -> None:
    """Schema 7 gives the tasks already queued the places they would have now: work posted
    to an agent oldest first, the children of the task it holds newest first ahead of it."""
    kind, url = shared_store
    fleet = Fleet.init(url)
    fleet.register("ada")
    fleet.post("parent", to="ada")
    parent, lease = one(fleet.claim("ada"))
    fleet.post("sent 1", to="ada")
    fleet.post("sent 2", to="ada")
    fleet.post("child 1", parent=parent.id)
    fleet.post("child 2", parent=parent.id)
    fleet.close()
    as_before_version_7(kind, url)
    with pytest.raises(SchemaMismatch, match="schema version 6"):
        Fleet.open(url, create=False)
    fleet = Fleet.init(url)
    fleet.complete(lease)
    titles = []
    while claim := fleet.claim("ada"):
        task, held = one(claim)
        titles.append(task.title)
        fleet.complete(held)
    fleet.close()
    assert titles == ["child 2", "child 1", "sent 1", "sent 2"]


# ---------------------------------------------------------------- schema 8: paused
# A pause was status 'overloaded' (the assessment's word for a busy fleet) until schema 8
# made it 'paused'; an agent paused under the old word is paused under the new one.

PAUSED_AGENT = (
    "INSERT INTO agents (id, role, skills, domains, max_concurrent, manager, ephemeral, status, "
    "last_seen, registered_at, incarnation, failures, paused_until) "
    "VALUES ('bob', 'worker', '[]', '[]', 1, {flag}, {flag}, 'overloaded', 1e12, 0, 1, 5, 2e12)"
)


def check_paused(fleet: Fleet) -> None:
    bob = fleet.agent("bob")
    assert bob.status is AgentStatus.PAUSED and bob.failures == 5
    assert fleet.claim("bob").reason == "paused"
    assert fleet.resume("bob").status is AgentStatus.WAITING


def test_a_schema_6_sqlite_fleet_keeps_its_paused_agent_paused(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path, isolation_level=None)
    for version, _, script in load_migrations("sqlite")[:6]:
        for statement in _statements(script):
            raw.execute(statement)
        raw.execute(f"PRAGMA user_version = {version}")
    raw.execute(PAUSED_AGENT.format(flag="0"))
    raw.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    raw.close()
    with pytest.raises(SchemaMismatch, match="schema version 6"):
        Fleet.open(f"sqlite://{path}", create=False)
    fleet = Fleet.init(f"sqlite://{path}")
    check_paused(fleet)
    fleet.close()


def test_a_schema_6_postgres_fleet_keeps_its_paused_agent_paused(postgres_url: str) -> None:
    schema = postgres_url.rsplit("schema=", 1)[1]
    with pg.schema_conn(postgres_url) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(
            "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, "
            "applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for version, name, script in load_migrations("postgres")[:6]:
            conn.execute(script.encode())
            conn.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, name)
            )
        conn.execute(PAUSED_AGENT.format(flag="false").encode())
    with pytest.raises(SchemaMismatch, match="schema version 6"):
        Fleet.open(postgres_url, create=False)
    fleet = Fleet.init(postgres_url)
    check_paused(fleet)
    fleet.close()


# ---------------------------------------------------------------- schema 9: labels


def test_a_schema_8_fleet_gets_labels_and_its_tasks_none(shared_store: tuple[str, str]) -> None:
    """Schema 9 adds the tasks' labels: a task posted before has none, and is found, edited
    and claimed as before (on PostgreSQL the direct claim reads the new column too)."""
    kind, url = shared_store
    fleet = Fleet.init(url)
    fleet.register("ada")
    old = fleet.post("posted before labels").id
    fleet.close()
    without_groups(kind, url)  # schema 12 and 11, then 10: back to 9
    if kind == "sqlite":
        raw = sqlite3.connect(url.removeprefix("sqlite://"), isolation_level=None)
        raw.execute("DROP TABLE schedules")
        raw.execute("ALTER TABLE tasks DROP COLUMN labels")
        raw.execute("PRAGMA user_version = 8")
        raw.close()
    else:
        with pg.schema_conn(url) as conn:
            conn.execute("DROP TABLE schedules")
            conn.execute("ALTER TABLE tasks DROP COLUMN labels")
            conn.execute("DELETE FROM schema_migrations WHERE version >= 9")
    with pytest.raises(SchemaMismatch, match="schema version 8"):
        Fleet.open(url, create=False)
    fleet = Fleet.init(url)
    assert fleet.get(old).labels == ()
    assert fleet.edit(old, labels=["triaged"]).labels == ("triaged",)
    assert [t.id for t in fleet.tasks(label="triaged")] == [old]
    assert one(fleet.claim("ada"))[0].labels == ("triaged",)
    fleet.close()


# ---------------------------------------------------------------- schema 12: posted_by


def test_a_schema_11_fleet_records_posters_and_its_tasks_none(
    shared_store: tuple[str, str],
) -> None:
    """Schema 12 adds who posted a task: one posted before has no poster, is claimed as
    before (on PostgreSQL the direct claim reads the new column too), and a new post
    records its poster."""
    kind, url = shared_store
    fleet = Fleet.init(url)
    fleet.register("ada", max_concurrent=2)
    old = fleet.post("posted before posters").id
    fleet.close()
    without_poster(kind, url)
    with pytest.raises(SchemaMismatch, match="schema version 11"):
        Fleet.open(url, create=False)
    fleet = Fleet.init(url)
    assert fleet.get(old).posted_by is None
    new = fleet.post("posted by ada", posted_by="ada").id
    assert {g.task.id: g.task.posted_by for g in fleet.claim("ada", 2).grants} == {
        old: None,
        new: "ada",
    }
    fleet.close()


# ---------------------------------------------------------------- schema 13: joins last


def test_a_schema_12_fleet_takes_ready_joins_last(shared_store: tuple[str, str]) -> None:
    """Schema 13 (PostgreSQL): the direct claim no longer hands out a ready join before the
    pool -- it refuses, and the general path takes the pool's task first."""
    kind, url = shared_store
    Fleet.init(url).close()
    without_joins_last(kind, url)
    fleet = Fleet.init(url)
    fleet.register("ada")
    fleet.post("parent", to="ada")
    parent, lease = one(fleet.claim("ada"))
    child = fleet.post("child", parent=parent.id)
    fleet.defer(lease, [child.id])
    fleet.complete(one(fleet.claim("ada"))[1])
    fleet.post("in the pool")
    titles = []
    while claim := fleet.claim("ada"):
        task, held = one(claim)
        titles.append(task.title)
        fleet.complete(held)
    fleet.close()
    assert titles == ["in the pool", "parent"]


# ---------------------------------------------------------------- schema 14: one function


def test_a_schema_13_postgres_fleet_finishes_its_leases_with_the_flat_claim(
    postgres_url: str,
) -> None:
    """Schema 14 replaces the direct claim's function while leases are held: a task leased
    under version 13 is finished, and the next one claimed, by the new function."""
    fleet = Fleet.init(postgres_url)
    fleet.register("ada")
    fleet.post("first", labels=["old"])
    _, lease = one(fleet.claim("ada"))
    fleet.close()
    without_flat_claim("postgres", postgres_url)
    with pytest.raises(SchemaMismatch, match="schema version 13"):
        Fleet.open(postgres_url, create=False)
    fleet = Fleet.init(postgres_url)
    second = fleet.post("second", group="free", posted_by="ada").id
    done = fleet.complete(lease, then_claim=1)
    fleet.close()
    assert (done.task.title, done.task.state.value, done.task.labels) == ("first", "done", ("old",))
    assert done.next is not None
    assert [(t.id, t.group, t.posted_by) for t in done.next.tasks] == [(second, "free", "ada")]
