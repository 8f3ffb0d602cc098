-- Agents register themselves and beat: each writes its row at start and
-- every few seconds, so that a lease held by an agent that stopped beating
-- can be shown as such.
CREATE TABLE agents (
    id           text PRIMARY KEY,
    host         text NOT NULL DEFAULT '',
    version      text NOT NULL DEFAULT '',
    started_at   timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL
);
