-- A fingerprint of what a resource declares besides its spec and action
-- (labels, annotations, dependencies, where it is declared). Syncs compare it
-- to find resources whose metadata needs refreshing without reading and
-- decoding every owned row's metadata.
ALTER TABLE resources ADD COLUMN meta_hash text NOT NULL DEFAULT '';
