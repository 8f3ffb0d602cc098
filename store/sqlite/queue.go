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

// In the queries below, $1 is the current time in Unix milliseconds.

// leaseFree is true of a row no worker holds: never leased, released, or
// expired.
const leaseFree = `(lease_expires_at IS NULL OR lease_expires_at <= $1)`

// urgentDue is true of resources due regardless of schedule: a deletion, a
// manual request, or a new generation whose retry time (if any) has come.
// Its first line is resources_urgent_idx's predicate, word for word, so
// that SQLite may walk that small partial index in id order.
const urgentDue = `(generation > observed_generation
       OR deletion_requested_at IS NOT NULL
       OR reconcile_requested_at IS NOT NULL)
	AND (reconcile_requested_at IS NOT NULL OR next_reconcile_at IS NULL OR next_reconcile_at <= $1)`

// scheduledDue is true of resources whose retry or drift check has come.
const scheduledDue = `next_reconcile_at <= $1`

// notOrphaned is true of resources whose source some agent serves: those
// of orphaned sources are kept as they are, neither reconciled nor destroyed.
const notOrphaned = `source_name NOT IN (` + store.OrphanedSourcesSQL + `)`

// claimUrgent picks urgent resources in id order; $2 is the limit.
const claimUrgent = `SELECT id, phase FROM resources
	WHERE ` + urgentDue + ` AND ` + leaseFree + ` AND ` + notOrphaned + ` AND ` + notSuspended + `
	ORDER BY id LIMIT $2`

// claimScheduled picks scheduled resources, earliest first.
const claimScheduled = `SELECT id, phase FROM resources
	WHERE ` + scheduledDue + ` AND ` + leaseFree + ` AND ` + notOrphaned + ` AND ` + notSuspended + `
	ORDER BY next_reconcile_at, id LIMIT $2`

// claimSQL leases the resources whose IDs are the JSON array $3 to the
// owner $2 until $4, and returns them with their type's drift interval.
const claimSQL = `UPDATE resources SET lease_owner = $2, lease_token = lease_token + 1, lease_expires_at = $4, leased_at = $1,
	phase = CASE WHEN deletion_requested_at IS NOT NULL THEN 'deleting' ELSE 'reconciling' END
WHERE id IN (SELECT value FROM json_each($3)) AND ` + leaseFree + `
RETURNING ` + resourceCols + `,
	coalesce((SELECT t.drift_interval_ms FROM resource_types t
		WHERE t.name = resources.kind AND t.version = resources.type_version), 0),
	attempt_handle`

// ClaimResources leases up to p.Limit due resources to p.Owner: urgent ones
// first, then scheduled ones. Picking and leasing happen in one write
// transaction, and there is only one writer, so no resource is leased
// twice: a concurrent claim runs before or after, and sees these leases.
// The claims commit together or not at all.
func (s *Store) ClaimResources(ctx context.Context, p store.ClaimParams) ([]*store.Claim, error) {
	if p.Owner == "" || p.Limit <= 0 || p.Duration <= 0 {
		return nil, invalid("claim resources: owner, a positive limit and a positive duration are required")
	}
	var out []*store.Claim
	err := s.withTx(ctx, func(s *Store) error {
		out = nil
		now := clock()
		for _, pick := range []string{claimUrgent, claimScheduled} {
			left := p.Limit - len(out)
			if left == 0 {
				break
			}
			type picked struct {
				id    int64
				prior manifest.Phase
			}
			picks, err := collect(ctx, s, func(row scanner) (picked, error) {
				var pk picked
				err := row.Scan(&pk.id, &pk.prior)
				return pk, err
			}, pick, ms(now), left)
			if err != nil {
				return err
			}
			if len(picks) == 0 {
				continue
			}
			ids := make([]int64, len(picks))
			for i, pk := range picks {
				ids[i] = pk.id
			}
			list, err := jsonArray(ids)
			if err != nil {
				return err
			}
			claimed := make(map[int64]*store.Claim, len(picks))
			rows, err := collect(ctx, s, func(row scanner) (*store.Claim, error) {
				var (
					drift  int64
					handle sql.NullString
				)
				r, err := scanResource(row, &drift, &handle)
				if err != nil {
					return nil, err
				}
				h, err := decodeHandle(handle)
				if err != nil {
					return nil, err
				}
				return &store.Claim{Resource: r, Lease: store.Lease{Owner: p.Owner, Token: r.LeaseToken},
					DriftInterval: fromMillis(drift), Handle: h}, nil
			}, claimSQL, ms(now), p.Owner, list, ms(now.Add(p.Duration)))
			if err != nil {
				return err
			}
			for _, c := range rows {
				claimed[c.ID] = c
			}
			// RETURNING comes in no particular order: put the claims back in
			// the order they were picked.
			for _, pk := range picks {
				c, ok := claimed[pk.id]
				if !ok {
					return fmt.Errorf("resource %d was picked but not leased", pk.id)
				}
				c.PriorPhase = pk.prior
				out = append(out, c)
			}
		}
		return nil
	})
	if err != nil {
		return nil, mapErr(err, "claim resources")
	}
	return out, nil
}

