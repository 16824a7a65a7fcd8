-- Every statement the SQLite store runs, by name. See shoal/stores/_sql.py for the format.
-- Step names (expire, own queue, pool, steal) are those of the claim in _claiming.py
-- (docs/ARCHITECTURE.md, "The claim").
-- Lists arrive as one JSON array parameter, read with json_each.
--
-- The names and parameters are those of the PostgreSQL file. SQLite has one writer at a
-- time, so what PostgreSQL needs for writers side by side (row locks, advisory locks, the
-- wake-up, the settled end of the log) is trivial here: a no-op `SELECT 1`, or the same
-- statement as its unlocked twin.

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
-- typeof() reads only the record's header: `payload IS NOT NULL` would read the whole
-- value (every overflow page of a large one) only to say it is there.
id, title, body, NULL, priority, skillset, domain, state, agent_id, pinned, stolen,
parent_id, key, attempts, max_attempts, lease_ttl, expected_duration, lease_expires, NULL,
error, waiting_on, created_at, updated_at, claimed_at, finished_at, stalled_at, ready_at,
retry_delay, group_name, labels, posted_by, typeof(payload) <> 'null', typeof(result) <> 'null'

-- fragment: candidate
-- A pending task as the claim weighs it, in the order of model.Candidate.
id, title, priority, domain, agent_id, pinned, created_at, lease_ttl, attempts, skillset,
expected_duration, ready_at, group_name

-- fragment: unheld
-- policy.Locality as a condition: leave out a task of a domain the claimer does not have
-- (:own_domains) that became ready after :local_since (locality_wait), or after
-- :domain_since (domain_wait) while an idle agent of its domain can do it (the
-- pairs of :reserved_domains and :reserved_skillsets, two JSON lists). A rule that is off
-- comes as infinity.
NOT (domain IS NOT NULL
     AND domain NOT IN (SELECT value FROM json_each(:own_domains))
     AND (coalesce(ready_at, created_at) > :local_since
          OR (coalesce(ready_at, created_at) > :domain_since
              AND EXISTS (SELECT 1 FROM json_each(:reserved_skillsets) AS r
                          WHERE r.value = skillset
                            AND :reserved_domains ->> r.key = domain))))

-- fragment: unfull
-- Concurrency groups: leave out a task of a group that already holds as many tasks as its
-- limit (:full_groups, a JSON list; empty for most claims). A task of no group never is.
(group_name IS NULL OR group_name NOT IN (SELECT value FROM json_each(:full_groups)))

-- fragment: agent
-- The columns of an agent, in the order SqlTx reads them.
id, role, skills, domains, max_concurrent, manager, ephemeral, status, idle_since, last_seen,
registered_at, incarnation, queued, failures, paused_until

-- fragment: stealable
-- The tail a thief may take from: the victim's pending tasks under the eligibility rules of
-- policy.StealFilter (priority >= the minimum, never stolen, not pinned, a skill set the
-- thief can do, and the thief's domain -- or no domain, or simple work: a high priority
-- number and no skills), and not held back by the locality rules.
state = 'pending' AND agent_id = :victim AND ready_at <= :now
  AND priority >= :min_priority AND stolen = 0 AND pinned = 0
  AND skillset IN (SELECT value FROM json_each(:skillsets))
  AND (domain IS NULL
       OR domain IN (SELECT value FROM json_each(:domains))
       OR (priority >= :cross_domain_priority AND skillset IS :free_skillset))
  AND {unheld} AND {unfull}
  AND seq BETWEEN :place_low AND :place_high


-- ============================================================ opening a fleet

-- name: schema_exists
-- At open: the file is the fleet's schema, and it exists once opened.
SELECT 1;

-- name: migrations_table
-- At open: the file is marked as a shoal fleet (PRAGMA application_id, "SHOL").
SELECT application_id = 1397247820 FROM pragma_application_id();

-- name: schema_version
-- The version of the fleet in the file: PRAGMA user_version, set when it was migrated.
SELECT user_version FROM pragma_user_version();

-- name: foreign_tables
-- At open, in a file without the shoal mark: tables, or another program's mark, mean the
-- file belongs to another program.
SELECT (SELECT count(*) FROM sqlite_master WHERE type = 'table')
       + (SELECT application_id <> 0 FROM pragma_application_id());

-- name: create_migrations_table
-- The version lives in the file's header (PRAGMA user_version), not in a table.
SELECT 1;

-- name: record_migration
-- Nothing to record per migration: PRAGMA user_version takes no parameters, so the store
-- sets it (and the shoal mark) once, at the end of the migrating transaction.
SELECT 1;

