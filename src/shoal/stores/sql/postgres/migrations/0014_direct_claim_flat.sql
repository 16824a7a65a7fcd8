-- shoal schema, version 14, for PostgreSQL: the direct claim as one function again.
--
-- Versions 8, 11 and 13 each added a refusal by wrapping the function before it under a
-- new name, so a claim ran four PL/pgSQL functions, each copying the rows of the one below
-- into a result set of its own. Version 11's wrapper also read each row's group by joining
-- the result with tasks, and since the planner takes a function for a thousand rows, that
-- join was a hash join over a scan of the whole tasks table: every claim read every task
-- row, live or finished, and a cycle's server time grew with the fleet's history. The
-- labels and poster (versions 9 and 12) were read beside the function by the statement
-- that called it, two more look-ups per row.
--
-- direct_claim is now the steps of version 4 with those three refusals inside, in one
-- function: each row carries every column of its task, group, labels and poster included,
-- straight from the UPDATE that finished or leased it. What it does and refuses is what the
-- four did together:
--   * a claim while an agent is silent past the timeout (version 8) is refused first;
--   * a claim that leased a task of a group with a limit (version 11), or a ready join
--     (version 13: a place of -2^62 or below), is refused -- asked of the tasks this claim
--     leased, where the wrappers asked it of the agent's tasks claimed at p_now, which are
--     those (the function's own leases) and, at most, tasks the agent took earlier at the
--     same instant, whose group or place says nothing of this claim.
-- The rows it returns and the events it writes are unchanged.
-- The four functions of versions 4 to 13 stay, unused, the outermost under a new name (the
-- same step as those versions took, so a fleet can be taken back to version 13 by a rename).
ALTER FUNCTION direct_claim(bigint, text, integer, double precision, text[], bigint[],
                            text[], text[], text, double precision, double precision,
                            double precision, double precision, double precision,
                            double precision)
    RENAME TO direct_claim_nested;

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
    o_ready_at double precision, o_retry_delay double precision, o_group text,
    o_labels text, o_posted_by text
)
LANGUAGE plpgsql VOLATILE
-- Plans made once per connection: every statement is an index look-up whatever the values.
SET plan_cache_mode = force_generic_plan
-- ... and an index look-up whatever the size of the table. A generic plan takes `id =
-- ANY(...)` for ten ids, and on a table of a thousand tasks or so, ten look-ups in the
-- primary key cost more by the planner's count than reading the table's few dozen pages:
-- the finish, its check and the lease then read every task, history included (~1 ms of
-- the server's time per claim at 1,000 tasks), until new statistics of the table made the
-- connection plan them again. With scans off a statement reads a table whole only where it
-- has no index to use.
SET enable_seqscan = off
-- A plan that must read a table whole anyway (the trigger's fold of finished_counts, run
-- inside this function) then carries the planner's penalty for it in its cost, which is
-- past jit_above_cost: compiling it took 0.3 s. Nothing this function runs is worth
-- compiling.
SET jit = off
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
    -- (version 8) another agent gone silent: the general path marks it offline first. A
    -- completion that claims nothing is not held up by it.
    IF p_n > 0 AND EXISTS (SELECT 1 FROM agents WHERE heard < p_silent_before) THEN
        RAISE EXCEPTION 'direct claim: an agent is silent' USING ERRCODE = 'SH001';
    END IF;
    PERFORM pg_advisory_xact_lock_shared(p_fleet_lock);
    IF (SELECT value FROM meta WHERE key = 'settings') IS DISTINCT FROM p_settings THEN
        RAISE EXCEPTION 'direct claim: the settings changed' USING ERRCODE = 'SH001';
    END IF;

    -- finish, under the leases given
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
               f.finished_at, f.stalled_at, f.ready_at, f.retry_delay, f.group_name,
               f.labels, f.posted_by
        FROM finished f ORDER BY f.ord;
        GET DIAGNOSTICS v_finished = ROW_COUNT;
        IF v_finished <> cardinality(p_finish_ids) OR EXISTS (
            SELECT 1 FROM tasks WHERE id = ANY(p_finish_ids)
              AND (agent_id IS DISTINCT FROM p_agent OR has_dependents)
        ) THEN
            RAISE EXCEPTION 'direct claim: not a plain completion' USING ERRCODE = 'SH001';
        END IF;
    END IF;

    -- the agent, after its lock
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
        -- own queue, from the head
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

        -- (versions 11 and 13) what the general path must take: a task of a group with a
        -- limit (it counts the group's holders under the group's lock), a ready join (it
        -- comes after the pool and the steals). The candidates are locked, so these columns
        -- are the ones the lease below will see.
        IF EXISTS (
            SELECT 1 FROM tasks AS t
            WHERE t.id = ANY(v_ids)
              AND (t.seq <= -4611686018427387904
                   OR (t.group_name IS NOT NULL
                       AND EXISTS (SELECT 1 FROM groups AS g WHERE g.name = t.group_name)))
        ) THEN
            RAISE EXCEPTION 'direct claim: a join, or a task of a group with a limit'
                USING ERRCODE = 'SH001';
        END IF;

        -- lease, log, and the agent is working
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
               f.finished_at, f.stalled_at, f.ready_at, f.retry_delay, f.group_name,
               f.labels, f.posted_by
        FROM leased f ORDER BY f.ord;
        GET DIAGNOSTICS v_count = ROW_COUNT;
        IF v_count <> cardinality(v_ids) THEN  -- cannot happen: the candidates were locked
            RAISE EXCEPTION 'direct claim: a candidate changed' USING ERRCODE = 'SH001';
        END IF;
        v_status := 'working';
    ELSE
        -- a completion that asks for nothing
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
