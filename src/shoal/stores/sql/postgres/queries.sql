-- Every statement the PostgreSQL store runs, by name. See shoal/stores/_sql.py for the format.
-- Step names (expire, own queue, pool, steal) are those of the claim in _claiming.py
-- (docs/ARCHITECTURE.md, "The claim").
-- Parameters are psycopg's %(name)s; lists arrive as arrays (or one JSON array for rows).
--
-- Locking clauses are the `-- locking:` fragments below: the loader fills them in for
-- read-write transactions and leaves them out for read-only ones, which may not (and need
-- not) lock rows -- a preview of a claim reads what the claim would lock.
--
-- Locking: writers run at READ COMMITTED, side by side. A claim finds candidates with
-- FOR UPDATE SKIP LOCKED, so it never waits on a row another claimer is taking; a row read in
-- order to change it is read FOR UPDATE; fleet-wide changes (registration, status, the hub's
-- passes, settings) hold the fleet lock exclusively and the rest hold it shared (see
-- postgres.py).

-- locking: for_update
FOR UPDATE

-- locking: for_update_of_a
FOR UPDATE OF a

-- locking: for_share
FOR SHARE

-- locking: skip_locked
-- Rows another writer is taking are skipped, never waited for.
FOR UPDATE SKIP LOCKED

-- fragment: task
-- The columns of a task, in the order SqlTx reads them.
id, title, body, payload, priority, skillset, domain, state, agent_id, pinned, stolen,
parent_id, key, attempts, max_attempts, lease_ttl, expected_duration, lease_expires, result,
error, waiting_on, created_at, updated_at, claimed_at, finished_at, stalled_at, ready_at,
retry_delay, group_name, labels, posted_by

-- fragment: listed_task
-- A task as a listing reads it (Task.left_out): the task columns with NULL in place of the
-- payload and the result, which a listing never loads however large, then whether the task
-- holds each.
-- IS NOT NULL does not fetch a TOASTed value: a large payload stays on disk.
id, title, body, NULL, priority, skillset, domain, state, agent_id, pinned, stolen,
parent_id, key, attempts, max_attempts, lease_ttl, expected_duration, lease_expires, NULL,
error, waiting_on, created_at, updated_at, claimed_at, finished_at, stalled_at, ready_at,
retry_delay, group_name, labels, posted_by, payload IS NOT NULL, result IS NOT NULL

-- fragment: t_task
-- The same, of a table aliased t.
t.id, t.title, t.body, t.payload, t.priority, t.skillset, t.domain, t.state, t.agent_id,
t.pinned, t.stolen, t.parent_id, t.key, t.attempts, t.max_attempts, t.lease_ttl,
t.expected_duration, t.lease_expires, t.result, t.error, t.waiting_on, t.created_at,
t.updated_at, t.claimed_at, t.finished_at, t.stalled_at, t.ready_at, t.retry_delay,
t.group_name, t.labels, t.posted_by

-- fragment: candidate
-- A pending task as the claim weighs it, in the order of model.Candidate.
id, title, priority, domain, agent_id, pinned, created_at, lease_ttl, attempts, skillset,
expected_duration, ready_at, group_name

-- fragment: unheld
-- policy.Locality as a condition: leave out a task of a domain the claimer does not have
-- (own_domains) that became ready after local_since (locality_wait), or after domain_since
-- (domain_wait) while an idle agent of its domain can do it (the pairs of
-- reserved_domains and reserved_skillsets). A rule that is off comes as infinity.
NOT (domain IS NOT NULL
     AND NOT domain = ANY(%(own_domains)s::text[])
     AND (coalesce(ready_at, created_at) > %(local_since)s::float8
          OR (coalesce(ready_at, created_at) > %(domain_since)s::float8
              AND (domain, skillset) IN (
                  SELECT * FROM unnest(%(reserved_domains)s::text[],
                                       %(reserved_skillsets)s::int[])))))

-- fragment: unfull
-- Concurrency groups: leave out a task of a group that already holds as many tasks as its
-- limit (full_groups; empty for most claims). A task of no group never is.
(group_name IS NULL OR NOT group_name = ANY(%(full_groups)s::text[]))

-- fragment: agent
-- The columns of an agent, in the order SqlTx reads them; queued is counted on the
-- queue index (see the schema).
a.id, a.role, a.skills, a.domains, a.max_concurrent, a.manager, a.ephemeral, a.status,
a.idle_since, a.last_seen, a.registered_at, a.incarnation,
(SELECT count(*) FROM tasks q WHERE q.state = 'pending' AND q.agent_id = a.id),
a.failures, a.paused_until

-- fragment: stealable
-- The tail a thief may take from: the victim's pending tasks under the eligibility rules of
-- policy.StealFilter (priority >= the minimum, never stolen, not pinned, a skill set the
-- thief can do, and the thief's domain -- or no domain, or simple work: a high priority
-- number and no skills), and not held back by the locality rules.
state = 'pending' AND agent_id = %(victim)s AND ready_at <= %(now)s
  AND priority >= %(min_priority)s AND NOT stolen AND NOT pinned
  AND skillset = ANY(%(skillsets)s::int[])
  AND (domain IS NULL
       OR domain = ANY(%(domains)s::text[])
       OR (priority >= %(cross_domain_priority)s
           AND skillset IS NOT DISTINCT FROM %(free_skillset)s::int))
  AND {unheld} AND {unfull}
  AND seq BETWEEN %(place_low)s AND %(place_high)s


-- ============================================================ opening a fleet

-- name: schema_exists
SELECT count(*) FROM pg_namespace WHERE nspname = %(schema)s;

