-- shoal schema, version 6, for PostgreSQL: how many tasks are done, dead and cancelled is
-- kept, not counted.
--
-- Live states are counted on their own partial indexes, but the finished ones are the
-- history itself: counting them read every finished task, so `status` and `assess` slowed
-- down as history grew (most of a second at ten million). Triggers keep the counts
-- instead, so every way a task enters or leaves a finished state (a completion on either
-- claim path, a failure that buries it, a cancel, a retry, a prune's delete, a row written
-- already finished) moves them, and no statement has to remember to.
--
-- Many writers finish tasks at once here, and one counter row per state would make each
-- wait for the previous one's commit (a row lock lasts until then, WAL flush included).
-- So each change is a row of its own in finished_counts, inserted and never updated, and
-- a state's count is the sum of its rows. Every 1024th change folds the rows into one per
-- state (a delete and an insert in one statement, so no sum ever moves), taking turns on
-- an advisory lock it only tries for: a writer that misses it leaves the folding to a
-- later one. So a count never sums more than a few thousand small rows.
CREATE TABLE finished_counts (
    id    bigserial,
    state text NOT NULL,
    n     bigint NOT NULL
);
INSERT INTO finished_counts (state, n)
SELECT state, count(*) FROM tasks WHERE state IN ('done', 'dead', 'cancelled') GROUP BY state;

-- Add the changes, and fold every row into one per state if this is the 1024th change.
CREATE FUNCTION count_finished(p_states text[], p_changes bigint[]) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_rows integer;
    v_last bigint;
BEGIN
    INSERT INTO finished_counts (state, n)
    SELECT * FROM unnest(p_states, p_changes) AS c (state, n) WHERE c.n <> 0;
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    IF v_rows = 0 THEN
        RETURN;
    END IF;
    v_last := currval(pg_get_serial_sequence('finished_counts', 'id'));
    IF v_last % 1024 < v_rows
       AND pg_try_advisory_xact_lock(1936, hashtext(current_schema())) THEN
        WITH gone AS (DELETE FROM finished_counts RETURNING state, n)
        INSERT INTO finished_counts (state, n)
        SELECT state, sum(n) FROM gone GROUP BY state;
    END IF;
END
$$;

-- One task's move, the common case (every completion): its rows inserted directly, and
-- the fold checked on the ids they got, without count_finished's arrays and sequence look-up.
CREATE FUNCTION tasks_finished_row() RETURNS trigger
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_id bigint;
    v_fold boolean := false;
BEGIN
    IF NEW.state IN ('done', 'dead', 'cancelled') THEN
        INSERT INTO finished_counts (state, n) VALUES (NEW.state, 1) RETURNING id INTO v_id;
        v_fold := v_id % 1024 = 0;
    END IF;
    IF OLD.state IN ('done', 'dead', 'cancelled') THEN
        INSERT INTO finished_counts (state, n) VALUES (OLD.state, -1) RETURNING id INTO v_id;
        v_fold := v_fold OR v_id % 1024 = 0;
    END IF;
    IF v_fold AND pg_try_advisory_xact_lock(1936, hashtext(current_schema())) THEN
        WITH gone AS (DELETE FROM finished_counts RETURNING state, n)
        INSERT INTO finished_counts (state, n)
        SELECT state, sum(n) FROM gone GROUP BY state;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION tasks_finished_statement() RETURNS trigger
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_states text[];
    v_changes bigint[];
BEGIN
    SELECT array_agg(state), array_agg(CASE TG_OP WHEN 'INSERT' THEN n ELSE -n END)
    INTO v_states, v_changes
    FROM (SELECT state::text, count(*) AS n FROM changed
          WHERE state IN ('done', 'dead', 'cancelled') GROUP BY state) AS c;
    IF v_states IS NOT NULL THEN
        PERFORM count_finished(v_states, v_changes);
    END IF;
    RETURN NULL;
END
$$;

-- A task finishing, or a finished one retried: one row at a time, and only those rows (the
-- WHEN is checked before any function runs, so a claim's updates cost nothing more).
CREATE TRIGGER tasks_finished_moved AFTER UPDATE OF state ON tasks
FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state
                   AND (OLD.state IN ('done', 'dead', 'cancelled')
                        OR NEW.state IN ('done', 'dead', 'cancelled')))
EXECUTE FUNCTION tasks_finished_row();

-- Rows written or deleted in bulk (a prune's batch, history loaded): once per statement.
CREATE TRIGGER tasks_finished_written AFTER INSERT ON tasks
REFERENCING NEW TABLE AS changed
FOR EACH STATEMENT EXECUTE FUNCTION tasks_finished_statement();

CREATE TRIGGER tasks_finished_deleted AFTER DELETE ON tasks
REFERENCING OLD TABLE AS changed
FOR EACH STATEMENT EXECUTE FUNCTION tasks_finished_statement();
