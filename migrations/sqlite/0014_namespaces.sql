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
-- SQLite cannot change a table's UNIQUE constraint in place, so resources
-- is rebuilt, as SQLite's documentation says to: a new table, the rows
-- copied with their ids, the old one dropped, the new one renamed, and its
-- indexes and triggers made again. The AUTOINCREMENT counter is carried
-- over, so that no id is ever reused. The trigger on reconcile_history
-- that reads resources is dropped first and made again after, as a rename
-- checks every trigger in the schema.

DROP TRIGGER reconcile_history_drift;

CREATE TABLE resources_new (
    id                     INTEGER PRIMARY KEY AUTOINCREMENT,
    kind                   TEXT NOT NULL,
    -- '' for a resource of a cluster-scoped kind.
    namespace              TEXT NOT NULL,
    grp                    TEXT NOT NULL,
    type_version           TEXT NOT NULL,
    name                   TEXT NOT NULL,
    labels                 TEXT NOT NULL DEFAULT '{}' CHECK (json_type(labels) = 'object'),
    annotations            TEXT NOT NULL DEFAULT '{}' CHECK (json_type(annotations) = 'object'),
    spec                   TEXT CHECK (spec IS NULL OR json_valid(spec)),
    spec_hash              TEXT NOT NULL,
    action                 TEXT NOT NULL DEFAULT '',
    depends_on             TEXT NOT NULL DEFAULT '[]' CHECK (json_type(depends_on) = 'array'),
    -- Where in its file the resource is declared, so errors can point at it.
    origin_document        INTEGER NOT NULL DEFAULT 0,
    origin_line            INTEGER NOT NULL DEFAULT 0,
    source_name            TEXT NOT NULL,
    source_path            TEXT NOT NULL DEFAULT '',
    source_revision        TEXT NOT NULL DEFAULT '',
    -- A fingerprint of what a resource declares besides its spec and action;
    -- syncs compare it to find metadata that needs refreshing.
    meta_hash              TEXT NOT NULL DEFAULT '',
    generation             INTEGER NOT NULL DEFAULT 1 CHECK (generation >= 1),
    observed_generation    INTEGER NOT NULL DEFAULT 0 CHECK (observed_generation >= 0),
    phase                  TEXT NOT NULL DEFAULT 'pending'
                           CHECK (phase IN ('pending', 'reconciling', 'ready', 'failed', 'deleting')),
    status_message         TEXT NOT NULL DEFAULT '',
    conditions             TEXT NOT NULL DEFAULT '[]' CHECK (json_type(conditions) = 'array'),
    outputs                TEXT CHECK (outputs IS NULL OR json_valid(outputs)),
    retry_count            INTEGER NOT NULL DEFAULT 0 CHECK (retry_count >= 0),
    next_reconcile_at      INTEGER,
    deletion_requested_at  INTEGER,
    reconcile_requested_at INTEGER,
    last_reconcile_time    INTEGER,
    -- waiting marks a resource that waits on others (dependencies not Ready
    -- yet, or dependents to destroy first); those are woken when the
    -- awaited resource becomes Ready or is destroyed.
    waiting                INTEGER NOT NULL DEFAULT 0 CHECK (waiting IN (0, 1)),
    lease_owner            TEXT NOT NULL DEFAULT '',
    -- Incremented on every claim; a worker's writes carry the token it was
    -- given, so a worker that lost its lease cannot overwrite its successor's.
    lease_token            INTEGER NOT NULL DEFAULT 0,
    lease_expires_at       INTEGER,
    created_at             INTEGER NOT NULL,
    updated_at             INTEGER NOT NULL,
    attempt_handle         TEXT CHECK (attempt_handle IS NULL OR json_type(attempt_handle) = 'object'),
    leased_at              INTEGER,
    suspended_at           INTEGER,
    notified_outcome       TEXT NOT NULL DEFAULT '',
    plugin_config          TEXT,
    UNIQUE (kind, namespace, name)
) STRICT;

