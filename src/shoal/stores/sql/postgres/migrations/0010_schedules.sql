-- shoal schema, version 10, for PostgreSQL: schedules of recurring tasks.
--
-- A schedule posts a task (the post arguments in `template`, JSON) every `every` seconds or
-- at the times the cron expression `cron` names in time zone `tz`. `next_at` is its next
-- tick; `last_task` the latest occurrence it posted: while that one is unfinished, a tick
-- posts nothing (`skipped` counts them), so work never piles up while nobody works it.
--
-- Due occurrences are posted by whoever looks -- a claim, the hub's reap -- with no daemon
-- (docs/ARCHITECTURE.md, "Recurring tasks"). Two writers that look at once both find the
-- schedule due; the one that locks its row first posts the occurrence, the other skips
-- the row (due_schedules: FOR UPDATE SKIP LOCKED) or, reading after that commit, finds
-- it no longer due. A claim must stay as fast as it was, so it asks only "when is the next
-- tick of any active schedule?" (next_schedule_at), now and then: the partial index below
-- answers it with one entry, and holds only the schedules that can fall due.
CREATE TABLE schedules (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    template   text NOT NULL,
    every      double precision,
    cron       text,
    tz         text,
    state      text NOT NULL DEFAULT 'active'
               CHECK (state IN ('active', 'paused', 'cancelled')),
    next_at    double precision NOT NULL,
    created_at double precision NOT NULL,
    last_task  bigint,
    posted     integer NOT NULL DEFAULT 0,
    skipped    integer NOT NULL DEFAULT 0,
    CHECK ((every IS NULL) <> (cron IS NULL))
);
CREATE INDEX schedules_due ON schedules (next_at) WHERE state = 'active';