-- name: lock_fleet
-- Opening or upgrading a fleet: the writer queue already makes openers take turns.
SELECT 1;


-- ============================================================ settings and counters

-- name: get_meta
-- A stored fact: the settings overrides, the last assessment.
SELECT value FROM meta WHERE key = :key;

-- name: set_meta
INSERT INTO meta (key, value) VALUES (:key, :value)
ON CONFLICT (key) DO UPDATE SET value = excluded.value;

-- name: next_seq
-- A number larger than any before it, for a queue place (policy.queue_place: +n, -n).
UPDATE counters SET value = value + 1 WHERE name = 'seq' RETURNING value;

-- name: count_finished
-- Move a finished state's kept count (schema version 6) by what this transaction did: the
-- store runs it once per state, just before commit.
UPDATE counters SET value = value + :change WHERE name = :state;

-- name: finished_state
-- Which finished state a task leaves (a retry), for the kept counts.
SELECT state FROM tasks WHERE id = :id;

-- name: next_seqs
-- :count positions at once (a batch of posts): the last of them; the others precede it.
UPDATE counters SET value = value + :count WHERE name = 'seq' RETURNING value;


-- ============================================================ agents

-- name: get_agent
SELECT {agent} FROM agents WHERE id = :id;

-- name: lock_agent
-- An agent this transaction is about to change: one writer at a time, so a plain read.
SELECT {agent} FROM agents WHERE id = :id;

-- name: list_agents
SELECT {agent} FROM agents ORDER BY id;

-- name: save_agent
-- Insert or update an agent; `queued` belongs to the triggers and is never written here.
-- `heard` is set on insert only; save_agent_heard keeps it (migration 8 says why).
INSERT INTO agents (id, role, skills, domains, max_concurrent, manager, ephemeral, status,
                    idle_since, last_seen, registered_at, incarnation, failures, paused_until,
                    heard)
VALUES (:id, :role, :skills, :domains, :max_concurrent, :manager, :ephemeral, :status,
        :idle_since, :last_seen, :registered_at, :incarnation, :failures, :paused_until,
        :heard)
ON CONFLICT (id) DO UPDATE SET
    role = excluded.role, skills = excluded.skills, domains = excluded.domains,
    max_concurrent = excluded.max_concurrent, manager = excluded.manager,
    ephemeral = excluded.ephemeral, status = excluded.status,
    idle_since = excluded.idle_since, last_seen = excluded.last_seen,
    registered_at = excluded.registered_at, incarnation = excluded.incarnation,
    failures = excluded.failures, paused_until = excluded.paused_until;

-- name: save_agent_heard
-- An agent's `heard`, written only when it changes, so its index is left alone otherwise.
UPDATE agents SET heard = :heard WHERE id = :id AND heard IS NOT :heard;

-- name: lock_claimer
-- Never run: one writer at a time, so two claims of one agent cannot overlap.
SELECT 1;

-- name: direct_claim
-- Never run: a claim here costs no round trips, so the general path is the only one.
SELECT 1;