-- Dependencies are rewritten as the agent writes them: kind, namespace,
-- name, in that order.
INSERT INTO resources_new (id, kind, namespace, grp, type_version, name, labels, annotations, spec, spec_hash,
    action, depends_on, origin_document, origin_line, source_name, source_path, source_revision, meta_hash,
    generation, observed_generation, phase, status_message, conditions, outputs, retry_count, next_reconcile_at,
    deletion_requested_at, reconcile_requested_at, last_reconcile_time, waiting, lease_owner, lease_token,
    lease_expires_at, created_at, updated_at, attempt_handle, leased_at, suspended_at, notified_outcome, plugin_config)
SELECT id, kind, 'default', grp, type_version, name, labels, annotations, spec, spec_hash,
    action,
    CASE WHEN depends_on = '[]' THEN depends_on ELSE
        (SELECT json_group_array(json_object('kind', json_extract(d.value, '$.kind'), 'namespace', 'default',
            'name', json_extract(d.value, '$.name'))) FROM json_each(resources.depends_on) d) END,
    origin_document, origin_line, source_name, source_path, source_revision, meta_hash,
    generation, observed_generation, phase, status_message, conditions, outputs, retry_count, next_reconcile_at,
    deletion_requested_at, reconcile_requested_at, last_reconcile_time, waiting, lease_owner, lease_token,
    lease_expires_at, created_at, updated_at, attempt_handle, leased_at, suspended_at, notified_outcome, plugin_config
FROM resources ORDER BY id;

-- The counter of ids handed out, which may be past the largest id left.
UPDATE sqlite_sequence SET seq = (SELECT seq FROM sqlite_sequence WHERE name = 'resources')
WHERE name = 'resources_new' AND EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'resources');
INSERT INTO sqlite_sequence (name, seq)
SELECT 'resources_new', seq FROM sqlite_sequence
WHERE name = 'resources' AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'resources_new');

DROP TABLE resources;
ALTER TABLE resources_new RENAME TO resources;

CREATE INDEX resources_urgent_idx ON resources (id)
    WHERE generation > observed_generation
       OR deletion_requested_at IS NOT NULL
       OR reconcile_requested_at IS NOT NULL;
CREATE INDEX resources_next_reconcile_idx ON resources (next_reconcile_at)
    WHERE next_reconcile_at IS NOT NULL;
CREATE INDEX resources_lease_expires_idx ON resources (lease_expires_at)
    WHERE lease_expires_at IS NOT NULL;
CREATE INDEX resources_source_idx ON resources (source_name, id);
CREATE INDEX resources_phase_idx ON resources (phase, id);
CREATE INDEX resources_type_idx ON resources (kind, type_version);
-- Lists of one namespace, and lookups of a name in whatever namespace.
CREATE INDEX resources_namespace_idx ON resources (namespace, id);
CREATE INDEX resources_kind_name_idx ON resources (kind, name);

