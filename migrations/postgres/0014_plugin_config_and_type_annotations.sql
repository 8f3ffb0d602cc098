-- A resource's own settings for its action (NULL when none), and a type's
-- free key-value annotations.
ALTER TABLE resources ADD COLUMN plugin_config json; -- json, as spec: kept byte for byte
ALTER TABLE resource_types ADD COLUMN annotations jsonb NOT NULL DEFAULT '{}';