// leaseLost tells, after a fenced write matched no row, whether the row is
// gone or its lease moved on.
func (s *Store) leaseLost(ctx context.Context, c *store.Claim, what string) error {
	var token int64
	err := s.queryRow(ctx, `SELECT lease_token FROM resources WHERE id = $1`, c.ID).Scan(&token)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s resource %d: %w", what, c.ID, store.ErrNotFound)
	}
	if err != nil {
		return mapErr(err, fmt.Sprintf("%s resource %d", what, c.ID))
	}
	return fmt.Errorf("%s resource %d: lease %d of %s is no longer current: %w",
		what, c.ID, c.Lease.Token, c.Lease.Owner, store.ErrLeaseLost)
}

// Heartbeat extends the lease and writes the progress, fenced by the token.
func (s *Store) Heartbeat(ctx context.Context, c *store.Claim, d time.Duration, p *store.Progress) error {
	if d <= 0 {
		return invalid("heartbeat: duration must be positive")
	}
	err := s.withTx(ctx, func(s *Store) error {
		now := clock()
		var (
			res   sql.Result
			err   error
			conds string
		)
		if p != nil {
			prev, err := s.storedState(ctx, c.ID)
			if errors.Is(err, sql.ErrNoRows) {
				return s.leaseLost(ctx, c, "heartbeat")
			}
			if err != nil {
				return err
			}
			next := store.KeepTransitionTimes(prev.conds, p.Conditions, now)
			if conds, err = jsonValue(next, len(next) == 0, "[]"); err != nil {
				return err
			}
		}
		if p == nil {
			res, err = s.exec(ctx, `UPDATE resources SET lease_expires_at = $4
				WHERE id = $1 AND lease_owner = $2 AND lease_token = $3`,
				c.ID, c.Lease.Owner, c.Lease.Token, ms(now.Add(d)))
		} else {
			res, err = s.exec(ctx, `UPDATE resources SET lease_expires_at = $4,
					status_message = $5, conditions = $6, updated_at = $7
				WHERE id = $1 AND lease_owner = $2 AND lease_token = $3`,
				c.ID, c.Lease.Owner, c.Lease.Token, ms(now.Add(d)), p.Message, conds, ms(now))
		}
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return err
		}
		return s.leaseLost(ctx, c, "heartbeat")
	})
	return mapErr(err, fmt.Sprintf("heartbeat resource %d", c.ID))
}