-- Who depends on whom, with the namespace of what is depended on.
DROP TABLE resource_dependencies;
CREATE TABLE resource_dependencies (
    kind        TEXT NOT NULL,
    namespace   TEXT NOT NULL,
    name        TEXT NOT NULL,
    resource_id INTEGER NOT NULL,
    PRIMARY KEY (kind, namespace, name, resource_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX resource_dependencies_resource_idx ON resource_dependencies (resource_id);
INSERT OR IGNORE INTO resource_dependencies (kind, namespace, name, resource_id)
    SELECT coalesce(json_extract(d.value, '$.kind'), ''), coalesce(json_extract(d.value, '$.namespace'), ''),
        coalesce(json_extract(d.value, '$.name'), ''), r.id
    FROM resources r, json_each(r.depends_on) d
    WHERE r.depends_on <> '[]';

CREATE TRIGGER resources_dependencies_inserted AFTER INSERT ON resources
    WHEN NEW.depends_on <> '[]'
BEGIN
    INSERT OR IGNORE INTO resource_dependencies (kind, namespace, name, resource_id)
        SELECT coalesce(json_extract(value, '$.kind'), ''), coalesce(json_extract(value, '$.namespace'), ''),
            coalesce(json_extract(value, '$.name'), ''), NEW.id
        FROM json_each(NEW.depends_on);
END;

CREATE TRIGGER resources_dependencies_updated AFTER UPDATE OF depends_on ON resources
    WHEN OLD.depends_on IS NOT NEW.depends_on
BEGIN
    DELETE FROM resource_dependencies WHERE resource_id = NEW.id;
    INSERT OR IGNORE INTO resource_dependencies (kind, namespace, name, resource_id)
        SELECT coalesce(json_extract(value, '$.kind'), ''), coalesce(json_extract(value, '$.namespace'), ''),
            coalesce(json_extract(value, '$.name'), ''), NEW.id
        FROM json_each(NEW.depends_on);
END;

CREATE TRIGGER resources_dependencies_deleted AFTER DELETE ON resources
    WHEN OLD.depends_on <> '[]'
BEGIN
    DELETE FROM resource_dependencies WHERE resource_id = OLD.id;
END;

-- Status events carry the namespace.
CREATE TRIGGER resources_status_inserted AFTER INSERT ON resources
BEGIN
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_status', json_object(
        'id', NEW.id, 'kind', NEW.kind, 'namespace', NEW.namespace, 'name', NEW.name, 'source', NEW.source_name,
        'status', NEW.phase, 'status_message', substr(NEW.status_message, 1, 1000),
        'generation', NEW.generation, 'observed_generation', NEW.observed_generation,
        'deleted', json('false'),
        'suspended', json(CASE WHEN NEW.suspended_at IS NOT NULL
            OR coalesce(json_extract(NEW.annotations, '$."no8s.io/suspend"'), '') = 'true' THEN 'true' ELSE 'false' END)));
END;

CREATE TRIGGER resources_status_deleted AFTER DELETE ON resources
BEGIN
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_status', json_object(
        'id', OLD.id, 'kind', OLD.kind, 'namespace', OLD.namespace, 'name', OLD.name, 'source', OLD.source_name,
        'status', OLD.phase, 'status_message', substr(OLD.status_message, 1, 1000),
        'generation', OLD.generation, 'observed_generation', OLD.observed_generation,
        'deleted', json('true'),
        'suspended', json(CASE WHEN OLD.suspended_at IS NOT NULL
            OR coalesce(json_extract(OLD.annotations, '$."no8s.io/suspend"'), '') = 'true' THEN 'true' ELSE 'false' END)));
END;

CREATE TRIGGER resources_status_updated
    AFTER UPDATE OF phase, status_message, conditions, generation, observed_generation, suspended_at, annotations ON resources
    WHEN OLD.phase IS NOT NEW.phase
        OR OLD.status_message IS NOT NEW.status_message
        OR OLD.conditions IS NOT NEW.conditions
        OR OLD.generation IS NOT NEW.generation
        OR OLD.observed_generation IS NOT NEW.observed_generation
        OR OLD.suspended_at IS NOT NEW.suspended_at
        OR coalesce(json_extract(OLD.annotations, '$."no8s.io/suspend"'), '') IS NOT
           coalesce(json_extract(NEW.annotations, '$."no8s.io/suspend"'), '')
BEGIN
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_status', json_object(
        'id', NEW.id, 'kind', NEW.kind, 'namespace', NEW.namespace, 'name', NEW.name, 'source', NEW.source_name,
        'status', NEW.phase, 'status_message', substr(NEW.status_message, 1, 1000),
        'generation', NEW.generation, 'observed_generation', NEW.observed_generation,
        'deleted', json('false'),
        'suspended', json(CASE WHEN NEW.suspended_at IS NOT NULL
            OR coalesce(json_extract(NEW.annotations, '$."no8s.io/suspend"'), '') = 'true' THEN 'true' ELSE 'false' END)));
END;

CREATE TRIGGER resources_changed AFTER UPDATE ON resources
    WHEN NOT (OLD.phase IS NOT NEW.phase
        OR OLD.status_message IS NOT NEW.status_message
        OR OLD.conditions IS NOT NEW.conditions
        OR OLD.generation IS NOT NEW.generation
        OR OLD.observed_generation IS NOT NEW.observed_generation
        OR OLD.suspended_at IS NOT NEW.suspended_at
        OR coalesce(json_extract(OLD.annotations, '$."no8s.io/suspend"'), '') IS NOT
           coalesce(json_extract(NEW.annotations, '$."no8s.io/suspend"'), ''))
