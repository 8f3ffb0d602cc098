-- Sources that no agent's configuration lists any more are orphaned, and
-- pruning while their resources are destroyed. SQLite cannot change a
-- CHECK constraint in place, so the table is rebuilt with the wider one.
CREATE TABLE sources_new (
    name                    TEXT PRIMARY KEY,
    kind                    TEXT NOT NULL CHECK (kind IN ('git', 'dir', 'api')),
    url                     TEXT NOT NULL DEFAULT '',
    path                    TEXT NOT NULL DEFAULT '',
    phase                   TEXT NOT NULL DEFAULT 'pending'
                            CHECK (phase IN ('pending', 'ready', 'failed', 'stalled', 'orphaned', 'pruning')),
    message                 TEXT NOT NULL DEFAULT '',
    last_applied_revision   TEXT NOT NULL DEFAULT '',
    last_attempted_revision TEXT NOT NULL DEFAULT '',
    last_commit_author      TEXT NOT NULL DEFAULT '',
    last_commit_message     TEXT NOT NULL DEFAULT '',
    last_commit_time        INTEGER,
    approved_revision       TEXT NOT NULL DEFAULT '',
    last_sync_time          INTEGER,
    last_applied_time       INTEGER,
    errors                  TEXT NOT NULL DEFAULT '[]' CHECK (json_type(errors) = 'array'),
    created_at              INTEGER NOT NULL,
    updated_at              INTEGER NOT NULL
) STRICT;

INSERT INTO sources_new
SELECT name, kind, url, path, phase, message, last_applied_revision, last_attempted_revision,
       last_commit_author, last_commit_message, last_commit_time, approved_revision,
       last_sync_time, last_applied_time, errors, created_at, updated_at
FROM sources;

DROP TABLE sources;
ALTER TABLE sources_new RENAME TO sources;
