package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// leaseFree is true of a row no worker holds: never leased, released, or
// expired by the database's clock, the only clock all agents share.
const leaseFree = `(lease_expires_at IS NULL OR lease_expires_at <= now())`

// urgentDue is true of resources due regardless of schedule: a deletion, a
// manual request, or a new generation whose retry time (if any) has come.
// The first three disjuncts repeat resources_urgent_idx's predicate so that
// a scan can walk that small partial index in id order.
const urgentDue = `(generation > observed_generation OR deletion_requested_at IS NOT NULL OR reconcile_requested_at IS NOT NULL)
	  AND (reconcile_requested_at IS NOT NULL OR next_reconcile_at IS NULL OR next_reconcile_at <= now())`

// scheduledDue is true of resources whose retry or drift check has come.
const scheduledDue = `next_reconcile_at <= now()`

// notOrphaned is true of resources whose source some agent serves: those
// of orphaned sources are kept as they are, neither reconciled nor destroyed.
const notOrphaned = `source_name NOT IN (` + store.OrphanedSourcesSQL + `)`

// claimUrgent picks urgent resources in id order.
const claimUrgent = `SELECT id, phase FROM resources
	WHERE ` + urgentDue + ` AND ` + leaseFree + ` AND ` + notOrphaned + `
	ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED`

// claimScheduled picks scheduled resources, earliest first.
const claimScheduled = `SELECT id, phase FROM resources
	WHERE ` + scheduledDue + ` AND ` + leaseFree + ` AND ` + notOrphaned + `
	ORDER BY next_reconcile_at LIMIT $3 FOR UPDATE SKIP LOCKED`

// claimSQL leases the rows picked by one of the queries above. The picked
// CTE's phase is read before the update, so it is the prior phase.
func claimSQL(pick string) string {
	return `WITH picked AS (` + pick + `)
UPDATE resources r SET lease_owner = $1, lease_token = r.lease_token + 1,
	lease_expires_at = now() + $2 * interval '1 millisecond',
	phase = CASE WHEN r.deletion_requested_at IS NOT NULL THEN 'deleting' ELSE 'reconciling' END
FROM picked WHERE r.id = picked.id
RETURNING ` + prefixed("r.", resourceCols) + `, picked.phase,
	coalesce((SELECT t.drift_interval_ms FROM resource_types t WHERE t.name = r.kind AND t.version = r.type_version), 0),
	r.attempt_handle`
}

// ClaimResources leases up to p.Limit due resources to p.Owner: urgent ones
// first, then scheduled ones. Each query is one statement, so its locks and
// leases commit together and no transaction is held open; when the second
// fails, the claims of the first are returned with the error.
func (s *Store) ClaimResources(ctx context.Context, p store.ClaimParams) ([]*store.Claim, error) {
	if p.Owner == "" || p.Limit <= 0 || p.Duration <= 0 {
		return nil, invalid("claim resources: owner, a positive limit and a positive duration are required")
	}
	var out []*store.Claim
	for _, pick := range []string{claimUrgent, claimScheduled} {
		left := p.Limit - len(out)
		if left == 0 {
			break
		}
		rows, err := s.q.Query(ctx, claimSQL(pick), p.Owner, millis(p.Duration), left)
		if err != nil {
			return out, mapErr(err, "claim resources")
		}
		claims, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Claim, error) {
			var (
				prior  string
				drift  int64
				handle []byte
			)
			r, err := scanResource(row, &prior, &drift, &handle)
			if err != nil {
				return nil, err
			}
			h, err := decodeHandle(handle)
			if err != nil {
				return nil, err
			}
			return &store.Claim{
				Resource:      r,
				Lease:         store.Lease{Owner: p.Owner, Token: r.LeaseToken},
				PriorPhase:    manifest.Phase(prior),
				DriftInterval: fromMillis(drift),
				Handle:        h,
			}, nil
		})
		if err != nil {
			return out, mapErr(err, "claim resources")
		}
		out = append(out, claims...)
	}
	return out, nil
}

