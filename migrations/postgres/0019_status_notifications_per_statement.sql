-- Status notifications are built in one pass over a statement's rows, and
-- inserts and deletions send theirs once per statement too.
--
-- The notifications are those 0015 and 0018 defined: a statement's events
-- in id order, up to 2000 bytes each going together (a JSON array) in
-- chunks whose events start within the same 5000 bytes, larger ones alone.
-- The update trigger built them with three window functions, two sorts and
-- a grouping, and every claim and every batch of completions fires it: it
-- cost about as much as the rest of a claim. A sync that creates or
-- deletes thousands of resources called a function and sent a notification
-- per row, and each notification wakes every listening connection.

-- no8s_send_status_events sends events, in order, as described above.
CREATE FUNCTION no8s_send_status_events(events text[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    ev text;
    big boolean;
    -- Of the event before: whether it was large, and where it started in
    -- the statement's events. The first event starts a chunk.
    prev_big boolean := true;
    prev_start bigint := 0;
    start bigint := 0;
    -- The chunk being built: its events, joined by commas, and how many.
    chunk text := '';
    n integer := 0;
BEGIN
    FOREACH ev IN ARRAY coalesce(events, '{}') LOOP
        big := octet_length(ev) > 2000;
        IF n > 0 AND (big OR prev_big OR start / 5000 <> prev_start / 5000) THEN
            PERFORM pg_notify('no8s_status', CASE WHEN n = 1 THEN chunk ELSE '[' || chunk || ']' END);
            chunk := '';
            n := 0;
        END IF;
        IF n > 0 THEN
            chunk := chunk || ',';
        END IF;
        chunk := chunk || ev;
        n := n + 1;
        prev_big := big;
        prev_start := start;
        start := start + octet_length(ev);
    END LOOP;
    IF n > 0 THEN
        PERFORM pg_notify('no8s_status', CASE WHEN n = 1 THEN chunk ELSE '[' || chunk || ']' END);
    END IF;
END
$$;

-- no8s_status_event is the event of a row. The message is cut to 1000
-- characters, so that an event fits a notification's 8000 bytes.
CREATE FUNCTION no8s_status_event(r resources, deleted boolean) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT json_build_object(
        'id', r.id, 'kind', r.kind, 'namespace', r.namespace, 'name', r.name, 'source', r.source_name,
        'status', r.phase, 'status_message', left(r.status_message, 1000),
        'generation', r.generation, 'observed_generation', r.observed_generation,
        'deleted', deleted, 'suspended', r.suspended)::text
$$;

CREATE OR REPLACE FUNCTION no8s_notify_status_updates() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM no8s_send_status_events(ARRAY(
        SELECT no8s_status_event(n, false)
        FROM no8s_new_rows n JOIN no8s_old_rows o ON o.id = n.id
        WHERE o.phase IS DISTINCT FROM n.phase
            OR o.status_message IS DISTINCT FROM n.status_message
            OR o.conditions IS DISTINCT FROM n.conditions
            OR o.generation IS DISTINCT FROM n.generation
            OR o.observed_generation IS DISTINCT FROM n.observed_generation
            OR o.suspended IS DISTINCT FROM n.suspended
        ORDER BY n.id));
    RETURN NULL;
END
$$;
-- As 0017 set it: CREATE OR REPLACE drops a function's settings.
ALTER FUNCTION no8s_notify_status_updates() SET enable_nestloop = off;

CREATE FUNCTION no8s_notify_status_inserts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM no8s_send_status_events(ARRAY(SELECT no8s_status_event(n, false) FROM no8s_new_rows n ORDER BY n.id));
    RETURN NULL;
END
$$;

CREATE FUNCTION no8s_notify_status_deletes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM no8s_send_status_events(ARRAY(SELECT no8s_status_event(o, true) FROM no8s_old_rows o ORDER BY o.id));
    RETURN NULL;
END
$$;

-- A trigger with transition tables fires on one event only.
DROP TRIGGER resources_created_or_removed ON resources;
CREATE TRIGGER resources_created AFTER INSERT ON resources
    REFERENCING NEW TABLE AS no8s_new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION no8s_notify_status_inserts();
CREATE TRIGGER resources_removed AFTER DELETE ON resources
    REFERENCING OLD TABLE AS no8s_old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION no8s_notify_status_deletes();
DROP FUNCTION no8s_notify_status();