BEGIN
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_changes', 'r:' || NEW.id);
END;

-- Notifications about a resource name its namespace.
ALTER TABLE notifications ADD COLUMN namespace TEXT NOT NULL DEFAULT '';
UPDATE notifications SET namespace = 'default' WHERE kind <> '';

CREATE TRIGGER resources_failed_told AFTER UPDATE OF phase ON resources
    WHEN NEW.phase = 'failed' AND OLD.phase IS NOT 'failed' AND NEW.notified_outcome <> 'failed'
BEGIN
    INSERT INTO notifications (event, severity, source, revision, kind, namespace, name, generation, labels, message)
    VALUES (CASE WHEN NEW.deletion_requested_at IS NOT NULL THEN 'DestroyFailed' ELSE 'ResourceFailed' END,
        'error', NEW.source_name, NEW.source_revision, NEW.kind, NEW.namespace, NEW.name, NEW.generation, NEW.labels,
        substr(NEW.status_message, 1, 2000));
    UPDATE resources SET notified_outcome = 'failed' WHERE id = NEW.id;
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_notifications', '');
END;

CREATE TRIGGER resources_recovered_told AFTER UPDATE OF phase ON resources
    WHEN NEW.phase = 'ready' AND OLD.phase IS NOT 'ready' AND NEW.notified_outcome = 'failed'
BEGIN
    INSERT INTO notifications (event, severity, source, revision, kind, namespace, name, generation, labels, message)
    VALUES ('ResourceRecovered', 'info', NEW.source_name, NEW.source_revision, NEW.kind, NEW.namespace, NEW.name,
        NEW.generation, NEW.labels, substr(NEW.status_message, 1, 2000));
    UPDATE resources SET notified_outcome = 'ready' WHERE id = NEW.id;
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_notifications', '');
END;

-- History names the namespace of the resource an attempt was for.
ALTER TABLE reconcile_history ADD COLUMN namespace TEXT NOT NULL DEFAULT '';
UPDATE reconcile_history SET namespace = 'default';
DROP INDEX reconcile_history_kind_name_idx;
CREATE INDEX reconcile_history_kind_name_idx ON reconcile_history (kind, namespace, name, id DESC);

CREATE TRIGGER reconcile_history_drift AFTER INSERT ON reconcile_history
    WHEN NEW.trigger = 'drift' AND NEW.no_drift_checks = 0 AND NEW.phase IN ('applying', 'completed')
BEGIN
    INSERT INTO notifications (event, severity, source, revision, kind, namespace, name, generation, labels, message)
    SELECT 'DriftDetected', 'warning', r.source_name, NEW.source_revision, NEW.kind, NEW.namespace, NEW.name, NEW.generation,
        r.labels, CASE WHEN NEW.success THEN 'drift corrected' ELSE substr('drift found; applying failed: ' || NEW.error, 1, 2000) END
    FROM resources r WHERE r.id = NEW.resource_id;
    INSERT INTO notify_outbox (topic, payload) VALUES ('no8s_notifications', '');
END;

-- A type's scope: Namespaced or Cluster, the same for every version of a
-- name; '' on rows stored before scopes, until their source writes them.
ALTER TABLE resource_types ADD COLUMN scope TEXT NOT NULL DEFAULT ''
    CHECK (scope IN ('', 'Namespaced', 'Cluster'));

-- The default namespace the resources declared without one were placed
-- in. An agent configured with another refuses to start while resources
-- are in this one (they would be destroyed and created again), and
-- records its own when none are.
CREATE TABLE store_settings (
    id                INTEGER PRIMARY KEY CHECK (id = 1),
    default_namespace TEXT NOT NULL
) STRICT;
INSERT INTO store_settings (id, default_namespace) VALUES (1, 'default');