-- name: schema_version
-- At open: the version of the fleet in this schema (None: not a fleet), and whether the
-- schema holds other tables (then it belongs to another program).
SELECT (SELECT max(version) FROM schema_migrations);

-- name: foreign_tables
SELECT count(*) FROM pg_tables WHERE schemaname = current_schema();

-- name: migrations_table
SELECT to_regclass('schema_migrations') IS NOT NULL;

-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: record_migration
INSERT INTO schema_migrations (version, name) VALUES (%(version)s, %(name)s);


-- ============================================================ settings and counters

-- name: get_meta
SELECT value FROM meta WHERE key = %(key)s;

-- name: set_meta
INSERT INTO meta (key, value) VALUES (%(key)s, %(value)s)
ON CONFLICT (key) DO UPDATE SET value = excluded.value;

-- name: next_seq
-- A number larger than any before it, for a queue place (policy.queue_place: +n, -n): a
-- sequence, so no writer waits for another.
SELECT nextval('task_seq');

-- name: count_finished
-- Never run: triggers keep the counts here (schema version 6), as rows of changes that many
-- writers can add side by side.
SELECT 1;

-- name: finished_state
-- Never run: as count_finished.
SELECT 1;

-- name: next_seqs
-- %(count)s positions at once (a batch of posts).
SELECT nextval('task_seq') FROM generate_series(1, %(count)s);


-- ============================================================ agents

-- name: get_agent
SELECT {agent} FROM agents a WHERE a.id = %(id)s;

-- name: lock_agent
-- An agent this transaction is about to change: held until commit.
SELECT {agent} FROM agents a WHERE a.id = %(id)s {for_update_of_a};

-- name: list_agents
SELECT {agent} FROM agents a ORDER BY a.id;

-- name: save_agent
INSERT INTO agents (id, role, skills, domains, max_concurrent, manager, ephemeral, status,
                    idle_since, last_seen, registered_at, incarnation, failures, paused_until)
VALUES (%(id)s, %(role)s, %(skills)s, %(domains)s, %(max_concurrent)s, %(manager)s,
        %(ephemeral)s, %(status)s, %(idle_since)s, %(last_seen)s, %(registered_at)s,
        %(incarnation)s, %(failures)s, %(paused_until)s)
ON CONFLICT (id) DO UPDATE SET
    role = excluded.role, skills = excluded.skills, domains = excluded.domains,
    max_concurrent = excluded.max_concurrent, manager = excluded.manager,
    ephemeral = excluded.ephemeral, status = excluded.status,
    idle_since = excluded.idle_since, last_seen = excluded.last_seen,
    registered_at = excluded.registered_at, incarnation = excluded.incarnation,
    failures = excluded.failures, paused_until = excluded.paused_until;

-- name: save_agent_heard
-- Never run: `heard` is generated from the row here (migration 8).
SELECT 1;

-- name: lock_claimer
-- A claim first locks its agent's row, so that two claims of one agent cannot both pass its
-- max_concurrent. (A separate statement: under READ COMMITTED, claim_context's counts must
-- be read after the lock is granted, not from the snapshot that waited for it.)
SELECT 1 FROM agents WHERE id = %(id)s {for_update};

-- name: direct_claim
-- The everyday claim -- finish the leases given, then own queue and pool -- as one statement
-- in its own transaction: the function of migrations/0014_direct_claim_flat.sql (its steps
-- are those of 0004_direct_claim.sql, which says what it does), which refuses with SQLSTATE
-- SH001, having changed nothing, what it leaves to the general path. Each row holds every
-- column of its task, as the UPDATE that finished or leased it left the row.
SELECT * FROM direct_claim(%(fleet_lock)s, %(agent)s, %(n)s, %(now)s, %(tokens)s::text[],
                           %(finish_ids)s::bigint[], %(finish_tokens)s::text[],
                           %(finish_results)s::text[], %(settings)s, %(lease_ttl)s,
                           %(domain_bonus)s, %(locality_wait)s, %(domain_wait)s,
                           %(seen_resolution)s, %(silent_before)s);

-- name: claim_context
-- Everything a claim reads before it chooses, in one statement. `queued` here only says
-- whether the agent's queue is empty (0) or not (1): that is all the claim asks. The last
-- column: whether another agent that should be heard from has been silent past
-- heartbeat_timeout, read from agents_heard (migration 8), whose range is empty while
-- everyone heartbeats. :silent_before is now less the timeout of the settings the store
-- read last; if the settings read here have another, the store asks again (any_silent).
SELECT a.id, a.role, a.skills, a.domains, a.max_concurrent, a.manager, a.ephemeral, a.status,
       a.idle_since, a.last_seen, a.registered_at, a.incarnation,
       EXISTS (SELECT 1 FROM tasks WHERE state = 'pending' AND agent_id = a.id)::int,
       a.failures, a.paused_until,
       (SELECT count(*) FROM tasks WHERE state = 'claimed' AND agent_id = a.id),
       EXISTS (SELECT 1 FROM tasks WHERE state = 'claimed' AND lease_expires <= %(now)s),
       (SELECT count(*) FROM skillsets),
       (SELECT value FROM meta WHERE key = 'settings'),
       EXISTS (SELECT 1 FROM agents AS other
               WHERE other.heard < %(silent_before)s AND other.id <> %(id)s)
FROM agents a WHERE a.id = %(id)s;

-- name: any_silent
-- claim_context's last column again, for a timeout other than the one it was asked with.
SELECT EXISTS (SELECT 1 FROM agents AS other
               WHERE other.heard < %(silent_before)s AND other.id <> %(id)s);

