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
    waiting_on        INTEGER NOT NULL DEFAULT 0,  -- unfinished tasks it waits on
    has_dependents    INTEGER NOT NULL DEFAULT 0,  -- some task waits on it
    pool_key          REAL NOT NULL,          -- policy.pool_key: the pool's static order
    seq               INTEGER NOT NULL,       -- place in a queue: head = largest
    created_at        REAL NOT NULL,
    updated_at        REAL NOT NULL,
    claimed_at        REAL,
    finished_at       REAL,
    stalled_at        REAL
);

-- The claim's pool step: best static key among one skill set ...
CREATE INDEX tasks_pool ON tasks (skillset, pool_key DESC, id)
    WHERE state = 'pending' AND agent_id IS NULL;
-- ... and among one skill set in one domain (for the domain bonus).
CREATE INDEX tasks_pool_domain ON tasks (skillset, domain, pool_key DESC, id)
    WHERE state = 'pending' AND agent_id IS NULL AND domain IS NOT NULL;
-- The own queue step (the owner's head, read forwards) and the steal step (a thief's tail,
-- read backwards).
CREATE INDEX tasks_queue ON tasks (agent_id, priority, seq DESC)
    WHERE state = 'pending' AND agent_id IS NOT NULL;
-- Leases: who holds what, and what expires first.
CREATE INDEX tasks_held ON tasks (agent_id) WHERE state = 'claimed';
CREATE INDEX tasks_expiry ON tasks (lease_expires) WHERE state = 'claimed';
CREATE UNIQUE INDEX tasks_key ON tasks (key) WHERE key IS NOT NULL;
-- For counting by state without reading every task (the rest are counted by the indexes
-- above, and done = all - the others).
CREATE INDEX tasks_blocked ON tasks (id) WHERE state = 'blocked';
CREATE INDEX tasks_ended ON tasks (state) WHERE state IN ('dead', 'cancelled');

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
-- A task's history. (An agent's events are found by reading the log from `since`: an index
-- on agent would cost every claim and completion a page write for a rarer query.)
CREATE INDEX events_by_task ON events (task_id) WHERE task_id IS NOT NULL;
-- The steal window: steals in the last rebalance_interval.
CREATE INDEX events_steals ON events (at) WHERE kind = 'stolen';

-- agents.queued follows the pending tasks in each queue. The conditions keep the triggers
-- off the hot path: a claim from the pool and a completion touch no queue.
CREATE TRIGGER tasks_queued AFTER INSERT ON tasks
WHEN NEW.state = 'pending' AND NEW.agent_id IS NOT NULL
BEGIN
    UPDATE agents SET queued = queued + 1 WHERE id = NEW.agent_id;
END;

CREATE TRIGGER tasks_left_queue AFTER UPDATE OF state, agent_id ON tasks
WHEN OLD.state = 'pending' AND OLD.agent_id IS NOT NULL
 AND (NEW.state <> 'pending' OR NEW.agent_id IS NOT OLD.agent_id)
BEGIN
    UPDATE agents SET queued = queued - 1 WHERE id = OLD.agent_id;
END;

CREATE TRIGGER tasks_joined_queue AFTER UPDATE OF state, agent_id ON tasks
WHEN NEW.state = 'pending' AND NEW.agent_id IS NOT NULL
 AND (OLD.state <> 'pending' OR NEW.agent_id IS NOT OLD.agent_id)
BEGIN
    UPDATE agents SET queued = queued + 1 WHERE id = NEW.agent_id;
END;
