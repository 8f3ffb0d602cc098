-- The reconcile queue's bookkeeping.
--
-- waiting marks a resource that waits on others: dependencies that are not
-- Ready yet, or dependents that must be destroyed first. When a resource
-- becomes Ready or is destroyed, the resources waiting on it are made due at
-- once instead of at their next recheck.
ALTER TABLE resources ADD COLUMN waiting boolean NOT NULL DEFAULT false;

-- Finding the resources that depend on one (to wake them, or to destroy
-- them first) is a containment query on depends_on.
CREATE INDEX resources_depends_on_idx ON resources USING gin (depends_on jsonb_path_ops);