-- name: queue_depths
-- Candidate victims for a steal: agents with pending tasks in their queue (tasks_queue),
-- and their status.
SELECT q.agent_id, q.depth, a.status FROM (
    SELECT agent_id, count(*) AS depth FROM tasks
    WHERE state = 'pending' AND agent_id IS NOT NULL
    GROUP BY agent_id
) AS q JOIN agents a ON a.id = q.agent_id
ORDER BY q.agent_id;

-- name: idle_agents
-- Domain first: who is idle, and so about to take work of their domains.
SELECT {agent} FROM agents a WHERE a.status = 'idle' ORDER BY a.id;


-- ============================================================ tasks: reads

-- name: get_task
SELECT {task} FROM tasks WHERE id = %(id)s;

-- name: get_tasks
SELECT {task} FROM tasks WHERE id = ANY(%(ids)s);

-- name: listed_tasks
-- Tasks by id, as a listing reads them (the ready preview).
SELECT {listed_task} FROM tasks WHERE id = ANY(%(ids)s);

-- name: share_tasks
-- Tasks this transaction relies on (the dependencies of a post or a defer): their state may
-- not change until it commits, so a dependency cannot finish unseen in between.
SELECT {task} FROM tasks WHERE id = ANY(%(ids)s) ORDER BY id {for_share};

-- name: leased_task
-- A task and the token of its lease, locked with its holder's agent row: whoever ends a
-- lease goes on to update that agent, and taking both here, in one statement, keeps the
-- lock order (task, then agent) that completions use.
WITH leased AS (
    SELECT {task}, token FROM tasks WHERE id = %(id)s {for_update}
), holder AS (
    SELECT 1 FROM agents WHERE id = (SELECT agent_id FROM leased) {for_update}
)
SELECT leased.*, (SELECT count(*) FROM holder) FROM leased;

-- name: task_by_key
SELECT {task} FROM tasks WHERE key = %(key)s;

-- name: lock_key
-- Posts with one idempotency key take turns, so the second finds the first's task.
SELECT pg_advisory_xact_lock(hashtextextended(%(key)s, 0));

-- name: list_tasks
SELECT {listed_task} FROM tasks
WHERE (%(state)s::text IS NULL OR state = %(state)s)
  AND (%(agent)s::text IS NULL OR agent_id = %(agent)s)
  AND (%(before)s::bigint IS NULL OR id < %(before)s)
  AND (%(label)s::text IS NULL OR labels::jsonb @> jsonb_build_array(%(label)s::text))
ORDER BY id DESC
LIMIT %(limit)s;

-- name: held_leases
-- What one agent holds, with the tokens (tasks_held). Rows another writer holds (a task
-- being completed right now) are skipped rather than waited for: they are ending anyway.
SELECT {task}, token FROM tasks WHERE state = 'claimed' AND agent_id = %(agent)s
ORDER BY claimed_at, id
{skip_locked};

-- name: held_leases_unlocked
SELECT {task}, token FROM tasks WHERE state = 'claimed' AND agent_id = %(agent)s
ORDER BY claimed_at, id;

-- name: claimed_tasks
SELECT {listed_task} FROM tasks WHERE state = 'claimed' ORDER BY id;

-- name: expired_leases
-- The claim's expire step: leases past their expiry (tasks_expiry). Several claimers may expire
-- leases at once; each takes the ones no other is taking.
SELECT {task} FROM tasks WHERE state = 'claimed' AND lease_expires <= %(now)s
ORDER BY lease_expires, id
LIMIT %(limit)s
{skip_locked};

-- name: state_counts
-- The live states, each counted on its own partial index.
SELECT (SELECT count(*) FROM tasks WHERE state = 'blocked'),
       (SELECT count(*) FROM tasks WHERE state = 'pending' AND agent_id IS NULL),
       (SELECT count(*) FROM tasks WHERE state = 'pending' AND agent_id IS NOT NULL),
       (SELECT count(*) FROM tasks WHERE state = 'claimed');

-- name: finished_counts
-- The finished states (the history), kept by triggers as the sums of finished_counts
-- (schema version 6): counting them would read every finished task.
SELECT state, sum(n)::bigint FROM finished_counts GROUP BY state;

-- name: pool_depth
SELECT count(*) FROM tasks WHERE state = 'pending' AND agent_id IS NULL;

-- name: server_time
-- The server's clock now (for `shoal doctor`: leases are stamped by the claimers' clocks).
SELECT extract(epoch FROM clock_timestamp())::float8;

-- name: waiting_tasks
-- Pending tasks not ready yet, and when the first is (tasks_waiting, from now on).
SELECT count(*), min(ready_at) FROM tasks WHERE state = 'pending' AND ready_at > %(now)s;

-- name: stuck_tasks
-- Blocked tasks waiting on a dead or cancelled one, looked for from the blocked ones
-- (tasks_blocked), never from the ended ones, which grow with the history.
SELECT id FROM tasks AS waiting
WHERE state = 'blocked' AND EXISTS (
    SELECT 1 FROM deps AS d JOIN tasks AS ended ON ended.id = d.depends_on
    WHERE d.task_id = waiting.id AND ended.state IN ('dead', 'cancelled'))
ORDER BY id
LIMIT %(limit)s;

-- name: pending_demand
-- Pending tasks by required skill set, counted in the pool (tasks_pool) and in the queues
-- (tasks_queue) apart, as on SQLite: each on its partial index, whatever the history.
SELECT s.skills, sum(p.n)::bigint FROM (
    SELECT skillset, count(*) AS n FROM tasks
    WHERE state = 'pending' AND agent_id IS NULL GROUP BY skillset
    UNION ALL
    SELECT skillset, count(*) FROM tasks
    WHERE state = 'pending' AND agent_id IS NOT NULL GROUP BY skillset
) AS p JOIN skillsets AS s ON s.id = p.skillset
GROUP BY s.skills;