-- name: claim_context
-- Everything a claim reads before it chooses, in one statement: the agent, how many leases
-- it holds (tasks_held), whether any lease is due (tasks_expiry), how many skill sets
-- exist (so the store's cache of them can be trusted), and whether another agent that
-- should be heard from has been silent past heartbeat_timeout (agents_heard, migration 8:
-- the range is empty while everyone heartbeats). :silent_before is now less the timeout of
-- the settings the store read last; if the settings read here have another timeout, the
-- store asks again with theirs (any_silent): reading the timeout out of the stored JSON
-- cost every claim a fifth of this statement.
SELECT {agent},
       (SELECT count(*) FROM tasks WHERE state = 'claimed' AND agent_id = :id),
       EXISTS (SELECT 1 FROM tasks WHERE state = 'claimed' AND lease_expires <= :now),
       (SELECT count(*) FROM skillsets),
       (SELECT value FROM meta WHERE key = 'settings'),
       EXISTS (SELECT 1 FROM agents AS other WHERE other.heard < :silent_before
                                              AND other.id <> :id)
FROM agents WHERE id = :id;

-- name: any_silent
-- claim_context's last column again, for a timeout other than the one it was asked with.
SELECT EXISTS (SELECT 1 FROM agents AS other WHERE other.heard < :silent_before
                                               AND other.id <> :id);

-- name: queue_depths
-- Candidate victims for a steal: agents with pending tasks in their queue, and their status.
SELECT id, queued, status FROM agents WHERE queued > 0 ORDER BY id;

-- name: idle_agents
-- Domain first: who is idle, and so about to take work of their domains.
SELECT {agent} FROM agents WHERE status = 'idle' ORDER BY id;


-- ============================================================ tasks: reads

-- name: get_task
SELECT {task} FROM tasks WHERE id = :id;

-- name: get_tasks
SELECT {task} FROM tasks WHERE id IN (SELECT value FROM json_each(:ids));

-- name: listed_tasks
-- Tasks by id, as a listing reads them (the ready preview).
SELECT {listed_task} FROM tasks WHERE id IN (SELECT value FROM json_each(:ids));

-- name: share_tasks
-- Tasks this transaction relies on: one writer at a time, so a plain read.
SELECT {task} FROM tasks WHERE id IN (SELECT value FROM json_each(:ids)) ORDER BY id;

-- name: leased_task
-- A task and the token of its current (or last) lease, to check a caller's lease.
SELECT {task}, token FROM tasks WHERE id = :id;

-- name: task_by_key
-- The idempotency key: a repeated post returns the first task.
SELECT {task} FROM tasks WHERE key = :key;

-- name: lock_key
-- Never run: posts with one idempotency key take turns in the writer queue anyway.
SELECT 1;

-- name: list_tasks
-- Newest first, optionally filtered; for people, so a scan is acceptable.
SELECT {listed_task} FROM tasks
WHERE (:state IS NULL OR state = :state)
  AND (:agent IS NULL OR agent_id = :agent)
  AND (:before IS NULL OR id < :before)
  AND (:label IS NULL OR EXISTS (SELECT 1 FROM json_each(labels) WHERE value = :label))
ORDER BY id DESC
LIMIT :limit;

-- name: held_leases
-- What one agent holds a lease on, with the tokens (tasks_held index).
SELECT {task}, token FROM tasks WHERE state = 'claimed' AND agent_id = :agent
ORDER BY claimed_at, id;

-- name: held_leases_unlocked
SELECT {task}, token FROM tasks WHERE state = 'claimed' AND agent_id = :agent
ORDER BY claimed_at, id;

-- name: claimed_tasks
-- Every lease (status, reap), read from tasks_expiry and then sorted: `+id` keeps SQLite from
-- walking the whole table in id order instead, which costs as much as the history is long.
SELECT {listed_task} FROM tasks WHERE state = 'claimed' ORDER BY +id;

-- name: expired_leases
-- The claim's expire step: leases past their expiry, soonest first (tasks_expiry index).
SELECT {task} FROM tasks WHERE state = 'claimed' AND lease_expires <= :now
ORDER BY lease_expires, id
LIMIT :limit;

-- name: state_counts
-- The live states, each counted on its own partial index.
SELECT (SELECT count(*) FROM tasks WHERE state = 'blocked'),
       (SELECT count(*) FROM tasks WHERE state = 'pending' AND agent_id IS NULL),
       (SELECT count(*) FROM tasks WHERE state = 'pending' AND agent_id IS NOT NULL),
       (SELECT count(*) FROM tasks WHERE state = 'claimed');

-- name: finished_counts
-- The finished states (the history), kept in counters (schema version 6; count_finished):
-- counting them would read every finished task.
SELECT name, value FROM counters WHERE name IN ('done', 'dead', 'cancelled');

-- name: pool_depth
SELECT count(*) FROM tasks WHERE state = 'pending' AND agent_id IS NULL;

-- name: server_time
-- An embedded store has no server: it runs on this machine's clock.
SELECT NULL;

-- name: waiting_tasks
-- Pending tasks not ready yet, and when the first is (tasks_waiting, from :now on; a task
-- is never ready before it was made, so a waiting one has ready_at > created_at).
SELECT count(*), min(ready_at) FROM tasks
WHERE state = 'pending' AND ready_at > created_at AND ready_at > :now;

-- name: stuck_tasks
-- Blocked tasks waiting on a dead or cancelled one: from the blocked (tasks_blocked, in id
-- order), each looked up in deps and its dependencies by id -- never from the ended ones,
-- which grow with the history.
SELECT id FROM tasks AS waiting
WHERE state = 'blocked' AND EXISTS (
    SELECT 1 FROM deps AS d JOIN tasks AS ended ON ended.id = d.depends_on
    WHERE d.task_id = waiting.id AND ended.state IN ('dead', 'cancelled'))
ORDER BY id
LIMIT :limit;

-- name: pending_demand
-- Pending tasks by required skill set (for assess: skills no live agent has), counted in
-- the pool (tasks_pool) and in the queues (tasks_queue) apart: there is no index of every
-- pending task, and without one SQLite would read the whole table.
SELECT s.skills, sum(p.n) FROM (
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
SELECT domain, sum(n) FROM (
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
-- work newest first, then work sent to the agent oldest first -- policy.queue_place)
-- (tasks_queue index, read forwards). Every step passes over tasks not ready by :now (a
-- retry backoff or a not_before still running). It reads one band of places
-- (policy.place_band): the queue without its ready joins, or -- the claim's joins step --
-- only them.
SELECT {candidate} FROM tasks
WHERE state = 'pending' AND agent_id = :agent AND ready_at <= :now AND {unfull}
  AND seq BETWEEN :place_low AND :place_high
ORDER BY priority, seq DESC
LIMIT :limit;

-- name: queue_head_longest
-- The own queue step with order = longest_first: within a priority, longest expected first (tasks
-- without an estimate last), then by place. tasks_queue gives the priorities in order; each
-- priority's tasks are sorted as they are read.
SELECT {candidate} FROM tasks
WHERE state = 'pending' AND agent_id = :agent AND ready_at <= :now AND {unfull}
  AND seq BETWEEN :place_low AND :place_high
ORDER BY priority, expected_duration DESC NULLS LAST, seq DESC
LIMIT :limit;

-- name: skillsets
SELECT id, skills FROM skillsets ORDER BY id;

-- name: skillset_id
SELECT id FROM skillsets WHERE skills = :skills;

-- name: insert_skillset
INSERT INTO skillsets (skills) VALUES (:skills) RETURNING id;

-- name: pool_best
-- The pool step: the best static keys of one skill set (tasks_pool index). The store runs it
-- once per skill set the agent can do and merges; pool_key rides along for the merge. (So
-- the pool statements take one :skillset where PostgreSQL's take the list.)
-- Tasks the locality rules hold back are passed over.
SELECT {candidate}, pool_key FROM tasks
WHERE state = 'pending' AND agent_id IS NULL AND skillset = :skillset AND ready_at <= :now
  AND {unheld} AND {unfull}
ORDER BY pool_key DESC, id
LIMIT :limit;

-- name: pool_best_in_domain
-- The pool step, domain bonus: the same within one of the agent's domains
-- (tasks_pool_domain index). Its own domain's work is never held back.
SELECT {candidate}, pool_key FROM tasks
WHERE state = 'pending' AND agent_id IS NULL AND skillset = :skillset AND domain = :domain
  AND ready_at <= :now AND {unfull}
ORDER BY pool_key DESC, id
LIMIT :limit;

-- name: pool_longest
-- The pool step with order = longest_first: pool tasks with an expected duration, by priority,
-- then longest, then static key (tasks_pool_longest index); the locality rules as above.
SELECT {candidate}, pool_key FROM tasks
WHERE state = 'pending' AND agent_id IS NULL AND expected_duration IS NOT NULL
  AND skillset = :skillset AND ready_at <= :now AND {unheld} AND {unfull}
ORDER BY priority, expected_duration DESC, pool_key DESC, id
LIMIT :limit;

-- name: steal_tail
-- The steal step: the tail of the victim's queue that a thief may take (the fragment
-- stealable) -- the end its owner reaches last: lowest priority, smallest place first
-- (tasks_queue index, read backwards).
SELECT {candidate} FROM tasks
WHERE {stealable}
ORDER BY priority DESC, seq
LIMIT :limit;

-- name: steal_tail_longest
-- The steal step with order = longest_first: the same tail, longest expected first within the
-- lowest priority (then by place).
SELECT {candidate} FROM tasks
WHERE {stealable}
ORDER BY priority DESC, expected_duration DESC NULLS LAST, seq
LIMIT :limit;

-- name: lock_steals
-- Never run: one writer at a time, so thieves already take turns.
SELECT 1;

-- name: next_ready
-- An idle claim: when the first task it could take that is not ready yet becomes ready --
-- in the agent's queue or the pool (tasks_waiting index, read forwards from :now).
SELECT min(ready_at) FROM tasks
WHERE state = 'pending' AND ready_at > created_at AND ready_at > :now
  AND (agent_id = :agent
       OR (agent_id IS NULL AND skillset IN (SELECT value FROM json_each(:skillsets))));

-- name: window_thieves
-- The steal caps' sliding window: who stole since when (events_steals index).
SELECT agent_id FROM events WHERE kind = 'stolen' AND at > :since ORDER BY at;


-- ============================================================ tasks: transitions

-- name: insert_task
INSERT INTO tasks (title, body, payload, priority, skillset, domain, state, agent_id, pinned,
                   parent_id, key, max_attempts, lease_ttl, expected_duration, waiting_on,
                   pool_key, seq, created_at, updated_at, ready_at, retry_delay, group_name,
                   labels, posted_by)
VALUES (:title, :body, :payload, :priority, :skillset, :domain, :state, :agent, :pinned,
        :parent, :key, :max_attempts, :lease_ttl, :expected_duration, :waiting_on,
        :pool_key, :seq, :created_at, :created_at, :ready_at, :retry_delay, :group, :labels,
        :posted_by)
RETURNING id;

-- name: add_deps
-- Run over many rows at once: once per row (executemany), a cached statement.
INSERT INTO deps (task_id, depends_on) VALUES (:task, :depends_on);

-- name: mark_depended_on
-- So that finishing a task knows, from its own row, whether anyone waits on it.
UPDATE tasks SET has_dependents = 1 WHERE id IN (SELECT value FROM json_each(:ids));

-- name: deps_of
SELECT depends_on FROM deps WHERE task_id = :task ORDER BY depends_on;

-- name: dependents_of
SELECT task_id FROM deps WHERE depends_on = :task ORDER BY task_id;

-- name: lease_task
-- lease_tasks for one task, without the JSON list (the common claim).
UPDATE tasks SET state = 'claimed', agent_id = :agent, token = :token,
    lease_expires = :expires, attempts = attempts + 1, claimed_at = :now,
    stalled_at = NULL, stolen = stolen OR :stolen, updated_at = :now
WHERE id = :id AND state = 'pending'
RETURNING {task};

-- name: lease_tasks
-- pending -> claimed for a batch, in one statement: parallel JSON lists of ids, tokens,
-- expiries and stolen flags (the n-th of each is read by its index); one more attempt each.
UPDATE tasks SET state = 'claimed', agent_id = :agent, token = g.g_token,
    lease_expires = g.g_expires, attempts = attempts + 1, claimed_at = :now,
    stalled_at = NULL, stolen = stolen OR g.g_stolen, updated_at = :now
FROM (SELECT value AS g_id, :tokens ->> key AS g_token, :expires ->> key AS g_expires,
             :stolen ->> key AS g_stolen
      FROM json_each(:ids)) AS g
WHERE tasks.id = g.g_id AND tasks.state = 'pending'
RETURNING {task};

-- name: finish_leased_one
-- finish_leased for one task: the same compare-and-set without the JSON list, returning the
-- finished task too (a completion answers with it; no second read).
UPDATE tasks SET state = 'done', result = :result, lease_expires = NULL, finished_at = :now,
    updated_at = :now
WHERE id = :id AND token = :token AND state = 'claimed' AND lease_expires > :now
RETURNING id, agent_id, has_dependents, {task};

-- name: finish_leased
-- claimed -> done for a batch (parallel JSON lists of ids, tokens and results), each only
-- under its live lease (token, state and expiry checked in the same statement: a
-- compare-and-set). The token stays, so a repeated complete is recognised. Says whether any
-- task waits on each finished one.
UPDATE tasks SET state = 'done', result = f.f_result, lease_expires = NULL,
    finished_at = :now, updated_at = :now
FROM (SELECT value AS f_id, :tokens ->> key AS f_token, :results ->> key AS f_result
      FROM json_each(:ids)) AS f
WHERE tasks.id = f.f_id AND tasks.token = f.f_token AND tasks.state = 'claimed'
  AND tasks.lease_expires > :now
RETURNING id, agent_id, has_dependents;

-- name: set_lease_expiry
UPDATE tasks SET lease_expires = :expires WHERE id = :id;

-- name: requeue_task
-- claimed -> pending in a queue (or the pool), ready at :ready_at (now, or after a failure's
-- retry backoff); a release refunds the attempt.
UPDATE tasks SET state = 'pending', agent_id = :agent, seq = :seq, lease_expires = NULL,
    attempts = attempts - :refund, error = coalesce(:error, error), updated_at = :now,
    ready_at = :ready_at
WHERE id = :id;

-- name: set_ready_at
-- Retry now: a pending task waiting out its backoff or its not_before is ready at once.
UPDATE tasks SET ready_at = :ready_at WHERE id = :id AND state = 'pending';

-- name: bury_task
-- claimed -> dead: attempts used up, or a failure not to retry.
UPDATE tasks SET state = 'dead', lease_expires = NULL, error = coalesce(:error, error),
    finished_at = :now, updated_at = :now
WHERE id = :id;

-- name: block_task
-- claimed -> blocked: a deferred continuation, bound for its agent's queue; the attempt is
-- refunded, and it is not ready until what it waits on is done.
UPDATE tasks SET state = 'blocked', agent_id = :agent, seq = :seq, waiting_on = :waiting_on,
    lease_expires = NULL, attempts = attempts - 1, updated_at = :now, ready_at = NULL
WHERE id = :id;

-- name: release_dependents
-- A task is done: count it off every blocked task waiting on it.
UPDATE tasks SET waiting_on = waiting_on - 1
WHERE state = 'blocked' AND id IN (SELECT task_id FROM deps WHERE depends_on = :task)
RETURNING id, waiting_on, seq;

-- name: ready_task
-- blocked -> pending at its place (seq) in the queue it was bound for (or the pool), ready now --
-- or at the not_before it was posted with, if that is later.
UPDATE tasks SET state = 'pending', agent_id = :agent, seq = :seq, updated_at = :now,
    ready_at = max(:now, coalesce(ready_at, :now))
WHERE id = :id;

-- name: bound_tasks
-- An agent is leaving: the unpinned tasks queued for it (tasks_queue) or blocked and bound
-- for its queue (tasks_blocked), oldest first.
SELECT * FROM (
    SELECT {candidate} FROM tasks
    WHERE state = 'pending' AND agent_id = :agent AND pinned = 0
    UNION ALL
    SELECT {candidate} FROM tasks
    WHERE state = 'blocked' AND agent_id = :agent AND pinned = 0
)
ORDER BY id
LIMIT :limit;

-- name: move_task
-- A pending task changes queue: a rebalance move, or back to the pool.
UPDATE tasks SET agent_id = :agent, seq = :seq, stolen = stolen OR :stolen, updated_at = :now
WHERE id = :id;

-- name: cancel_task
UPDATE tasks SET state = 'cancelled', lease_expires = NULL, finished_at = :now,
    updated_at = :now
WHERE id = :id;

-- name: revive_task
-- dead or cancelled -> pending (or blocked), with fresh attempts.
UPDATE tasks SET state = :state, agent_id = :agent, seq = :seq, waiting_on = :waiting_on,
    pool_key = :pool_key,
    attempts = 0, error = NULL, result = NULL, finished_at = NULL, stalled_at = NULL,
    lease_expires = NULL, updated_at = :now,
    ready_at = CASE WHEN :state = 'pending' THEN :now END
WHERE id = :id;

-- name: mark_stalled
UPDATE tasks SET stalled_at = :now WHERE id = :id;

-- name: set_priority
UPDATE tasks SET priority = :priority, pool_key = :pool_key, updated_at = :now WHERE id = :id;

-- name: edit_task
-- Fleet.edit: what a task says and how it ranks; its place, lease and state stay.
UPDATE tasks SET title = :title, body = :body, priority = :priority, pool_key = :pool_key,
    skillset = :skillset, domain = :domain, labels = :labels,
    expected_duration = :expected_duration, updated_at = :now
WHERE id = :id;

-- name: keyed_tasks
-- Unfinished tasks, to recompute pool keys after the aging setting changes.
SELECT id, priority, created_at FROM tasks
WHERE state IN ('blocked', 'pending', 'claimed') ORDER BY id;

-- name: set_pool_keys
-- Run over many rows at once: once per row (executemany).
UPDATE tasks SET pool_key = :pool_key WHERE id = :id;


-- ============================================================ concurrency groups

-- name: lock_groups
-- Never run: one writer at a time, so the counts below stay true until the commit.
SELECT 1;

-- name: group_limits
-- Every group with a limit (a group without a row has none), by name.
SELECT name, max_held FROM groups ORDER BY name;

-- name: held_by_group
-- How many tasks of each group are held (claimed) now, under a lease not yet due (a due
-- lease runs nothing: the next claim takes it back): one range of tasks_group_held.
SELECT group_name, count(*) FROM tasks
WHERE state = 'claimed' AND group_name IS NOT NULL AND lease_expires > :now
GROUP BY group_name;

-- name: set_group_limit
INSERT INTO groups (name, max_held) VALUES (:name, :max)
ON CONFLICT (name) DO UPDATE SET max_held = excluded.max_held;

-- name: clear_group_limit
DELETE FROM groups WHERE name = :name RETURNING name;


-- ============================================================ wake-ups

-- name: notify_work
-- Never run: SQLite cannot notify; waiters poll PRAGMA data_version instead.
SELECT 1;


-- ============================================================ the event log

-- name: append_events
-- The events a transaction held back, written just before it commits, in the order they
-- happened. Run over many rows at once: once per row (executemany).
INSERT INTO events (at, kind, task_id, agent_id, data) VALUES (:at, :kind, :task, :agent, :data);

-- name: events_settled
-- How far the log can be read: all of it. Writers take turns and write their events before
-- they commit, so the log has no gap to wait on.
SELECT max(id) FROM events;

-- name: events
SELECT id, at, kind, task_id, agent_id, data FROM events
WHERE id > :since AND id <= :until ORDER BY id LIMIT :limit;

-- name: events_newest
-- The same, the newest first (`events --tail`).
SELECT id, at, kind, task_id, agent_id, data FROM events
WHERE id > :since AND id <= :until ORDER BY id DESC LIMIT :limit;

-- name: events_of_task
-- A task's history (events_by_task), optionally only one agent's part of it.
SELECT id, at, kind, task_id, agent_id, data FROM events
WHERE task_id = :task AND id > :since AND id <= :until
  AND (:agent IS NULL OR agent_id = :agent)
ORDER BY id LIMIT :limit;

-- name: events_of_task_newest
-- The same, the newest first (`events --tail`).
SELECT id, at, kind, task_id, agent_id, data FROM events
WHERE task_id = :task AND id > :since AND id <= :until
  AND (:agent IS NULL OR agent_id = :agent)
ORDER BY id DESC LIMIT :limit;

-- name: events_of_agent
-- No index on agent (see the schema): this reads the log forward from `since`.
SELECT id, at, kind, task_id, agent_id, data FROM events
WHERE id > :since AND id <= :until AND agent_id = :agent ORDER BY id LIMIT :limit;

-- name: events_of_agent_newest
-- The same, the newest first (`events --tail`).
SELECT id, at, kind, task_id, agent_id, data FROM events
WHERE id > :since AND id <= :until AND agent_id = :agent ORDER BY id DESC LIMIT :limit;


-- name: event_bounds
-- The log's first and last ids (the primary key's two ends: one lookup each, where one
-- SELECT of both would read the whole table).
SELECT (SELECT min(id) FROM events), (SELECT max(id) FROM events);

-- name: event_at_or_after
-- The first event from an id on: one step of the search for a time (``_first_event_at``).
SELECT id, at FROM events WHERE id >= :id ORDER BY id LIMIT 1;

-- name: event_counts
-- The charts' counts: events from :first on (the window's first id), per bucket of :width
-- seconds, kind and the detail model.count_detail names. Only the window's rows are read.
SELECT CAST((at - :start) / :width AS INTEGER) AS bucket, kind,
       CASE kind
         WHEN 'posted' THEN coalesce(json_extract(data, '$.state'), '')
         WHEN 'stolen' THEN coalesce(json_extract(data, '$.by'), '')
         WHEN 'deferred' THEN CASE WHEN coalesce(json_extract(data, '$.waiting_on'), 0) > 0
                                   THEN 'waiting' ELSE '' END
         WHEN 'cancelled' THEN coalesce(json_extract(data, '$.was'), '')
         WHEN 'retried' THEN CASE WHEN json_extract(data, '$.was') = 'pending' THEN ''
                                  ELSE coalesce(json_extract(data, '$.state'), '') END
         WHEN 'dead' THEN coalesce(json_extract(data, '$.cause'), '')
         ELSE '' END AS detail,
       count(*)
