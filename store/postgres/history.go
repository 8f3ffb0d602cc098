package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

const reconcileCols = `id, resource_id, kind, namespace, name, generation, source_revision, trigger, phase, success, error,
	created_count, updated_count, deleted_count, outputs, plan_output, duration_ms, agent_id, started_at, finished_at,
	no_drift_checks, last_checked_at`

// foldNoDrift is the condition, on the history row h, under which a
// no-drift check of resource rid, generation gen, with plan output plan and
// success ok, is folded into h instead of added: h is that resource's
// newest record and a successful no-drift check of the same generation and
// plan output. checks is the new record's NoDriftChecks.
func foldNoDrift(rid, gen, plan, ok, checks string) string {
	return checks + ` > 0 AND ` + ok + ` AND h.id = (SELECT max(id) FROM reconcile_history WHERE resource_id = ` + rid + `)
		AND h.no_drift_checks > 0 AND h.success AND h.generation = ` + gen + ` AND h.plan_output = ` + plan
}

// AddReconcileRecord appends a reconcile attempt and returns its ID. The
// record's ID is ignored. A no-drift check may be folded into the record
// before it (see store.ReconcileRecord.NoDriftChecks): the ID is then that
// record's.
func (s *Store) AddReconcileRecord(ctx context.Context, h *store.ReconcileRecord) (int64, error) {
	if h == nil {
		return 0, invalid("add reconcile record: no record")
	}
	var id int64
	err := s.q.QueryRow(ctx, `WITH fold AS (
			UPDATE reconcile_history h SET no_drift_checks = h.no_drift_checks + 1, last_checked_at = $18,
				duration_ms = $15, agent_id = $16
			WHERE `+foldNoDrift("$1", "$4", "$14", "$8", "$19")+`
			RETURNING h.id
		), ins AS (
			INSERT INTO reconcile_history (resource_id, kind, name, generation, source_revision,
				trigger, phase, success, error, created_count, updated_count, deleted_count, outputs, plan_output,
				duration_ms, agent_id, started_at, finished_at, no_drift_checks, namespace)
			SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20
			WHERE NOT EXISTS (SELECT 1 FROM fold)
			RETURNING id
		)
		SELECT id FROM fold UNION ALL SELECT id FROM ins`,
		h.ResourceID, h.Kind, h.Name, h.Generation, string(h.SourceRevision), string(h.Trigger), h.Phase,
		h.Success, h.Error, h.Created, h.Updated, h.Deleted, jsonDoc(h.Outputs), h.PlanOutput,
		millis(h.Duration), h.AgentID, h.StartedAt, h.FinishedAt, h.NoDriftChecks, h.Namespace).Scan(&id)
	if err != nil {
		return 0, mapErr(err, fmt.Sprintf("add reconcile record of resource %d", h.ResourceID))
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
	sql := `SELECT ` + reconcileCols + ` FROM reconcile_history WHERE ` + where + ` ORDER BY id DESC`
	if limit > 0 {
		args = append(args, limit)
		sql += fmt.Sprintf(` LIMIT $%d`, len(args))
	}
	rows, err := s.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, mapErr(err, "list reconcile records of "+what)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.ReconcileRecord, error) {
		var (
			h   store.ReconcileRecord
			out []byte
			ms  int64
		)
		err := row.Scan(&h.ID, &h.ResourceID, &h.Kind, &h.Namespace, &h.Name, &h.Generation, &h.SourceRevision, &h.Trigger,
			&h.Phase, &h.Success, &h.Error, &h.Created, &h.Updated, &h.Deleted, &out, &h.PlanOutput, &ms,
			&h.AgentID, &h.StartedAt, &h.FinishedAt, &h.NoDriftChecks, &h.LastCheckedAt)
		h.Outputs = rawDoc(out)
		if h.LastCheckedAt != nil {
			t := utc(*h.LastCheckedAt)
			h.LastCheckedAt = &t
		}
		h.Duration = fromMillis(ms)
		h.StartedAt, h.FinishedAt = utc(h.StartedAt), utc(h.FinishedAt)
		return &h, err
	})
	if err != nil {
		return nil, mapErr(err, "list reconcile records of "+what)
	}
	return out, nil
}

