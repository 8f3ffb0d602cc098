-- Status notifications of updates are sent once per statement rather than
-- by a trigger call per row. A claim or a batch of completions updates many
-- rows in one statement, and a row trigger ran a PL/pgSQL call for each of
-- them; the statement trigger reads the rows before and after the update
-- from its transition tables and sends, in one query, the same notification
-- for each row whose status changed, as before. Inserts and deletions keep
-- their row trigger.
CREATE FUNCTION no8s_notify_status_updates() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Payloads are limited to 8000 bytes: the message is cut to 1000 characters.
    PERFORM pg_notify('no8s_status', json_build_object(
        'id', n.id, 'kind', n.kind, 'name', n.name, 'source', n.source_name,
        'status', n.phase, 'status_message', left(n.status_message, 1000),
        'generation', n.generation, 'observed_generation', n.observed_generation,
        'deleted', false, 'suspended', n.suspended)::text)
    FROM no8s_new_rows n JOIN no8s_old_rows o ON o.id = n.id
    WHERE o.phase IS DISTINCT FROM n.phase
        OR o.status_message IS DISTINCT FROM n.status_message
        OR o.conditions IS DISTINCT FROM n.conditions
        OR o.generation IS DISTINCT FROM n.generation
        OR o.observed_generation IS DISTINCT FROM n.observed_generation
        OR o.suspended IS DISTINCT FROM n.suspended
    ORDER BY n.id;
    RETURN NULL;
END
$$;

DROP TRIGGER resources_status_changed ON resources;
CREATE TRIGGER resources_status_changed AFTER UPDATE ON resources
    REFERENCING OLD TABLE AS no8s_old_rows NEW TABLE AS no8s_new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION no8s_notify_status_updates();

-- The outcome trigger does something only when the outcome told changes:
-- its condition says so, so that the common success after a success calls
-- no function at all.
DROP TRIGGER resources_outcome ON resources;
CREATE TRIGGER resources_outcome BEFORE UPDATE OF phase ON resources
    FOR EACH ROW WHEN (OLD.phase IS DISTINCT FROM NEW.phase
        AND ((NEW.phase = 'failed' AND NEW.notified_outcome <> 'failed')
          OR (NEW.phase = 'ready' AND NEW.notified_outcome = 'failed')))
    EXECUTE FUNCTION no8s_resource_outcome();
