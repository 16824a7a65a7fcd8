-- shoal schema, version 5 (SQLite): the index of pending tasks that are not ready yet holds
-- only the tasks whose ready_at was moved past the moment they were made.
--
-- A task is never ready before it was made, so a pending task can be waiting (ready_at in
-- the future) only if its ready_at was set later than its created_at: posted with a
-- not_before, pending again after a failure's retry backoff, a release or an expired lease,
-- freed by its dependencies, or retried. A task posted to be claimed at once (the common
-- case) has ready_at = created_at and is not in the index, so claiming it writes one index
-- page less.
DROP INDEX tasks_waiting;
CREATE INDEX tasks_waiting ON tasks (ready_at) WHERE state = 'pending' AND ready_at > created_at;
