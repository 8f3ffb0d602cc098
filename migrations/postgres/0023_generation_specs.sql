-- The spec of each generation of a resource, as declared, so that what
-- changed between two generations can be shown. A row is written in the
-- transaction that stores the generation, whatever writes it (a sync, the
-- API, a bulk apply): a new resource's first generation by a statement
-- trigger over the inserted rows, each later one by a row trigger that
-- fires only when an update changes the generation, which claims, status
-- writes and heartbeats never do. Rows outlive their resource, like the
-- reconcile history, and are trimmed with it (TrimHistory).
CREATE TABLE generation_specs (
    resource_id     bigint NOT NULL,
    generation      bigint NOT NULL,
    kind            text NOT NULL,
    namespace       text NOT NULL,
    name            text NOT NULL,
    spec            json,
    action          text NOT NULL DEFAULT '',
    source_revision text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (resource_id, generation)
);

CREATE INDEX generation_specs_created_at ON generation_specs (created_at);

CREATE FUNCTION no8s_generation_specs_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO generation_specs (resource_id, generation, kind, namespace, name, spec, action, source_revision, created_at)
    SELECT id, generation, kind, namespace, name, spec, action, source_revision, updated_at FROM no8s_new_rows
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

CREATE TRIGGER resources_generation_specs_inserted AFTER INSERT ON resources
    REFERENCING NEW TABLE AS no8s_new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION no8s_generation_specs_inserted();

CREATE FUNCTION no8s_generation_spec_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO generation_specs (resource_id, generation, kind, namespace, name, spec, action, source_revision, created_at)
    VALUES (NEW.id, NEW.generation, NEW.kind, NEW.namespace, NEW.name, NEW.spec, NEW.action, NEW.source_revision, NEW.updated_at)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

CREATE TRIGGER resources_generation_spec_updated AFTER UPDATE OF generation ON resources
    FOR EACH ROW WHEN (OLD.generation IS DISTINCT FROM NEW.generation)
    EXECUTE FUNCTION no8s_generation_spec_updated();

-- The generations stored so far: their current specs only, the earlier
-- ones were not kept.
INSERT INTO generation_specs (resource_id, generation, kind, namespace, name, spec, action, source_revision, created_at)
SELECT id, generation, kind, namespace, name, spec, action, source_revision, updated_at FROM resources;
