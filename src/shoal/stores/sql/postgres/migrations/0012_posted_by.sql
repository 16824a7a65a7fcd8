-- shoal schema, version 12, for PostgreSQL: a task records who posted it.
--
-- posted_by is the agent that posted the task through an agent's face (an MCP session
-- acting as that agent, an agent's API token); NULL for a person's post (the CLI, an admin
-- token, the dashboard). The poster may edit its own task (Fleet.edit through those faces);
-- no claim reads it, so it needs no index. The direct claim's function is unchanged: its
-- query reads posted_by beside the labels of each row it returns (queries.sql).
ALTER TABLE tasks ADD COLUMN posted_by text;