-- name: pending_by_domain
-- Pending tasks by domain (for /metrics), counted in the pool and in the queues apart, each
-- on its partial index, as pending_demand is.
SELECT domain, sum(n)::bigint FROM (
    SELECT domain, count(*) AS n FROM tasks
    WHERE state = 'pending' AND agent_id IS NULL GROUP BY domain
    UNION ALL
    SELECT domain, count(*) FROM tasks
    WHERE state = 'pending' AND agent_id IS NOT NULL GROUP BY domain
) AS p
GROUP BY domain;


-- ============================================================ the claim cascade

-- name: queue_head
-- The own queue step, its head: highest priority first, then the largest place (seq: own
-- work newest first, then work sent to the agent oldest first -- policy.queue_place;
-- tasks_queue). Rows another claimer is taking are skipped, never waited for. Every step
-- passes over tasks not ready by now (a retry backoff or a not_before still running). It
-- reads one band of places (policy.place_band): the queue without its ready joins, or --
-- the claim's joins step -- only them.
SELECT {candidate} FROM tasks
WHERE state = 'pending' AND agent_id = %(agent)s AND ready_at <= %(now)s AND {unfull}
  AND seq BETWEEN %(place_low)s AND %(place_high)s
ORDER BY priority, seq DESC
LIMIT %(limit)s
{skip_locked};

-- name: queue_head_longest
-- The own queue step with order = longest_first: within a priority, longest expected first (tasks
-- without an estimate last), then by place. tasks_queue gives the priorities in order.
SELECT {candidate} FROM tasks
WHERE state = 'pending' AND agent_id = %(agent)s AND ready_at <= %(now)s AND {unfull}
  AND seq BETWEEN %(place_low)s AND %(place_high)s
ORDER BY priority, expected_duration DESC NULLS LAST, seq DESC
LIMIT %(limit)s
{skip_locked};

-- name: skillsets
SELECT id, skills FROM skillsets ORDER BY id;

-- name: skillset_id
SELECT id FROM skillsets WHERE skills = %(skills)s;

-- name: insert_skillset
-- Two writers may add the same set at once: the second takes the first's id.
WITH added AS (
    INSERT INTO skillsets (skills) VALUES (%(skills)s)
    ON CONFLICT (skills) DO NOTHING RETURNING id
)
SELECT id FROM added
UNION ALL
SELECT id FROM skillsets WHERE skills = %(skills)s
LIMIT 1;

-- name: pool_best
-- The pool step: the best static keys of each skill set the agent can do, one index range
-- each (tasks_pool), merged; pool_key rides along for the merge. Rows other claimers are
-- taking are skipped, and so are tasks the locality rules hold back.
SELECT c.* FROM unnest(%(skillsets)s::int[]) AS s (id)
CROSS JOIN LATERAL (
    SELECT {candidate}, pool_key FROM tasks
    WHERE state = 'pending' AND agent_id IS NULL AND skillset = s.id
      AND ready_at <= %(now)s AND {unheld} AND {unfull}
    ORDER BY pool_key DESC, id
    LIMIT %(limit)s
    {skip_locked}
) AS c
ORDER BY c.pool_key DESC, c.id
LIMIT %(limit)s;

-- name: pool_best_in_domain
-- The pool step, domain bonus: the same within one of the agent's domains (tasks_pool_domain).
SELECT c.* FROM unnest(%(skillsets)s::int[]) AS s (id)
CROSS JOIN LATERAL (
    SELECT {candidate}, pool_key FROM tasks
    WHERE state = 'pending' AND agent_id IS NULL AND skillset = s.id
      AND domain = %(domain)s AND ready_at <= %(now)s AND {unfull}
    ORDER BY pool_key DESC, id
    LIMIT %(limit)s
    {skip_locked}
) AS c
ORDER BY c.pool_key DESC, c.id
LIMIT %(limit)s;

-- name: pool_longest
-- The pool step with order = longest_first: pool tasks with an expected duration, by priority,
-- then longest, then static key (tasks_pool_longest), per skill set, merged.
SELECT c.* FROM unnest(%(skillsets)s::int[]) AS s (id)
CROSS JOIN LATERAL (
    SELECT {candidate}, pool_key FROM tasks
    WHERE state = 'pending' AND agent_id IS NULL AND expected_duration IS NOT NULL
      AND skillset = s.id AND ready_at <= %(now)s AND {unheld} AND {unfull}
    ORDER BY priority, expected_duration DESC, pool_key DESC, id
    LIMIT %(limit)s
    {skip_locked}
) AS c
ORDER BY c.priority, c.expected_duration DESC, c.pool_key DESC, c.id
LIMIT %(limit)s;

-- name: steal_tail
-- The steal step: the tail of the victim's queue that a thief may take (the fragment
-- stealable) -- the end its owner reaches last: lowest priority, smallest place first
-- (tasks_queue read backwards).
SELECT {candidate} FROM tasks
WHERE {stealable}
ORDER BY priority DESC, seq
LIMIT %(limit)s
{skip_locked};

-- name: steal_tail_longest
-- The steal step with order = longest_first: the same tail, longest expected first within the
-- lowest priority (then by place).
SELECT {candidate} FROM tasks
WHERE {stealable}
ORDER BY priority DESC, expected_duration DESC NULLS LAST, seq
LIMIT %(limit)s
{skip_locked};

-- name: lock_steals
-- Steals take turns (held until commit): the caps count every steal in a sliding window, so
-- two thieves must not both count the window before either has stolen.
SELECT pg_advisory_xact_lock(%(key)s);

