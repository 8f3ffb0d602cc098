package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

const reconcileCols = `id, resource_id, kind, namespace, name, generation, source_revision, trigger, phase, success, error,
	created_count, updated_count, deleted_count, outputs, plan_output, duration_ms, agent_id, started_at, finished_at,
	no_drift_checks, last_checked_at`

const insertReconcileSQL = `INSERT INTO reconcile_history (resource_id, kind, name, generation, source_revision,
		trigger, phase, success, error, created_count, updated_count, deleted_count, outputs, plan_output,
		duration_ms, agent_id, started_at, finished_at, no_drift_checks, namespace)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)
	RETURNING id`

// foldNoDriftSQL folds a successful no-drift check into the resource's
// newest record when that is one too, of the same generation and plan
// output (see store.ReconcileRecord.NoDriftChecks).
const foldNoDriftSQL = `UPDATE reconcile_history SET no_drift_checks = no_drift_checks + 1, last_checked_at = $5,
		duration_ms = $6, agent_id = $7
	WHERE id = (SELECT max(id) FROM reconcile_history WHERE resource_id = $1)
		AND no_drift_checks > 0 AND success AND generation = $2 AND plan_output = $3 AND $4
	RETURNING id`

// writeReconcileRecord folds h into the record before it or inserts it,
// for the given resource, and returns the ID of the record written.
func (s *Store) writeReconcileRecord(ctx context.Context, h *store.ReconcileRecord, resourceID int64, ref manifest.ObjectRef, generation int64) (int64, error) {
	var id int64
	if h.NoDriftChecks > 0 {
		err := s.queryRow(ctx, foldNoDriftSQL, resourceID, generation, h.PlanOutput, h.Success,
			ms(h.FinishedAt), millis(h.Duration), h.AgentID).Scan(&id)
		if err == nil {
			return id, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return 0, err
		}
	}
	err := s.queryRow(ctx, insertReconcileSQL, reconcileArgs(h, resourceID, ref, generation)...).Scan(&id)
	return id, err
}

// reconcileArgs are the arguments of insertReconcileSQL for h, recorded
// for the given resource.
func reconcileArgs(h *store.ReconcileRecord, resourceID int64, ref manifest.ObjectRef, generation int64) []any {
	return []any{resourceID, ref.Kind, ref.Name, generation, string(h.SourceRevision), string(h.Trigger), h.Phase,
		h.Success, h.Error, h.Created, h.Updated, h.Deleted, jsonDoc(h.Outputs), h.PlanOutput,
		millis(h.Duration), h.AgentID, ms(h.StartedAt), ms(h.FinishedAt), h.NoDriftChecks, ref.Namespace}
}

// AddReconcileRecord appends a reconcile attempt and returns its ID. The
// record's ID is ignored. A no-drift check may be folded into the record
// before it (see store.ReconcileRecord.NoDriftChecks): the ID is then that
// record's.
func (s *Store) AddReconcileRecord(ctx context.Context, h *store.ReconcileRecord) (int64, error) {
	if h == nil {
		return 0, invalid("add reconcile record: no record")
	}
	what := fmt.Sprintf("add reconcile record of resource %d", h.ResourceID)
	if err := validDoc(h.Outputs, what+": outputs"); err != nil {
		return 0, err
	}
	var id int64
	err := s.withTx(ctx, func(s *Store) error {
		var err error
		id, err = s.writeReconcileRecord(ctx, h, h.ResourceID,
			manifest.ObjectRef{Kind: h.Kind, Namespace: h.Namespace, Name: h.Name}, h.Generation)
		return err
	})
	if err != nil {
		return 0, mapErr(err, what)
	}
	return id, nil
}

// ListReconcileRecords returns up to limit attempts of the resource, newest
// first; zero means no limit. The resource need not exist any more.
func (s *Store) ListReconcileRecords(ctx context.Context, resourceID int64, limit int) ([]*store.ReconcileRecord, error) {
	return s.listReconcileRecords(ctx, fmt.Sprintf("resource %d", resourceID), `resource_id = $1`, []any{resourceID}, limit)
}

// ListReconcileRecordsByRef returns up to limit attempts of the resources
// that had ref, newest first; zero means no limit.
func (s *Store) ListReconcileRecordsByRef(ctx context.Context, ref manifest.ObjectRef, limit int) ([]*store.ReconcileRecord, error) {
	return s.listReconcileRecords(ctx, ref.String(), `kind = $1 AND namespace = $2 AND name = $3`,
		[]any{ref.Kind, ref.Namespace, ref.Name}, limit)
}

// listReconcileRecords returns up to limit attempts that where selects,
// newest first, of what (for errors).
func (s *Store) listReconcileRecords(ctx context.Context, what, where string, args []any, limit int) ([]*store.ReconcileRecord, error) {
	if limit < 0 {
		return nil, invalid("list reconcile records: negative limit")
	}
	query := `SELECT ` + reconcileCols + ` FROM reconcile_history WHERE ` + where + ` ORDER BY id DESC`
	if limit > 0 {
		args = append(args, limit)
		query += fmt.Sprintf(` LIMIT $%d`, len(args))
	}
	out, err := collect(ctx, s, func(row scanner) (*store.ReconcileRecord, error) {
		var (
			h                 store.ReconcileRecord
			out               []byte
			dur               int64
			started, finished int64
			checked           sql.NullInt64
		)
		err := row.Scan(&h.ID, &h.ResourceID, &h.Kind, &h.Namespace, &h.Name, &h.Generation, &h.SourceRevision, &h.Trigger,
			&h.Phase, &h.Success, &h.Error, &h.Created, &h.Updated, &h.Deleted, &out, &h.PlanOutput, &dur,
			&h.AgentID, &started, &finished, &h.NoDriftChecks, &checked)
		if checked.Valid {
			t := fromMs(checked.Int64)
			h.LastCheckedAt = &t
		}
		h.Outputs = rawDoc(out)
		h.Duration = fromMillis(dur)
		h.StartedAt, h.FinishedAt = fromMs(started), fromMs(finished)
		return &h, err
	}, query, args...)
	if err != nil {
		return nil, mapErr(err, "list reconcile records of "+what)
	}
	return out, nil
}

