package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

const sourceCols = `name, kind, url, path, phase, message, last_applied_revision, last_attempted_revision,
	last_commit_author, last_commit_message, last_commit_time, approved_revision, last_sync_time, last_applied_time, errors,
	created_at, updated_at, suspended_at, suspended_by, last_check_time, suspended_reason, suspended_by_identity`

func scanSource(row scanner) (*store.Source, error) {
	var (
		src                             store.Source
		commitTime, syncTime, appliedAt sql.NullInt64
		suspendedAt, checkedAt          sql.NullInt64
		errs                            string
		created, updated                int64
	)
	err := row.Scan(&src.Name, &src.Kind, &src.URL, &src.Path, &src.Phase, &src.Message,
		&src.LastAppliedRevision, &src.LastAttemptedRevision, &src.LastCommit.Author, &src.LastCommit.Message,
		&commitTime, &src.ApprovedRevision, &syncTime, &appliedAt, &errs, &created, &updated,
		&suspendedAt, &src.SuspendedBy, &checkedAt, &src.SuspendedReason, &src.SuspendedIdentity)
	if err != nil {
		return nil, err
	}
	if src.Errors, err = decodeSlice[manifest.Problem](errs, "errors"); err != nil {
		return nil, err
	}
	src.LastCommit.Time = timeOrZero(commitTime)
	src.LastSyncTime = fromNullMs(syncTime)
	src.LastAppliedTime = fromNullMs(appliedAt)
	src.SuspendedAt = fromNullMs(suspendedAt)
	src.LastCheckTime = fromNullMs(checkedAt)
	src.CreatedAt, src.UpdatedAt = fromMs(created), fromMs(updated)
	return &src, nil
}

// PutSource creates the source or replaces all of its state but its
// creation time.
func (s *Store) PutSource(ctx context.Context, src *store.Source) (*store.Source, error) {
	if src == nil || src.Name == "" {
		return nil, invalid("put source: name is required")
	}
	want := src.Phase
	if want == "" {
		want = store.SourcePending
	}
	if !slices.Contains(store.SourcePhases(), want) {
		return nil, invalid("put source %q: unknown phase %q", src.Name, want)
	}
	errs, err := jsonValue(src.Errors, len(src.Errors) == 0, "[]")
	if err != nil {
		return nil, err
	}
	var out *store.Source
	err = s.withTx(ctx, func(s *Store) error {
		out, err = scanSource(s.queryRow(ctx, `INSERT INTO sources (name, kind, url, path, phase, message,
				last_applied_revision, last_attempted_revision, last_commit_author, last_commit_message,
				last_commit_time, approved_revision, last_sync_time, last_applied_time, errors, created_at, updated_at,
				last_check_time)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $16, $17)
			ON CONFLICT (name) DO UPDATE SET
				kind = excluded.kind, url = excluded.url, path = excluded.path, phase = excluded.phase,
				message = excluded.message, last_applied_revision = excluded.last_applied_revision,
				last_attempted_revision = excluded.last_attempted_revision,
				last_commit_author = excluded.last_commit_author, last_commit_message = excluded.last_commit_message,
				last_commit_time = excluded.last_commit_time, approved_revision = excluded.approved_revision,
				last_sync_time = excluded.last_sync_time, last_applied_time = excluded.last_applied_time,
				errors = excluded.errors, updated_at = excluded.updated_at,
				last_check_time = coalesce(excluded.last_check_time, sources.last_check_time)
			RETURNING `+sourceCols,
			src.Name, string(src.Kind), src.URL, src.Path, string(want), src.Message,
			string(src.LastAppliedRevision), string(src.LastAttemptedRevision), src.LastCommit.Author,
			src.LastCommit.Message, msOrNull(src.LastCommit.Time), string(src.ApprovedRevision),
			msPtr(src.LastSyncTime), msPtr(src.LastAppliedTime), errs, ms(clock()), msPtr(src.LastCheckTime)))
		return err
	})
	if err != nil {
		return nil, mapErr(err, fmt.Sprintf("put source %q", src.Name))
	}
	return out, nil
}

// MarkSourceChecked records when the named source was last checked.
func (s *Store) MarkSourceChecked(ctx context.Context, name string, at time.Time) error {
	err := s.withTx(ctx, func(s *Store) error {
		_, err := s.exec(ctx, `UPDATE sources SET last_check_time = $2
			WHERE name = $1 AND (last_check_time IS NULL OR last_check_time < $2)`, name, ms(at))
		return err
	})
	return mapErr(err, fmt.Sprintf("mark source %q checked", name))
}

// GetSource returns the named source, or ErrNotFound.
func (s *Store) GetSource(ctx context.Context, name string) (*store.Source, error) {
	src, err := scanSource(s.queryRow(ctx, `SELECT `+sourceCols+` FROM sources WHERE name = $1`, name))
	if err != nil {
		return nil, mapErr(err, fmt.Sprintf("source %q", name))
	}
	return src, nil
}

