-- The handle of a resource's current attempt: remote work (a workflow run,
-- a pipeline) that an action started and the next attempt must follow or
-- cancel before it starts anew. It is written while the lease is held and
-- outlives the agent that wrote it; a completion clears it. A JSON object
-- (store.Handle), NULL when there is none. Not part of the status: writing
-- it sends no status notification.
ALTER TABLE resources ADD COLUMN attempt_handle jsonb
    CHECK (attempt_handle IS NULL OR jsonb_typeof(attempt_handle) = 'object');
