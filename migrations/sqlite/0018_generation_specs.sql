-- The spec of each generation of a resource, as declared, so that what
-- changed between two generations can be shown. A row is written in the
-- transaction that stores the generation, whatever writes it (a sync, the
-- API, a bulk apply), by a trigger on the insert of a resource and on an
-- update that changes its generation. Rows outlive their resource, like
-- the reconcile history, and are trimmed with it (TrimHistory).
CREATE TABLE generation_specs (
    resource_id     INTEGER NOT NULL,
    generation      INTEGER NOT NULL,
    kind            TEXT NOT NULL,
    namespace       TEXT NOT NULL,
    name            TEXT NOT NULL,
    spec            TEXT,
    action          TEXT NOT NULL DEFAULT '',
    source_revision TEXT NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    PRIMARY KEY (resource_id, generation)
);

CREATE INDEX generation_specs_created_at ON generation_specs (created_at);

CREATE TRIGGER resources_generation_spec_inserted AFTER INSERT ON resources
BEGIN
    INSERT OR IGNORE INTO generation_specs (resource_id, generation, kind, namespace, name, spec, action, source_revision, created_at)
    VALUES (NEW.id, NEW.generation, NEW.kind, NEW.namespace, NEW.name, NEW.spec, NEW.action, NEW.source_revision, NEW.updated_at);
END;

CREATE TRIGGER resources_generation_spec_updated AFTER UPDATE OF generation ON resources
    WHEN NEW.generation <> OLD.generation
BEGIN
    INSERT OR IGNORE INTO generation_specs (resource_id, generation, kind, namespace, name, spec, action, source_revision, created_at)
    VALUES (NEW.id, NEW.generation, NEW.kind, NEW.namespace, NEW.name, NEW.spec, NEW.action, NEW.source_revision, NEW.updated_at);
END;

-- The generations stored so far: their current specs only, the earlier
-- ones were not kept.
INSERT OR IGNORE INTO generation_specs (resource_id, generation, kind, namespace, name, spec, action, source_revision, created_at)
SELECT id, generation, kind, namespace, name, spec, action, source_revision, updated_at FROM resources;
