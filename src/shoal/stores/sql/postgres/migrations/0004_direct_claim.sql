-- shoal schema, version 4, for PostgreSQL: the everyday claim in one statement.
--
-- A busy worker's day is "finish this task, take the next one". Run as separate statements
-- that costs about six round trips between the worker and the server; direct_claim does
-- the common case of it on the server, as one statement (so one round trip, in its own
-- transaction), and refuses -- raising SQLSTATE 'SH001' before anything it did is kept --
-- every case that needs more than the common steps. The caller then runs the general claim
-- (the cascade in _claiming.py) in a transaction of its own; nothing was changed meanwhile.
--
-- What it does, in the order and with the locks of the general path (so the two can run
-- side by side):
--   1. take the fleet lock, shared, like every everyday writer (see postgres.py);
--   2. refuse unless the stored settings are the ones the caller worked its terms out from;
--   3. finish p_finish_ids under their leases (token, state and expiry compare-and-set),
--      locking each task and then the holder's row, and refuse unless all of them finished,
--      all were held by p_agent and none has dependents to release;
--   4. lock the agent's row and read it and its leases after the lock; refuse if it is unknown,
--      terminated, offline or paused, or if any lease in the fleet is due to expire (the
--      expire step belongs to the general path);
--   5. with p_n = 0 (a completion that asks for nothing): the agent is working if it still
--      holds leases, else waiting, as after_letting_go says;
--   6. else the claim's own queue step (head first) and pool step (best score, the domain
--      bonus included, over the skill sets the agent can do, another domain's young work
--      left to its own agents by the locality rules), both with SKIP LOCKED; refuse if the
--      agent is at capacity or if nothing was found (the steal and idle steps, and the
--      moment to try again, are the general path's);
--   7. lease what it picked (tokens from the caller, expiry from the task's lease_ttl or
--      p_lease_ttl), write the events in the order the general path writes them, and mark
--      the agent working (last_seen at most once per p_seen_resolution seconds, as touch
--      does), ending its failure streak after a completion.
--
-- The rows it returns: role 'finished' (each finished task) or 'granted' (each lease, in
-- claim order, with its source, the queue it came from and its token), then the task.
-- A differential test (tests/stores/test_direct_claim.py) runs the same histories through
-- this and the general path and compares every row and event.

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
    p_seen_resolution double precision
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
-- Plans made once per connection: every statement is an index look-up whatever the values.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_completed boolean := cardinality(p_finish_ids) > 0;
    v_finished integer;
    v_agent agents%ROWTYPE;
    v_held integer;
    v_room integer;
    v_want integer;
    v_skills text[];
    v_domains text[];
    v_eligible integer[];
    v_ids bigint[] := '{}';
    v_sources text[] := '{}';
    v_origins text[] := '{}';
    v_count integer;
    v_might_hold boolean;
    v_pass integer;
    v_own text[];
    v_local_since double precision;
    v_domain_since double precision;
    v_reserved_domains text[];
    v_reserved_skillsets integer[];
    v_pool bigint[];
    v_status text;
    c record;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(p_fleet_lock);
    IF (SELECT value FROM meta WHERE key = 'settings') IS DISTINCT FROM p_settings THEN
        RAISE EXCEPTION 'direct claim: the settings changed' USING ERRCODE = 'SH001';
    END IF;

    -- 3. finish
    IF v_completed THEN
        -- The conditions are wrapped in coalesce so that no partial index matches them: the
        -- plan (made once, generic) is then a primary-key look-up per task, never a scan of
        -- every claimed task.
        RETURN QUERY
        WITH finished AS (
            UPDATE tasks AS t SET state = 'done',
                result = p_finish_results[array_position(p_finish_ids, t.id)],
                lease_expires = NULL, finished_at = p_now, updated_at = p_now
            WHERE t.id = ANY(p_finish_ids)
              AND coalesce(t.token = p_finish_tokens[array_position(p_finish_ids, t.id)]
                           AND t.state = 'claimed' AND t.lease_expires > p_now, false)
            RETURNING array_position(p_finish_ids, t.id) AS ord, t.*
        )
        SELECT 'finished'::text, NULL::text, NULL::text, NULL::text,
               f.id, f.title, f.body, f.payload, f.priority, f.skillset, f.domain, f.state,
               f.agent_id, f.pinned, f.stolen, f.parent_id, f.key, f.attempts,
               f.max_attempts, f.lease_ttl, f.expected_duration, f.lease_expires, f.result,
               f.error, f.waiting_on, f.created_at, f.updated_at, f.claimed_at,
               f.finished_at, f.stalled_at, f.ready_at, f.retry_delay
        FROM finished f ORDER BY f.ord;
        GET DIAGNOSTICS v_finished = ROW_COUNT;
        IF v_finished <> cardinality(p_finish_ids) OR EXISTS (
            SELECT 1 FROM tasks WHERE id = ANY(p_finish_ids)
              AND (agent_id IS DISTINCT FROM p_agent OR has_dependents)
        ) THEN
            RAISE EXCEPTION 'direct claim: not a plain completion' USING ERRCODE = 'SH001';
        END IF;
    END IF;

    -- 4. the agent, after its lock
    -- (FOR UPDATE under READ COMMITTED reads the row as it is once the lock is granted; the
    -- counts below are read after it, each statement with a fresh snapshot)
    SELECT * INTO v_agent FROM agents WHERE id = p_agent FOR UPDATE;
    IF NOT FOUND OR v_agent.status IN ('terminated', 'offline', 'overloaded')
       OR v_agent.paused_until IS NOT NULL
       OR EXISTS (SELECT 1 FROM tasks WHERE state = 'claimed' AND lease_expires <= p_now) THEN
        RAISE EXCEPTION 'direct claim: not a plain agent' USING ERRCODE = 'SH001';
    END IF;
    SELECT count(*) INTO v_held FROM tasks WHERE state = 'claimed' AND agent_id = p_agent;

    IF p_n > 0 THEN
        -- 6. own queue, from the head
        v_room := least(p_n, v_agent.max_concurrent - v_held);
        IF v_room <= 0 THEN
            RAISE EXCEPTION 'direct claim: busy' USING ERRCODE = 'SH001';
        END IF;
        FOR c IN
            SELECT id, agent_id FROM tasks
            WHERE state = 'pending' AND agent_id = p_agent AND ready_at <= p_now
            ORDER BY priority, seq DESC
            LIMIT v_room
            FOR UPDATE SKIP LOCKED
        LOOP
            v_ids := v_ids || c.id;
            v_sources := v_sources || 'queue'::text;
            v_origins := v_origins || c.agent_id;
        END LOOP;
        -- the pool, best score
        v_want := v_room - cardinality(v_ids);
        IF v_want > 0 THEN
            v_skills := ARRAY(SELECT jsonb_array_elements_text(v_agent.skills::jsonb));
            v_domains := ARRAY(SELECT jsonb_array_elements_text(v_agent.domains::jsonb));
            v_eligible := ARRAY(
                SELECT id FROM skillsets
                WHERE skills = '' OR string_to_array(skills, ',') <@ v_skills
                ORDER BY id
            );
            IF cardinality(v_eligible) > 0 THEN
                -- The look-ups of pool_candidates, ranked as policy.rank_pool ranks them. As
                -- in _claiming.Holds: first with nothing held; only if a candidate might be
                -- held are the locality rules worked out (who is idle, for domain_wait) and
                -- the look-ups made again under them.
                v_local_since := 'Infinity';
                v_domain_since := 'Infinity';
                v_own := '{}';
                v_reserved_domains := '{}';
                v_reserved_skillsets := '{}';
                FOR v_pass IN 1 .. 2 LOOP
                    WITH found AS (
                        SELECT b.id, b.domain, b.pool_key, b.created_at, b.ready_at
                        FROM unnest(v_eligible) AS s (id)
                        CROSS JOIN LATERAL (
                            SELECT id, domain, pool_key, created_at, ready_at FROM tasks
                            WHERE state = 'pending' AND agent_id IS NULL AND skillset = s.id
                              AND ready_at <= p_now
                              AND NOT (domain IS NOT NULL AND NOT domain = ANY(v_own)
                                       AND (coalesce(ready_at, created_at) > v_local_since
                                            OR (coalesce(ready_at, created_at) > v_domain_since
                                                AND (domain, skillset) IN (
                                                    SELECT * FROM unnest(v_reserved_domains,
                                                                         v_reserved_skillsets)))))
                            ORDER BY pool_key DESC, id
                            LIMIT v_want
                            FOR UPDATE SKIP LOCKED
                        ) AS b
                        UNION ALL
                        SELECT b.id, b.domain, b.pool_key, b.created_at, b.ready_at
                        FROM unnest(v_domains) AS d (name)
                        CROSS JOIN unnest(v_eligible) AS s (id)
                        CROSS JOIN LATERAL (
                            SELECT id, domain, pool_key, created_at, ready_at FROM tasks
                            WHERE state = 'pending' AND agent_id IS NULL AND skillset = s.id
                              AND domain = d.name AND ready_at <= p_now
                            ORDER BY pool_key DESC, id
                            LIMIT v_want
                            FOR UPDATE SKIP LOCKED
                        ) AS b
                    ), candidates AS (
                        SELECT DISTINCT ON (id) * FROM found ORDER BY id
                    )
                    SELECT coalesce(bool_or(domain IS NOT NULL AND NOT domain = ANY(v_domains)
                                            AND coalesce(ready_at, created_at)
                                                > p_now - greatest(p_locality_wait, p_domain_wait)),
                                    false),
                           (array_agg(id ORDER BY pool_key + CASE WHEN domain = ANY(v_domains)
                                                                  THEN p_domain_bonus ELSE 0 END
                                                      DESC, id))[1:v_want]
                    INTO v_might_hold, v_pool
                    FROM candidates;
                    EXIT WHEN v_pass = 2 OR NOT v_might_hold
                              OR greatest(p_locality_wait, p_domain_wait) <= 0;
                    -- policy.locality, with policy.reserved_for's pairs
                    v_own := v_domains;
                    IF p_locality_wait > 0 THEN
                        v_local_since := p_now - p_locality_wait;
                    END IF;
                    IF p_domain_wait > 0 THEN
                        SELECT coalesce(array_agg(r.domain ORDER BY r.domain, r.skillset), '{}'),
                               coalesce(array_agg(r.skillset ORDER BY r.domain, r.skillset), '{}')
                        INTO v_reserved_domains, v_reserved_skillsets
                        FROM (
                            SELECT DISTINCT d.name AS domain, s.id AS skillset
                            FROM agents a
                            CROSS JOIN LATERAL jsonb_array_elements_text(a.domains::jsonb) AS d (name)
                            JOIN skillsets s
                              ON s.skills = ''
                              OR string_to_array(s.skills, ',')
                                 <@ ARRAY(SELECT jsonb_array_elements_text(a.skills::jsonb))
                            WHERE a.status = 'idle' AND a.id <> p_agent
                        ) AS r;
                        IF cardinality(v_reserved_domains) > 0 THEN
                            v_domain_since := p_now - p_domain_wait;
                        END IF;
                    END IF;
                END LOOP;
                v_pool := coalesce(v_pool, '{}');
                v_ids := v_ids || v_pool;
                v_sources := v_sources || array_fill('pool'::text, ARRAY[cardinality(v_pool)]);
                v_origins := v_origins || array_fill(NULL::text, ARRAY[cardinality(v_pool)]);
            END IF;
        END IF;
        IF cardinality(v_ids) = 0 THEN
            RAISE EXCEPTION 'direct claim: nothing at hand' USING ERRCODE = 'SH001';
        END IF;

        -- 7. lease, log, and the agent is working
        RETURN QUERY
        WITH leased AS (
            UPDATE tasks AS t SET state = 'claimed', agent_id = p_agent,
                token = p_tokens[array_position(v_ids, t.id)],
                lease_expires = p_now + coalesce(t.lease_ttl, p_lease_ttl),
                attempts = t.attempts + 1, claimed_at = p_now, stalled_at = NULL,
                updated_at = p_now
            WHERE t.id = ANY(v_ids) AND coalesce(t.state = 'pending', false)  -- (as above)
            RETURNING array_position(v_ids, t.id) AS ord, t.*
        )
        SELECT 'granted'::text, v_sources[f.ord], v_origins[f.ord], f.token,
               f.id, f.title, f.body, f.payload, f.priority, f.skillset, f.domain, f.state,
               f.agent_id, f.pinned, f.stolen, f.parent_id, f.key, f.attempts,
               f.max_attempts, f.lease_ttl, f.expected_duration, f.lease_expires, f.result,
               f.error, f.waiting_on, f.created_at, f.updated_at, f.claimed_at,
               f.finished_at, f.stalled_at, f.ready_at, f.retry_delay
        FROM leased f ORDER BY f.ord;
        GET DIAGNOSTICS v_count = ROW_COUNT;
        IF v_count <> cardinality(v_ids) THEN  -- cannot happen: the candidates were locked
            RAISE EXCEPTION 'direct claim: a candidate changed' USING ERRCODE = 'SH001';
        END IF;
        v_status := 'working';
    ELSE
        -- 5. a completion that asks for nothing
        v_status := CASE WHEN v_held > 0 THEN 'working' ELSE 'waiting' END;
    END IF;

    INSERT INTO events (at, kind, task_id, agent_id, data)
    SELECT p_now, e.kind, e.task_id, p_agent, e.data FROM (
        SELECT 1 AS part, f.ord, 'completed' AS kind, f.id AS task_id, NULL::text AS data
        FROM unnest(p_finish_ids) WITH ORDINALITY AS f (id, ord)
        UNION ALL
        SELECT 2, g.ord, 'claimed', g.id,
               format('{"source": "%s", "attempt": %s}', g.source,
                      (SELECT attempts FROM tasks WHERE tasks.id = g.id))
        FROM unnest(v_ids, v_sources) WITH ORDINALITY AS g (id, source, ord)
    ) AS e ORDER BY e.part, e.ord;

    UPDATE agents SET
        failures = CASE WHEN v_completed THEN 0 ELSE failures END,
        status = v_status,
        idle_since = NULL,
        last_seen = CASE WHEN status <> v_status OR idle_since IS NOT NULL
                              OR NOT p_now - last_seen < p_seen_resolution
                         THEN p_now ELSE last_seen END
    WHERE id = p_agent
      AND (status <> v_status OR idle_since IS NOT NULL
           OR NOT p_now - last_seen < p_seen_resolution
           OR (v_completed AND failures > 0));
END;
$$;
