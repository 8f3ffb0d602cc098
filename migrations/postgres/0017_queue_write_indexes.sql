-- Every claim and every completion writes a new version of the resource's
-- row, and each version needs an entry in each index of the table that it
-- cannot share with the one before. Two indexes served only list filters
-- (by phase, by labels) that the API now answers from the copy it keeps in
-- memory; the rare store-side listings that still filter on them (the CLI
-- on a local store) scan the table in id order instead. Dropping them
-- takes two index insertions, one of them into a GIN index, off each of
-- those writes.
DROP INDEX resources_phase_idx;
DROP INDEX resources_labels_idx;

-- The status trigger's query joins the statement's old and new rows. A
-- connection plans it once, sized for the statement that first fires it,
-- and keeps that plan: planned for one row it is a nested loop, which makes
-- a later statement of thousands of rows (a sync, a batch of completions on
-- the same connection) quadratic, seconds to minutes of CPU with the rows
-- locked. Without nested loops the plan is a hash join at every size.
ALTER FUNCTION no8s_notify_status_updates() SET enable_nestloop = off;
