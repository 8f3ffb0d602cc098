-- Change notifications for copies kept in memory.
--
-- The API answers reads from a copy of the resources, sources and resource
-- types that it keeps current from notifications. Status changes of a
-- resource are announced on no8s_status already; every other change of a
-- resource's row, and every change of a source or a type, is announced on
-- no8s_changes with the row's key: r:<id>, s:<name>, t:<id>. A listener
-- reads the row again; the payload says only which.
--
-- Store versions order writes and reads: a fence takes the next number of
-- store_version and announces it on no8s_changes as v:<n> in the same
-- transaction. Notifications arrive in commit order, so a listener that
-- has heard v:<n> has heard every change committed before the fence began.
CREATE TABLE store_version (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    v  INTEGER NOT NULL
);
INSERT INTO store_version (id, v) VALUES (1, 0);

-- The complement of resources_status_updated's condition: each update is
-- announced once, on one topic or the other.
CREATE TRIGGER resources_changed AFTER UPDATE ON resources
    WHEN NOT (OLD.phase IS NOT NEW.phase
        OR OLD.status_message IS NOT NEW.status_message
        OR OLD.conditions IS NOT NEW.conditions
        OR OLD.generation IS NOT NEW.generation
        OR OLD.observed_generation IS NOT NEW.observed_generation
        OR OLD.suspended_at IS NOT NEW.suspended_at
        OR coalesce(json_extract(OLD.annotations, '$."no8s.io/suspend"'), '') IS NOT
           coalesce(json_extract(NEW.annotations, '$."no8s.io/suspend"'), ''))
BEGIN
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_changes', 'r:' || NEW.id);
END;

CREATE TRIGGER sources_inserted AFTER INSERT ON sources
BEGIN
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_changes', 's:' || NEW.name);
END;
CREATE TRIGGER sources_updated AFTER UPDATE ON sources
BEGIN
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_changes', 's:' || NEW.name);
END;
CREATE TRIGGER sources_deleted AFTER DELETE ON sources
BEGIN
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_changes', 's:' || OLD.name);
END;

CREATE TRIGGER resource_types_inserted AFTER INSERT ON resource_types
BEGIN
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_changes', 't:' || NEW.id);
END;
CREATE TRIGGER resource_types_updated AFTER UPDATE ON resource_types
BEGIN
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_changes', 't:' || NEW.id);
END;
CREATE TRIGGER resource_types_deleted AFTER DELETE ON resource_types
BEGIN
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_changes', 't:' || OLD.id);
END;
