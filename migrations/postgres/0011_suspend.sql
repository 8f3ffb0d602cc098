-- Suspension. A suspended resource is neither reconciled nor checked for
-- drift nor destroyed until resumed; a suspended source is neither fetched
-- nor synced. A resource is suspended through the API (suspended_at) or by
-- its annotation no8s.io/suspend: "true"; a source through the API or by
-- suspend: true in an agent's configuration (suspended_by says which).
ALTER TABLE resources ADD COLUMN suspended_at timestamptz;
-- What claims filter on. A plain boolean keeps the planner's estimates
-- sound: without statistics (a table just filled) it takes a test of
-- suspended_at IS NULL to match 0.5% of the rows, and would sort every due
-- row at each claim instead of walking the urgent index.
ALTER TABLE resources ADD COLUMN suspended boolean NOT NULL GENERATED ALWAYS AS
    (suspended_at IS NOT NULL OR coalesce(annotations->>'no8s.io/suspend' = 'true', false)) STORED;
ALTER TABLE sources ADD COLUMN suspended_at timestamptz;
ALTER TABLE sources ADD COLUMN suspended_by text NOT NULL DEFAULT ''
    CHECK (suspended_by IN ('', 'api', 'config'));

-- Status notifications say whether the resource is suspended, and a
-- suspension or resume is announced like a change of status.
CREATE OR REPLACE FUNCTION no8s_notify_status() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r resources;
BEGIN
    IF TG_OP = 'DELETE' THEN
        r := OLD;
    ELSE
        r := NEW;
    END IF;
    -- Payloads are limited to 8000 bytes: the message is cut to 1000 characters.
    PERFORM pg_notify('no8s_status', json_build_object(
        'id', r.id, 'kind', r.kind, 'name', r.name, 'source', r.source_name,
        'status', r.phase, 'status_message', left(r.status_message, 1000),
        'generation', r.generation, 'observed_generation', r.observed_generation,
        'deleted', TG_OP = 'DELETE', 'suspended', r.suspended)::text);
    RETURN NULL;
END
$$;

DROP TRIGGER resources_status_changed ON resources;
CREATE TRIGGER resources_status_changed AFTER UPDATE ON resources
    FOR EACH ROW WHEN (OLD.phase IS DISTINCT FROM NEW.phase
        OR OLD.status_message IS DISTINCT FROM NEW.status_message
        OR OLD.conditions IS DISTINCT FROM NEW.conditions
        OR OLD.generation IS DISTINCT FROM NEW.generation
        OR OLD.observed_generation IS DISTINCT FROM NEW.observed_generation
        OR OLD.suspended IS DISTINCT FROM NEW.suspended)
    EXECUTE FUNCTION no8s_notify_status();