// completeSQL writes a claim's outcome, fenced by the lease. The status
// columns take the claim into account: a resource whose generation,
// deletion request or manual request changed while it was claimed keeps
// that change and is due at once; one with a new generation is pending, as
// ApplyResource made it.
//
// $1 now, $2 id, $3 lease owner, $4 lease token, $5 claimed generation,
// $6 claimed manual request time, $7 claimed with a deletion request,
// $8 phase, $9 message, $10 conditions, $11 observed generation,
// $12 outputs, $13 retry count, $14 last reconcile time, $15 requeue after
// (milliseconds, NULL for none), $16 waiting, $17 keep the attempt's handle
// (otherwise it is cleared).
const completeSQL = `UPDATE resources SET
	phase = CASE WHEN deletion_requested_at IS NOT NULL AND NOT $7 THEN 'deleting'
		WHEN deletion_requested_at IS NULL AND ($7 OR generation <> $5) THEN 'pending' ELSE $8 END,
	status_message = $9, conditions = $10, observed_generation = $11, outputs = $12,
	retry_count = CASE WHEN generation <> $5 THEN 0 ELSE $13 END,
	last_reconcile_time = $14,
	next_reconcile_at = CASE
		WHEN generation <> $5 OR (deletion_requested_at IS NOT NULL) <> $7 THEN NULL
		WHEN $15 IS NULL THEN NULL
		ELSE $1 + $15 END,
	reconcile_requested_at = CASE WHEN reconcile_requested_at IS $6 THEN NULL ELSE reconcile_requested_at END,
	waiting = $16, lease_owner = '', lease_expires_at = NULL, updated_at = $1,
	attempt_handle = CASE WHEN $17 THEN attempt_handle END
WHERE id = $2 AND lease_owner = $3 AND lease_token = $4
RETURNING ` + resourceCols

// CompleteReconcile writes the outcome of a claim, its history record and
// the wake-ups it causes in one transaction; see store.Store.
func (s *Store) CompleteReconcile(ctx context.Context, c *store.Claim, done store.Completion) (*store.Resource, error) {
	what := fmt.Sprintf("complete reconcile of resource %d", c.ID)
	if err := checkCompletion(c, done); err != nil {
		return nil, err
	}
	var out *store.Resource
	err := s.withTx(ctx, func(s *Store) error {
		r, notify, err := s.complete(ctx, c, done)
		if err != nil {
			return err
		}
		out = r
		if notify {
			return s.Notify(ctx, store.TopicResources, c.Ref().String())
		}
		return nil
	})
	if err != nil {
		return nil, mapErr(err, what)
	}
	return out, nil
}

// CompleteReconciles writes many completions in one write transaction,
// each in a savepoint of its own so that one refused rolls back alone, and
// sends one TopicResources notification for all of them; see store.Store.
func (s *Store) CompleteReconciles(ctx context.Context, batch []store.ClaimCompletion) []store.CompletionResult {
	out := make([]store.CompletionResult, len(batch))
	err := s.withTx(ctx, func(tx *Store) error {
		notify := false
		for i, cc := range batch {
			out[i] = store.CompletionResult{}
			if err := checkCompletion(cc.Claim, cc.Done); err != nil {
				out[i].Err = err
				continue
			}
			err := tx.savepoint(ctx, func(sp *Store) error {
				r, n, err := sp.complete(ctx, cc.Claim, cc.Done)
				out[i].Resource, notify = r, notify || n
				return err
			})
			if err != nil {
				out[i] = store.CompletionResult{Err: mapErr(err, fmt.Sprintf("complete reconcile of resource %d", cc.Claim.ID))}
			}
		}
		if notify {
			return tx.Notify(ctx, store.TopicResources, "")
		}
		return nil
	})
	if err != nil {
		// Nothing was written: every completion that was not refused
		// already fails with the transaction.
		for i, cc := range batch {
			if out[i].Err == nil {
				out[i] = store.CompletionResult{Err: mapErr(err, fmt.Sprintf("complete reconcile of resource %d", cc.Claim.ID))}
			}
		}
	}
	return out
}

