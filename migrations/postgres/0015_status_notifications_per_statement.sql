-- Status notifications of updates are sent once per statement rather than
-- by a trigger call per row. A claim or a batch of completions updates many
-- rows in one statement, and a row trigger ran a PL/pgSQL call and sent a
-- notification for each of them; the statement trigger reads the rows
-- before and after the update from its transition tables, builds the same
-- event for each row whose status changed, as before, and sends the events
-- of the statement together: a JSON array of events in each notification,
-- or the event itself when the statement changed one row. The store's
-- listener hands them out one by one again. Inserts and deletions keep
-- their row trigger.
--
-- Payloads are limited to 8000 bytes, and an event's message is cut to 1000
-- characters: events of up to 2000 bytes go together, in id order, in
-- chunks whose events start within the same 5000 bytes of the statement's
-- events (under 7200 bytes each); larger ones go alone.
CREATE FUNCTION no8s_notify_status_updates() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('no8s_status', c.payload)
    FROM (
        SELECT CASE WHEN count(*) = 1 THEN min(e.payload)
                ELSE '[' || string_agg(e.payload, ',' ORDER BY e.id) || ']' END AS payload
        FROM (
            SELECT e.id, e.payload, sum(e.brk) OVER (ORDER BY e.id) AS chunk
            FROM (
                SELECT e.id, e.payload,
                    CASE WHEN e.big OR lag(e.big, 1, true) OVER w
                        OR e.start / 5000 <> lag(e.start, 1, 0::bigint) OVER w / 5000 THEN 1 ELSE 0 END AS brk
                FROM (
                    SELECT e.id, e.payload, octet_length(e.payload) > 2000 AS big,
                        coalesce(sum(octet_length(e.payload)) OVER (ORDER BY e.id
                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS start
                    FROM (
                        SELECT n.id, json_build_object(
                            'id', n.id, 'kind', n.kind, 'name', n.name, 'source', n.source_name,
                            'status', n.phase, 'status_message', left(n.status_message, 1000),
                            'generation', n.generation, 'observed_generation', n.observed_generation,
                            'deleted', false, 'suspended', n.suspended)::text AS payload
                        FROM no8s_new_rows n JOIN no8s_old_rows o ON o.id = n.id
                        WHERE o.phase IS DISTINCT FROM n.phase
                            OR o.status_message IS DISTINCT FROM n.status_message
                            OR o.conditions IS DISTINCT FROM n.conditions
                            OR o.generation IS DISTINCT FROM n.generation
                            OR o.observed_generation IS DISTINCT FROM n.observed_generation
                            OR o.suspended IS DISTINCT FROM n.suspended
                    ) e
                ) e
                WINDOW w AS (ORDER BY e.id)
            ) e
        ) e
        GROUP BY e.chunk
        ORDER BY min(e.id)
    ) c;
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
