-- shoal schema, version 12 (SQLite): a task records who posted it.
--
-- posted_by is the agent that posted the task through an agent's face (an MCP session
-- acting as that agent, an agent's API token); NULL for a person's post (the CLI, an admin
-- token, the dashboard). The poster may edit its own task (Fleet.edit through those faces);
-- no claim reads it, so it needs no index.
ALTER TABLE tasks ADD COLUMN posted_by TEXT;
