-- shoal schema, version 6 (SQLite): how many tasks are done, dead and cancelled is kept, not
-- counted.
--
-- Live states are counted on their own partial indexes, but the finished ones are the
-- history itself: counting them read every finished task, so `status` and `assess` slowed
-- down as history grew (half a second at ten million). Triggers keep the three counts in
-- `counters` instead, under the state's name, so every way a task enters or leaves a
-- finished state (a completion on any path, a failure that buries it, a cancel, a retry, a
-- prune's delete, a row written already finished) moves them, and no statement of the
-- claim path has to remember to. SQLite has one writer at a time, so one row per state is
-- enough: an update never waits for another.
INSERT INTO counters (name, value)
SELECT s.state, (SELECT count(*) FROM tasks WHERE tasks.state = s.state)
FROM (SELECT 'done' AS state UNION ALL SELECT 'dead' UNION ALL SELECT 'cancelled') AS s;

CREATE TRIGGER tasks_finished_moved AFTER UPDATE OF state ON tasks
WHEN OLD.state <> NEW.state
 AND (OLD.state IN ('done', 'dead', 'cancelled') OR NEW.state IN ('done', 'dead', 'cancelled'))
BEGIN
    UPDATE counters SET value = value + 1
    WHERE name = NEW.state AND name IN ('done', 'dead', 'cancelled');
    UPDATE counters SET value = value - 1
    WHERE name = OLD.state AND name IN ('done', 'dead', 'cancelled');
END;

CREATE TRIGGER tasks_finished_written AFTER INSERT ON tasks
WHEN NEW.state IN ('done', 'dead', 'cancelled')
BEGIN
    UPDATE counters SET value = value + 1 WHERE name = NEW.state;
END;

CREATE TRIGGER tasks_finished_deleted AFTER DELETE ON tasks
WHEN OLD.state IN ('done', 'dead', 'cancelled')
BEGIN
    UPDATE counters SET value = value - 1 WHERE name = OLD.state;
END;
