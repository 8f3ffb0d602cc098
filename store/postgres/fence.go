package postgres

import (
	"context"

	"github.com/no8s/no8s-agent/store"
)

// Fence issues the next store version and announces it; see store.Store.
// One statement does both, so the announcement commits with the number.
func (s *Store) Fence(ctx context.Context) (int64, error) {
	if s.tx != nil {
		return 0, invalid("fence inside a transaction")
	}
	var v int64
	err := s.q.QueryRow(ctx, `SELECT v FROM (SELECT nextval('no8s_store_version') AS v) AS issued,
		LATERAL pg_notify('`+store.TopicChanges+`', '`+store.ChangeVersion+`' || v)`).Scan(&v)
	return v, mapErr(err, "fence")
}
