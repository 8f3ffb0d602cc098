-- An agent that shuts down cleanly says so, so that it is listed as
-- stopped rather than gone (which is kept for agents that vanished).
ALTER TABLE agents ADD COLUMN stopped_at timestamptz;

-- A resource suspended by its annotation no8s.io/suspend: "true" records
-- since when, as a suspension through the API does (suspended_at): the
-- time the annotation was first written, kept while it stays, cleared when
-- it goes. A trigger keeps it, whatever statement writes the annotations.
-- Resources annotated already take their last update's time.
ALTER TABLE resources ADD COLUMN annotation_suspended_at timestamptz;
UPDATE resources SET annotation_suspended_at = updated_at
    WHERE annotations->>'no8s.io/suspend' = 'true';

CREATE FUNCTION no8s_note_annotation_suspension() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(NEW.annotations->>'no8s.io/suspend' = 'true', false) THEN
        IF TG_OP = 'INSERT' OR OLD.annotation_suspended_at IS NULL THEN
            NEW.annotation_suspended_at := now();
        END IF;
    ELSE
        NEW.annotation_suspended_at := NULL;
    END IF;
    RETURN NEW;
END
$$;

-- Only rows whose annotations change run it: applies that leave them as
-- they are cost nothing more.
CREATE TRIGGER resources_annotation_suspension_inserted BEFORE INSERT ON resources
    FOR EACH ROW WHEN (NEW.annotations ? 'no8s.io/suspend')
    EXECUTE FUNCTION no8s_note_annotation_suspension();
CREATE TRIGGER resources_annotation_suspension_updated BEFORE UPDATE OF annotations ON resources
    FOR EACH ROW WHEN (OLD.annotations IS DISTINCT FROM NEW.annotations)
    EXECUTE FUNCTION no8s_note_annotation_suspension();
