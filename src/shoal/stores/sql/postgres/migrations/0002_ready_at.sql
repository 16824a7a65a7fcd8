-- shoal schema, version 2: when each task became ready, and the pool ranked longest first.

-- The locality rules (domain_wait, locality_wait) count from the moment a task became ready
-- to run: posted pending, freed by its dependencies, or pending again after a release, a
-- failure or an expired lease. NULL while it is blocked.
ALTER TABLE tasks ADD COLUMN ready_at double precision;

-- Tasks already in the fleet: a pending one became ready when it last changed (the latest
-- it can have been); a blocked one is not ready; the others were ready once, when posted.
UPDATE tasks SET ready_at = CASE state
    WHEN 'blocked' THEN NULL
    WHEN 'pending' THEN updated_at
    ELSE created_at
END;

-- The claim's pool step with order = longest_first: pool tasks that carry an expected
-- duration, by priority and then longest first. Tasks without one are not in it (they rank
-- after those that have one), so a fleet that never sets expected_duration pays nothing.
CREATE INDEX tasks_pool_longest ON tasks (skillset, priority, expected_duration DESC,
                                          pool_key DESC, id)
    WHERE state = 'pending' AND agent_id IS NULL AND expected_duration IS NOT NULL;
