"""Millions of finished tasks, with their events, written straight into a fleet's tables.

Posting and completing ten million tasks through the Fleet API would take hours, and what
``bench/scale.py`` asks is not how fast history is made but whether it slows the live work
down. So history is written set-based, in the store's own tables, with the rows the store
itself would have written for each finished task (read from ``_sqltx.SqlTx`` and the
statements ``insert_task``, ``lease_task``, ``finish_leased_one``, ``bury_task``,
``cancel_task`` and ``append_events``):

* a task row: ``done`` (97 in 100, with a result), ``dead`` (1 in 100: three attempts, an
  error) or ``cancelled`` (1 in 100); a skill set and a domain of the live fleet; the agent
  that held it last; a token; ``created_at`` < ``claimed_at`` < ``finished_at``, spread
  evenly over the days before the run; ``ready_at`` = ``created_at``; one in a hundred
  ``stolen``;
* three events each, as the store logs them: ``posted`` (its priority and state),
  ``claimed`` -- or ``stolen``, for the stolen ones, with ``from`` -- (source and attempt),
  and ``completed``, ``dead`` or ``cancelled``.

SQLite gets a recursive CTE per chunk (one transaction each, then a checkpoint so the WAL
does not hold gigabytes); PostgreSQL gets ``generate_series``, the tasks and their events in
one statement per chunk; ``scale.py`` then runs ``VACUUM ANALYZE``, as it does after the live
fleet is built -- a fleet that grew that large over weeks would have been vacuumed and
analysed by autovacuum long before.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any

#: Rows per transaction while filling.
CHUNK = 500_000
#: How far back history reaches, and where it ends (seconds before the run).
SPAN = 60 * 86400.0
NEWEST = 3600.0

# The columns both stores fill; the rest keep their defaults (NULL, 0, false).
_TASK_COLUMNS = (
    "title, body, priority, skillset, domain, state, agent_id, stolen, attempts, token, "
    "result, error, pool_key, seq, created_at, updated_at, claimed_at, finished_at, ready_at"
)

# A history task from its number i (1-based) and the parameters: base (epoch seconds of the
# oldest), step (seconds between two), skillset0 and skillsets (a contiguous range of ids),
# domains, agents. {cat} is the dialect's string concatenation of a text and a number.
_SQLITE_TASKS = f"""
WITH RECURSIVE n (i) AS (SELECT :lo UNION ALL SELECT i + 1 FROM n WHERE i < :hi),
h AS (SELECT i, :base + i * :step AS t,
             CASE i % 100 WHEN 0 THEN 'dead' WHEN 1 THEN 'cancelled' ELSE 'done' END AS s
      FROM n)
INSERT INTO tasks ({_TASK_COLUMNS})
SELECT 'history ' || i, '', 1 + i % 9, :skillset0 + i % :skillsets,
       'd' || substr('0' || (i % :domains), -2), s,
       'a' || substr('000' || (i % :agents), -4), i % 100 = 2,
       CASE s WHEN 'dead' THEN 3 WHEN 'cancelled' THEN 0 ELSE 1 END, printf('%016x', i),
       CASE s WHEN 'done' THEN '{{"ok": true}}' END, CASE s WHEN 'dead' THEN 'broken' END,
       600.0 * (10 - (1 + i % 9)) - t, 0, t, t + 60,
       CASE s WHEN 'cancelled' THEN NULL ELSE t + 1 END, t + 60, t
FROM h
"""

_SQLITE_EVENTS = """
INSERT INTO events (at, kind, task_id, agent_id, data)
SELECT created_at, 'posted', id, NULL, '{"priority": ' || priority || ', "state": "pending"}'
FROM tasks WHERE id BETWEEN :first AND :last;
INSERT INTO events (at, kind, task_id, agent_id, data)
SELECT claimed_at, CASE WHEN stolen THEN 'stolen' ELSE 'claimed' END, id, agent_id,
       CASE WHEN stolen THEN '{"source": "steal", "attempt": 1, "from": "a0000"}'
            ELSE '{"source": "pool", "attempt": 1}' END
FROM tasks WHERE id BETWEEN :first AND :last AND state <> 'cancelled';
INSERT INTO events (at, kind, task_id, agent_id, data)
SELECT finished_at, CASE state WHEN 'done' THEN 'completed' ELSE state END, id, agent_id,
       CASE state WHEN 'cancelled' THEN '{"was": "pending"}' END
