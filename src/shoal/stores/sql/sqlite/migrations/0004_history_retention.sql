-- shoal schema, version 4: history can end (Fleet.prune, the history_retention setting).

-- Finished tasks by the moment they finished. A prune reads them oldest first and stops at
-- its cutoff, so it never walks live work or young history, however large the fleet.
-- finished_at is set exactly when a task finishes (done, dead, cancelled) and cleared when
-- it is retried, so the index holds only history; a completion adds one entry at its end,
-- and a claim does not touch it.
CREATE INDEX tasks_finished ON tasks (finished_at) WHERE finished_at IS NOT NULL;

-- Events of no task (an agent's or the fleet's), by age: a prune deletes the old ones. A
-- task's events go with the task (events_by_task).
CREATE INDEX events_untasked ON events (at) WHERE task_id IS NULL;
