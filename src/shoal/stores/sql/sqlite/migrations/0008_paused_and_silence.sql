-- shoal schema, version 8 (SQLite): a pause is a status of its own, and a claim can tell
-- cheaply whether some agent has gone silent.
--
-- A paused agent used to be 'overloaded', the same word as the assessment's verdict on a
-- fleet with too much work; it is 'paused' now, in the store as on every face.
--
-- An agent silent past heartbeat_timeout is offline whether or not a monitor runs: the
-- next claim anywhere marks it so and sends its queue back to the pool. The claim asks
-- "is any agent that should be heard from silent?" in its one statement (claim_context).
-- `heard` answers it: the agent's last_seen while it is expected to be heard from (idle,
-- working, waiting, paused), NULL once it is offline or terminated, so the agents that
-- come and go over a fleet's life are not in its index, and the range of it older than
-- the timeout is empty while everyone heartbeats. It is a column of its own, written by a
-- statement of its own only when it changes (save_agent_heard): SQLite rewrites an index
-- whenever an UPDATE's SET names its column, and an index on last_seen and status would
-- cost every claim that turns an agent from waiting to working one more page written.
UPDATE agents SET status = 'paused' WHERE status = 'overloaded';
ALTER TABLE agents ADD COLUMN heard REAL;
UPDATE agents SET heard = last_seen WHERE status IN ('idle', 'working', 'waiting', 'paused');
CREATE INDEX agents_heard ON agents (heard) WHERE heard IS NOT NULL;
