-- An agent that shuts down cleanly says so, so that it is listed as
-- stopped rather than gone (which is kept for agents that vanished).
-- Milliseconds since the Unix epoch.
ALTER TABLE agents ADD COLUMN stopped_at INTEGER;