-- name: next_ready
-- An idle claim: when the first task it could take that is not ready yet becomes ready --
-- in the agent's queue or the pool (tasks_waiting, read forwards from now).
SELECT min(ready_at) FROM tasks
WHERE state = 'pending' AND ready_at > %(now)s
  AND (agent_id = %(agent)s
       OR (agent_id IS NULL AND skillset = ANY(%(skillsets)s::int[])));

-- name: window_thieves
SELECT agent_id FROM events WHERE kind = 'stolen' AND at > %(since)s ORDER BY at;


-- ============================================================ tasks: transitions

-- name: insert_task
INSERT INTO tasks (title, body, payload, priority, skillset, domain, state, agent_id, pinned,
                   parent_id, key, max_attempts, lease_ttl, expected_duration, waiting_on,
                   pool_key, seq, created_at, updated_at, ready_at, retry_delay, group_name,
                   labels, posted_by)
VALUES (%(title)s, %(body)s, %(payload)s, %(priority)s, %(skillset)s, %(domain)s, %(state)s,
        %(agent)s, %(pinned)s, %(parent)s, %(key)s, %(max_attempts)s, %(lease_ttl)s,
        %(expected_duration)s, %(waiting_on)s, %(pool_key)s, %(seq)s, %(created_at)s,
        %(created_at)s, %(ready_at)s, %(retry_delay)s, %(group)s, %(labels)s,
        %(posted_by)s)
RETURNING id;

-- name: add_deps
-- Run over many rows at once: one statement with an array of depends_on.
INSERT INTO deps (task_id, depends_on) SELECT %(task)s, unnest(%(depends_on)s::bigint[]);

-- name: mark_depended_on
UPDATE tasks SET has_dependents = true WHERE id = ANY(%(ids)s) AND NOT has_dependents;

-- name: deps_of
SELECT depends_on FROM deps WHERE task_id = %(task)s ORDER BY depends_on;

-- name: dependents_of
SELECT task_id FROM deps WHERE depends_on = %(task)s ORDER BY task_id;

-- name: lease_task
-- lease_tasks for one task, without the arrays (the common claim).
UPDATE tasks SET state = 'claimed', agent_id = %(agent)s, token = %(token)s,
    lease_expires = %(expires)s, attempts = attempts + 1, claimed_at = %(now)s,
    stalled_at = NULL, stolen = stolen OR %(stolen)s, updated_at = %(now)s
WHERE id = %(id)s AND state = 'pending'
RETURNING {task};

-- name: lease_tasks
-- pending -> claimed for a batch in one statement: parallel arrays of ids, tokens, expiries
-- and stolen flags; one more attempt each. The rows were locked by the candidate query.
UPDATE tasks AS t SET state = 'claimed', agent_id = %(agent)s, token = g.token,
    lease_expires = g.expires, attempts = t.attempts + 1, claimed_at = %(now)s,
    stalled_at = NULL, stolen = t.stolen OR g.stolen, updated_at = %(now)s
FROM unnest(%(ids)s::bigint[], %(tokens)s::text[], %(expires)s::float8[],
            %(stolen)s::bool[]) AS g (id, token, expires, stolen)
WHERE t.id = g.id AND t.state = 'pending'
RETURNING {t_task};

-- name: finish_leased_one
-- finish_leased for one task: the same compare-and-set and lock order, without the arrays,
-- returning the finished task too (a completion answers with it; no second read). The
-- holders' count comes last: it only makes the locking part run.
WITH finished AS (
    UPDATE tasks SET state = 'done', result = %(result)s, lease_expires = NULL,
        finished_at = %(now)s, updated_at = %(now)s
    WHERE id = %(id)s AND token = %(token)s AND state = 'claimed' AND lease_expires > %(now)s
    RETURNING {task}, has_dependents
), holders AS (
    SELECT a.id FROM agents a WHERE a.id IN (SELECT agent_id FROM finished) {for_update}
)
SELECT id, agent_id, has_dependents, {task}, (SELECT count(*) FROM holders) FROM finished;

-- name: finish_leased
-- claimed -> done for a batch, each only under its live lease (token, state and expiry
-- checked in the same statement: a compare-and-set). The token stays, so a repeated complete
-- is recognised. Says whether any task waits on each finished one. The holders' agent rows
-- are locked in the same statement, since the completion goes on to update them: every
-- writer takes a task before its agent, never the other way round.
WITH finished AS (
    UPDATE tasks AS t SET state = 'done', result = f.result, lease_expires = NULL,
        finished_at = %(now)s, updated_at = %(now)s
    FROM unnest(%(ids)s::bigint[], %(tokens)s::text[], %(results)s::text[])
         AS f (id, token, result)
    WHERE t.id = f.id AND t.token = f.token AND t.state = 'claimed'
      AND t.lease_expires > %(now)s
    RETURNING t.id, t.agent_id, t.has_dependents
), holders AS (
    SELECT a.id FROM agents a WHERE a.id IN (SELECT agent_id FROM finished)
    ORDER BY a.id {for_update}
)
SELECT id, agent_id, has_dependents, (SELECT count(*) FROM holders) FROM finished;

-- name: set_lease_expiry
UPDATE tasks SET lease_expires = %(expires)s WHERE id = %(id)s;

-- name: requeue_task
-- claimed -> pending in a queue (or the pool), ready at ready_at (now, or after a failure's
-- retry backoff); a release refunds the attempt.
UPDATE tasks SET state = 'pending', agent_id = %(agent)s, seq = %(seq)s, lease_expires = NULL,
    attempts = attempts - %(refund)s, error = coalesce(%(error)s, error), updated_at = %(now)s,
    ready_at = %(ready_at)s