// TrimHistory deletes up to batch records beyond limits: first those older
// than MaxAge, then, per resource and per source, those beyond the newest
// MaxPerResource, found through the (resource_id, id) and (source, id)
// indexes, and the generation specs alike.
func (s *Store) TrimHistory(ctx context.Context, limits store.HistoryLimits, batch int) (int, error) {
	if batch <= 0 || limits.MaxPerResource < 0 || limits.MaxAge < 0 {
		return 0, invalid("trim history: a positive batch and limits of zero or more are required")
	}
	deleted := 0
	run := func(sql string, args ...any) error {
		if deleted >= batch {
			return nil
		}
		tag, err := s.q.Exec(ctx, sql, append(args, batch-deleted)...)
		if err != nil {
			return mapErr(err, "trim history")
		}
		deleted += int(tag.RowsAffected())
		return nil
	}
	if limits.MaxAge > 0 {
		for _, t := range []string{"reconcile_history", "sync_history"} {
			if err := run(`DELETE FROM `+t+` WHERE id IN (SELECT id FROM `+t+`
				WHERE finished_at < now() - $1 * interval '1 millisecond' ORDER BY id LIMIT $2)`, millis(limits.MaxAge)); err != nil {
				return deleted, err
			}
		}
		// Notices go once they are delivered or given up.
		if err := run(`DELETE FROM notifications WHERE id IN (SELECT id FROM notifications
			WHERE done_at < now() - $1 * interval '1 millisecond' ORDER BY id LIMIT $2)`, millis(limits.MaxAge)); err != nil {
			return deleted, err
		}
		// The spec of a resource's current generation stays, however old.
		if err := run(`DELETE FROM generation_specs WHERE (resource_id, generation) IN (
			SELECT g.resource_id, g.generation FROM generation_specs g
			WHERE g.created_at < now() - $1 * interval '1 millisecond'
				AND NOT EXISTS (SELECT 1 FROM resources r WHERE r.id = g.resource_id AND r.generation = g.generation)
			ORDER BY g.created_at LIMIT $2)`, millis(limits.MaxAge)); err != nil {
			return deleted, err
		}
	}
	if limits.MaxPerResource > 0 {
		for _, t := range []struct{ table, key string }{{"reconcile_history", "resource_id"}, {"sync_history", "source"}} {
			if err := run(`DELETE FROM `+t.table+` WHERE id IN (
				SELECT h.id FROM (SELECT `+t.key+` AS k FROM `+t.table+` GROUP BY `+t.key+` HAVING count(*) > $1) crowded,
					LATERAL (SELECT id FROM `+t.table+` WHERE `+t.key+` = crowded.k ORDER BY id DESC OFFSET $1) h
				LIMIT $2)`, limits.MaxPerResource); err != nil {
				return deleted, err
			}
		}
		if err := run(`DELETE FROM notifications WHERE id IN (
			SELECT h.id FROM (SELECT source AS k FROM notifications WHERE done_at IS NOT NULL
					GROUP BY source HAVING count(*) > $1) crowded,
				LATERAL (SELECT id FROM notifications WHERE source = crowded.k AND done_at IS NOT NULL
					ORDER BY id DESC OFFSET $1) h
			LIMIT $2)`, limits.MaxPerResource); err != nil {
			return deleted, err
		}
		if err := run(`DELETE FROM generation_specs WHERE (resource_id, generation) IN (
			SELECT g.resource_id, g.generation FROM (SELECT resource_id AS k FROM generation_specs
					GROUP BY resource_id HAVING count(*) > $1) crowded,
				LATERAL (SELECT resource_id, generation FROM generation_specs WHERE resource_id = crowded.k
					ORDER BY generation DESC OFFSET $1) g
			LIMIT $2)`, limits.MaxPerResource); err != nil {
			return deleted, err
		}
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
	sql := `SELECT ` + generationSpecCols + ` FROM generation_specs WHERE resource_id = $1 ORDER BY generation DESC`
	if limit > 0 {
		args = append(args, limit)
		sql += ` LIMIT $2`
	}
	rows, err := s.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, mapErr(err, fmt.Sprintf("list generation specs of resource %d", resourceID))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.GenerationSpec, error) {
		return scanGenerationSpec(row)
	})
	if err != nil {
		return nil, mapErr(err, fmt.Sprintf("list generation specs of resource %d", resourceID))
	}
	return out, nil
}

// GetGenerationSpec returns the kept spec of one generation of a resource.
func (s *Store) GetGenerationSpec(ctx context.Context, resourceID, generation int64) (*store.GenerationSpec, error) {
	g, err := scanGenerationSpec(s.q.QueryRow(ctx, `SELECT `+generationSpecCols+` FROM generation_specs
		WHERE resource_id = $1 AND generation = $2`, resourceID, generation))
	if err != nil {
		return nil, mapErr(err, fmt.Sprintf("spec of generation %d of resource %d", generation, resourceID))
	}
	return g, nil
}

func scanGenerationSpec(row pgx.Row) (*store.GenerationSpec, error) {
	var (
		g    store.GenerationSpec
		spec []byte
	)
	if err := row.Scan(&g.ResourceID, &g.Kind, &g.Namespace, &g.Name, &g.Generation, &spec, &g.Action,
		&g.SourceRevision, &g.CreatedAt); err != nil {
		return nil, err
	}
	g.Spec = rawDoc(spec)
	g.CreatedAt = utc(g.CreatedAt)
	return &g, nil
}
