-- Notifications: what is worth telling people (a resource failing or
-- recovering, drift, a source failing, stalled or recovering, a revision
-- applied), recorded by triggers in the transaction that makes the change,
-- whoever writes it, so that none is lost or told twice. Agents route each
-- to the configured providers (pending) and deliver it, retrying what
-- failed; results says, by provider, how the last delivery went. Times
-- are milliseconds since the Unix epoch.
CREATE TABLE notifications (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    event            TEXT NOT NULL,
    severity         TEXT NOT NULL,
    source           TEXT NOT NULL DEFAULT '',
    revision         TEXT NOT NULL DEFAULT '',
    kind             TEXT NOT NULL DEFAULT '',
    name             TEXT NOT NULL DEFAULT '',
    generation       INTEGER NOT NULL DEFAULT 0,
    labels           TEXT NOT NULL DEFAULT '{}',
    message          TEXT NOT NULL DEFAULT '',
    created_at       INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
    routed           INTEGER NOT NULL DEFAULT 0,
    pending          TEXT NOT NULL DEFAULT '[]',
    results          TEXT NOT NULL DEFAULT '{}',
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER NOT NULL DEFAULT 0,
    lease_owner      TEXT NOT NULL DEFAULT '',
    lease_expires_at INTEGER,
    lease_token      INTEGER NOT NULL DEFAULT 0,
    done_at          INTEGER
) STRICT;
CREATE INDEX notifications_open_idx ON notifications (next_attempt_at, id) WHERE done_at IS NULL;
CREATE INDEX notifications_source_idx ON notifications (source, id);

-- The last outcome told of each resource: '' (none), failed or ready, so
-- that a resource failing twenty times in a row is told once, and its
-- recovery once.
ALTER TABLE resources ADD COLUMN notified_outcome TEXT NOT NULL DEFAULT '';

CREATE TRIGGER resources_failed_told AFTER UPDATE OF phase ON resources
    WHEN NEW.phase = 'failed' AND OLD.phase IS NOT 'failed' AND NEW.notified_outcome <> 'failed'
BEGIN
    INSERT INTO notifications (event, severity, source, revision, kind, name, generation, labels, message)
    VALUES (CASE WHEN NEW.deletion_requested_at IS NOT NULL THEN 'DestroyFailed' ELSE 'ResourceFailed' END,
        'error', NEW.source_name, NEW.source_revision, NEW.kind, NEW.name, NEW.generation, NEW.labels,
        substr(NEW.status_message, 1, 2000));
    UPDATE resources SET notified_outcome = 'failed' WHERE id = NEW.id;
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_notifications', '');
END;

CREATE TRIGGER resources_recovered_told AFTER UPDATE OF phase ON resources
    WHEN NEW.phase = 'ready' AND OLD.phase IS NOT 'ready' AND NEW.notified_outcome = 'failed'
BEGIN
    INSERT INTO notifications (event, severity, source, revision, kind, name, generation, labels, message)
    VALUES ('ResourceRecovered', 'info', NEW.source_name, NEW.source_revision, NEW.kind, NEW.name,
        NEW.generation, NEW.labels, substr(NEW.status_message, 1, 2000));
    UPDATE resources SET notified_outcome = 'ready' WHERE id = NEW.id;
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_notifications', '');
END;

-- A drift check that found the world changed and applied the spec again.
CREATE TRIGGER reconcile_history_drift AFTER INSERT ON reconcile_history
    WHEN NEW.trigger = 'drift' AND NEW.no_drift_checks = 0 AND NEW.phase IN ('applying', 'completed')
BEGIN
    INSERT INTO notifications (event, severity, source, revision, kind, name, generation, labels, message)
    SELECT 'DriftDetected', 'warning', r.source_name, NEW.source_revision, NEW.kind, NEW.name, NEW.generation,
        r.labels, CASE WHEN NEW.success THEN 'drift corrected' ELSE substr('drift found; applying failed: ' || NEW.error, 1, 2000) END
    FROM resources r WHERE r.id = NEW.resource_id;
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_notifications', '');
END;

-- The sources' events; the first problems of a failed revision are told
-- with it, each as file:line: message.
CREATE TRIGGER sources_failed_told AFTER UPDATE OF phase ON sources
    WHEN NEW.phase = 'failed' AND OLD.phase IS NOT 'failed'
BEGIN
    INSERT INTO notifications (event, severity, source, revision, message)
    VALUES ('SourceFailed', 'error', NEW.name, NEW.last_attempted_revision, substr(NEW.message || coalesce(char(10) ||
        (SELECT group_concat(coalesce(nullif(json_extract(p.value, '$.file'), ''), '-') ||
            coalesce(':' || json_extract(p.value, '$.line'), '') || ': ' || json_extract(p.value, '$.message'), char(10))
         FROM (SELECT value FROM json_each(NEW.errors) LIMIT 5) p), ''), 1, 2000));
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_notifications', '');
END;

CREATE TRIGGER sources_failed_first_told AFTER INSERT ON sources
    WHEN NEW.phase = 'failed'
BEGIN
    INSERT INTO notifications (event, severity, source, revision, message)
    VALUES ('SourceFailed', 'error', NEW.name, NEW.last_attempted_revision, substr(NEW.message || coalesce(char(10) ||
        (SELECT group_concat(coalesce(nullif(json_extract(p.value, '$.file'), ''), '-') ||
            coalesce(':' || json_extract(p.value, '$.line'), '') || ': ' || json_extract(p.value, '$.message'), char(10))
         FROM (SELECT value FROM json_each(NEW.errors) LIMIT 5) p), ''), 1, 2000));
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_notifications', '');
END;

CREATE TRIGGER sources_stalled_told AFTER UPDATE OF phase ON sources
    WHEN NEW.phase = 'stalled' AND OLD.phase IS NOT 'stalled'
BEGIN
    INSERT INTO notifications (event, severity, source, revision, message)
    VALUES ('SourceStalled', 'warning', NEW.name, NEW.last_attempted_revision,
        substr(NEW.message || char(10) || 'Approve it with: no8s-agent approve source ' || NEW.name, 1, 2000));
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_notifications', '');
END;

CREATE TRIGGER sources_recovered_told AFTER UPDATE OF phase ON sources
    WHEN NEW.phase = 'ready' AND OLD.phase IN ('failed', 'stalled')
BEGIN
    INSERT INTO notifications (event, severity, source, revision, message)
    VALUES ('SourceRecovered', 'info', NEW.name, NEW.last_applied_revision, substr(NEW.message, 1, 2000));
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_notifications', '');
END;

CREATE TRIGGER sources_applied_told AFTER UPDATE OF last_applied_revision ON sources
    WHEN NEW.last_applied_revision <> '' AND NEW.last_applied_revision IS NOT OLD.last_applied_revision
BEGIN
    INSERT INTO notifications (event, severity, source, revision, message)
    VALUES ('RevisionApplied', 'info', NEW.name, NEW.last_applied_revision, 'applied ' || NEW.last_applied_revision);
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_notifications', '');
END;

CREATE TRIGGER sources_applied_first_told AFTER INSERT ON sources
    WHEN NEW.last_applied_revision <> ''
BEGIN
    INSERT INTO notifications (event, severity, source, revision, message)
    VALUES ('RevisionApplied', 'info', NEW.name, NEW.last_applied_revision, 'applied ' || NEW.last_applied_revision);
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_notifications', '');
END;
