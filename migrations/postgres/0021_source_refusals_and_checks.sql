-- A revision a source refuses (invalid, unsigned, in conflict, stalled on
-- the prune guard) is told once, whatever the polls and retries that judge
-- it again, so that a commit-status provider marks the commit that broke
-- things: RevisionRefused, with the source's message and first problems.
-- SourceFailed and SourceStalled tell of the source's phase changing, which
-- a second refused revision in a row does not do. refusal_told_revision is
-- the refused revision last told; applying a revision clears it, so that a
-- revision refused again later (pushed back) is told again. Fetch failures
-- are about the remote, not a revision, and are not told here.
ALTER TABLE sources ADD COLUMN refusal_told_revision text NOT NULL DEFAULT '';

CREATE FUNCTION no8s_revision_refused() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    problems text;
BEGIN
    -- INSERT ... ON CONFLICT runs the insert's BEFORE trigger on the row
    -- proposed, which knows nothing of what was told: the update judges.
    IF TG_OP = 'INSERT' AND EXISTS (SELECT 1 FROM sources WHERE name = NEW.name) THEN
        RETURN NEW;
    END IF;
    IF NEW.phase = 'ready' THEN
        NEW.refusal_told_revision := '';
    ELSIF NEW.phase IN ('failed', 'stalled') AND NEW.last_attempted_revision <> ''
            AND NEW.last_attempted_revision <> NEW.refusal_told_revision
            AND NEW.message NOT LIKE 'FetchFailed:%' THEN
        SELECT string_agg(coalesce(nullif(p->>'file', ''), '-') || coalesce(':' || (p->>'line'), '') || ': ' || (p->>'message'), E'\n')
            INTO problems FROM (SELECT p FROM jsonb_array_elements(NEW.errors) p LIMIT 5) first;
        INSERT INTO notifications (event, severity, source, revision, message)
        VALUES ('RevisionRefused', CASE WHEN NEW.phase = 'stalled' THEN 'warning' ELSE 'error' END, NEW.name,
            NEW.last_attempted_revision, left(NEW.message || coalesce(E'\n' || problems, ''), 2000));
        NEW.refusal_told_revision := NEW.last_attempted_revision;
        PERFORM pg_notify('no8s_notifications', '');
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER sources_refused BEFORE INSERT OR UPDATE ON sources
    FOR EACH ROW EXECUTE FUNCTION no8s_revision_refused();

-- When the source was last fetched and judged, a poll or a webhook,
-- whether or not anything had changed: last_sync_time moves only when a
-- revision is applied or refused, so a source polled every few seconds
-- looked idle for as long as nothing changed. Agents write it at most
-- every few seconds per source, not at every poll.
ALTER TABLE sources ADD COLUMN last_check_time timestamptz;
