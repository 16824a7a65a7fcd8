"""A fleet made by an older shoal is upgraded by `shoal init`, keeping every task, and until
then it is refused with a message that says so. Schema 1 -> 2 adds ready_at (backfilled by
state) and the longest-first pool index, on SQLite and on PostgreSQL."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from shoal import Fleet, SchemaMismatch, TaskState
from shoal.stores._sql import load_migrations
from shoal.stores.sqlite import APPLICATION_ID, _statements
from tests import pg

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
