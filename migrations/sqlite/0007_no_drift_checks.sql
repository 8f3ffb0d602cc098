-- Consecutive identical no-drift checks of a resource fold into one
-- history row: no_drift_checks counts the checks it stands for (0 for
-- every other attempt), last_checked_at is when the last one finished
-- (milliseconds since the Unix epoch).
ALTER TABLE reconcile_history ADD COLUMN no_drift_checks INTEGER NOT NULL DEFAULT 0 CHECK (no_drift_checks >= 0);
ALTER TABLE reconcile_history ADD COLUMN last_checked_at INTEGER;