FROM events
WHERE id >= :first AND at >= :start AND (:agent IS NULL OR agent_id = :agent)
GROUP BY bucket, kind, detail;

-- name: steals_from
-- Steals from one agent's queue since :start, per bucket (events_steals).
SELECT CAST((at - :start) / :width AS INTEGER) AS bucket, count(*) FROM events
WHERE kind = 'stolen' AND at >= :start AND json_extract(data, '$.from') = :agent
GROUP BY bucket;


-- ============================================================ history (Fleet.prune)
-- A prune deletes finished tasks older than its cutoff, with their events and dependency
-- rows, and the old events of no task, in batches (see shoal/_pruning.py for the rules).
-- The newest task and the newest event always stay: SQLite gives a new row the largest id
-- plus one, so deleting the newest would hand its id out again.

-- name: prunable_tasks
-- Finished before :cutoff (tasks_finished, oldest first) and free to go: a done task always
-- (its dependents have counted it off), a dead or cancelled one only when no task still in
-- the fleet and not done waits on it (retrying that task would wait on it again).
SELECT id FROM tasks AS t
WHERE finished_at < :cutoff
  AND id < (SELECT max(id) FROM tasks)
  AND (state = 'done'
       OR NOT EXISTS (SELECT 1 FROM deps AS d JOIN tasks AS w ON w.id = d.task_id
                      WHERE d.depends_on = t.id AND w.state <> 'done'))
