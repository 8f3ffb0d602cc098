-- A resource's own settings for its action (NULL when none), and a type's
-- free key-value annotations.
ALTER TABLE resources ADD COLUMN plugin_config TEXT;
ALTER TABLE resource_types ADD COLUMN annotations TEXT NOT NULL DEFAULT '{}';
