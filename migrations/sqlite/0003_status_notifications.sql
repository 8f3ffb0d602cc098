-- Notifications, delivered when their transaction commits.
--
-- Every listener hears of each change to a resource's status, whoever
-- writes it (a sync, a claim, a completion, a heartbeat with progress, a
-- deletion): triggers write the event so that no write path can forget to.
-- Notifications wait in notify_outbox, in the order they were made; the
-- store reads and empties it just before each commit and hands them to its
-- listeners once the commit succeeded. A transaction that rolls back
-- (or a savepoint rolled back to) takes its notifications with it. Lease
-- renewals that change nothing visible send nothing.
CREATE TABLE notify_outbox (
    id      INTEGER PRIMARY KEY,
    topic   TEXT NOT NULL,
    payload TEXT NOT NULL
) STRICT;

-- The payload is a store.StatusEvent; the message is cut to 1000 characters
-- (store.MaxStatusMessage), so that events look the same from either backend.
CREATE TRIGGER resources_status_inserted AFTER INSERT ON resources
BEGIN
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_status', json_object(
        'id', NEW.id, 'kind', NEW.kind, 'name', NEW.name, 'source', NEW.source_name,
        'status', NEW.phase, 'status_message', substr(NEW.status_message, 1, 1000),
        'generation', NEW.generation, 'observed_generation', NEW.observed_generation,
        'deleted', json('false')));
END;

CREATE TRIGGER resources_status_deleted AFTER DELETE ON resources
BEGIN
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_status', json_object(
        'id', OLD.id, 'kind', OLD.kind, 'name', OLD.name, 'source', OLD.source_name,
        'status', OLD.phase, 'status_message', substr(OLD.status_message, 1, 1000),
        'generation', OLD.generation, 'observed_generation', OLD.observed_generation,
        'deleted', json('true')));
END;

CREATE TRIGGER resources_status_updated
    AFTER UPDATE OF phase, status_message, conditions, generation, observed_generation ON resources
    WHEN OLD.phase IS NOT NEW.phase
        OR OLD.status_message IS NOT NEW.status_message
        OR OLD.conditions IS NOT NEW.conditions
        OR OLD.generation IS NOT NEW.generation
        OR OLD.observed_generation IS NOT NEW.observed_generation
BEGIN
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_status', json_object(
        'id', NEW.id, 'kind', NEW.kind, 'name', NEW.name, 'source', NEW.source_name,
        'status', NEW.phase, 'status_message', substr(NEW.status_message, 1, 1000),
        'generation', NEW.generation, 'observed_generation', NEW.observed_generation,
        'deleted', json('false')));
END;
