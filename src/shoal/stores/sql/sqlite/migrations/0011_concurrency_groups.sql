-- shoal schema, version 11 (SQLite): concurrency groups -- "one deploy at a time".
--
-- A task may name a group (group_name); a group may have a limit (groups.max_held): at
-- most that many of its tasks are held (claimed) at once, fleet-wide. A claim counts a
-- group's held tasks only when a candidate it found has a group (_claiming.Holds), inside
-- its own write transaction -- one writer at a time here, so the count cannot go stale
-- before the commit. tasks_group_held makes that count one short index range; tasks of
-- no group are not in it. A group with no row has no limit.
ALTER TABLE tasks ADD COLUMN group_name TEXT;
CREATE INDEX tasks_group_held ON tasks (group_name)
    WHERE state = 'claimed' AND group_name IS NOT NULL;
CREATE TABLE groups (
    name     TEXT PRIMARY KEY,
    max_held INTEGER NOT NULL CHECK (max_held > 0)
);
