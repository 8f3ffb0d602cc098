-- Who depends on whom, as rows.
--
-- Every completion that makes a resource Ready asks which resources depend
-- on it (to wake those waiting), and the dashboard lists dependents. SQLite
-- cannot index inside a JSON array, so triggers keep this table in step
-- with resources.depends_on: the question becomes an index lookup instead
-- of parsing every row's depends_on. Triggers, not the store's code, so that
-- no write path can forget.
CREATE TABLE resource_dependencies (
    kind        TEXT NOT NULL,
    name        TEXT NOT NULL,
    resource_id INTEGER NOT NULL,
    PRIMARY KEY (kind, name, resource_id)
) STRICT, WITHOUT ROWID;

-- Removing or rewriting a resource's list finds its rows by resource.
CREATE INDEX resource_dependencies_resource_idx ON resource_dependencies (resource_id);

CREATE TRIGGER resources_dependencies_inserted AFTER INSERT ON resources
    WHEN NEW.depends_on <> '[]'
BEGIN
    INSERT OR IGNORE INTO resource_dependencies (kind, name, resource_id)
        SELECT coalesce(json_extract(value, '$.kind'), ''), coalesce(json_extract(value, '$.name'), ''), NEW.id
        FROM json_each(NEW.depends_on);
END;

CREATE TRIGGER resources_dependencies_updated AFTER UPDATE OF depends_on ON resources
    WHEN OLD.depends_on IS NOT NEW.depends_on
BEGIN
    DELETE FROM resource_dependencies WHERE resource_id = NEW.id;
    INSERT OR IGNORE INTO resource_dependencies (kind, name, resource_id)
        SELECT coalesce(json_extract(value, '$.kind'), ''), coalesce(json_extract(value, '$.name'), ''), NEW.id
        FROM json_each(NEW.depends_on);
END;

CREATE TRIGGER resources_dependencies_deleted AFTER DELETE ON resources
    WHEN OLD.depends_on <> '[]'
BEGIN
    DELETE FROM resource_dependencies WHERE resource_id = OLD.id;
END;
