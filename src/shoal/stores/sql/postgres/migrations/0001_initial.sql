-- shoal schema, version 1, for PostgreSQL: the same fleet as the SQLite schema, laid out for
-- many writers at once.
--
-- * The hot rows are pending and claimed tasks. Every index a claim reads is partial, so
--   finished history (which only grows) never slows a claim down.
-- * Queue positions come from a sequence, not a counter row, so posting and claiming never
--   queue behind one hot row.
-- * Queue depths are counted on demand from the queue index instead of being kept in the
--   agents table: a counter there would make every post to a queue and every steal from it
--   take the owner's agent row, and writers that take rows in different orders deadlock.
-- * The tables live in the fleet's own schema (the URL's ?schema=, default "shoal"): the
--   store sets search_path, so nothing here names the schema.

-- Small key-value facts: the stored settings, the last assessment.
CREATE TABLE meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);

-- A task's place in a queue: the head is the largest.
CREATE SEQUENCE task_seq;

-- Every distinct set of required skills, as sorted comma-separated names ('' = none).
CREATE TABLE skillsets (
    id     integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    skills text NOT NULL UNIQUE
);

CREATE TABLE agents (
    id             text PRIMARY KEY,
    role           text NOT NULL,
    skills         text NOT NULL,            -- JSON list
    domains        text NOT NULL,            -- JSON list
    max_concurrent integer NOT NULL,
    manager        boolean NOT NULL,
    ephemeral      boolean NOT NULL,
    status         text NOT NULL,
    idle_since     double precision,
    last_seen      double precision NOT NULL,
    registered_at  double precision NOT NULL,
    incarnation    integer NOT NULL
);

CREATE TABLE tasks (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    title             text NOT NULL,
    body              text NOT NULL DEFAULT '',
    payload           text,                   -- JSON
    priority          smallint NOT NULL CHECK (priority BETWEEN 1 AND 9),
    skillset          integer NOT NULL REFERENCES skillsets (id),
    domain            text,
    state             text NOT NULL CHECK (state IN
                          ('blocked', 'pending', 'claimed', 'done', 'dead', 'cancelled')),
    agent_id          text,                   -- queue owner / holder / last holder
    pinned            boolean NOT NULL DEFAULT false,
    stolen            boolean NOT NULL DEFAULT false,
    parent_id         bigint,
    key               text,
    attempts          integer NOT NULL DEFAULT 0,
    max_attempts      integer,
    lease_ttl         double precision,
    expected_duration double precision,
    token             text,                   -- current (or last) lease
    lease_expires     double precision,
    result            text,                   -- JSON
    error             text,
    waiting_on        integer NOT NULL DEFAULT 0,  -- unfinished tasks it waits on
    has_dependents    boolean NOT NULL DEFAULT false,
    pool_key          double precision NOT NULL,   -- policy.pool_key: the pool's static order
    seq               bigint NOT NULL,        -- place in a queue: head = largest
    created_at        double precision NOT NULL,
    updated_at        double precision NOT NULL,
    claimed_at        double precision,
    finished_at       double precision,
    stalled_at        double precision
) WITH (fillfactor = 85);
-- A queue table churns: let autovacuum keep up long before the default 20% of dead rows.
ALTER TABLE tasks SET (autovacuum_vacuum_scale_factor = 0.02,
                       autovacuum_analyze_scale_factor = 0.02);

-- The claim's pool step: best static key among one skill set ...
CREATE INDEX tasks_pool ON tasks (skillset, pool_key DESC, id)
    WHERE state = 'pending' AND agent_id IS NULL;
-- ... and among one skill set in one domain (for the domain bonus).
CREATE INDEX tasks_pool_domain ON tasks (skillset, domain, pool_key DESC, id)
    WHERE state = 'pending' AND agent_id IS NULL AND domain IS NOT NULL;
-- The own queue step (the owner's head, read forwards), the steal step (a thief's tail,
-- read backwards), and queue depths.
CREATE INDEX tasks_queue ON tasks (agent_id, priority, seq DESC)
    WHERE state = 'pending' AND agent_id IS NOT NULL;
-- Leases: who holds what, and what expires first.
CREATE INDEX tasks_held ON tasks (agent_id) WHERE state = 'claimed';
CREATE INDEX tasks_expiry ON tasks (lease_expires) WHERE state = 'claimed';
CREATE UNIQUE INDEX tasks_key ON tasks (key) WHERE key IS NOT NULL;
CREATE INDEX tasks_blocked ON tasks (agent_id) WHERE state = 'blocked';
CREATE INDEX tasks_ended ON tasks (state) WHERE state IN ('dead', 'cancelled');

CREATE TABLE deps (
    task_id    bigint NOT NULL,  -- waits ...
    depends_on bigint NOT NULL,  -- ... on this one
    PRIMARY KEY (task_id, depends_on)
);
CREATE INDEX deps_by_dependency ON deps (depends_on, task_id);

CREATE TABLE events (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at        double precision NOT NULL,
    kind      text NOT NULL,
    task_id   bigint,
    agent_id  text,
    data      text,                 -- JSON
    -- Server time of the write. Ids are taken before commit, so with many writers an id can
    -- become visible after a larger one; a reader following the log waits for such a gap to
    -- fill (or to age past any transaction, when its writer rolled back).
    logged_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX events_by_task ON events (task_id) WHERE task_id IS NOT NULL;
CREATE INDEX events_steals ON events (at) WHERE kind = 'stolen';