// ListSources returns every source, ordered by name.
func (s *Store) ListSources(ctx context.Context) ([]*store.Source, error) {
	out, err := collect(ctx, s, scanSource, `SELECT `+sourceCols+` FROM sources ORDER BY name`)
	if err != nil {
		return nil, mapErr(err, "list sources")
	}
	return out, nil
}

const syncCols = `id, source, revision, commit_author, commit_message, commit_time, success, created_count,
	updated_count, deleted_count, unchanged_count, duration_ms, errors, message, started_at, finished_at`

// AddSyncRecord appends a sync attempt and returns its ID. The record's ID
// is ignored.
func (s *Store) AddSyncRecord(ctx context.Context, r *store.SyncRecord) (int64, error) {
	if r == nil || r.Source == "" {
		return 0, invalid("add sync record: source is required")
	}
	errs, err := jsonValue(r.Errors, len(r.Errors) == 0, "[]")
	if err != nil {
		return 0, err
	}
	var id int64
	err = s.withTx(ctx, func(s *Store) error {
		return s.queryRow(ctx, `INSERT INTO sync_history (source, revision, commit_author, commit_message,
				commit_time, success, created_count, updated_count, deleted_count, unchanged_count, duration_ms,
				errors, message, started_at, finished_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
			RETURNING id`,
			r.Source, string(r.Revision), r.Commit.Author, r.Commit.Message, msOrNull(r.Commit.Time), r.Success,
			r.Created, r.Updated, r.Deleted, r.Unchanged, millis(r.Duration), errs, r.Message,
			ms(r.StartedAt), ms(r.FinishedAt)).Scan(&id)
	})
	if err != nil {
		return 0, mapErr(err, fmt.Sprintf("add sync record of source %q", r.Source))
	}
	return id, nil
}

// ListSyncRecords returns up to limit sync attempts of the source, newest
// first; zero means no limit.
func (s *Store) ListSyncRecords(ctx context.Context, source string, limit int) ([]*store.SyncRecord, error) {
	if limit < 0 {
		return nil, invalid("list sync records: negative limit")
	}
	query := `SELECT ` + syncCols + ` FROM sync_history WHERE source = $1 ORDER BY id DESC`
	args := []any{source}
	if limit > 0 {
		query += ` LIMIT $2`
		args = append(args, limit)
	}
	out, err := collect(ctx, s, func(row scanner) (*store.SyncRecord, error) {
		var (
			r                 store.SyncRecord
			commitTime        sql.NullInt64
			errs              string
			dur               int64
			started, finished int64
		)
		if err := row.Scan(&r.ID, &r.Source, &r.Revision, &r.Commit.Author, &r.Commit.Message, &commitTime,
			&r.Success, &r.Created, &r.Updated, &r.Deleted, &r.Unchanged, &dur, &errs, &r.Message,
			&started, &finished); err != nil {
			return nil, err
		}
		var err error
		if r.Errors, err = decodeSlice[manifest.Problem](errs, "errors"); err != nil {
			return nil, err
		}
		r.Commit.Time = timeOrZero(commitTime)
		r.Duration = fromMillis(dur)
		r.StartedAt, r.FinishedAt = fromMs(started), fromMs(finished)
		return &r, nil
	}, query, args...)
	if err != nil {
		return nil, mapErr(err, fmt.Sprintf("list sync records of source %q", source))
	}
	return out, nil
}

// DeleteSource removes a source's row, once nothing it owns remains.
func (s *Store) DeleteSource(ctx context.Context, name string) error {
	what := fmt.Sprintf("delete source %q", name)
	err := s.withTx(ctx, func(s *Store) error {
		var resources, types int64
		if err := s.queryRow(ctx, `SELECT (SELECT count(*) FROM resources WHERE source_name = $1),
				(SELECT count(*) FROM resource_types WHERE source_name = $1)`, name).Scan(&resources, &types); err != nil {
			return err
		}
		if resources > 0 || types > 0 {
			return fmt.Errorf("%s: it still owns %d resource(s) and %d resource type version(s): %w", what, resources, types, store.ErrInUse)
		}
		res, err := s.exec(ctx, `DELETE FROM sources WHERE name = $1`, name)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("source %q: %w", name, store.ErrNotFound)
		}
		return s.Notify(ctx, store.TopicSources, name)
	})
	return mapErr(err, what)
}

// finishPrune removes a source being pruned once its last resource is
// gone, with the resource types it owns that no resource uses.
func (s *Store) finishPrune(ctx context.Context, source string) error {
	res, err := s.exec(ctx, `DELETE FROM sources WHERE name = $1 AND `+store.PruningSourceSQL+`
		AND NOT EXISTS (SELECT 1 FROM resources WHERE source_name = $1)`, source)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return err
	}
	if _, err := s.exec(ctx, `DELETE FROM resource_types WHERE source_name = $1
		AND NOT EXISTS (SELECT 1 FROM resources r WHERE r.kind = resource_types.name AND r.type_version = resource_types.version)`, source); err != nil {
		return err
	}
	return s.Notify(ctx, store.TopicSources, source)
}
