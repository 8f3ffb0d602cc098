package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/no8s/no8s-agent/store"
)

// RecordHandle stores the handle of the claim's attempt, fenced by the
// lease like Heartbeat. It is a column of its own, outside the status, so
// it sends no status notification.
func (s *Store) RecordHandle(ctx context.Context, c *store.Claim, h store.Handle) error {
	if err := h.Check(); err != nil {
		return err
	}
	b, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("record handle of resource %d: %w", c.ID, err)
	}
	tag, err := s.q.Exec(ctx, `UPDATE resources SET attempt_handle = $4
		WHERE id = $1 AND lease_owner = $2 AND lease_token = $3`, c.ID, c.Lease.Owner, c.Lease.Token, b)
	if err != nil {
		return mapErr(err, fmt.Sprintf("record handle of resource %d", c.ID))
	}
	if tag.RowsAffected() == 0 {
		return s.leaseLost(ctx, c, "record handle of")
	}
	return nil
}

// decodeHandle decodes the attempt_handle column: nil when NULL.
func decodeHandle(b []byte) (*store.Handle, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var h store.Handle
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("decode attempt handle: %w", err)
	}
	return &h, nil
}
