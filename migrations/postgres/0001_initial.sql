-- The initial schema of the PostgreSQL store.
--
-- Conventions, and why:
-- * Times are timestamptz so that agents in different time zones agree.
-- * Durations are bigint milliseconds: exact, easy to compare and sum, and
--   free of interval's month/day arithmetic.
-- * Documents the agent treats as opaque bytes (schemas, specs, outputs) are
--   json, not jsonb: json keeps the text as written, so a stored spec still
--   hashes to its spec_hash and canonical JSON stays canonical. Documents the
--   store queries or that have no byte-level meaning (labels, conditions,
--   problems) are jsonb.
-- * Absent strings are '' rather than NULL so that equality filters need no
--   IS NOT DISTINCT FROM.
-- * Nothing references sources or resources with a foreign key: resources of
--   the API pseudo-source have no sources row, and history must outlive the
--   records it describes.

CREATE TABLE resource_types (
    id                bigserial PRIMARY KEY,
    name              text NOT NULL,
    version           text NOT NULL,
    grp               text NOT NULL,
    description       text NOT NULL DEFAULT '',
    action            text NOT NULL DEFAULT '',
    drift_interval_ms bigint NOT NULL DEFAULT 0 CHECK (drift_interval_ms >= 0),
    schema            json,
    source_name       text NOT NULL,
    source_path       text NOT NULL DEFAULT '',
    source_revision   text NOT NULL DEFAULT '',
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (name, version)
);

-- Sync plans diff the types a source owns against its snapshot.
CREATE INDEX resource_types_source_idx ON resource_types (source_name);

CREATE TABLE resources (
    id                     bigserial PRIMARY KEY,
    kind                   text NOT NULL,
    grp                    text NOT NULL,
    type_version           text NOT NULL,
    name                   text NOT NULL,
    labels                 jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(labels) = 'object'),
    annotations            jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(annotations) = 'object'),
    spec                   json,
    spec_hash              text NOT NULL,
    action                 text NOT NULL DEFAULT '',
    depends_on             jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(depends_on) = 'array'),
    -- Where in its file the resource is declared, so errors can point at it.
    origin_document        integer NOT NULL DEFAULT 0,
    origin_line            integer NOT NULL DEFAULT 0,
    source_name            text NOT NULL,
    source_path            text NOT NULL DEFAULT '',
    source_revision        text NOT NULL DEFAULT '',
    generation             bigint NOT NULL DEFAULT 1 CHECK (generation >= 1),
    observed_generation    bigint NOT NULL DEFAULT 0 CHECK (observed_generation >= 0),
    phase                  text NOT NULL DEFAULT 'pending'
                           CHECK (phase IN ('pending', 'reconciling', 'ready', 'failed', 'deleting')),
    status_message         text NOT NULL DEFAULT '',
    conditions             jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(conditions) = 'array'),
    outputs                json,
    retry_count            integer NOT NULL DEFAULT 0 CHECK (retry_count >= 0),
    next_reconcile_at      timestamptz,
    deletion_requested_at  timestamptz,
    reconcile_requested_at timestamptz,
    last_reconcile_time    timestamptz,
    lease_owner            text NOT NULL DEFAULT '',
    -- Incremented on every claim; a worker's writes carry the token it was
    -- given, so a worker that lost its lease cannot overwrite its successor's.
    lease_token            bigint NOT NULL DEFAULT 0,
    lease_expires_at       timestamptz,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now(),
    UNIQUE (kind, name)
);

-- Work that is due regardless of the clock: a new generation, a deletion or a
-- manual request. Partial, so the queue scan stays small when all is settled.
CREATE INDEX resources_urgent_idx ON resources (id)
    WHERE generation > observed_generation
       OR deletion_requested_at IS NOT NULL
       OR reconcile_requested_at IS NOT NULL;

