-- shoal schema, version 11, for PostgreSQL: concurrency groups -- "one deploy at a time".
--
-- A task may name a group (group_name); a group may have a limit (groups.max_held): at
-- most that many of its tasks are held (claimed) at once, fleet-wide. A claim counts a
-- group's held tasks only when a candidate it found has a group (_claiming.Holds). Claims
-- run side by side here, so before counting it locks every group's row (lock_groups, in
-- name order: no two claims wait on each other in a circle) and keeps the lock until it
-- commits; the count, a statement of its own, then sees every claim committed before it.
-- tasks_group_held makes that count one short index range; tasks of no group are not in
-- it. A group with no row has no limit.
ALTER TABLE tasks ADD COLUMN group_name text;
CREATE INDEX tasks_group_held ON tasks (group_name)
    WHERE state = 'claimed' AND group_name IS NOT NULL;
CREATE TABLE groups (
    name     text PRIMARY KEY,
    max_held integer NOT NULL CHECK (max_held > 0)
);

-- The direct claim takes no lock on a group, so it must never hand out a task of a group
-- with a limit: the steps of version 8 keep their name, and direct_claim is now those with
-- one refusal behind them (SH001: the general path takes such a claim, counting under the
-- groups' locks). A fleet with no limits pays one look at an empty table. Each row also
-- says the task's group now (o_group, after the task's columns).
ALTER FUNCTION direct_claim(bigint, text, integer, double precision, text[], bigint[],
                            text[], text[], text, double precision, double precision,
                            double precision, double precision, double precision,
                            double precision)
    RENAME TO direct_claim_ungrouped;

CREATE FUNCTION direct_claim(
    p_fleet_lock bigint,
    p_agent text,
    p_n integer,
    p_now double precision,
    p_tokens text[],
    p_finish_ids bigint[],
    p_finish_tokens text[],
    p_finish_results text[],
    p_settings text,
    p_lease_ttl double precision,
    p_domain_bonus double precision,
    p_locality_wait double precision,
    p_domain_wait double precision,
    p_seen_resolution double precision,
    p_silent_before double precision
) RETURNS TABLE (
    o_role text, o_source text, o_origin text, o_token text,
    o_id bigint, o_title text, o_body text, o_payload text, o_priority smallint,
    o_skillset integer, o_domain text, o_state text, o_agent_id text, o_pinned boolean,
    o_stolen boolean, o_parent_id bigint, o_key text, o_attempts integer,
    o_max_attempts integer, o_lease_ttl double precision,
    o_expected_duration double precision, o_lease_expires double precision, o_result text,
    o_error text, o_waiting_on integer, o_created_at double precision,
    o_updated_at double precision, o_claimed_at double precision,
    o_finished_at double precision, o_stalled_at double precision,
    o_ready_at double precision, o_retry_delay double precision, o_group text
)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    -- A task's group never changes, so the statement's own view of it is the right one.
    RETURN QUERY SELECT d.*, t.group_name FROM direct_claim_ungrouped(
        p_fleet_lock, p_agent, p_n, p_now, p_tokens, p_finish_ids, p_finish_tokens,
        p_finish_results, p_settings, p_lease_ttl, p_domain_bonus, p_locality_wait,
        p_domain_wait, p_seen_resolution, p_silent_before) AS d
        LEFT JOIN tasks AS t ON t.id = d.o_id;
    IF p_n > 0 AND EXISTS (SELECT 1 FROM groups) AND EXISTS (
        SELECT 1 FROM tasks AS t JOIN groups AS g ON g.name = t.group_name
        WHERE t.state = 'claimed' AND t.agent_id = p_agent AND t.claimed_at = p_now
    ) THEN
        RAISE EXCEPTION 'direct claim: a task of a group with a limit' USING ERRCODE = 'SH001';
    END IF;
END;
$$;
