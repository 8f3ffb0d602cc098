-- A revision a source refuses (invalid, unsigned, in conflict, stalled on
-- the prune guard) is told once, whatever the polls and retries that judge
-- it again, so that a commit-status provider marks the commit that broke
-- things: RevisionRefused, with the source's message and first problems.
-- SourceFailed and SourceStalled tell of the source's phase changing, which
-- a second refused revision in a row does not do. refusal_told_revision is
-- the refused revision last told; applying a revision clears it, so that a
-- revision refused again later (pushed back) is told again. Fetch failures
-- are about the remote, not a revision, and are not told here.
ALTER TABLE sources ADD COLUMN refusal_told_revision TEXT NOT NULL DEFAULT '';

CREATE TRIGGER sources_refused_told AFTER UPDATE ON sources
    WHEN NEW.phase IN ('failed', 'stalled') AND NEW.last_attempted_revision <> ''
        AND NEW.last_attempted_revision <> NEW.refusal_told_revision
        AND NEW.message NOT LIKE 'FetchFailed:%'
BEGIN
    INSERT INTO notifications (event, severity, source, revision, message)
    VALUES ('RevisionRefused', CASE WHEN NEW.phase = 'stalled' THEN 'warning' ELSE 'error' END, NEW.name,
        NEW.last_attempted_revision, substr(NEW.message || coalesce(char(10) ||
        (SELECT group_concat(coalesce(nullif(json_extract(p.value, '$.file'), ''), '-') ||
            coalesce(':' || json_extract(p.value, '$.line'), '') || ': ' || json_extract(p.value, '$.message'), char(10))
         FROM (SELECT value FROM json_each(NEW.errors) LIMIT 5) p), ''), 1, 2000));
    UPDATE sources SET refusal_told_revision = NEW.last_attempted_revision WHERE name = NEW.name;
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_notifications', '');
END;

CREATE TRIGGER sources_refused_first_told AFTER INSERT ON sources
    WHEN NEW.phase IN ('failed', 'stalled') AND NEW.last_attempted_revision <> ''
        AND NEW.message NOT LIKE 'FetchFailed:%'
BEGIN
    INSERT INTO notifications (event, severity, source, revision, message)
    VALUES ('RevisionRefused', CASE WHEN NEW.phase = 'stalled' THEN 'warning' ELSE 'error' END, NEW.name,
        NEW.last_attempted_revision, substr(NEW.message || coalesce(char(10) ||
        (SELECT group_concat(coalesce(nullif(json_extract(p.value, '$.file'), ''), '-') ||
            coalesce(':' || json_extract(p.value, '$.line'), '') || ': ' || json_extract(p.value, '$.message'), char(10))
         FROM (SELECT value FROM json_each(NEW.errors) LIMIT 5) p), ''), 1, 2000));
    UPDATE sources SET refusal_told_revision = NEW.last_attempted_revision WHERE name = NEW.name;
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_notifications', '');
END;

CREATE TRIGGER sources_refusal_cleared AFTER UPDATE OF phase ON sources
    WHEN NEW.phase = 'ready' AND NEW.refusal_told_revision <> ''
BEGIN
    UPDATE sources SET refusal_told_revision = '' WHERE name = NEW.name;
END;

-- When the source was last fetched and judged, a poll or a webhook,
-- whether or not anything had changed: last_sync_time moves only when a
-- revision is applied or refused, so a source polled every few seconds
-- looked idle for as long as nothing changed. Agents write it at most
-- every few seconds per source, not at every poll.
ALTER TABLE sources ADD COLUMN last_check_time INTEGER;
