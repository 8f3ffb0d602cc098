package postgres

import (
	"context"

	"github.com/no8s/no8s-agent/store"
)

// DefaultNamespace returns the default namespace the store records.
func (s *Store) DefaultNamespace(ctx context.Context) (string, error) {
	var ns string
	err := s.q.QueryRow(ctx, `SELECT default_namespace FROM store_settings WHERE id = 1`).Scan(&ns)
	return ns, mapErr(err, "default namespace")
}

// SetDefaultNamespace records ns as the default namespace, unless
// resources are in the one recorded (see store.Store). The settings row is
// locked, and every agent sets it at start, before it syncs: the count
// and the write see the same resources unless an agent already running
// with the recorded namespace places one there meanwhile, which its own
// next start would refuse.
func (s *Store) SetDefaultNamespace(ctx context.Context, ns string) error {
	err := s.withTx(ctx, func(s *Store) error {
		var recorded string
		if err := s.q.QueryRow(ctx, `SELECT default_namespace FROM store_settings WHERE id = 1 FOR UPDATE`).Scan(&recorded); err != nil {
			return err
		}
		if recorded == ns {
			return nil
		}
		var n int
		if err := s.q.QueryRow(ctx, `SELECT count(*) FROM resources WHERE namespace = $1`, recorded).Scan(&n); err != nil {
			return err
		}
		if err := store.CheckDefaultNamespace(recorded, ns, n); err != nil {
			return err
		}
		_, err := s.q.Exec(ctx, `UPDATE store_settings SET default_namespace = $1 WHERE id = 1`, ns)
		return err
	})
	return mapErr(err, "set the default namespace")
}
