-- Suspension. A suspended resource is neither reconciled nor checked for
-- drift nor destroyed until resumed; a suspended source is neither fetched
-- nor synced. A resource is suspended through the API (suspended_at,
-- milliseconds since the Unix epoch) or by its annotation
-- no8s.io/suspend: "true"; a source through the API or by suspend: true in
-- an agent's configuration (suspended_by says which).
ALTER TABLE resources ADD COLUMN suspended_at INTEGER;
ALTER TABLE sources ADD COLUMN suspended_at INTEGER;
ALTER TABLE sources ADD COLUMN suspended_by TEXT NOT NULL DEFAULT ''
    CHECK (suspended_by IN ('', 'api', 'config'));