// checkCompletion refuses a completion no backend writes.
func checkCompletion(c *store.Claim, done store.Completion) error {
	u := done.Status
	if !u.Phase.Valid() {
		return invalid("complete reconcile of resource %d: unknown phase %q", c.ID, u.Phase)
	}
	if u.ObservedGeneration < 0 || u.RetryCount < 0 || done.RequeueAfter < 0 {
		return invalid("complete reconcile of resource %d: negative observed generation, retry count or requeue", c.ID)
	}
	if done.Record != nil && (done.Record.StartedAt.IsZero() || done.Record.FinishedAt.IsZero()) {
		return invalid("complete reconcile of resource %d: the record needs its start and finish times", c.ID)
	}
	what := fmt.Sprintf("complete reconcile of resource %d", c.ID)
	if err := validDoc(u.Outputs, what+": outputs"); err != nil {
		return err
	}
	if done.Record != nil {
		if err := validDoc(done.Record.Outputs, what+": record outputs"); err != nil {
			return err
		}
	}
	return nil
}

// complete writes one completion inside the write transaction s and tells
// whether the resource, or one it woke, is due at once: then the caller
// notifies TopicResources.
func (s *Store) complete(ctx context.Context, c *store.Claim, done store.Completion) (*store.Resource, bool, error) {
	u := done.Status
	// A completion that writes Ready for the claimed generation wakes the
	// resources waiting for it.
	readyCond := manifest.FindCondition(u.Conditions, manifest.ConditionReady)
	nowReady := readyCond != nil && readyCond.Status == manifest.ConditionTrue && u.ObservedGeneration == c.Generation
	at := clock()
	now := ms(at)
	notify := false
	if done.Delete {
		// Only the destruction that was claimed removes the row: a
		// resource brought back meanwhile has a new generation and no
		// deletion request.
		res, err := s.exec(ctx, `DELETE FROM resources WHERE id = $1 AND lease_owner = $2 AND lease_token = $3
			AND generation = $4 AND deletion_requested_at IS NOT NULL`, c.ID, c.Lease.Owner, c.Lease.Token, c.Generation)
		if err != nil {
			return nil, false, err
		}
		if n, err := res.RowsAffected(); err != nil {
			return nil, false, err
		} else if n == 1 {
			if done.Record != nil {
				if _, err := s.AddReconcileRecord(ctx, done.Record); err != nil {
					return nil, false, err
				}
			}
			if err := s.finishPrune(ctx, c.Source.Name); err != nil {
				return nil, false, err
			}
			woken, err := s.wakeDependencies(ctx, c, now)
			return nil, woken, err
		}
	}
	var next any
	if done.Requeue {
		next = millis(done.RequeueAfter)
	}
	if done.Waiting {
		// Whatever it waits on may have got there after the worker
		// looked: then it is due at once, as a wake-up would have made it.
		over, err := s.waitIsOver(ctx, done.WaitForReady, done.WaitForGone)
		if err != nil {
			return nil, false, err
		}
		if over {
			next, notify = int64(0), true
		}
	}
	prev, err := s.storedState(ctx, c.ID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, s.leaseLost(ctx, c, "complete reconcile of")
	}
	if err != nil {
		return nil, false, err
	}
	written, msg := store.KeepTransitionTimes(prev.conds, u.Conditions, at), u.Message
	if prev.gen != c.Generation && !prev.deleting {
		written, msg = store.PendingConditions(written, prev.gen, at), store.PendingMessage(prev.gen)
	}
	conds, err := jsonValue(written, len(written) == 0, "[]")
	if err != nil {
		return nil, false, err
	}
	r, err := scanResource(s.queryRow(ctx, completeSQL,
		now, c.ID, c.Lease.Owner, c.Lease.Token, c.Generation, msPtr(c.ReconcileRequestedAt),
		c.DeletionRequestedAt != nil, string(u.Phase), msg, conds, u.ObservedGeneration,
		jsonDoc(u.Outputs), u.RetryCount, msPtr(u.LastReconcileTime), next, done.Waiting, done.KeepHandle))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, s.leaseLost(ctx, c, "complete reconcile of")
	}
	if err != nil {
		return nil, false, err
	}
	if rec := done.Record; rec != nil {
		if _, err := s.writeReconcileRecord(ctx, rec, c.ID, r.Ref(), c.Generation); err != nil {
			return nil, false, err
		}
	}
	// It may have changed while claimed; then it is due now.
	notify = notify || stillDue(r)
	if nowReady && !done.Delete && isReady(r) {
		woken, err := s.wakeDependents(ctx, r.Ref(), now)
		if err != nil {
			return nil, false, err
		}
		notify = notify || woken
	}
	return r, notify, nil
}

