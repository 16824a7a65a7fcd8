-- shoal schema, version 8, for PostgreSQL: a pause is a status of its own, and a claim can
-- tell cheaply whether some agent has gone silent.
--
-- A paused agent used to be 'overloaded', the same word as the assessment's verdict on a
-- fleet with too much work; it is 'paused' now, in the store as on every face.
--
-- An agent silent past heartbeat_timeout is offline whether or not a monitor runs: the
-- next claim anywhere marks it so and sends its queue back to the pool (the general path:
-- it is a fleet-wide change). The claim asks "is any agent that should be heard from
-- silent?" in its one statement (claim_context), and the direct claim asks it too. `heard`
-- answers it: the agent's last_seen while it is expected to be heard from (idle, working,
-- waiting, paused), NULL once it is offline or terminated, so the agents that come and go
-- over a fleet's life are not in its index, and the range of it older than the timeout is
-- empty while everyone heartbeats. Generated from the row, it is right whoever writes the
-- row (the direct claim writes agents too), and it changes value only when last_seen does
-- or the agent leaves or rejoins those statuses: a claim that turns an agent from waiting
-- to working leaves its index entry as it is (a HOT update).
UPDATE agents SET status = 'paused' WHERE status = 'overloaded';
ALTER TABLE agents ADD COLUMN heard double precision GENERATED ALWAYS AS (
    CASE WHEN status IN ('idle', 'working', 'waiting', 'paused') THEN last_seen END
) STORED;
CREATE INDEX agents_heard ON agents (heard) WHERE heard IS NOT NULL;

-- The direct claim of version 4 keeps its steps (a paused agent, whatever its status word,
-- has paused_until set and is refused by them) under a new name; direct_claim is now that
-- with one refusal in front: a claim while an agent is silent past the timeout (the caller
-- passes p_silent_before, now - heartbeat_timeout of the settings it sends, which the steps
-- check are still the stored ones) goes to the general path, which marks it offline first.
-- A completion that claims nothing (p_n = 0) is not held up by another agent's silence.
ALTER FUNCTION direct_claim(bigint, text, integer, double precision, text[], bigint[],
                            text[], text[], text, double precision, double precision,
                            double precision, double precision, double precision)
    RENAME TO direct_claim_steps;

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
    o_ready_at double precision, o_retry_delay double precision
)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    IF p_n > 0 AND EXISTS (SELECT 1 FROM agents WHERE heard < p_silent_before) THEN
        RAISE EXCEPTION 'direct claim: an agent is silent' USING ERRCODE = 'SH001';
    END IF;
    RETURN QUERY SELECT * FROM direct_claim_steps(
        p_fleet_lock, p_agent, p_n, p_now, p_tokens, p_finish_ids, p_finish_tokens,
        p_finish_results, p_settings, p_lease_ttl, p_domain_bonus, p_locality_wait,
        p_domain_wait, p_seen_resolution);
END;
$$;
