-- Status notifications and the time a source's revision was applied.
--
-- Every agent on the database, and every event stream it serves, hears of
-- each change to a resource's status: whoever writes it (a sync, a claim, a
-- completion, a heartbeat with progress, a deletion). A trigger sends the
-- notification so that no write path can forget to, and it is delivered at
-- commit like the rest of the transaction. Lease renewals that change
-- nothing visible send nothing.
ALTER TABLE sources ADD COLUMN last_applied_time timestamptz;
UPDATE sources SET last_applied_time = last_sync_time
    WHERE last_applied_revision <> '' AND last_applied_revision = last_attempted_revision;

CREATE FUNCTION no8s_notify_status() RETURNS trigger LANGUAGE plpgsql AS $$
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
        'deleted', TG_OP = 'DELETE')::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER resources_created_or_removed AFTER INSERT OR DELETE ON resources
    FOR EACH ROW EXECUTE FUNCTION no8s_notify_status();

CREATE TRIGGER resources_status_changed AFTER UPDATE ON resources
    FOR EACH ROW WHEN (OLD.phase IS DISTINCT FROM NEW.phase
        OR OLD.status_message IS DISTINCT FROM NEW.status_message
        OR OLD.conditions IS DISTINCT FROM NEW.conditions
        OR OLD.generation IS DISTINCT FROM NEW.generation
        OR OLD.observed_generation IS DISTINCT FROM NEW.observed_generation)
    EXECUTE FUNCTION no8s_notify_status();