// wakeDependents makes due at once the resources that wait for ref to be
// Ready. It reports whether it woke any.
func (s *Store) wakeDependents(ctx context.Context, ref manifest.ObjectRef, now int64) (bool, error) {
	res, err := s.exec(ctx, `UPDATE resources SET next_reconcile_at = $1
		WHERE waiting AND next_reconcile_at > $1
		  AND id IN (SELECT resource_id FROM resource_dependencies WHERE kind = $2 AND namespace = $3 AND name = $4)`,
		now, ref.Kind, ref.Namespace, ref.Name)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// wakeDependencies makes due at once, after c was destroyed, the resources
// it depends on that waited for it to go. It reports whether it woke any.
func (s *Store) wakeDependencies(ctx context.Context, c *store.Claim, now int64) (bool, error) {
	if len(c.DependsOn) == 0 {
		return false, nil
	}
	list, err := jsonArray(c.DependsOn)
	if err != nil {
		return false, err
	}
	res, err := s.exec(ctx, `UPDATE resources SET next_reconcile_at = $1
		WHERE waiting AND next_reconcile_at > $1 AND `+fmt.Sprintf(refsIn, 2), now, list)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// waitIsOver tells whether any of the resources a waiter waits on got where
// it needs them since the worker looked. No completion can run between
// this read and the waiter's write: they share the one write transaction.
func (s *Store) waitIsOver(ctx context.Context, ready, gone []manifest.ObjectRef) (bool, error) {
	refs := append(append([]manifest.ObjectRef(nil), ready...), gone...)
	if len(refs) == 0 {
		return false, nil
	}
	list, err := jsonArray(refs)
	if err != nil {
		return false, err
	}
	found, err := collect(ctx, s, func(row scanner) (*store.Resource, error) { return scanResource(row) },
		`SELECT `+resourceCols+` FROM resources WHERE `+fmt.Sprintf(refsIn, 1), list)
	if err != nil {
		return false, err
	}
	byRef := make(map[manifest.ObjectRef]*store.Resource, len(found))
	for _, r := range found {
		byRef[r.Ref()] = r
	}
	// Any one of them getting there is worth another look: that is when
	// the waiter would have been woken.
	for _, ref := range ready {
		if r, ok := byRef[ref]; ok && isReady(r) {
			return true, nil
		}
	}
	for _, ref := range gone {
		if _, ok := byRef[ref]; !ok {
			return true, nil
		}
	}
	return false, nil
}

// stillDue tells whether a resource just completed is due at once.
func stillDue(r *store.Resource) bool {
	return r.ReconcileRequestedAt != nil ||
		(r.NextReconcileAt == nil && (r.Generation > r.ObservedGeneration || r.DeletionRequestedAt != nil))
}

// isReady is what a dependent waits for: the current generation reconciled
// and Ready.
func isReady(r *store.Resource) bool {
	ready := manifest.FindCondition(r.Conditions, manifest.ConditionReady)
	return ready != nil && ready.Status == manifest.ConditionTrue &&
		r.ObservedGeneration == r.Generation && r.DeletionRequestedAt == nil
}

// RequestReconcile records a manual request and notifies reconcilers.
//
// A completion clears the request it served by comparing times, so a new
// request must never carry the time of the one being served: with
// millisecond times two requests can fall in the same millisecond, and the
// second then moves one millisecond past the first.
func (s *Store) RequestReconcile(ctx context.Context, id int64) (*store.Resource, error) {
	var out *store.Resource
	err := s.withTx(ctx, func(s *Store) error {
		r, err := scanResource(s.queryRow(ctx, `UPDATE resources SET
				reconcile_requested_at = max($1, coalesce(reconcile_requested_at + 1, $1)), updated_at = $1
			WHERE id = $2 RETURNING `+resourceCols, ms(clock()), id))
		if err != nil {
			return err
		}
		out = r
		return s.Notify(ctx, store.TopicResources, r.Ref().String())
	})
	if err != nil {
		return nil, mapErr(err, fmt.Sprintf("request reconcile of resource %d", id))
	}
	return out, nil
}

// NextDue returns the time until the earliest scheduled reconcile of a free
// resource, or lease expiry; zero when one is due already.
func (s *Store) NextDue(ctx context.Context) (time.Duration, bool, error) {
	now := clock()
	var next, expiry sql.NullInt64
	// A scheduled resource that is due already but unclaimed counts, as
	// zero: the caller should claim now.
	err := s.queryRow(ctx, `SELECT
			(SELECT min(next_reconcile_at) FROM resources WHERE next_reconcile_at IS NOT NULL AND `+leaseFree+` AND `+notOrphaned+` AND `+notSuspended+`),
			(SELECT min(lease_expires_at) FROM resources WHERE lease_expires_at > $1 AND `+notOrphaned+` AND `+notSuspended+`)`, ms(now)).Scan(&next, &expiry)
	if err != nil {
		return 0, false, mapErr(err, "next due reconcile")
	}
	if !next.Valid && !expiry.Valid {
		return 0, false, nil
	}
	at := next.Int64
	if !next.Valid || (expiry.Valid && expiry.Int64 < at) {
		at = expiry.Int64
	}
	return max(0, fromMs(at).Sub(now)), true, nil
}

// CountResources counts the resources; see store.Store.
func (s *Store) CountResources(ctx context.Context) (int, error) {
	var n int
	if err := s.queryRow(ctx, `SELECT count(*) FROM resources`).Scan(&n); err != nil {
		return 0, mapErr(err, "count resources")
	}
	return n, nil
}

// Stats counts resources by phase, and those due, leased and waiting, in
// one scan.
func (s *Store) Stats(ctx context.Context) (*store.Stats, error) {
	rows, err := s.query(ctx, `SELECT phase, count(*),
			count(*) FILTER (WHERE `+leaseFree+` AND ((`+urgentDue+`) OR `+scheduledDue+`) AND `+notOrphaned+` AND `+notSuspended+`),
			count(*) FILTER (WHERE lease_expires_at > $1),
			count(*) FILTER (WHERE waiting),
			count(*) FILTER (WHERE NOT (`+notSuspended+`))
		FROM resources GROUP BY phase`, ms(clock()))
	if err != nil {
		return nil, mapErr(err, "count resources")
	}
	defer rows.Close()
	out := &store.Stats{ByPhase: map[manifest.Phase]int{}}
	for _, p := range manifest.Phases() {
		out.ByPhase[p] = 0
	}
	for rows.Next() {
		var (
			phase                              string
			n, due, leased, waiting, suspended int
		)
		if err := rows.Scan(&phase, &n, &due, &leased, &waiting, &suspended); err != nil {
			return nil, mapErr(err, "count resources")
		}
		out.ByPhase[manifest.Phase(phase)] = n
		out.Due += due
		out.Leased += leased
		out.Waiting += waiting
		out.Suspended += suspended
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(err, "count resources")
	}
	return out, nil
}

// stored is what writes of conditions need of a resource as stored.
type stored struct {
	conds    []manifest.Condition
	gen      int64
	deleting bool
}

// storedState reads a resource's conditions, generation and deletion
// request, inside the writing transaction.
func (s *Store) storedState(ctx context.Context, id int64) (stored, error) {
	var (
		out   stored
		conds string
	)
	if err := s.queryRow(ctx, `SELECT conditions, generation, deletion_requested_at IS NOT NULL FROM resources WHERE id = $1`, id).
		Scan(&conds, &out.gen, &out.deleting); err != nil {
		return out, err
	}
	var err error
	out.conds, err = decodeSlice[manifest.Condition](conds, "conditions")
	return out, err
}
