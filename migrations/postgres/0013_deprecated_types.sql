-- A deprecated type version still validates, but every sync and API write
-- of a resource that uses it carries a warning.
ALTER TABLE resource_types ADD COLUMN deprecated boolean NOT NULL DEFAULT false;
