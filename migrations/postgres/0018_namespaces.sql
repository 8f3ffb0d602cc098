-- Namespaces: a resource is identified by (kind, namespace, name).
--
-- Every resource stored so far was declared without a namespace, so it
-- moves to "default", the default namespace this migration records: the
-- one the agent places such resources in unless configured otherwise, so
-- that the next sync of the same manifests finds each where it is, and
-- changes nothing. Generations, leases, status, queue state and history
-- stay as they are. Dependencies name the namespace of what they depend on;
-- those stored so far are on resources in "default" too. A resource type
-- gets a scope; rows stored so far have none ('') until their source
-- writes them again (see store.Store.PutResourceType).
--
-- The new columns take their value for existing rows from a default that
-- is dropped at once: filling them costs no rewrite of the table, and
-- every writer must say the namespace.

ALTER TABLE resources ADD COLUMN namespace text NOT NULL DEFAULT 'default';
ALTER TABLE resources ALTER COLUMN namespace DROP DEFAULT;
ALTER TABLE resources DROP CONSTRAINT resources_kind_name_key;
ALTER TABLE resources ADD CONSTRAINT resources_kind_namespace_name_key UNIQUE (kind, namespace, name);

-- Dependencies are rewritten as the agent writes them: kind, namespace,
-- name. The rows' other change notifications are not sent: nothing a
-- listener shows changed.
ALTER TABLE resources DISABLE TRIGGER resources_changed;
UPDATE resources SET depends_on = (
    SELECT jsonb_agg(jsonb_build_object('kind', d.e->'kind', 'namespace', 'default', 'name', d.e->'name') ORDER BY d.i)
    FROM jsonb_array_elements(resources.depends_on) WITH ORDINALITY AS d(e, i))
WHERE depends_on <> '[]'::jsonb;
ALTER TABLE resources ENABLE TRIGGER resources_changed;

ALTER TABLE reconcile_history ADD COLUMN namespace text NOT NULL DEFAULT 'default';
ALTER TABLE reconcile_history ALTER COLUMN namespace DROP DEFAULT;
DROP INDEX reconcile_history_kind_name_idx;
CREATE INDEX reconcile_history_kind_name_idx ON reconcile_history (kind, namespace, name, id DESC);

-- Notifications about a resource name its namespace.
ALTER TABLE notifications ADD COLUMN namespace text NOT NULL DEFAULT '';
UPDATE notifications SET namespace = 'default' WHERE kind <> '';

-- A type's scope: Namespaced or Cluster, the same for every version of a
-- name; '' on rows stored before scopes, until their source writes them.
ALTER TABLE resource_types ADD COLUMN scope text NOT NULL DEFAULT ''
    CHECK (scope IN ('', 'Namespaced', 'Cluster'));

-- The default namespace the resources declared without one were placed
-- in. An agent configured with another refuses to start while resources
-- are in this one (they would be destroyed and created again), and
-- records its own when none are.
CREATE TABLE store_settings (
    id                integer PRIMARY KEY CHECK (id = 1),
    default_namespace text NOT NULL
);
INSERT INTO store_settings (id, default_namespace) VALUES (1, 'default');

-- Status events, notifications and drift notices carry the namespace.
CREATE OR REPLACE FUNCTION no8s_notify_status() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r resources;
BEGIN
    IF TG_OP = 'DELETE' THEN
        r := OLD;
    ELSE
        r := NEW;
    END IF;
    -- Payloads are limited to 8000 bytes: the message is cut to 1000 characters.
    PERFORM pg_notify('no8s_status', json_build_object(
        'id', r.id, 'kind', r.kind, 'namespace', r.namespace, 'name', r.name, 'source', r.source_name,
        'status', r.phase, 'status_message', left(r.status_message, 1000),
        'generation', r.generation, 'observed_generation', r.observed_generation,
        'deleted', TG_OP = 'DELETE', 'suspended', r.suspended)::text);
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION no8s_notify_status_updates() RETURNS trigger LANGUAGE plpgsql AS $$
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
                            'id', n.id, 'kind', n.kind, 'namespace', n.namespace, 'name', n.name, 'source', n.source_name,
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
-- As 0017 set it: CREATE OR REPLACE drops a function's settings.
ALTER FUNCTION no8s_notify_status_updates() SET enable_nestloop = off;

CREATE OR REPLACE FUNCTION no8s_resource_outcome() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.phase = 'failed' AND NEW.notified_outcome <> 'failed' THEN
        INSERT INTO notifications (event, severity, source, revision, kind, namespace, name, generation, labels, message)
        VALUES (CASE WHEN NEW.deletion_requested_at IS NOT NULL THEN 'DestroyFailed' ELSE 'ResourceFailed' END,
            'error', NEW.source_name, NEW.source_revision, NEW.kind, NEW.namespace, NEW.name, NEW.generation, NEW.labels,
            left(NEW.status_message, 2000));
        NEW.notified_outcome := 'failed';
        PERFORM pg_notify('no8s_notifications', '');
    ELSIF NEW.phase = 'ready' AND NEW.notified_outcome = 'failed' THEN
        INSERT INTO notifications (event, severity, source, revision, kind, namespace, name, generation, labels, message)
        VALUES ('ResourceRecovered', 'info', NEW.source_name, NEW.source_revision, NEW.kind, NEW.namespace, NEW.name,
            NEW.generation, NEW.labels, left(NEW.status_message, 2000));
        NEW.notified_outcome := 'ready';
        PERFORM pg_notify('no8s_notifications', '');
    END IF;
    RETURN NEW;
END
$$;

CREATE OR REPLACE FUNCTION no8s_drift_detected() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO notifications (event, severity, source, revision, kind, namespace, name, generation, labels, message)
    SELECT 'DriftDetected', 'warning', r.source_name, NEW.source_revision, NEW.kind, NEW.namespace, NEW.name, NEW.generation,
        r.labels, CASE WHEN NEW.success THEN 'drift corrected' ELSE left('drift found; applying failed: ' || NEW.error, 2000) END
    FROM resources r WHERE r.id = NEW.resource_id;
    PERFORM pg_notify('no8s_notifications', '');
    RETURN NULL;
END
$$;
