package sqlite

import (
	"context"
	"strconv"

	"github.com/no8s/no8s-agent/store"
)

// Fence issues the next store version and announces it; see store.Store.
// The number and its announcement commit together.
func (s *Store) Fence(ctx context.Context) (int64, error) {
	if s.tx != nil {
		return 0, invalid("fence inside a transaction")
	}
	var v int64
	err := s.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		t := tx.(*Store)
		if err := t.queryRow(ctx, `UPDATE store_version SET v = v + 1 WHERE id = 1 RETURNING v`).Scan(&v); err != nil {
			return mapErr(err, "fence")
		}
		return t.Notify(ctx, store.TopicChanges, store.ChangeVersion+strconv.FormatInt(v, 10))
	})
	return v, err
}
