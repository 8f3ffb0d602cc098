-- Sources that no agent's configuration lists any more are orphaned, and
-- pruning while their resources are destroyed.
ALTER TABLE sources DROP CONSTRAINT sources_phase_check;
ALTER TABLE sources ADD CONSTRAINT sources_phase_check
    CHECK (phase IN ('pending', 'ready', 'failed', 'stalled', 'orphaned', 'pruning'));