// leaseLost tells, after a fenced write matched no row, whether the row is
// gone or its lease moved on.
func (s *Store) leaseLost(ctx context.Context, c *store.Claim, what string) error {
	var token int64
	err := s.q.QueryRow(ctx, `SELECT lease_token FROM resources WHERE id = $1`, c.ID).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
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
	var (
		tag interface{ RowsAffected() int64 }
		err error
	)
	if p == nil {
		tag, err = s.q.Exec(ctx, `UPDATE resources SET lease_expires_at = now() + $4 * interval '1 millisecond'
			WHERE id = $1 AND lease_owner = $2 AND lease_token = $3`, c.ID, c.Lease.Owner, c.Lease.Token, millis(d))
	} else {
		conds, cerr := jsonValue(p.Conditions, len(p.Conditions) == 0, "[]")
		if cerr != nil {
			return cerr
		}
		tag, err = s.q.Exec(ctx, `UPDATE resources SET lease_expires_at = now() + $4 * interval '1 millisecond',
				status_message = $5, conditions = `+keepTransitionTimes("$6")+`, updated_at = now()
			WHERE id = $1 AND lease_owner = $2 AND lease_token = $3`,
			c.ID, c.Lease.Owner, c.Lease.Token, millis(d), p.Message, conds)
	}
	if err != nil {
		return mapErr(err, fmt.Sprintf("heartbeat resource %d", c.ID))
	}
	if tag.RowsAffected() == 0 {
		return s.leaseLost(ctx, c, "heartbeat")
	}
	return nil
}

// completeSQL writes a claim's outcome in one statement: the status (fenced
// by the lease) and the history record when there is one. One statement is
// one round trip and its own transaction, which keeps the common completion
// cheap. It also tells whether the resource became Ready ($16) and has
// dependents, which must then be woken by a statement of their own: a
// statement sees the rows as they were when it started, and a dependent
// may have started waiting since.
//
// The status columns take the claim into account: a resource whose
// generation, deletion request or manual request changed while it was
// claimed keeps that change and is due at once; one with a new generation
// is pending, as ApplyResource made it. The attempt's handle is cleared
// unless the completion keeps it ($33).
var completeSQL = `WITH upd AS (
	UPDATE resources SET
		phase = CASE WHEN deletion_requested_at IS NOT NULL AND NOT $6 THEN 'deleting'
			WHEN deletion_requested_at IS NULL AND ($6 OR generation <> $4) THEN 'pending' ELSE $7 END,
		status_message = CASE WHEN generation <> $4 AND deletion_requested_at IS NULL
			THEN 'generation ' || generation || ' is waiting to be reconciled' ELSE $8 END,
		conditions = CASE WHEN generation <> $4 AND deletion_requested_at IS NULL
			THEN ` + pendingConditions(keepTransitionTimes("$9"), "generation") + `
			ELSE ` + keepTransitionTimes("$9") + ` END,
		observed_generation = $10, outputs = $11,
		retry_count = CASE WHEN generation <> $4 THEN 0 ELSE $12 END,
		last_reconcile_time = $13,
		next_reconcile_at = CASE
			WHEN generation <> $4 OR (deletion_requested_at IS NOT NULL) <> $6 THEN NULL
			WHEN $14::bigint IS NULL THEN NULL
			ELSE now() + $14::bigint * interval '1 millisecond' END,
		reconcile_requested_at = CASE WHEN reconcile_requested_at IS NOT DISTINCT FROM $5 THEN NULL
			ELSE reconcile_requested_at END,
		waiting = $15, lease_owner = '', lease_expires_at = NULL, updated_at = now(),
		attempt_handle = CASE WHEN $33 THEN attempt_handle END
	WHERE id = $1 AND lease_owner = $2 AND lease_token = $3
	RETURNING *
), hist AS (
	INSERT INTO reconcile_history (resource_id, kind, name, generation, source_revision,
		trigger, phase, success, error, created_count, updated_count, deleted_count, outputs, plan_output,
		duration_ms, agent_id, started_at, finished_at)
	SELECT $1, upd.kind, upd.name, $4, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31
	FROM upd WHERE $17
	RETURNING id
)
SELECT ` + resourceCols + `,
	-- count rather than EXISTS: with EXISTS the planner, hoping for an early
	-- match, may scan the table instead of the depends_on index.
	$16 AND (SELECT count(*) FROM resources d WHERE d.depends_on @> $32::jsonb AND d.depends_on <> '[]'::jsonb) > 0,
	(SELECT count(*) FROM hist)
FROM upd`