ORDER BY finished_at
LIMIT :limit;

-- name: prune_task_events
-- The events of tasks being pruned (events_by_task).
DELETE FROM events WHERE task_id IN (SELECT value FROM json_each(:ids)) RETURNING id;

-- name: prune_deps
-- Their dependency rows, both ways: what they waited on, and who waited on them.
DELETE FROM deps
WHERE task_id IN (SELECT value FROM json_each(:ids))
   OR depends_on IN (SELECT value FROM json_each(:ids));

-- name: prune_tasks
-- The tasks themselves; a task that is not finished is never deleted, whatever the list.
DELETE FROM tasks WHERE id IN (SELECT value FROM json_each(:ids)) AND finished_at IS NOT NULL
RETURNING state;

-- name: prune_untasked_events
-- Events of no task (an agent's, the fleet's) logged before :cutoff, oldest first
-- (events_untasked), never the newest of the log.
DELETE FROM events WHERE id IN (
    SELECT id FROM events
    WHERE task_id IS NULL AND at < :cutoff AND id < (SELECT max(id) FROM events)
    ORDER BY at
    LIMIT :limit)
RETURNING id;

-- name: prune_preview
-- A dry run: how many tasks and events a prune to :cutoff would delete, over all its
-- batches. `held` is every dead or cancelled task a task that stays waits on, directly or
-- through other held tasks; the rest of what finished before :cutoff goes (not the newest
-- task). Events: those of the tasks that go, and the old ones of no task -- the newest of
-- the log too once a task goes, since the prune's own event is then newer.
WITH RECURSIVE held (id) AS (
    SELECT d.depends_on FROM deps AS d JOIN tasks AS w ON w.id = d.task_id
    WHERE w.state <> 'done'
      AND NOT (coalesce(w.finished_at < :cutoff, 0) AND w.id < (SELECT max(id) FROM tasks))
    UNION
    SELECT d.depends_on FROM held AS h JOIN deps AS d ON d.task_id = h.id
), gone AS (
    SELECT id FROM tasks
    WHERE finished_at < :cutoff AND id < (SELECT max(id) FROM tasks)
      AND (state = 'done' OR id NOT IN (SELECT id FROM held))
)
SELECT (SELECT count(*) FROM gone),
       (SELECT count(*) FROM events WHERE task_id IN (SELECT id FROM gone))
       + (SELECT count(*) FROM events
          WHERE task_id IS NULL AND at < :cutoff
            AND (id < (SELECT max(id) FROM events) OR EXISTS (SELECT 1 FROM gone)));

