package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/no8s/no8s-agent/store"
)

const noticeCols = `id, event, severity, source, revision, kind, namespace, name, generation, labels, message, created_at,
	routed, pending, results, attempts, next_attempt_at, done_at, lease_owner, lease_token`

func scanNotice(row scanner) (*store.Notice, error) {
	var (
		n                        store.Notice
		labels, pending, results string
		created, next            int64
		done                     sql.NullInt64
	)
	err := row.Scan(&n.ID, &n.Event, &n.Severity, &n.Source, &n.Revision, &n.Kind, &n.Namespace, &n.Name, &n.Generation, &labels,
		&n.Message, &created, &n.Routed, &pending, &results, &n.Attempts, &next, &done, &n.LeaseOwner, &n.LeaseToken)
	if err != nil {
		return nil, err
	}
	if n.Labels, err = decodeMap(labels, "labels"); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(pending), &n.Pending); err != nil {
		return nil, fmt.Errorf("pending providers: %w", err)
	}
	if err := json.Unmarshal([]byte(results), &n.Results); err != nil {
		return nil, fmt.Errorf("delivery results: %w", err)
	}
	n.CreatedAt, n.NextAttemptAt, n.DoneAt = fromMs(created), fromMs(next), fromNullMs(done)
	return &n, nil
}

func (s *Store) queryNotices(ctx context.Context, q string, args ...any) ([]*store.Notice, error) {
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.Notice
	for rows.Next() {
		n, err := scanNotice(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// RouteNotices routes up to limit unrouted notices, oldest first. The
// store has one writer, so no other agent routes them meanwhile.
func (s *Store) RouteNotices(ctx context.Context, limit int, route func(*store.Notice) []string) (int, error) {
	if limit <= 0 {
		return 0, invalid("route notices: limit %d is not positive", limit)
	}
	routed := 0
	err := s.withTx(ctx, func(s *Store) error {
		ns, err := s.queryNotices(ctx, `SELECT `+noticeCols+` FROM notifications WHERE NOT routed ORDER BY id LIMIT $1`, limit)
		if err != nil {
			return err
		}
		now := ms(clock())
		for _, n := range ns {
			providers := route(n)
			pending, err := store.EncodeProviders(providers)
			if err != nil {
				return err
			}
			var done any
			if len(providers) == 0 {
				done = now
			}
			if _, err := s.exec(ctx, `UPDATE notifications SET routed = 1, pending = $2, done_at = $3, next_attempt_at = $4
				WHERE id = $1`, n.ID, string(pending), done, now); err != nil {
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
	var out []*store.Notice
	err := s.withTx(ctx, func(s *Store) error {
		now := ms(clock())
		var err error
		out, err = s.queryNotices(ctx, `UPDATE notifications SET lease_owner = $1, lease_token = lease_token + 1,
				lease_expires_at = $4
			WHERE id IN (SELECT id FROM notifications
				WHERE done_at IS NULL AND routed AND next_attempt_at <= $3
					AND (lease_expires_at IS NULL OR lease_expires_at <= $3)
				ORDER BY next_attempt_at, id LIMIT $2)
			RETURNING `+noticeCols, owner, limit, now, now+d.Milliseconds())
		return err
	})
	if err != nil {
		return nil, mapErr(err, "claim notices")
	}
	return out, nil
}

// CompleteNotice writes a delivery outcome, fenced by the claim's lease.
func (s *Store) CompleteNotice(ctx context.Context, n *store.Notice, c store.NoticeCompletion) error {
	// The claim holds the notice's results as stored: no one else writes
	// them while it is leased.
	results, pend, done, err := c.Encode(n)
	if err != nil {
		return err
	}
	var affected int64
	err = s.withTx(ctx, func(s *Store) error {
		now := ms(clock())
		var doneAt any
		if done {
			doneAt = now
		}
		res, err := s.exec(ctx, `UPDATE notifications SET results = $4, pending = $5,
				attempts = attempts + 1, next_attempt_at = $6, done_at = $7, lease_owner = '', lease_expires_at = NULL
			WHERE id = $1 AND lease_owner = $2 AND lease_token = $3`,
			n.ID, n.LeaseOwner, n.LeaseToken, string(results), string(pend), now+c.RetryAfter.Milliseconds(), doneAt)
		if err != nil {
			return err
		}
		affected, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return mapErr(err, fmt.Sprintf("complete notice %d", n.ID))
	}
	if affected == 0 {
		return fmt.Errorf("complete notice %d: lease %d of %s is no longer current: %w", n.ID, n.LeaseToken, n.LeaseOwner, store.ErrLeaseLost)
	}
	return nil
}

// ListNotices returns the newest notices, of one source when given.
func (s *Store) ListNotices(ctx context.Context, source string, limit int) ([]*store.Notice, error) {
	if limit <= 0 {
		return nil, invalid("list notices: limit %d is not positive", limit)
	}
	out, err := s.queryNotices(ctx, `SELECT `+noticeCols+` FROM notifications
		WHERE $1 = '' OR source = $1 ORDER BY id DESC LIMIT $2`, source, limit)
	return out, mapErr(err, "list notices")
}