// CompleteReconcile writes the outcome of a claim; see store.Store.
func (s *Store) CompleteReconcile(ctx context.Context, c *store.Claim, done store.Completion) (*store.Resource, error) {
	u := done.Status
	if !u.Phase.Valid() {
		return nil, invalid("complete reconcile of resource %d: unknown phase %q", c.ID, u.Phase)
	}
	if u.ObservedGeneration < 0 || u.RetryCount < 0 || done.RequeueAfter < 0 {
		return nil, invalid("complete reconcile of resource %d: negative observed generation, retry count or requeue", c.ID)
	}
	conds, err := jsonValue(u.Conditions, len(u.Conditions) == 0, "[]")
	if err != nil {
		return nil, err
	}
	var next any
	if done.Requeue {
		next = millis(done.RequeueAfter)
	}
	// A completion that writes Ready for the claimed generation wakes the
	// resources waiting for it.
	readyCond := manifest.FindCondition(u.Conditions, manifest.ConditionReady)
	nowReady := readyCond != nil && readyCond.Status == manifest.ConditionTrue && u.ObservedGeneration == c.Generation
	// A constant containment argument lets the dependents lookup use the
	// depends_on index.
	dependsOnRef, err := json.Marshal([]manifest.ObjectRef{c.Ref()})
	if err != nil {
		return nil, err
	}
	rec := done.Record
	if rec == nil {
		rec = &store.ReconcileRecord{}
	}
	args := []any{c.ID, c.Lease.Owner, c.Lease.Token, c.Generation, c.ReconcileRequestedAt, c.DeletionRequestedAt != nil,
		string(u.Phase), u.Message, conds, u.ObservedGeneration, jsonDoc(u.Outputs),
		u.RetryCount, u.LastReconcileTime, next, done.Waiting, nowReady && !done.Delete, done.Record != nil,
		string(rec.SourceRevision), string(rec.Trigger), rec.Phase, rec.Success, rec.Error,
		rec.Created, rec.Updated, rec.Deleted, jsonDoc(rec.Outputs), rec.PlanOutput,
		millis(rec.Duration), rec.AgentID, rec.StartedAt, rec.FinishedAt, dependsOnRef, done.KeepHandle}
	if done.Record != nil && (rec.StartedAt.IsZero() || rec.FinishedAt.IsZero()) {
		return nil, invalid("complete reconcile of resource %d: the record needs its start and finish times", c.ID)
	}

	var (
		out    *store.Resource
		notify bool
	)
	write := func(s *Store) error {
		var (
			wake     bool
			recorded int64
		)
		r, err := scanResource(s.q.QueryRow(ctx, completeSQL, args...), &wake, &recorded)
		if errors.Is(err, pgx.ErrNoRows) {
			return s.leaseLost(ctx, c, "complete reconcile of")
		}
		if err != nil {
			return err
		}
		out = r
		// It may have changed while claimed; then any agent may take it now.
		notify = notify || stillDue(r)
		if wake && isReady(r) {
			woken, err := s.wakeDependents(ctx, r.Ref())
			notify = notify || woken
			return err
		}
		return nil
	}
	if !done.Delete && !done.Waiting {
		err = write(s)
	} else {
		// Destroys and waits read and lock other rows first: a transaction.
		err = s.retryDeadlock(ctx, func(s *Store) error {
			notify = false
			if done.Delete {
				// Only the destruction that was claimed removes the row: a
				// resource brought back meanwhile has a new generation and
				// no deletion request.
				tag, err := s.q.Exec(ctx, `DELETE FROM resources WHERE id = $1 AND lease_owner = $2 AND lease_token = $3
					AND generation = $4 AND deletion_requested_at IS NOT NULL`, c.ID, c.Lease.Owner, c.Lease.Token, c.Generation)
				if err != nil {
					return err
				}
				if tag.RowsAffected() == 1 {
					out = nil
					if done.Record != nil {
						if _, err := s.AddReconcileRecord(ctx, done.Record); err != nil {
							return err
						}
					}
					if err := s.finishPrune(ctx, c.Source.Name); err != nil {
						return err
					}
					woken, err := s.wakeDependencies(ctx, c)
					notify = woken
					return err
				}
			}
			if done.Waiting {
				over, err := s.waitIsOver(ctx, done.WaitForReady, done.WaitForGone)
				if err != nil {
					return err
				}
				if over {
					args[13], notify = int64(0), true
				}
			}
			return write(s)
		})
	}
	if err == nil && notify {
		ref := c.Ref().String()
		err = s.Notify(ctx, store.TopicResources, ref)
	}
	if err != nil {
		return nil, mapErr(err, fmt.Sprintf("complete reconcile of resource %d", c.ID))
	}
	return out, nil
}