-- fragment: schedule
-- The columns of a schedule, in the order SqlSchedules reads them.
id, template, every, cron, tz, state, next_at, created_at, last_task, posted, skipped

-- name: insert_schedule
-- A new schedule (migration 10); the store gives its id.
INSERT INTO schedules (template, every, cron, tz, state, next_at, created_at, last_task,
                       posted, skipped)
VALUES (:template, :every, :cron, :tz, :state, :next_at, :created_at, :last_task, :posted,
        :skipped)
RETURNING id;

-- name: get_schedule
SELECT {schedule} FROM schedules WHERE id = :id;

-- name: list_schedules
SELECT {schedule} FROM schedules ORDER BY id;

-- name: save_schedule
-- What changes in a schedule's life: its state, its next tick, its occurrences.
UPDATE schedules
SET state = :state, next_at = :next_at, last_task = :last_task, posted = :posted,
    skipped = :skipped
WHERE id = :id;

-- name: due_schedules
-- Active schedules whose next tick has come, soonest first (schedules_due). One writer at a
-- time here: nobody else can be posting them.
SELECT {schedule} FROM schedules
WHERE state = 'active' AND next_at <= :now
ORDER BY next_at, id
LIMIT :limit;

-- name: next_schedule_at
-- The next tick of any active schedule: one entry of schedules_due, what a claim asks now
-- and then (docs/ARCHITECTURE.md, "Recurring tasks").
SELECT min(next_at) FROM schedules WHERE state = 'active';
