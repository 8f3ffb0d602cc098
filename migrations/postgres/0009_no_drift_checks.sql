-- Consecutive identical no-drift checks of a resource fold into one
-- history row: no_drift_checks counts the checks it stands for (0 for
-- every other attempt), last_checked_at is when the last one finished.
ALTER TABLE reconcile_history
    ADD COLUMN no_drift_checks integer NOT NULL DEFAULT 0 CHECK (no_drift_checks >= 0),
    ADD COLUMN last_checked_at timestamptz;
