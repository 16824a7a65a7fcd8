-- shoal schema, version 3: retry backoff, delayed tasks, and the circuit breaker.

-- A pending task is claimable once its ready_at has come: a failed task waits out its retry
-- backoff, a task posted with not_before waits for that moment. retry_delay is a task's own
-- first backoff (NULL: the fleet's retry_delay setting).
ALTER TABLE tasks ADD COLUMN retry_delay REAL;

-- The circuit breaker: how many tasks an agent failed in a row (a completion resets it), and
-- until when it is paused after failure_streak of them (NULL: not paused).
ALTER TABLE agents ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN paused_until REAL;

-- Pending tasks by the moment they become ready: an idle claim asks when the next waiting
-- task it could take is due (its retry_at), reading forwards from now.
CREATE INDEX tasks_waiting ON tasks (ready_at) WHERE state = 'pending';
