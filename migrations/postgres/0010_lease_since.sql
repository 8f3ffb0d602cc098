-- When the current lease holder claimed the resource: what a stuck
-- resource has been waiting on, and since when.
ALTER TABLE resources ADD COLUMN leased_at timestamptz;
