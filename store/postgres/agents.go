package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s-agent/store"
)

// RecordAgent records that agent a runs.
func (s *Store) RecordAgent(ctx context.Context, a *store.Agent) error {
	if a == nil || a.ID == "" {
		return invalid("record agent: an agent with an id is required")
	}
	_, err := s.q.Exec(ctx, `INSERT INTO agents (id, host, version, started_at, last_seen_at)
		VALUES ($1, $2, $3, $4, now())
		ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, version = EXCLUDED.version,
			started_at = EXCLUDED.started_at, last_seen_at = now(), stopped_at = NULL`, a.ID, a.Host, a.Version, a.StartedAt)
	return mapErr(err, "record agent "+a.ID)
}

// ListAgents returns the agents that beat, ordered by id.
func (s *Store) ListAgents(ctx context.Context) ([]*store.Agent, error) {
	rows, err := s.q.Query(ctx, `SELECT id, host, version, started_at, last_seen_at, stopped_at FROM agents ORDER BY id`)
	if err != nil {
		return nil, mapErr(err, "list agents")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Agent, error) {
		var a store.Agent
		err := r.Scan(&a.ID, &a.Host, &a.Version, &a.StartedAt, &a.LastSeenAt, &a.StoppedAt)
		a.StartedAt, a.LastSeenAt = a.StartedAt.UTC(), a.LastSeenAt.UTC()
		if a.StoppedAt != nil {
			*a.StoppedAt = a.StoppedAt.UTC()
		}
		return &a, err
	})
	return out, mapErr(err, "list agents")
}

// StopAgent records that agent id shut down cleanly.
func (s *Store) StopAgent(ctx context.Context, id string) error {
	tag, err := s.q.Exec(ctx, `UPDATE agents SET stopped_at = now(), last_seen_at = now() WHERE id = $1`, id)
	if err != nil {
		return mapErr(err, "stop agent "+id)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("stop agent %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// ForgetAgents removes the agents not seen for longer than age.
func (s *Store) ForgetAgents(ctx context.Context, age time.Duration) (int, error) {
	if age <= 0 {
		return 0, invalid("forget agents: a positive age is required")
	}
	tag, err := s.q.Exec(ctx, `DELETE FROM agents WHERE last_seen_at < now() - $1 * interval '1 millisecond'`, millis(age))
	if err != nil {
		return 0, mapErr(err, fmt.Sprintf("forget agents not seen for %s", age))
	}
	return int(tag.RowsAffected()), nil
}
