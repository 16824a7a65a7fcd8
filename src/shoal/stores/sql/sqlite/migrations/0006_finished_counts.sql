-- shoal schema, version 6 (SQLite): how many tasks are done, dead and cancelled is kept, not
-- counted.
--
-- Live states are counted on their own partial indexes, but the finished ones are the
-- history itself: counting them read every finished task, so `status` and `assess` slowed
-- down as history grew (half a second at ten million). The three counts are kept in
-- `counters` under the state's name from now on. The store moves them itself, once per
-- transaction (SqlTx, "finished counts"): a trigger would do it per row, and on SQLite a
-- firing trigger costs more than the rest of a completion's statement.
INSERT INTO counters (name, value)
SELECT s.state, (SELECT count(*) FROM tasks WHERE tasks.state = s.state)
FROM (SELECT 'done' AS state UNION ALL SELECT 'dead' UNION ALL SELECT 'cancelled') AS s;
