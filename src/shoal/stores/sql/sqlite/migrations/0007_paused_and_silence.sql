-- shoal schema, version 7 (SQLite): a pause is a status of its own, and a claim can tell
-- cheaply whether some agent has gone silent.
--
-- A paused agent used to be 'overloaded', the same word as the assessment's verdict on a
-- fleet with too much work; it is 'paused' now, in the store as on every face.
--
-- An agent silent past heartbeat_timeout is offline whether or not a monitor runs: the
-- next claim anywhere marks it so and sends its queue back to the pool. The claim asks
-- "is any agent that should be heard from silent?" in its one statement (claim_context);
-- this index answers it by reading the range of last_seen older than the timeout, which is
-- empty while every agent heartbeats. Offline and terminated agents -- all those that come
-- and go over a fleet's life -- are not in it.
UPDATE agents SET status = 'paused' WHERE status = 'overloaded';
CREATE INDEX agents_heard ON agents (last_seen)
    WHERE status IN ('idle', 'working', 'waiting', 'paused');
