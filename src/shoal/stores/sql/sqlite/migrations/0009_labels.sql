-- shoal schema, version 9 (SQLite): a task carries labels.
--
-- Labels are free names people find and sort work by (`shoal list --label`, an imported
-- issue's labels); no claim reads them, so they need no index of the claim's: a JSON list,
-- sorted, read whole with the task. A listing by label scans, as every listing for people
-- may (list_tasks).
ALTER TABLE tasks ADD COLUMN labels TEXT NOT NULL DEFAULT '[]';
