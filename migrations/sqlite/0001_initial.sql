-- The initial schema of the embedded SQLite store.
--
-- Conventions, and why:
-- * Tables are STRICT, so that a value of the wrong type is refused instead
--   of being stored as whatever it happens to be.
-- * Times are INTEGER milliseconds since the Unix epoch (UTC). One agent
--   process owns the file, so its clock is the only one: every "now" is a
--   parameter from Go, and times compare and sort as plain numbers.
-- * Durations are INTEGER milliseconds, as in PostgreSQL.
-- * JSON is TEXT. Opaque documents (schemas, specs, outputs) are kept byte
--   for byte as given, so a stored spec still hashes to its spec_hash;
--   documents the store queries (labels, annotations, depends_on) or that
--   have no byte-level meaning (conditions, problems) are written by the
--   agent's encoder. CHECKs keep every one of them well-formed.
-- * Booleans are INTEGER 0 or 1.
-- * Absent strings are '' rather than NULL so that equality filters need no
--   IS.
-- * AUTOINCREMENT keeps SQLite from reusing the ID of a deleted row: history
--   rows of a destroyed resource must never describe its successor.
-- * No foreign keys, as in PostgreSQL: resources of the API pseudo-source
--   have no sources row, and history must outlive the records it describes.

CREATE TABLE resource_types (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    name              TEXT NOT NULL,
    version           TEXT NOT NULL,
    grp               TEXT NOT NULL,
    description       TEXT NOT NULL DEFAULT '',
    action            TEXT NOT NULL DEFAULT '',
    drift_interval_ms INTEGER NOT NULL DEFAULT 0 CHECK (drift_interval_ms >= 0),
    schema            TEXT CHECK (schema IS NULL OR json_valid(schema)),
    source_name       TEXT NOT NULL,
    source_path       TEXT NOT NULL DEFAULT '',
    source_revision   TEXT NOT NULL DEFAULT '',
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    UNIQUE (name, version)
) STRICT;

-- Sync plans diff the types a source owns against its snapshot.
CREATE INDEX resource_types_source_idx ON resource_types (source_name);

CREATE TABLE resources (
    id                     INTEGER PRIMARY KEY AUTOINCREMENT,
    kind                   TEXT NOT NULL,
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
    UNIQUE (kind, name)
) STRICT;

-- Work that is due regardless of the clock: a new generation, a deletion or
-- a manual request. Partial, so the queue scan stays small when all is
-- settled; the claim query repeats this predicate word for word so that
-- SQLite sees it may use the index.
CREATE INDEX resources_urgent_idx ON resources (id)
    WHERE generation > observed_generation
       OR deletion_requested_at IS NOT NULL
       OR reconcile_requested_at IS NOT NULL;

-- Retries and drift checks become due as time passes; the wake-up timer also
-- asks for the earliest of these.
CREATE INDEX resources_next_reconcile_idx ON resources (next_reconcile_at)
    WHERE next_reconcile_at IS NOT NULL;

-- Expired leases are found by their expiry.
CREATE INDEX resources_lease_expires_idx ON resources (lease_expires_at)
    WHERE lease_expires_at IS NOT NULL;

-- List filters, each paginated by id.
CREATE INDEX resources_source_idx ON resources (source_name, id);
CREATE INDEX resources_phase_idx ON resources (phase, id);

-- Deleting a type version must find the resources still using it.
CREATE INDEX resources_type_idx ON resources (kind, type_version);

-- History rows keep kind and name and have no foreign key: they must survive
-- the deletion of their resource, and remain findable by name afterwards.
CREATE TABLE reconcile_history (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    resource_id     INTEGER NOT NULL,
    kind            TEXT NOT NULL,
    name            TEXT NOT NULL,
    generation      INTEGER NOT NULL,
    source_revision TEXT NOT NULL DEFAULT '',
    trigger         TEXT NOT NULL
                    CHECK (trigger IN ('create', 'update', 'retry', 'drift', 'manual', 'delete')),
    phase           TEXT NOT NULL DEFAULT '',
    success         INTEGER NOT NULL CHECK (success IN (0, 1)),
    error           TEXT NOT NULL DEFAULT '',
    created_count   INTEGER NOT NULL DEFAULT 0,
    updated_count   INTEGER NOT NULL DEFAULT 0,
    deleted_count   INTEGER NOT NULL DEFAULT 0,
    outputs         TEXT CHECK (outputs IS NULL OR json_valid(outputs)),
    plan_output     TEXT NOT NULL DEFAULT '',
    duration_ms     INTEGER NOT NULL DEFAULT 0,
    agent_id        TEXT NOT NULL DEFAULT '',
    started_at      INTEGER NOT NULL,
    finished_at     INTEGER NOT NULL
) STRICT;

CREATE INDEX reconcile_history_resource_idx ON reconcile_history (resource_id, id DESC);
CREATE INDEX reconcile_history_kind_name_idx ON reconcile_history (kind, name, id DESC);

CREATE TABLE sources (
    name                    TEXT PRIMARY KEY,
    kind                    TEXT NOT NULL CHECK (kind IN ('git', 'dir', 'api')),
    url                     TEXT NOT NULL DEFAULT '',
    path                    TEXT NOT NULL DEFAULT '',
    phase                   TEXT NOT NULL DEFAULT 'pending'
                            CHECK (phase IN ('pending', 'ready', 'failed', 'stalled')),
    message                 TEXT NOT NULL DEFAULT '',
    last_applied_revision   TEXT NOT NULL DEFAULT '',
    last_attempted_revision TEXT NOT NULL DEFAULT '',
    last_commit_author      TEXT NOT NULL DEFAULT '',
    last_commit_message     TEXT NOT NULL DEFAULT '',
    last_commit_time        INTEGER,
    approved_revision       TEXT NOT NULL DEFAULT '',
    last_sync_time          INTEGER,
    last_applied_time       INTEGER,
    errors                  TEXT NOT NULL DEFAULT '[]' CHECK (json_type(errors) = 'array'),
    created_at              INTEGER NOT NULL,
    updated_at              INTEGER NOT NULL
) STRICT;

-- Sync history outlives a source removed from the configuration.
CREATE TABLE sync_history (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    source          TEXT NOT NULL,
    revision        TEXT NOT NULL DEFAULT '',
    commit_author   TEXT NOT NULL DEFAULT '',
    commit_message  TEXT NOT NULL DEFAULT '',
    commit_time     INTEGER,
    success         INTEGER NOT NULL CHECK (success IN (0, 1)),
    created_count   INTEGER NOT NULL DEFAULT 0,
    updated_count   INTEGER NOT NULL DEFAULT 0,
    deleted_count   INTEGER NOT NULL DEFAULT 0,
    unchanged_count INTEGER NOT NULL DEFAULT 0,
    duration_ms     INTEGER NOT NULL DEFAULT 0,
    errors          TEXT NOT NULL DEFAULT '[]' CHECK (json_type(errors) = 'array'),
    message         TEXT NOT NULL DEFAULT '',
    started_at      INTEGER NOT NULL,
    finished_at     INTEGER NOT NULL
) STRICT;

CREATE INDEX sync_history_source_idx ON sync_history (source, id DESC);
