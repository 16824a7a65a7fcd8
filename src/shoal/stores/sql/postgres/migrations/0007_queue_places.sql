-- shoal schema, version 7, for PostgreSQL: an agent's queue runs the work others sent it in
-- the order it came.
--
-- A queued task's place (seq) used to be a number that only grew, the head of a queue the
-- largest: newest first, whoever posted it, so two steps posted to one agent ran in the
-- wrong order. Now its sign says whose work it is (policy.queue_place): the agent's own --
-- a child of a task it holds or held, a task it started (a deferred continuation, a task
-- handed back) -- keeps +n, in front and newest first; work others sent it gets -n,
-- behind and oldest first. The index and the claim's queries are unchanged: the head is
-- still the largest place. This gives the tasks already queued the places they would have
-- been given.
UPDATE tasks SET seq = -seq
WHERE state IN ('pending', 'blocked') AND agent_id IS NOT NULL AND seq > 0
    AND claimed_at IS NULL
    AND NOT EXISTS (
        SELECT 1 FROM tasks AS parent
        WHERE parent.id = tasks.parent_id AND parent.agent_id = tasks.agent_id
    );
