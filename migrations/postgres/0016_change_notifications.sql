-- Change notifications for copies kept in memory.
--
-- The API answers reads from a copy of the resources, sources and resource
-- types that it keeps current from notifications. Status changes of a
-- resource are announced on no8s_status already; every other change of a
-- resource's row, and every change of a source or a type, is announced on
-- no8s_changes with the row's key: r:<id>, s:<name>, t:<id>. A listener
-- reads the row again; the payload says only which.
--
-- Store versions order writes and reads across agents: a fence takes the
-- next number of no8s_store_version and announces it on no8s_changes as
-- v:<n> in the same statement. Notifications arrive in commit order, so a
-- listener that has heard v:<n> has heard every change committed before
-- the fence began.
CREATE SEQUENCE no8s_store_version;

CREATE FUNCTION no8s_notify_resource_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('no8s_changes', 'r:' || NEW.id);
    RETURN NULL;
END
$$;

-- The complement of the condition on which resources_status_changed sends a
-- row's status: each updated row is announced once, on one topic or the
-- other.
CREATE TRIGGER resources_changed AFTER UPDATE ON resources
    FOR EACH ROW WHEN (NOT (OLD.phase IS DISTINCT FROM NEW.phase
        OR OLD.status_message IS DISTINCT FROM NEW.status_message
        OR OLD.conditions IS DISTINCT FROM NEW.conditions
        OR OLD.generation IS DISTINCT FROM NEW.generation
        OR OLD.observed_generation IS DISTINCT FROM NEW.observed_generation
        OR OLD.suspended IS DISTINCT FROM NEW.suspended))
    EXECUTE FUNCTION no8s_notify_resource_changed();

CREATE FUNCTION no8s_notify_source_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('no8s_changes', 's:' || OLD.name);
    ELSE
        PERFORM pg_notify('no8s_changes', 's:' || NEW.name);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER sources_changed AFTER INSERT OR UPDATE OR DELETE ON sources
    FOR EACH ROW EXECUTE FUNCTION no8s_notify_source_changed();

CREATE FUNCTION no8s_notify_type_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('no8s_changes', 't:' || OLD.id);
    ELSE
        PERFORM pg_notify('no8s_changes', 't:' || NEW.id);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER resource_types_changed AFTER INSERT OR UPDATE OR DELETE ON resource_types
    FOR EACH ROW EXECUTE FUNCTION no8s_notify_type_changed();
