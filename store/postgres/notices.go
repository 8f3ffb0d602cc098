package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s-agent/store"
)

const noticeCols = `id, event, severity, source, revision, kind, namespace, name, generation, labels, message, created_at,
	routed, pending, results, attempts, next_attempt_at, done_at, lease_owner, lease_token`

func scanNotice(row pgx.Row) (*store.Notice, error) {
	var (
		n                        store.Notice
		labels, pending, results []byte
	)
	err := row.Scan(&n.ID, &n.Event, &n.Severity, &n.Source, &n.Revision, &n.Kind, &n.Namespace, &n.Name, &n.Generation, &labels,
		&n.Message, &n.CreatedAt, &n.Routed, &pending, &results, &n.Attempts, &n.NextAttemptAt, &n.DoneAt,
		&n.LeaseOwner, &n.LeaseToken)
	if err != nil {
		return nil, err
	}
	if n.Labels, err = decodeMap(labels, "labels"); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(pending, &n.Pending); err != nil {
		return nil, fmt.Errorf("pending providers: %w", err)
	}
	if err := json.Unmarshal(results, &n.Results); err != nil {
		return nil, fmt.Errorf("delivery results: %w", err)
	}
	n.CreatedAt, n.NextAttemptAt = utc(n.CreatedAt), utc(n.NextAttemptAt)
	n.DoneAt = utcPtr(n.DoneAt)
	return &n, nil
}

func collectNotices(rows pgx.Rows) ([]*store.Notice, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Notice, error) { return scanNotice(row) })
}

// RouteNotices routes up to limit unrouted notices, oldest first.
func (s *Store) RouteNotices(ctx context.Context, limit int, route func(*store.Notice) []string) (int, error) {
	if limit <= 0 {
		return 0, invalid("route notices: limit %d is not positive", limit)
	}
	routed := 0
	err := s.withTx(ctx, func(s *Store) error {
		rows, err := s.q.Query(ctx, `SELECT `+noticeCols+` FROM notifications WHERE NOT routed
			ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`, limit)
		if err != nil {
			return err
		}
		ns, err := collectNotices(rows)
		if err != nil {
			return err
		}
		for _, n := range ns {
			providers := route(n)
			pending, err := store.EncodeProviders(providers)
			if err != nil {
				return err
			}
			if _, err := s.q.Exec(ctx, `UPDATE notifications SET routed = true, pending = $2,
					done_at = CASE WHEN $3 THEN now() END, next_attempt_at = now()
				WHERE id = $1`, n.ID, pending, len(providers) == 0); err != nil {
				return err
			}
			routed++
		}
		return nil
	})
	if err != nil {
		return 0, mapErr(err, "route notices")
	}
	return routed, nil
}

// ClaimNotices leases due notices.
func (s *Store) ClaimNotices(ctx context.Context, owner string, limit int, d time.Duration) ([]*store.Notice, error) {
	if owner == "" || limit <= 0 || d <= 0 {
		return nil, invalid("claim notices: owner, a positive limit and a positive duration are required")
	}
	rows, err := s.q.Query(ctx, `WITH picked AS (
			SELECT id FROM notifications
			WHERE done_at IS NULL AND routed AND next_attempt_at <= now()
				AND (lease_expires_at IS NULL OR lease_expires_at <= now())
			ORDER BY next_attempt_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)
		UPDATE notifications n SET lease_owner = $1, lease_token = n.lease_token + 1,
			lease_expires_at = now() + $3 * interval '1 millisecond'
		FROM picked WHERE n.id = picked.id
		RETURNING `+prefixed("n.", noticeCols), owner, limit, millis(d))
	if err != nil {
		return nil, mapErr(err, "claim notices")
	}
	out, err := collectNotices(rows)
	return out, mapErr(err, "claim notices")
}

// CompleteNotice writes a delivery outcome, fenced by the claim's lease.
func (s *Store) CompleteNotice(ctx context.Context, n *store.Notice, c store.NoticeCompletion) error {
	// The claim holds the notice's results as stored: no one else writes
	// them while it is leased.
	results, pend, done, err := c.Encode(n)
	if err != nil {
		return err
	}
	tag, err := s.q.Exec(ctx, `UPDATE notifications SET results = $4, pending = $5,
			attempts = attempts + 1, next_attempt_at = now() + $6 * interval '1 millisecond',
			done_at = CASE WHEN $7 THEN now() END, lease_owner = '', lease_expires_at = NULL
		WHERE id = $1 AND lease_owner = $2 AND lease_token = $3`,
		n.ID, n.LeaseOwner, n.LeaseToken, results, pend, millis(c.RetryAfter), done)
	if err != nil {
		return mapErr(err, fmt.Sprintf("complete notice %d", n.ID))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("complete notice %d: lease %d of %s is no longer current: %w", n.ID, n.LeaseToken, n.LeaseOwner, store.ErrLeaseLost)
	}
	return nil
}

// ListNotices returns the newest notices, of one source when given.
func (s *Store) ListNotices(ctx context.Context, source string, limit int) ([]*store.Notice, error) {
	if limit <= 0 {
		return nil, invalid("list notices: limit %d is not positive", limit)
	}
	rows, err := s.q.Query(ctx, `SELECT `+noticeCols+` FROM notifications
		WHERE $1 = '' OR source = $1 ORDER BY id DESC LIMIT $2`, source, limit)
	if err != nil {
		return nil, mapErr(err, "list notices")
	}
	out, err := collectNotices(rows)
	return out, mapErr(err, "list notices")
}
