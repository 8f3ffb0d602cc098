-- The status trigger sends the same notifications as before (see 0015 and
-- 0018: events of one statement in id order, up to 2000 bytes each going
-- together in chunks whose events start within the same 5000 bytes, larger
-- ones alone), but builds them in one pass over the statement's changed
-- rows rather than with three window functions, two sorts and a grouping.
-- Every claim and every batch of completions fires it, and the query it
-- replaces cost about as much as the rest of a claim's statement.
CREATE OR REPLACE FUNCTION no8s_notify_status_updates() RETURNS trigger LANGUAGE plpgsql AS $$
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
    FOR ev IN
        SELECT json_build_object(
            'id', n.id, 'kind', n.kind, 'namespace', n.namespace, 'name', n.name, 'source', n.source_name,
            'status', n.phase, 'status_message', left(n.status_message, 1000),
            'generation', n.generation, 'observed_generation', n.observed_generation,
            'deleted', false, 'suspended', n.suspended)::text
        FROM no8s_new_rows n JOIN no8s_old_rows o ON o.id = n.id
        WHERE o.phase IS DISTINCT FROM n.phase
            OR o.status_message IS DISTINCT FROM n.status_message
            OR o.conditions IS DISTINCT FROM n.conditions
            OR o.generation IS DISTINCT FROM n.generation
            OR o.observed_generation IS DISTINCT FROM n.observed_generation
            OR o.suspended IS DISTINCT FROM n.suspended
        ORDER BY n.id
    LOOP
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
    RETURN NULL;
END
$$;
-- As 0017 set it: CREATE OR REPLACE drops a function's settings.
ALTER FUNCTION no8s_notify_status_updates() SET enable_nestloop = off;
