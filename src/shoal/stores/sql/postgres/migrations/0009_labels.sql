-- shoal schema, version 9, for PostgreSQL: a task carries labels.
--
-- Labels are free names people find and sort work by (`shoal list --label`, an imported
-- issue's labels); no claim reads them, so they need no index of the claim's: a JSON list
-- as text, sorted, read whole with the task (the same value as SQLite's). A listing by
-- label scans, as every listing for people may (list_tasks). The direct claim's function
-- is unchanged: its query adds the labels of each row it returns (queries.sql).
ALTER TABLE tasks ADD COLUMN labels text NOT NULL DEFAULT '[]';
