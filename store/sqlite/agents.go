package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/no8s/no8s-agent/store"
)

// RecordAgent records that agent a runs.
func (s *Store) RecordAgent(ctx context.Context, a *store.Agent) error {
	if a == nil || a.ID == "" {
		return invalid("record agent: an agent with an id is required")
	}
	err := s.withTx(ctx, func(s *Store) error {
		_, err := s.exec(ctx, `INSERT INTO agents (id, host, version, started_at, last_seen_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET host = excluded.host, version = excluded.version,
				started_at = excluded.started_at, last_seen_at = excluded.last_seen_at, stopped_at = NULL`,
			a.ID, a.Host, a.Version, ms(a.StartedAt), ms(time.Now()))
		return err
	})
	return mapErr(err, "record agent "+a.ID)
}

// ListAgents returns the agents that beat, ordered by id.
func (s *Store) ListAgents(ctx context.Context) ([]*store.Agent, error) {
	rows, err := s.query(ctx, `SELECT id, host, version, started_at, last_seen_at, stopped_at FROM agents ORDER BY id`)
	if err != nil {
		return nil, mapErr(err, "list agents")
	}
	defer rows.Close()
	var out []*store.Agent
	for rows.Next() {
		var (
			a             store.Agent
			started, seen int64
			stopped       sql.NullInt64
		)
		if err := rows.Scan(&a.ID, &a.Host, &a.Version, &started, &seen, &stopped); err != nil {
			return nil, mapErr(err, "list agents")
		}
		a.StartedAt, a.LastSeenAt, a.StoppedAt = fromMs(started), fromMs(seen), fromNullMs(stopped)
		out = append(out, &a)
	}
	return out, mapErr(rows.Err(), "list agents")
}

// StopAgent records that agent id shut down cleanly.
func (s *Store) StopAgent(ctx context.Context, id string) error {
	var n int64
	err := s.withTx(ctx, func(s *Store) error {
		now := ms(time.Now())
		res, err := s.exec(ctx, `UPDATE agents SET stopped_at = ?, last_seen_at = ? WHERE id = ?`, now, now, id)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return mapErr(err, "stop agent "+id)
	}
	if n == 0 {
		return fmt.Errorf("stop agent %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// ForgetAgents removes the agents not seen for longer than age.
func (s *Store) ForgetAgents(ctx context.Context, age time.Duration) (int, error) {
	if age <= 0 {
		return 0, invalid("forget agents: a positive age is required")
	}
	var n int64
	err := s.withTx(ctx, func(s *Store) error {
		res, err := s.exec(ctx, `DELETE FROM agents WHERE last_seen_at < ?`, ms(time.Now().Add(-age)))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, mapErr(err, fmt.Sprintf("forget agents not seen for %s", age))
	}
	return int(n), nil
}