WHERE id = %(id)s;

-- name: set_ready_at
-- Retry now: a pending task waiting out its backoff or its not_before is ready at once.
UPDATE tasks SET ready_at = %(ready_at)s WHERE id = %(id)s AND state = 'pending';

-- name: bury_task
UPDATE tasks SET state = 'dead', lease_expires = NULL, error = coalesce(%(error)s, error),
    finished_at = %(now)s, updated_at = %(now)s
WHERE id = %(id)s;

-- name: block_task
-- claimed -> blocked (a deferred continuation): not ready until what it waits on is done.
UPDATE tasks SET state = 'blocked', agent_id = %(agent)s, seq = %(seq)s, waiting_on = %(waiting_on)s,
    lease_expires = NULL, attempts = attempts - 1, updated_at = %(now)s, ready_at = NULL
WHERE id = %(id)s;

-- name: release_dependents
-- A task is done: count it off every blocked task waiting on it. Under READ COMMITTED each
-- row is re-read after its lock, so two dependencies finishing at once count down correctly
-- and exactly one of them sees zero.
UPDATE tasks SET waiting_on = waiting_on - 1
WHERE state = 'blocked' AND id IN (SELECT task_id FROM deps WHERE depends_on = %(task)s)
RETURNING id, waiting_on, seq;

-- name: ready_task
-- blocked -> pending at its place (seq) in the queue it was bound for (or the pool), ready now --
-- or at the not_before it was posted with, if that is later.
UPDATE tasks SET state = 'pending', agent_id = %(agent)s, seq = %(seq)s, updated_at = %(now)s,
    ready_at = greatest(%(now)s, coalesce(ready_at, %(now)s))
WHERE id = %(id)s;

-- name: bound_tasks
SELECT * FROM (
    SELECT {candidate} FROM tasks
    WHERE state = 'pending' AND agent_id = %(agent)s AND NOT pinned
    UNION ALL
    SELECT {candidate} FROM tasks
    WHERE state = 'blocked' AND agent_id = %(agent)s AND NOT pinned
) AS bound
ORDER BY id
LIMIT %(limit)s;

-- name: move_task
UPDATE tasks SET agent_id = %(agent)s, seq = %(seq)s, stolen = stolen OR %(stolen)s,
    updated_at = %(now)s
WHERE id = %(id)s;

-- name: cancel_task
UPDATE tasks SET state = 'cancelled', lease_expires = NULL, finished_at = %(now)s,
    updated_at = %(now)s
WHERE id = %(id)s;

-- name: revive_task
UPDATE tasks SET state = %(state)s, agent_id = %(agent)s, seq = %(seq)s,
    waiting_on = %(waiting_on)s, pool_key = %(pool_key)s,
    attempts = 0, error = NULL, result = NULL, finished_at = NULL, stalled_at = NULL,
    lease_expires = NULL, updated_at = %(now)s,
    ready_at = CASE WHEN %(state)s = 'pending' THEN %(now)s::float8 END
WHERE id = %(id)s;

-- name: mark_stalled
UPDATE tasks SET stalled_at = %(now)s WHERE id = %(id)s;

-- name: set_priority
UPDATE tasks SET priority = %(priority)s, pool_key = %(pool_key)s, updated_at = %(now)s
WHERE id = %(id)s;

-- name: edit_task
-- Fleet.edit: what a task says and how it ranks; its place, lease and state stay.
UPDATE tasks SET title = %(title)s, body = %(body)s, priority = %(priority)s,
    pool_key = %(pool_key)s, skillset = %(skillset)s, domain = %(domain)s,
    labels = %(labels)s, expected_duration = %(expected_duration)s, updated_at = %(now)s
WHERE id = %(id)s;

-- name: keyed_tasks
SELECT id, priority, created_at FROM tasks
WHERE state IN ('blocked', 'pending', 'claimed') ORDER BY id;

-- name: set_pool_keys
-- Run over many rows at once: arrays of id and pool_key.
UPDATE tasks SET pool_key = k.pool_key
FROM unnest(%(id)s::bigint[], %(pool_key)s::float8[]) AS k (id, pool_key)
WHERE tasks.id = k.id;


-- ============================================================ concurrency groups

-- name: lock_groups
-- A claim that met a task of some group locks every group's row, in name order (so no two
-- claims wait on each other in a circle), until it commits: claims that meet grouped work
-- take turns, and the count it reads next, a statement of its own, sees every claim
-- committed before it. A limit changed meanwhile waits for the claim too.
SELECT name FROM groups ORDER BY name {for_update};

-- name: group_limits
-- Every group with a limit (a group without a row has none), by name.
SELECT name, max_held FROM groups ORDER BY name;

-- name: held_by_group
-- How many tasks of each group are held (claimed) now, under a lease not yet due (a due
-- lease runs nothing: the next claim takes it back): one range of tasks_group_held.
SELECT group_name, count(*) FROM tasks
WHERE state = 'claimed' AND group_name IS NOT NULL AND lease_expires > %(now)s
GROUP BY group_name;

-- name: set_group_limit
INSERT INTO groups (name, max_held) VALUES (%(name)s, %(max)s)
ON CONFLICT (name) DO UPDATE SET max_held = excluded.max_held;

-- name: clear_group_limit
DELETE FROM groups WHERE name = %(name)s RETURNING name;


-- ============================================================ wake-ups and locks

-- name: notify_work
-- New work (posted, released, expired, freed by a dependency, moved, stealable): wake the
-- agents waiting in LISTEN. Sent only by transactions that made work, since every notifying
-- commit takes PostgreSQL's notification queue lock.
SELECT pg_notify(%(channel)s, '');

