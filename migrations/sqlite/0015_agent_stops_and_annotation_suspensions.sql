-- An agent that shuts down cleanly says so, so that it is listed as
-- stopped rather than gone (which is kept for agents that vanished).
-- Milliseconds since the Unix epoch.
ALTER TABLE agents ADD COLUMN stopped_at INTEGER;

-- A resource suspended by its annotation no8s.io/suspend: "true" records
-- since when, as a suspension through the API does (suspended_at): the
-- time the annotation was first written, kept while it stays, cleared when
-- it goes. The store's writes of annotations set it. Resources annotated
-- already take their last update's time.
ALTER TABLE resources ADD COLUMN annotation_suspended_at INTEGER;
UPDATE resources SET annotation_suspended_at = updated_at
    WHERE json_extract(annotations, '$."no8s.io/suspend"') = 'true';
