-- Notifications: what is worth telling people (a resource failing or
-- recovering, drift, a source failing, stalled or recovering, a revision
-- applied), recorded by triggers in the transaction that makes the change,
-- whoever writes it, so that none is lost or told twice. Agents route each
-- to the configured providers (pending) and deliver it, retrying what
-- failed; results says, by provider, how the last delivery went.
CREATE TABLE notifications (
    id               bigserial PRIMARY KEY,
    event            text NOT NULL,
    severity         text NOT NULL,
    source           text NOT NULL DEFAULT '',
    revision         text NOT NULL DEFAULT '',
    kind             text NOT NULL DEFAULT '',
    name             text NOT NULL DEFAULT '',
    generation       bigint NOT NULL DEFAULT 0,
    labels           jsonb NOT NULL DEFAULT '{}',
    message          text NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT now(),
    routed           boolean NOT NULL DEFAULT false,
    pending          jsonb NOT NULL DEFAULT '[]',
    results          jsonb NOT NULL DEFAULT '{}',
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    lease_owner      text NOT NULL DEFAULT '',
    lease_expires_at timestamptz,
    lease_token      bigint NOT NULL DEFAULT 0,
    done_at          timestamptz
);
CREATE INDEX notifications_open_idx ON notifications (next_attempt_at, id) WHERE done_at IS NULL;
CREATE INDEX notifications_source_idx ON notifications (source, id);

-- The last outcome told of each resource: '' (none), failed or ready, so
-- that a resource failing twenty times in a row is told once, and its
-- recovery once.
ALTER TABLE resources ADD COLUMN notified_outcome text NOT NULL DEFAULT '';

CREATE FUNCTION no8s_resource_outcome() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.phase = 'failed' AND NEW.notified_outcome <> 'failed' THEN
        INSERT INTO notifications (event, severity, source, revision, kind, name, generation, labels, message)
        VALUES (CASE WHEN NEW.deletion_requested_at IS NOT NULL THEN 'DestroyFailed' ELSE 'ResourceFailed' END,
            'error', NEW.source_name, NEW.source_revision, NEW.kind, NEW.name, NEW.generation, NEW.labels,
            left(NEW.status_message, 2000));
        NEW.notified_outcome := 'failed';
        PERFORM pg_notify('no8s_notifications', '');
    ELSIF NEW.phase = 'ready' AND NEW.notified_outcome = 'failed' THEN
        INSERT INTO notifications (event, severity, source, revision, kind, name, generation, labels, message)
        VALUES ('ResourceRecovered', 'info', NEW.source_name, NEW.source_revision, NEW.kind, NEW.name,
            NEW.generation, NEW.labels, left(NEW.status_message, 2000));
        NEW.notified_outcome := 'ready';
        PERFORM pg_notify('no8s_notifications', '');
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER resources_outcome BEFORE UPDATE OF phase ON resources
    FOR EACH ROW WHEN (OLD.phase IS DISTINCT FROM NEW.phase AND NEW.phase IN ('failed', 'ready'))
    EXECUTE FUNCTION no8s_resource_outcome();

-- A drift check that found the world changed and applied the spec again.
CREATE FUNCTION no8s_drift_detected() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO notifications (event, severity, source, revision, kind, name, generation, labels, message)
    SELECT 'DriftDetected', 'warning', r.source_name, NEW.source_revision, NEW.kind, NEW.name, NEW.generation,
        r.labels, CASE WHEN NEW.success THEN 'drift corrected' ELSE left('drift found; applying failed: ' || NEW.error, 2000) END
    FROM resources r WHERE r.id = NEW.resource_id;
    PERFORM pg_notify('no8s_notifications', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER reconcile_history_drift AFTER INSERT ON reconcile_history
    FOR EACH ROW WHEN (NEW.trigger = 'drift' AND NEW.no_drift_checks = 0 AND NEW.phase IN ('applying', 'completed'))
    EXECUTE FUNCTION no8s_drift_detected();

CREATE FUNCTION no8s_source_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    old_phase   text := '';
    old_applied text := '';
    problems    text;
    told        boolean := true;
BEGIN
    IF TG_OP = 'UPDATE' THEN
        old_phase := OLD.phase;
        old_applied := OLD.last_applied_revision;
    END IF;
    IF NEW.phase = 'failed' AND old_phase <> 'failed' THEN
        SELECT string_agg(coalesce(nullif(p->>'file', ''), '-') || coalesce(':' || (p->>'line'), '') || ': ' || (p->>'message'), E'\n')
            INTO problems FROM (SELECT p FROM jsonb_array_elements(NEW.errors) p LIMIT 5) first;
        INSERT INTO notifications (event, severity, source, revision, message)
        VALUES ('SourceFailed', 'error', NEW.name, NEW.last_attempted_revision,
            left(NEW.message || coalesce(E'\n' || problems, ''), 2000));
    ELSIF NEW.phase = 'stalled' AND old_phase <> 'stalled' THEN
        INSERT INTO notifications (event, severity, source, revision, message)
        VALUES ('SourceStalled', 'warning', NEW.name, NEW.last_attempted_revision,
            left(NEW.message || E'\nApprove it with: no8s-agent approve source ' || NEW.name, 2000));
    ELSIF NEW.phase = 'ready' AND old_phase IN ('failed', 'stalled') THEN
        INSERT INTO notifications (event, severity, source, revision, message)
        VALUES ('SourceRecovered', 'info', NEW.name, NEW.last_applied_revision, left(NEW.message, 2000));
    ELSE
        told := false;
    END IF;
    IF NEW.last_applied_revision <> '' AND NEW.last_applied_revision <> old_applied THEN
        INSERT INTO notifications (event, severity, source, revision, message)
        VALUES ('RevisionApplied', 'info', NEW.name, NEW.last_applied_revision,
            'applied ' || NEW.last_applied_revision);
        told := true;
    END IF;
    IF told THEN
        PERFORM pg_notify('no8s_notifications', '');
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER sources_events AFTER INSERT OR UPDATE OF phase, last_applied_revision ON sources
    FOR EACH ROW EXECUTE FUNCTION no8s_source_events();
