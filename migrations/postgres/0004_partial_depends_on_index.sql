-- Most resources depend on nothing. Indexing only those that do keeps the
-- index small, and lets the planner use it for "who depends on X?" even
-- before statistics are gathered: every completion that makes a resource
-- Ready asks that question, and a full scan of the table there would cost
-- more than the rest of the completion.
DROP INDEX resources_depends_on_idx;
CREATE INDEX resources_depends_on_idx ON resources USING gin (depends_on jsonb_path_ops)
    WHERE depends_on <> '[]'::jsonb;
