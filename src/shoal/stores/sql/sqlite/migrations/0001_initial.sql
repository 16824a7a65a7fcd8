-- shoal schema, version 1: tasks, agents, dependencies, the event log and settings.
--
-- The hot rows are pending and claimed tasks; every index the claim uses is partial, so
-- finished history (which only grows) never slows a claim down.

-- Small key-value facts: the stored settings, the last assessment.
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

-- Monotonic counters. 'seq' orders tasks inside a queue: the head is the largest seq.
CREATE TABLE counters (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO counters (name, value) VALUES ('seq', 0);

-- Every distinct set of required skills, as sorted comma-separated names ('' = none).
-- Tasks refer to their set by id, so "the skills this agent can do" is a short list of ids
-- and each pool look-up is one range of one index.
CREATE TABLE skillsets (
    id     INTEGER PRIMARY KEY,
    skills TEXT NOT NULL UNIQUE
);

CREATE TABLE agents (
    id             TEXT PRIMARY KEY,
    role           TEXT NOT NULL,
    skills         TEXT NOT NULL,            -- JSON list
    domains        TEXT NOT NULL,            -- JSON list
    max_concurrent INTEGER NOT NULL,
    manager        INTEGER NOT NULL,
    ephemeral      INTEGER NOT NULL,
    status         TEXT NOT NULL,
    idle_since     REAL,
    last_seen      REAL NOT NULL,
    registered_at  REAL NOT NULL,
    incarnation    INTEGER NOT NULL,
    queued         INTEGER NOT NULL DEFAULT 0 -- pending tasks in its queue, kept by triggers
);

CREATE TABLE tasks (
    id                INTEGER PRIMARY KEY,
    title             TEXT NOT NULL,
    body              TEXT NOT NULL DEFAULT '',
    payload           TEXT,                   -- JSON
    priority          INTEGER NOT NULL CHECK (priority BETWEEN 1 AND 9),
    skillset          INTEGER NOT NULL REFERENCES skillsets (id),
    domain            TEXT,
    state             TEXT NOT NULL CHECK (state IN
                          ('blocked', 'pending', 'claimed', 'done', 'dead', 'cancelled')),
    agent_id          TEXT,                   -- queue owner / holder / last holder
    pinned            INTEGER NOT NULL DEFAULT 0,
    stolen            INTEGER NOT NULL DEFAULT 0,
    parent_id         INTEGER,
    key               TEXT,
    attempts          INTEGER NOT NULL DEFAULT 0,
    max_attempts      INTEGER,
    lease_ttl         REAL,
    expected_duration REAL,
    token             TEXT,                   -- current (or last) lease
    lease_expires     REAL,
    result            TEXT,                   -- JSON
    error             TEXT,
    waiting_on        INTEGER NOT NULL DEFAULT 0,
    pool_key          REAL NOT NULL,          -- policy.pool_key: the pool's static order
    seq               INTEGER NOT NULL,       -- place in a queue: head = largest
    created_at        REAL NOT NULL,
    updated_at        REAL NOT NULL,
    claimed_at        REAL,
    finished_at       REAL,
    stalled_at        REAL
);

-- Step 2 of the claim, the pool: best static key among one skill set ...
CREATE INDEX tasks_pool ON tasks (skillset, pool_key DESC, id)
    WHERE state = 'pending' AND agent_id IS NULL;
-- ... and among one skill set in one domain (for the domain bonus).
CREATE INDEX tasks_pool_domain ON tasks (skillset, domain, pool_key DESC, id)
    WHERE state = 'pending' AND agent_id IS NULL AND domain IS NOT NULL;
-- Step 1 (the owner's head, read forwards) and step 3 (a thief's tail, read backwards).
CREATE INDEX tasks_queue ON tasks (agent_id, priority, seq DESC)
    WHERE state = 'pending' AND agent_id IS NOT NULL;
-- Leases: who holds what, and what expires first.
CREATE INDEX tasks_held ON tasks (agent_id) WHERE state = 'claimed';
CREATE INDEX tasks_expiry ON tasks (lease_expires) WHERE state = 'claimed';
CREATE UNIQUE INDEX tasks_key ON tasks (key) WHERE key IS NOT NULL;

CREATE TABLE deps (
    task_id    INTEGER NOT NULL,  -- waits ...
    depends_on INTEGER NOT NULL,  -- ... on this one
    PRIMARY KEY (task_id, depends_on)
) WITHOUT ROWID;
CREATE INDEX deps_by_dependency ON deps (depends_on, task_id);

CREATE TABLE events (
    id       INTEGER PRIMARY KEY,
    at       REAL NOT NULL,
    kind     TEXT NOT NULL,
    task_id  INTEGER,
    agent_id TEXT,
    data     TEXT                  -- JSON
);
CREATE INDEX events_by_task ON events (task_id) WHERE task_id IS NOT NULL;
CREATE INDEX events_by_agent ON events (agent_id) WHERE agent_id IS NOT NULL;
-- The steal window: steals in the last rebalance_interval.
CREATE INDEX events_steals ON events (at) WHERE kind = 'stolen';

-- Tasks counted by state, so status and assess never count a million rows.
CREATE TABLE task_counts (
    state TEXT PRIMARY KEY,
    n     INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO task_counts (state, n) VALUES
    ('blocked', 0), ('pending', 0), ('claimed', 0), ('done', 0), ('dead', 0), ('cancelled', 0);

CREATE TRIGGER tasks_counted AFTER INSERT ON tasks
BEGIN
    UPDATE task_counts SET n = n + 1 WHERE state = NEW.state;
    UPDATE agents SET queued = queued + 1
        WHERE NEW.state = 'pending' AND id = NEW.agent_id;
END;

CREATE TRIGGER tasks_recounted AFTER UPDATE OF state ON tasks
WHEN OLD.state <> NEW.state
BEGIN
    UPDATE task_counts SET n = n - 1 WHERE state = OLD.state;
    UPDATE task_counts SET n = n + 1 WHERE state = NEW.state;
END;

CREATE TRIGGER tasks_requeued AFTER UPDATE OF state, agent_id ON tasks
WHEN (OLD.state = 'pending' OR NEW.state = 'pending')
 AND (OLD.state <> NEW.state OR OLD.agent_id IS NOT NEW.agent_id)
BEGIN
    UPDATE agents SET queued = queued - 1
        WHERE OLD.state = 'pending' AND id = OLD.agent_id;
    UPDATE agents SET queued = queued + 1
        WHERE NEW.state = 'pending' AND id = NEW.agent_id;
END;