-- name: lock_fleet
-- Opening or upgrading a fleet: one opener at a time. (Every writer also holds the fleet
-- lock -- shared for the everyday verbs, which run side by side on row locks, exclusive for
-- fleet-wide changes -- taken in the same message as BEGIN; see postgres.py.)
SELECT pg_advisory_xact_lock(%(key)s);


-- ============================================================ the event log

-- name: append_events
-- The events a transaction held back, written just before it commits, in the order they
-- happened (ids in that order). Run over many rows at once: one array per column.
INSERT INTO events (at, kind, task_id, agent_id, data)
SELECT * FROM unnest(%(at)s::float8[], %(kind)s::text[], %(task)s::bigint[],
                     %(agent)s::text[], %(data)s::text[]);

-- name: events_settled
-- How far the log can be read without skipping an event still being committed: the ids
-- just before the first gap whose next row is younger than the grace period (a gap is a
-- transaction in flight, or one that rolled back -- which, once old, is no gap to wait on).
-- Nor is a gap a prune left: ids up to the meta 'pruned_events' (the highest it deleted)
-- are all settled, since a prune runs alone and so after every writer that took one.
-- Nor is a gap no transaction can still fill: a writer holding a missing id took it before
-- the row after the gap was written, so its transaction began before then; when no client
-- session's transaction is that old (after a server restart, or once the writers that
-- rolled back are gone), the gap is final at once. Sessions whose start this role may not
-- see count as old.
SELECT coalesce(min(prev_id), (SELECT max(id) FROM events)) FROM (
    SELECT id, logged_at,
           lag(id) OVER (ORDER BY id) AS prev_id
    FROM events
    WHERE id > (SELECT coalesce(max(id), 0) FROM events) - 5000
) AS recent
WHERE id <> prev_id + 1 AND logged_at > clock_timestamp() - make_interval(secs => %(grace)s)
  AND id - 1 > (SELECT coalesce(max(value::bigint), 0) FROM meta WHERE key = 'pruned_events')
  AND EXISTS (
      SELECT 1 FROM pg_stat_activity
      WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
        AND datname = current_database()
        AND (xact_start IS NULL AND state IS NULL OR xact_start <= recent.logged_at)
  );

-- name: events
SELECT id, at, kind, task_id, agent_id, data FROM events
WHERE id > %(since)s AND id <= %(until)s ORDER BY id LIMIT %(limit)s;

-- name: events_newest
-- The same, the newest first (`events --tail`).
SELECT id, at, kind, task_id, agent_id, data FROM events
WHERE id > %(since)s AND id <= %(until)s ORDER BY id DESC LIMIT %(limit)s;

-- name: events_of_task
SELECT id, at, kind, task_id, agent_id, data FROM events
WHERE task_id = %(task)s AND id > %(since)s AND id <= %(until)s
  AND (%(agent)s::text IS NULL OR agent_id = %(agent)s)
ORDER BY id LIMIT %(limit)s;

-- name: events_of_task_newest
-- The same, the newest first (`events --tail`).
SELECT id, at, kind, task_id, agent_id, data FROM events
WHERE task_id = %(task)s AND id > %(since)s AND id <= %(until)s
  AND (%(agent)s::text IS NULL OR agent_id = %(agent)s)
ORDER BY id DESC LIMIT %(limit)s;

-- name: events_of_agent
SELECT id, at, kind, task_id, agent_id, data FROM events
WHERE id > %(since)s AND id <= %(until)s AND agent_id = %(agent)s ORDER BY id LIMIT %(limit)s;

-- name: events_of_agent_newest
-- The same, the newest first (`events --tail`).
SELECT id, at, kind, task_id, agent_id, data FROM events
WHERE id > %(since)s AND id <= %(until)s AND agent_id = %(agent)s ORDER BY id DESC LIMIT %(limit)s;


-- name: event_bounds
-- The log's first and last ids (the primary key's two ends: one lookup each, where one
-- SELECT of both would read the whole table).
SELECT (SELECT min(id) FROM events), (SELECT max(id) FROM events);

-- name: event_at_or_after
-- The first event from an id on: one step of the search for a time (``_first_event_at``).
SELECT id, at FROM events WHERE id >= %(id)s ORDER BY id LIMIT 1;

-- name: event_counts
-- The charts' counts: events from the window's first id on, per bucket of its width in
-- seconds, kind and the detail model.count_detail names. Only the window's rows are read.
SELECT floor((at - %(start)s) / %(width)s)::bigint AS bucket, kind,
       CASE kind
         WHEN 'posted' THEN coalesce(data::jsonb ->> 'state', '')
         WHEN 'stolen' THEN coalesce(data::jsonb ->> 'by', '')
         WHEN 'deferred' THEN CASE WHEN coalesce((data::jsonb ->> 'waiting_on')::numeric, 0) > 0
                                   THEN 'waiting' ELSE '' END
         WHEN 'cancelled' THEN coalesce(data::jsonb ->> 'was', '')
         WHEN 'retried' THEN CASE WHEN data::jsonb ->> 'was' = 'pending' THEN ''
                                  ELSE coalesce(data::jsonb ->> 'state', '') END
         WHEN 'dead' THEN coalesce(data::jsonb ->> 'cause', '')
         ELSE '' END AS detail,
       count(*)
FROM events
WHERE id >= %(first)s AND at >= %(start)s
  AND (%(agent)s::text IS NULL OR agent_id = %(agent)s)
GROUP BY 1, 2, 3;

