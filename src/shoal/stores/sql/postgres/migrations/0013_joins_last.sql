-- shoal schema, version 13, for PostgreSQL: ready joins come last.
--
-- A deferred task (a join: the rest of a task that waited on its children) has its place in
-- a band of its own, below every other place (policy.join_place: -2^62 and below). Once it
-- is ready, a claim takes it only when nothing else is there for the agent: its queue
-- without its joins, the pool, a steal of other work (_claiming's joins step). The queries
-- read one band at a time (queue_head and the fragment stealable, in queries.sql).
--
-- The direct claim's own queue step reads the whole queue, head first, so it reaches a
-- join only once nothing else is queued -- but before the pool and the steal, which the
-- joins step follows. Its steps of version 11 keep their name, and direct_claim is now
-- those with one refusal behind them (SH001: the general path takes such a claim): a claim
-- that leased a join. No table changes; a task deferred before this version keeps the
-- place it has, in front of its agent's queue, once.
ALTER FUNCTION direct_claim(bigint, text, integer, double precision, text[], bigint[],
                            text[], text[], text, double precision, double precision,
                            double precision, double precision, double precision,
                            double precision)
    RENAME TO direct_claim_with_joins;

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
    RETURN QUERY SELECT * FROM direct_claim_with_joins(
        p_fleet_lock, p_agent, p_n, p_now, p_tokens, p_finish_ids, p_finish_tokens,
        p_finish_results, p_settings, p_lease_ttl, p_domain_bonus, p_locality_wait,
        p_domain_wait, p_seen_resolution, p_silent_before);
    -- tasks_held reads the agent's claimed tasks; a join's place is -2^62 or below
    IF p_n > 0 AND EXISTS (
        SELECT 1 FROM tasks
        WHERE state = 'claimed' AND agent_id = p_agent AND claimed_at = p_now
          AND seq <= -4611686018427387904
    ) THEN
        RAISE EXCEPTION 'direct claim: a ready join, which comes after the pool and steals'
            USING ERRCODE = 'SH001';
    END IF;
END;
$$;