FROM tasks WHERE id BETWEEN :first AND :last
"""

_PG_CHUNK = f"""
WITH h AS (
    SELECT i, %(base)s + i * %(step)s AS t,
           CASE i %% 100 WHEN 0 THEN 'dead' WHEN 1 THEN 'cancelled' ELSE 'done' END AS s
    FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) AS i
), t AS (
    INSERT INTO tasks ({_TASK_COLUMNS})
    SELECT 'history ' || i, '', 1 + i %% 9, %(skillset0)s + i %% %(skillsets)s,
           'd' || lpad((i %% %(domains)s)::text, 2, '0'), s,
           'a' || lpad((i %% %(agents)s)::text, 4, '0'), i %% 100 = 2,
           CASE s WHEN 'dead' THEN 3 WHEN 'cancelled' THEN 0 ELSE 1 END,
           lpad(to_hex(i), 16, '0'),
           CASE s WHEN 'done' THEN '{{"ok": true}}' END, CASE s WHEN 'dead' THEN 'broken' END,
           600.0 * (10 - (1 + i %% 9)) - t, 0, t, t + 60,
           CASE s WHEN 'cancelled' THEN NULL ELSE t + 1 END, t + 60, t
    FROM h
    RETURNING id, priority, state, agent_id, stolen, created_at, claimed_at, finished_at
)
INSERT INTO events (at, kind, task_id, agent_id, data)
SELECT e.at, e.kind, t.id, e.agent, e.data FROM t CROSS JOIN LATERAL (VALUES
    (t.created_at, 'posted', NULL,
     '{{"priority": ' || t.priority || ', "state": "pending"}}'),
    (t.claimed_at, CASE WHEN t.stolen THEN 'stolen' ELSE 'claimed' END, t.agent_id,
     CASE WHEN t.stolen THEN '{{"source": "steal", "attempt": 1, "from": "a0000"}}'
          ELSE '{{"source": "pool", "attempt": 1}}' END),
    (t.finished_at, CASE t.state WHEN 'done' THEN 'completed' ELSE t.state END, t.agent_id,
     CASE t.state WHEN 'cancelled' THEN '{{"was": "pending"}}' END)
) AS e (at, kind, agent, data)
WHERE NOT (t.state = 'cancelled' AND e.kind IN ('claimed', 'stolen'))
"""


# SQLite keeps the finished counts by hand (its store moves them at each commit; schema 6):
# history written around the store moves them here.
_SQLITE_COUNTS = """
UPDATE counters SET value = value + (SELECT count(*) FROM tasks
                                     WHERE id BETWEEN :first AND :last AND state = counters.name)
WHERE name IN ('done', 'dead', 'cancelled')
"""


def shape(skillset_ids: list[int], domains: int, agents: int, finished: int) -> dict[str, Any]:
    """The parameters every chunk shares: the live fleet's skill sets (a contiguous range
    of ids, as posting made them), how many domains and agents, and the times."""
    first = min(skillset_ids)
    count = len(skillset_ids)
    if sorted(skillset_ids) != list(range(first, first + count)):
        count = 1  # not contiguous: the first set will do
    base = time.time() - SPAN
    return {
        "skillset0": first,
        "skillsets": count,
        "domains": domains,
        "agents": agents,
        "base": base,
        "step": (SPAN - NEWEST) / max(finished, 1),
    }


def fill_sqlite(
    path: str, finished: int, params: dict[str, Any], say: Callable[[str], None]
) -> tuple[int, int]:
    """``finished`` history tasks and their events into the SQLite fleet at ``path``."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=600)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -512000")
    before = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    for lo in range(1, finished + 1, CHUNK):
        hi = min(lo + CHUNK - 1, finished)
        conn.execute("BEGIN IMMEDIATE")
        first = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM tasks").fetchone()[0]
        conn.execute(_SQLITE_TASKS, {**params, "lo": lo, "hi": hi})
        last = conn.execute("SELECT max(id) FROM tasks").fetchone()[0]
        for statement in _SQLITE_EVENTS.split(";"):
            conn.execute(statement, {"first": first, "last": last})
        conn.execute(_SQLITE_COUNTS, {"first": first, "last": last})
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        say(f"    history: {hi:,} of {finished:,} tasks")
    events = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    conn.close()
    return finished, int(events - before)


def fill_postgres(
    conn: Any, finished: int, params: dict[str, Any], say: Callable[[str], None]
) -> tuple[int, int]:
    """The same on PostgreSQL, through ``conn`` (autocommit, search_path set to the fleet's
    schema)."""
    conn.execute("SET synchronous_commit = off")
    before = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    for lo in range(1, finished + 1, CHUNK):
        hi = min(lo + CHUNK - 1, finished)
        conn.execute(_PG_CHUNK, {**params, "lo": lo, "hi": hi})
        say(f"    history: {hi:,} of {finished:,} tasks")
    events = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    return finished, int(events - before)