// TrimHistory deletes up to batch records beyond limits: first those older
// than MaxAge, then, per resource and per source, those beyond the newest
// MaxPerResource, and the generation specs alike.
func (s *Store) TrimHistory(ctx context.Context, limits store.HistoryLimits, batch int) (int, error) {
	if batch <= 0 || limits.MaxPerResource < 0 || limits.MaxAge < 0 {
		return 0, invalid("trim history: a positive batch and limits of zero or more are required")
	}
	deleted := 0
	err := s.withTx(ctx, func(s *Store) error {
		run := func(sql string, args ...any) error {
			if deleted >= batch {
				return nil
			}
			res, err := s.exec(ctx, sql, append(args, batch-deleted)...)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			deleted += int(n)
			return err
		}
		if limits.MaxAge > 0 {
			cutoff := ms(time.Now().Add(-limits.MaxAge))
			for _, t := range []string{"reconcile_history", "sync_history"} {
				if err := run(`DELETE FROM `+t+` WHERE id IN (SELECT id FROM `+t+`
					WHERE finished_at < ? ORDER BY id LIMIT ?)`, cutoff); err != nil {
					return err
				}
			}
			// Notices go once they are delivered or given up.
			if err := run(`DELETE FROM notifications WHERE id IN (SELECT id FROM notifications
				WHERE done_at < ? ORDER BY id LIMIT ?)`, cutoff); err != nil {
				return err
			}
			// The spec of a resource's current generation stays, however old.
			if err := run(`DELETE FROM generation_specs WHERE (resource_id, generation) IN (
				SELECT g.resource_id, g.generation FROM generation_specs g
				WHERE g.created_at < ?
					AND NOT EXISTS (SELECT 1 FROM resources r WHERE r.id = g.resource_id AND r.generation = g.generation)
				ORDER BY g.created_at LIMIT ?)`, cutoff); err != nil {
				return err
			}
		}
		if limits.MaxPerResource > 0 {
			for _, t := range []struct{ table, key string }{{"reconcile_history", "resource_id"}, {"sync_history", "source"}} {
				if err := run(`DELETE FROM `+t.table+` WHERE id IN (SELECT id FROM (
					SELECT id, row_number() OVER (PARTITION BY `+t.key+` ORDER BY id DESC) AS n FROM `+t.table+`)
					WHERE n > ? ORDER BY id LIMIT ?)`, limits.MaxPerResource); err != nil {
					return err
				}
			}
			if err := run(`DELETE FROM notifications WHERE id IN (SELECT id FROM (
				SELECT id, row_number() OVER (PARTITION BY source ORDER BY id DESC) AS n FROM notifications
				WHERE done_at IS NOT NULL) WHERE n > ? ORDER BY id LIMIT ?)`, limits.MaxPerResource); err != nil {
				return err
			}
			if err := run(`DELETE FROM generation_specs WHERE (resource_id, generation) IN (
				SELECT resource_id, generation FROM (
					SELECT resource_id, generation, row_number() OVER (PARTITION BY resource_id ORDER BY generation DESC) AS n
					FROM generation_specs)
				WHERE n > ? ORDER BY resource_id, generation LIMIT ?)`, limits.MaxPerResource); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, mapErr(err, "trim history")
	}
	return deleted, nil
}

const generationSpecCols = `resource_id, kind, namespace, name, generation, spec, action, source_revision, created_at`

// ListGenerationSpecs returns up to limit kept specs of the resource's
// generations, newest first; zero means no limit.
func (s *Store) ListGenerationSpecs(ctx context.Context, resourceID int64, limit int) ([]*store.GenerationSpec, error) {
	if limit < 0 {
		return nil, invalid("list generation specs: negative limit")
	}
	args := []any{resourceID}
	query := `SELECT ` + generationSpecCols + ` FROM generation_specs WHERE resource_id = $1 ORDER BY generation DESC`
	if limit > 0 {
		args = append(args, limit)
		query += ` LIMIT $2`
	}
	out, err := collect(ctx, s, scanGenerationSpec, query, args...)
	if err != nil {
		return nil, mapErr(err, fmt.Sprintf("list generation specs of resource %d", resourceID))
	}
	return out, nil
}

// GetGenerationSpec returns the kept spec of one generation of a resource.
func (s *Store) GetGenerationSpec(ctx context.Context, resourceID, generation int64) (*store.GenerationSpec, error) {
	g, err := scanGenerationSpec(s.queryRow(ctx, `SELECT `+generationSpecCols+` FROM generation_specs
		WHERE resource_id = $1 AND generation = $2`, resourceID, generation))
	if err != nil {
		return nil, mapErr(err, fmt.Sprintf("spec of generation %d of resource %d", generation, resourceID))
	}
	return g, nil
}

func scanGenerationSpec(row scanner) (*store.GenerationSpec, error) {
	var (
		g       store.GenerationSpec
		spec    []byte
		created int64
	)
	if err := row.Scan(&g.ResourceID, &g.Kind, &g.Namespace, &g.Name, &g.Generation, &spec, &g.Action,
		&g.SourceRevision, &created); err != nil {
		return nil, err
	}
	g.Spec = rawDoc(spec)
	g.CreatedAt = fromMs(created)
	return &g, nil
}