-- Retries and drift checks become due as time passes; the wake-up timer also
-- asks for the earliest of these.
CREATE INDEX resources_next_reconcile_idx ON resources (next_reconcile_at)
    WHERE next_reconcile_at IS NOT NULL;

-- Leases of crashed agents are found by their expiry.
CREATE INDEX resources_lease_expires_idx ON resources (lease_expires_at)
    WHERE lease_expires_at IS NOT NULL;

-- List filters, each paginated by id.
CREATE INDEX resources_source_idx ON resources (source_name, id);
CREATE INDEX resources_phase_idx ON resources (phase, id);
CREATE INDEX resources_labels_idx ON resources USING gin (labels jsonb_path_ops);

-- Deleting a type version must find the resources still using it.
CREATE INDEX resources_type_idx ON resources (kind, type_version);

-- History rows keep kind and name and have no foreign key: they must survive
-- the deletion of their resource, and remain findable by name afterwards.
CREATE TABLE reconcile_history (
    id              bigserial PRIMARY KEY,
    resource_id     bigint NOT NULL,
    kind            text NOT NULL,
    name            text NOT NULL,
    generation      bigint NOT NULL,
    source_revision text NOT NULL DEFAULT '',
    trigger         text NOT NULL
                    CHECK (trigger IN ('create', 'update', 'retry', 'drift', 'manual', 'delete')),
    phase           text NOT NULL DEFAULT '',
    success         boolean NOT NULL,
    error           text NOT NULL DEFAULT '',
    created_count   integer NOT NULL DEFAULT 0,
    updated_count   integer NOT NULL DEFAULT 0,
    deleted_count   integer NOT NULL DEFAULT 0,
    outputs         json,
    plan_output     text NOT NULL DEFAULT '',
    duration_ms     bigint NOT NULL DEFAULT 0,
    agent_id        text NOT NULL DEFAULT '',
    started_at      timestamptz NOT NULL,
    finished_at     timestamptz NOT NULL
);

CREATE INDEX reconcile_history_resource_idx ON reconcile_history (resource_id, id DESC);
CREATE INDEX reconcile_history_kind_name_idx ON reconcile_history (kind, name, id DESC);

CREATE TABLE sources (
    name                    text PRIMARY KEY,
    kind                    text NOT NULL CHECK (kind IN ('git', 'dir', 'api')),
    url                     text NOT NULL DEFAULT '',
    path                    text NOT NULL DEFAULT '',
    phase                   text NOT NULL DEFAULT 'pending'
                            CHECK (phase IN ('pending', 'ready', 'failed', 'stalled')),
    message                 text NOT NULL DEFAULT '',
    last_applied_revision   text NOT NULL DEFAULT '',
    last_attempted_revision text NOT NULL DEFAULT '',
    last_commit_author      text NOT NULL DEFAULT '',
    last_commit_message     text NOT NULL DEFAULT '',
    last_commit_time        timestamptz,
    approved_revision       text NOT NULL DEFAULT '',
    last_sync_time          timestamptz,
    errors                  jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(errors) = 'array'),
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now()
);

-- Sync history outlives a source removed from the configuration.
CREATE TABLE sync_history (
    id              bigserial PRIMARY KEY,
    source          text NOT NULL,
    revision        text NOT NULL DEFAULT '',
    commit_author   text NOT NULL DEFAULT '',
    commit_message  text NOT NULL DEFAULT '',
    commit_time     timestamptz,
    success         boolean NOT NULL,
    created_count   integer NOT NULL DEFAULT 0,
    updated_count   integer NOT NULL DEFAULT 0,
    deleted_count   integer NOT NULL DEFAULT 0,
    unchanged_count integer NOT NULL DEFAULT 0,
    duration_ms     bigint NOT NULL DEFAULT 0,
    errors          jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(errors) = 'array'),
    message         text NOT NULL DEFAULT '',
    started_at      timestamptz NOT NULL,
    finished_at     timestamptz NOT NULL
);

CREATE INDEX sync_history_source_idx ON sync_history (source, id DESC);
