-- Agents register themselves and beat: each writes its row at start and
-- every few seconds, so that a lease held by an agent that stopped beating
-- can be shown as such. Times are milliseconds since the Unix epoch.
CREATE TABLE agents (
    id           TEXT PRIMARY KEY,
    host         TEXT NOT NULL DEFAULT '',
    version      TEXT NOT NULL DEFAULT '',
    started_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL
);