-- name: steals_from
-- Steals from one agent's queue since the window's start, per bucket (events_steals).
SELECT floor((at - %(start)s) / %(width)s)::bigint AS bucket, count(*) FROM events
WHERE kind = 'stolen' AND at >= %(start)s AND data::jsonb ->> 'from' = %(agent)s
GROUP BY 1;


-- ============================================================ history (Fleet.prune)
-- A prune deletes finished tasks older than its cutoff, with their events and dependency
-- rows, and the old events of no task, in batches (see shoal/_pruning.py for the rules).
-- Each batch is a fleet-wide (exclusive) transaction, so nothing changes under it. The
-- newest task and the newest event always stay, as on SQLite (where they must).

-- name: prunable_tasks
-- Finished before the cutoff (tasks_finished, oldest first) and free to go: a done task
-- always (its dependents have counted it off), a dead or cancelled one only when no task
-- still in the fleet and not done waits on it (retrying that task would wait on it again).
SELECT id FROM tasks AS t
WHERE finished_at < %(cutoff)s
  AND id < (SELECT max(id) FROM tasks)
  AND (state = 'done'
       OR NOT EXISTS (SELECT 1 FROM deps AS d JOIN tasks AS w ON w.id = d.task_id
                      WHERE d.depends_on = t.id AND w.state <> 'done'))
ORDER BY finished_at
LIMIT %(limit)s;

-- name: prune_task_events
-- The events of tasks being pruned (events_by_task).
DELETE FROM events WHERE task_id = ANY(%(ids)s::bigint[]) RETURNING id;

-- name: prune_deps
-- Their dependency rows, both ways: what they waited on, and who waited on them.
DELETE FROM deps
WHERE task_id = ANY(%(ids)s::bigint[]) OR depends_on = ANY(%(ids)s::bigint[]);

-- name: prune_tasks
-- The tasks themselves; a task that is not finished is never deleted, whatever the list.
DELETE FROM tasks WHERE id = ANY(%(ids)s::bigint[]) AND finished_at IS NOT NULL
RETURNING state;

-- name: prune_untasked_events
-- Events of no task (an agent's, the fleet's) logged before the cutoff, oldest first
-- (events_untasked), never the newest of the log.
DELETE FROM events WHERE id IN (
    SELECT id FROM events
    WHERE task_id IS NULL AND at < %(cutoff)s AND id < (SELECT max(id) FROM events)
    ORDER BY at
    LIMIT %(limit)s)
RETURNING id;

-- name: prune_preview
-- A dry run: how many tasks and events a prune to the cutoff would delete, over all its
-- batches. `held` is every dead or cancelled task a task that stays waits on, directly or
-- through other held tasks; the rest of what finished before the cutoff goes (not the
-- newest task). Events: those of the tasks that go, and the old ones of no task -- the
-- newest of the log too once a task goes, since the prune's own event is then newer.
WITH RECURSIVE held (id) AS (
    SELECT d.depends_on FROM deps AS d JOIN tasks AS w ON w.id = d.task_id
    WHERE w.state <> 'done'
      AND NOT (coalesce(w.finished_at < %(cutoff)s, false)
               AND w.id < (SELECT max(id) FROM tasks))
    UNION
    SELECT d.depends_on FROM held AS h JOIN deps AS d ON d.task_id = h.id
), gone AS (
    SELECT id FROM tasks
    WHERE finished_at < %(cutoff)s AND id < (SELECT max(id) FROM tasks)
      AND (state = 'done' OR id NOT IN (SELECT id FROM held))
)
SELECT (SELECT count(*) FROM gone),
       (SELECT count(*) FROM events WHERE task_id IN (SELECT id FROM gone))
       + (SELECT count(*) FROM events
          WHERE task_id IS NULL AND at < %(cutoff)s
            AND (id < (SELECT max(id) FROM events) OR EXISTS (SELECT 1 FROM gone)));

-- fragment: schedule
-- The columns of a schedule, in the order SqlSchedules reads them.
id, template, every, cron, tz, state, next_at, created_at, last_task, posted, skipped

-- name: insert_schedule
-- A new schedule (migration 10); the store gives its id.
INSERT INTO schedules (template, every, cron, tz, state, next_at, created_at, last_task,
                       posted, skipped)
VALUES (%(template)s, %(every)s, %(cron)s, %(tz)s, %(state)s, %(next_at)s, %(created_at)s,
        %(last_task)s, %(posted)s, %(skipped)s)
RETURNING id;

-- name: get_schedule
-- Locked in a write: pause, resume and cancel change it whole.
SELECT {schedule} FROM schedules WHERE id = %(id)s {for_update};

-- name: list_schedules
SELECT {schedule} FROM schedules ORDER BY id;

-- name: save_schedule
-- What changes in a schedule's life: its state, its next tick, its occurrences.
UPDATE schedules
SET state = %(state)s, next_at = %(next_at)s, last_task = %(last_task)s,
    posted = %(posted)s, skipped = %(skipped)s
WHERE id = %(id)s;

-- name: due_schedules
-- Active schedules whose next tick has come, soonest first (schedules_due). Two writers
-- may look at once: one takes the row, the other skips it (it is being posted), and a
-- reader after that commit sees the next tick, no longer due -- so an occurrence is
-- posted once.
SELECT {schedule} FROM schedules
WHERE state = 'active' AND next_at <= %(now)s
ORDER BY next_at, id
LIMIT %(limit)s
{skip_locked};

-- name: next_schedule_at
-- The next tick of any active schedule: one entry of schedules_due, what a claim asks now
-- and then (docs/ARCHITECTURE.md, "Recurring tasks").
SELECT min(next_at) FROM schedules WHERE state = 'active';