// retryDeadlock is withTx that runs fn again, up to three times, when
// PostgreSQL aborted it to break a deadlock: completions lock rows other
// than their own (awaited resources, waiters), so two of them can meet in
// the wrong order. Inside an outer transaction it cannot retry.
func (s *Store) retryDeadlock(ctx context.Context, fn func(s *Store) error) error {
	for attempt := 1; ; attempt++ {
		err := s.withTx(ctx, fn)
		var pgErr *pgconn.PgError
		if s.tx != nil || attempt == 3 || !errors.As(err, &pgErr) || pgErr.Code != "40P01" {
			return err
		}
	}
}

// wakeDependents makes due at once the resources that wait for ref to be
// Ready. It reports whether it woke any.
func (s *Store) wakeDependents(ctx context.Context, ref manifest.ObjectRef) (bool, error) {
	b, err := json.Marshal([]manifest.ObjectRef{ref})
	if err != nil {
		return false, err
	}
	tag, err := s.q.Exec(ctx, `UPDATE resources SET next_reconcile_at = now()
		WHERE depends_on @> $1::jsonb AND depends_on <> '[]'::jsonb AND waiting AND next_reconcile_at > now()`, b)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

// wakeDependencies makes due at once, after c was destroyed, the resources
// it depends on that waited for it to go. It reports whether it woke any.
func (s *Store) wakeDependencies(ctx context.Context, c *store.Claim) (bool, error) {
	if len(c.DependsOn) == 0 {
		return false, nil
	}
	kinds, names := make([]string, len(c.DependsOn)), make([]string, len(c.DependsOn))
	for i, d := range c.DependsOn {
		kinds[i], names[i] = d.Kind, d.Name
	}
	tag, err := s.q.Exec(ctx, `UPDATE resources SET next_reconcile_at = now()
		WHERE waiting AND next_reconcile_at > now()
		  AND (kind, name) IN (SELECT * FROM unnest($1::text[], $2::text[]))`, kinds, names)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

// waitIsOver tells whether any of the resources a waiter waits on got where
// it needs them since the worker looked. It share-locks them before the waiter's own row is written:
// a resource completing at the same moment either committed before (and is
// seen here) or waits for this transaction and then wakes the waiter. Both
// kinds of transaction lock the awaited row first, so they cannot deadlock.
func (s *Store) waitIsOver(ctx context.Context, ready, gone []manifest.ObjectRef) (bool, error) {
	refs := append(append([]manifest.ObjectRef(nil), ready...), gone...)
	if len(refs) == 0 {
		return false, nil
	}
	kinds, names := make([]string, len(refs)), make([]string, len(refs))
	for i, r := range refs {
		kinds[i], names[i] = r.Kind, r.Name
	}
	rows, err := s.q.Query(ctx, `SELECT `+resourceCols+` FROM resources
		WHERE (kind, name) IN (SELECT * FROM unnest($1::text[], $2::text[])) ORDER BY id FOR SHARE`, kinds, names)
	if err != nil {
		return false, err
	}
	found, err := collectResources(rows)
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
func (s *Store) RequestReconcile(ctx context.Context, id int64) (*store.Resource, error) {
	var out *store.Resource
	err := s.withTx(ctx, func(s *Store) error {
		r, err := scanResource(s.q.QueryRow(ctx, `UPDATE resources SET reconcile_requested_at = now(), updated_at = now()
			WHERE id = $1 RETURNING `+resourceCols, id))
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
	var ms *float64
	// A scheduled resource that is due already but unclaimed (a claim raced
	// with the clock) counts, as zero: the caller should claim now.
	err := s.q.QueryRow(ctx, `SELECT EXTRACT(EPOCH FROM least(
			(SELECT min(next_reconcile_at) FROM resources WHERE next_reconcile_at IS NOT NULL AND `+leaseFree+` AND `+notOrphaned+`),
			(SELECT min(lease_expires_at) FROM resources WHERE lease_expires_at > now() AND `+notOrphaned+`)) - now()) * 1000`).Scan(&ms)
	if err != nil {
		return 0, false, mapErr(err, "next due reconcile")
	}
	if ms == nil {
		return 0, false, nil
	}
	return max(0, time.Duration(*ms*float64(time.Millisecond))), true, nil
}

// Stats counts resources by phase, and those due, leased and waiting, in
// one scan.
func (s *Store) Stats(ctx context.Context) (*store.Stats, error) {
	rows, err := s.q.Query(ctx, `SELECT phase, count(*),
			count(*) FILTER (WHERE `+leaseFree+` AND ((`+urgentDue+`) OR `+scheduledDue+`) AND `+notOrphaned+`),
			count(*) FILTER (WHERE lease_expires_at > now()),
			count(*) FILTER (WHERE waiting)
		FROM resources GROUP BY phase`)
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
			phase                   string
			n, due, leased, waiting int
		)
		if err := rows.Scan(&phase, &n, &due, &leased, &waiting); err != nil {
			return nil, mapErr(err, "count resources")
		}
		out.ByPhase[manifest.Phase(phase)] = n
		out.Due += due
		out.Leased += leased
		out.Waiting += waiting
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(err, "count resources")
	}
	return out, nil
}

// utcNowJSON is the transaction's time as a JSON string in RFC 3339, UTC,
// as Go writes times.
const utcNowJSON = `to_jsonb(to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))`

// keepTransitionTimes is the SQL of store.KeepTransitionTimes: the
// conditions in the JSON parameter next, with their transition times
// checked against the row's conditions. It is used in UPDATEs of
// resources, where conditions is the row as it was.
func keepTransitionTimes(next string) string {
	return `(SELECT coalesce(jsonb_agg(CASE
		WHEN o.c IS NULL THEN n.c
		WHEN (n.c->>'lastTransitionTime')::timestamptz > (o.c->>'lastTransitionTime')::timestamptz THEN n.c
		WHEN o.c->'status' = n.c->'status' THEN n.c || jsonb_build_object('lastTransitionTime', o.c->'lastTransitionTime')
		ELSE n.c || jsonb_build_object('lastTransitionTime', ` + utcNowJSON + `) END ORDER BY n.i), '[]'::jsonb)
	FROM jsonb_array_elements(` + next + `::jsonb) WITH ORDINALITY AS n(c, i)
	LEFT JOIN LATERAL (SELECT e AS c FROM jsonb_array_elements(resources.conditions) AS e
		WHERE e->>'type' = n.c->>'type' LIMIT 1) AS o ON true)`
}

// pendingConditions is the SQL of store.PendingConditions for the
// conditions column conds and the new generation gen.
func pendingConditions(conds, gen string) string {
	ready := func(old string) string {
		return `jsonb_build_object('type', 'Ready', 'status', 'Unknown', 'reason', '` + store.ReasonProgressing + `',
			'message', 'generation ' || (` + gen + `) || ' is waiting to be reconciled',
			'lastTransitionTime', CASE WHEN ` + old + `->>'status' = 'Unknown' THEN ` + old + `->'lastTransitionTime'
				ELSE ` + utcNowJSON + ` END)`
	}
	return `(CASE WHEN ` + conds + ` @> '[{"type": "Ready"}]' THEN
		(SELECT jsonb_agg(CASE WHEN c.e->>'type' = 'Ready' THEN ` + ready("c.e") + ` ELSE c.e END ORDER BY c.i)
			FROM jsonb_array_elements(` + conds + `) WITH ORDINALITY AS c(e, i))
		ELSE ` + conds + ` || jsonb_build_array(` + ready("NULL::jsonb") + `) END)`
}
