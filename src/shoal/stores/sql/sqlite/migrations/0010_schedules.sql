-- shoal schema, version 10 (SQLite): schedules of recurring tasks.
--
-- A schedule posts a task (the post arguments in `template`, JSON) every `every` seconds or
-- at the times the cron expression `cron` names in time zone `tz`. `next_at` is its next
-- tick; `last_task` the latest occurrence it posted: while that one is unfinished, a tick
-- posts nothing (`skipped` counts them), so work never piles up while nobody works it.
--
-- Due occurrences are posted by whoever looks -- a claim, the hub's reap -- with no daemon
-- (docs/ARCHITECTURE.md, "Recurring tasks"). A claim must stay as fast as it was, so it
-- asks only "when is the next tick of any active schedule?" (next_schedule_at), now and
-- then: the partial index below answers it with one entry, and holds only the schedules
-- that can fall due.
CREATE TABLE schedules (
    id         INTEGER PRIMARY KEY,
    template   TEXT NOT NULL,
    every      REAL,
    cron       TEXT,
    tz         TEXT,
    state      TEXT NOT NULL DEFAULT 'active'
               CHECK (state IN ('active', 'paused', 'cancelled')),
    next_at    REAL NOT NULL,
    created_at REAL NOT NULL,
    last_task  INTEGER,
    posted     INTEGER NOT NULL DEFAULT 0,
    skipped    INTEGER NOT NULL DEFAULT 0,
    CHECK ((every IS NULL) <> (cron IS NULL))
);
CREATE INDEX schedules_due ON schedules (next_at) WHERE state = 'active';
