-- Suspension. A suspended resource is neither reconciled nor checked for
-- drift nor destroyed until resumed; a suspended source is neither fetched
-- nor synced. A resource is suspended through the API (suspended_at,
-- milliseconds since the Unix epoch) or by its annotation
-- no8s.io/suspend: "true"; a source through the API or by suspend: true in
-- an agent's configuration (suspended_by says which).
ALTER TABLE resources ADD COLUMN suspended_at INTEGER;
ALTER TABLE sources ADD COLUMN suspended_at INTEGER;
ALTER TABLE sources ADD COLUMN suspended_by TEXT NOT NULL DEFAULT ''
    CHECK (suspended_by IN ('', 'api', 'config'));

-- Status notifications say whether the resource is suspended, and a
-- suspension or resume is announced like a change of status.
DROP TRIGGER resources_status_inserted;
DROP TRIGGER resources_status_deleted;
DROP TRIGGER resources_status_updated;

CREATE TRIGGER resources_status_inserted AFTER INSERT ON resources
BEGIN
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_status', json_object(
        'id', NEW.id, 'kind', NEW.kind, 'name', NEW.name, 'source', NEW.source_name,
        'status', NEW.phase, 'status_message', substr(NEW.status_message, 1, 1000),
        'generation', NEW.generation, 'observed_generation', NEW.observed_generation,
        'deleted', json('false'),
        'suspended', json(CASE WHEN NEW.suspended_at IS NOT NULL
            OR coalesce(json_extract(NEW.annotations, '$."no8s.io/suspend"'), '') = 'true' THEN 'true' ELSE 'false' END)));
END;

CREATE TRIGGER resources_status_deleted AFTER DELETE ON resources
BEGIN
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_status', json_object(
        'id', OLD.id, 'kind', OLD.kind, 'name', OLD.name, 'source', OLD.source_name,
        'status', OLD.phase, 'status_message', substr(OLD.status_message, 1, 1000),
        'generation', OLD.generation, 'observed_generation', OLD.observed_generation,
        'deleted', json('true'),
        'suspended', json(CASE WHEN OLD.suspended_at IS NOT NULL
            OR coalesce(json_extract(OLD.annotations, '$."no8s.io/suspend"'), '') = 'true' THEN 'true' ELSE 'false' END)));
END;

CREATE TRIGGER resources_status_updated
    AFTER UPDATE OF phase, status_message, conditions, generation, observed_generation, suspended_at, annotations ON resources
    WHEN OLD.phase IS NOT NEW.phase
        OR OLD.status_message IS NOT NEW.status_message
        OR OLD.conditions IS NOT NEW.conditions
        OR OLD.generation IS NOT NEW.generation
        OR OLD.observed_generation IS NOT NEW.observed_generation
        OR OLD.suspended_at IS NOT NEW.suspended_at
        OR coalesce(json_extract(OLD.annotations, '$."no8s.io/suspend"'), '') IS NOT
           coalesce(json_extract(NEW.annotations, '$."no8s.io/suspend"'), '')
BEGIN
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_status', json_object(
        'id', NEW.id, 'kind', NEW.kind, 'name', NEW.name, 'source', NEW.source_name,
        'status', NEW.phase, 'status_message', substr(NEW.status_message, 1, 1000),
        'generation', NEW.generation, 'observed_generation', NEW.observed_generation,
        'deleted', json('false'),
        'suspended', json(CASE WHEN NEW.suspended_at IS NOT NULL
            OR coalesce(json_extract(NEW.annotations, '$."no8s.io/suspend"'), '') = 'true' THEN 'true' ELSE 'false' END)));
END;
