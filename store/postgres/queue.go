package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
	WHERE ` + urgentDue + ` AND ` + leaseFree + ` AND ` + notOrphaned + ` AND ` + notSuspended + `
	ORDER BY id LIMIT ` + claimLimit + ` FOR UPDATE SKIP LOCKED`

// claimScheduled picks scheduled resources, earliest first.
const claimScheduled = `SELECT id, phase FROM resources
	WHERE ` + scheduledDue + ` AND ` + leaseFree + ` AND ` + notOrphaned + ` AND ` + notSuspended + `
	ORDER BY next_reconcile_at LIMIT ` + claimLimit + ` FOR UPDATE SKIP LOCKED`

// claimLimit stands for the claim's limit in the queries above.
const claimLimit = "/*limit*/$3"

// maxLiteralLimit is the largest limit written into a claim's SQL.
const maxLiteralLimit = 64

// withLimit writes the limit into the SQL of a claim, up to
// maxLiteralLimit, so that each limit is its own prepared statement: with
// the limit a parameter PostgreSQL plans every claim afresh (a generic
// plan cannot know how few rows it wants), and planning cost as much as
// running it. Workers claim a few resources at a time, so there are few
// such statements.
func withLimit(sql string, limit int) (string, []any) {
	if limit > maxLiteralLimit {
		return sql, []any{limit}
	}
	return strings.Replace(sql, claimLimit, strconv.Itoa(limit), 1), nil
}

// claimSQL leases the rows picked by one of the queries above. The picked
// CTE's phase is read before the update, so it is the prior phase.
func claimSQL(pick string) string {
	return `WITH picked AS (` + pick + `)
UPDATE resources r SET lease_owner = $1, lease_token = r.lease_token + 1,
	lease_expires_at = now() + $2 * interval '1 millisecond', leased_at = now(),
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
		sql, limit := withLimit(claimSQL(pick), left)
		rows, err := s.q.Query(ctx, sql, append([]any{p.Owner, millis(p.Duration)}, limit...)...)
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
), fold AS (
	UPDATE reconcile_history h SET no_drift_checks = h.no_drift_checks + 1, last_checked_at = $31,
		duration_ms = $28, agent_id = $29
	FROM upd WHERE $17 AND ` + foldNoDrift("$1", "$4", "$27", "$21", "$34::int") + `
	RETURNING h.id
), hist AS (
	INSERT INTO reconcile_history (resource_id, kind, namespace, name, generation, source_revision,
		trigger, phase, success, error, created_count, updated_count, deleted_count, outputs, plan_output,
		duration_ms, agent_id, started_at, finished_at, no_drift_checks)
	SELECT $1, upd.kind, upd.namespace, upd.name, $4, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $34
	FROM upd WHERE $17 AND NOT EXISTS (SELECT 1 FROM fold)
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
		millis(rec.Duration), rec.AgentID, rec.StartedAt, rec.FinishedAt, dependsOnRef, done.KeepHandle, rec.NoDriftChecks}
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
	kinds, namespaces, names := refColumns(c.DependsOn)
	tag, err := s.q.Exec(ctx, `UPDATE resources SET next_reconcile_at = now()
		WHERE waiting AND next_reconcile_at > now()
		  AND (kind, namespace, name) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))`, kinds, namespaces, names)
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
	kinds, namespaces, names := refColumns(refs)
	rows, err := s.q.Query(ctx, `SELECT `+resourceCols+` FROM resources
		WHERE (kind, namespace, name) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[])) ORDER BY id FOR SHARE`,
		kinds, namespaces, names)
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
			(SELECT min(next_reconcile_at) FROM resources WHERE next_reconcile_at IS NOT NULL AND `+leaseFree+` AND `+notOrphaned+` AND `+notSuspended+`),
			(SELECT min(lease_expires_at) FROM resources WHERE lease_expires_at > now() AND `+notOrphaned+` AND `+notSuspended+`)) - now()) * 1000`).Scan(&ms)
	if err != nil {
		return 0, false, mapErr(err, "next due reconcile")
	}
	if ms == nil {
		return 0, false, nil
	}
	return max(0, time.Duration(*ms*float64(time.Millisecond))), true, nil
}

// CountResources counts the resources; see store.Store.
func (s *Store) CountResources(ctx context.Context) (int, error) {
	var n int
	if err := s.q.QueryRow(ctx, `SELECT count(*) FROM resources`).Scan(&n); err != nil {
		return 0, mapErr(err, "count resources")
	}
	return n, nil
}

// Stats counts resources by phase, and those due, leased and waiting, in
// one scan.
func (s *Store) Stats(ctx context.Context) (*store.Stats, error) {
	rows, err := s.q.Query(ctx, `SELECT phase, count(*),
			count(*) FILTER (WHERE `+leaseFree+` AND ((`+urgentDue+`) OR `+scheduledDue+`) AND `+notOrphaned+` AND `+notSuspended+`),
			count(*) FILTER (WHERE lease_expires_at > now()),
			count(*) FILTER (WHERE waiting),
			count(*) FILTER (WHERE NOT (`+notSuspended+`))
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

// completeBatchTemplate writes the outcomes of many claims in one statement, as
// completeSQL does one: the input arrays are unnested into one row per
// completion (inp), the fenced UPDATE writes the rows whose lease is still
// current, their history records go in with one INSERT, and one
// TopicResources notification is sent when any of them stays due. A
// completion whose lease is gone matches no row and is left out, alone.
//
// Input columns are prefixed c_ so that the UPDATE's unqualified column
// names are the row's. It is the statement of completeBatchSQL and
// completeBatchIDsSQL, with placeholders for what they return.
var completeBatchTemplate = `WITH inp AS (
	SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[], $5::timestamptz[], $6::bool[],
		$7::text[], $8::text[], $9::text[], $10::bigint[], $11::text[], $12::int[], $13::timestamptz[],
		$14::bigint[], $15::bool[], $16::bool[], $17::bool[], $18::text[], $19::text[], $20::text[], $21::bool[],
		$22::text[], $23::int[], $24::int[], $25::int[], $26::text[], $27::text[], $28::bigint[], $29::text[],
		$30::timestamptz[], $31::timestamptz[], $32::text[], $33::bool[], $34::int[])
		WITH ORDINALITY AS t(c_id, c_owner, c_token, c_gen, c_requested, c_deleting,
			c_phase, c_message, c_conds, c_observed, c_outputs, c_retries, c_last,
			c_next, c_waiting, c_ready, c_recorded, c_revision, c_trigger, c_stage, c_success,
			c_error, c_created, c_updated, c_deleted, c_rec_outputs, c_plan, c_duration, c_agent,
			c_started, c_finished, c_dep_ref, c_keep, c_checks, c_ord)
), upd AS (
	UPDATE resources SET
		phase = CASE WHEN deletion_requested_at IS NOT NULL AND NOT inp.c_deleting THEN 'deleting'
			WHEN deletion_requested_at IS NULL AND (inp.c_deleting OR generation <> inp.c_gen) THEN 'pending' ELSE inp.c_phase END,
		status_message = CASE WHEN generation <> inp.c_gen AND deletion_requested_at IS NULL
			THEN 'generation ' || generation || ' is waiting to be reconciled' ELSE inp.c_message END,
		conditions = CASE WHEN generation <> inp.c_gen AND deletion_requested_at IS NULL
			THEN ` + pendingConditions(keepTransitionTimes("inp.c_conds"), "generation") + `
			ELSE ` + keepTransitionTimes("inp.c_conds") + ` END,
		observed_generation = inp.c_observed, outputs = inp.c_outputs::json,
		retry_count = CASE WHEN generation <> inp.c_gen THEN 0 ELSE inp.c_retries END,
		last_reconcile_time = inp.c_last,
		next_reconcile_at = CASE
			WHEN generation <> inp.c_gen OR (deletion_requested_at IS NOT NULL) <> inp.c_deleting THEN NULL
			WHEN inp.c_next IS NULL THEN NULL
			ELSE now() + inp.c_next * interval '1 millisecond' END,
		reconcile_requested_at = CASE WHEN reconcile_requested_at IS NOT DISTINCT FROM inp.c_requested THEN NULL
			ELSE reconcile_requested_at END,
		waiting = inp.c_waiting, lease_owner = '', lease_expires_at = NULL, updated_at = now(),
		attempt_handle = CASE WHEN inp.c_keep THEN attempt_handle END
	FROM inp
	WHERE resources.id = inp.c_id AND resources.lease_owner = inp.c_owner AND resources.lease_token = inp.c_token
	RETURNING resources.*, inp.c_ord, inp.c_ready, inp.c_dep_ref, inp.c_recorded, inp.c_gen, inp.c_revision,
		inp.c_trigger, inp.c_stage, inp.c_success, inp.c_error, inp.c_created, inp.c_updated, inp.c_deleted,
		inp.c_rec_outputs, inp.c_plan, inp.c_duration, inp.c_agent, inp.c_started, inp.c_finished, inp.c_checks
), fold AS (
	UPDATE reconcile_history h SET no_drift_checks = h.no_drift_checks + 1, last_checked_at = upd.c_finished,
		duration_ms = upd.c_duration, agent_id = upd.c_agent
	FROM upd WHERE upd.c_recorded AND ` + foldNoDrift("upd.id", "upd.c_gen", "upd.c_plan", "upd.c_success", "upd.c_checks") + `
	RETURNING upd.id AS folded
), hist AS (
	INSERT INTO reconcile_history (resource_id, kind, namespace, name, generation, source_revision,
		trigger, phase, success, error, created_count, updated_count, deleted_count, outputs, plan_output,
		duration_ms, agent_id, started_at, finished_at, no_drift_checks)
	SELECT id, kind, namespace, name, c_gen, c_revision, c_trigger, c_stage, c_success, c_error, c_created, c_updated, c_deleted,
		c_rec_outputs::json, c_plan, c_duration, c_agent, c_started, c_finished, c_checks
	FROM upd WHERE c_recorded AND id NOT IN (SELECT folded FROM fold) ORDER BY c_ord
	RETURNING id
), note AS (
	-- One notification for the whole batch: listeners only need to know
	-- that something is due, and look at the queue.
	SELECT pg_notify('` + store.TopicResources + `', '') FROM (SELECT 1 FROM upd
		WHERE reconcile_requested_at IS NOT NULL
		   OR (next_reconcile_at IS NULL AND (generation > observed_generation OR deletion_requested_at IS NOT NULL))
		LIMIT 1) AS due
)
SELECT /*returned*/, c_ord,
	-- count rather than EXISTS: with EXISTS the planner, hoping for an early
	-- match, may scan the table instead of the depends_on index.
	CASE WHEN c_ready/*ready*/ THEN (SELECT count(*) FROM resources d
		WHERE d.depends_on @> c_dep_ref::jsonb AND d.depends_on <> '[]'::jsonb) > 0 ELSE false END,
	(SELECT count(*) FROM hist), (SELECT count(*) FROM note)
FROM upd`

// completeBatchSQL writes a batch of completions and returns the rows as
// written; completeBatchIDsSQL returns only their ids, for callers that
// look at nothing else, and tells in its wake flag whether each row is
// Ready (as isReady tells of a row read back).
var (
	completeBatchSQL    = strings.NewReplacer("/*returned*/", resourceCols, "/*ready*/", "").Replace(completeBatchTemplate)
	completeBatchIDsSQL = strings.NewReplacer("/*returned*/", "id", "/*ready*/", readySQL).Replace(completeBatchTemplate)
)

// readySQL is isReady in SQL, of the row upd returns: the first Ready
// condition is True, the current generation is reconciled and no deletion
// is asked for.
const readySQL = ` AND (SELECT c->>'status' FROM jsonb_array_elements(conditions) AS c
		WHERE c->>'type' = 'Ready' LIMIT 1) IS NOT DISTINCT FROM 'True'
	AND observed_generation = generation AND deletion_requested_at IS NULL`

// wakeDependentsBatchSQL makes due at once the resources that wait for any
// of the resources in the jsonb array $1 (each a one-element dependsOn
// array) to be Ready, and notifies in the same statement when it woke any.
const wakeDependentsBatchSQL = `WITH woken AS (
	UPDATE resources SET next_reconcile_at = now()
	WHERE depends_on <> '[]'::jsonb AND depends_on @> ANY($1::jsonb[]) AND waiting AND next_reconcile_at > now()
	RETURNING 1
)
SELECT pg_notify('` + store.TopicResources + `', '') FROM (SELECT 1 FROM woken LIMIT 1) AS any_woken`

// CompleteReconciles writes many completions; see store.Store. Plain
// completions (neither destroying nor waiting, the bulk of any burst) are
// written by one statement, one round trip for all of them; destroys and
// waits read and lock other rows first and are written one by one, as
// CompleteReconcile writes them.
func (s *Store) CompleteReconciles(ctx context.Context, batch []store.ClaimCompletion) []store.CompletionResult {
	out := make([]store.CompletionResult, len(batch))
	var (
		plain []int
		seen  = make(map[int64]bool, len(batch))
	)
	for i, cc := range batch {
		// Inside a transaction, or for a resource twice in the batch (the
		// second can only be refused, but must be told so), one by one.
		if cc.Done.Delete || cc.Done.Waiting || s.tx != nil || seen[cc.Claim.ID] {
			continue
		}
		seen[cc.Claim.ID] = true
		plain = append(plain, i)
	}
	if len(plain) > 0 {
		// One alone goes this way too: its plan is cached, where
		// CompleteReconcile's statement is often planned afresh.
		s.completePlain(ctx, batch, plain, out)
	}
	written := make(map[int]bool, len(plain))
	for _, i := range plain {
		written[i] = true
	}
	for i, cc := range batch {
		if !written[i] {
			out[i].Resource, out[i].Err = s.CompleteReconcile(ctx, cc.Claim, cc.Done)
		}
	}
	return out
}

// completionArgs are the columns of completeBatchSQL's input, one slice per
// column, one element per completion.
type completionArgs struct {
	ids, tokens, gens, observed, duration []int64
	owners, phases, messages, conds       []string
	outputs, recOutputs                   []*string
	requested, last                       []*time.Time
	deleting, waiting, ready, recorded    []bool
	success, keep                         []bool
	retries, created, updated, deleted    []int32
	checks                                []int32
	next                                  []*int64
	revision, trigger, stage, errs, plan  []string
	agent, depRef                         []string
	started, finished                     []time.Time
}

// add appends one completion, or returns why it cannot be written.
func (a *completionArgs) add(c *store.Claim, done store.Completion) error {
	u := done.Status
	if !u.Phase.Valid() {
		return invalid("complete reconcile of resource %d: unknown phase %q", c.ID, u.Phase)
	}
	if u.ObservedGeneration < 0 || u.RetryCount < 0 || done.RequeueAfter < 0 {
		return invalid("complete reconcile of resource %d: negative observed generation, retry count or requeue", c.ID)
	}
	rec := done.Record
	if rec != nil && (rec.StartedAt.IsZero() || rec.FinishedAt.IsZero()) {
		return invalid("complete reconcile of resource %d: the record needs its start and finish times", c.ID)
	}
	conds, err := jsonValue(u.Conditions, len(u.Conditions) == 0, "[]")
	if err != nil {
		return err
	}
	dependsOnRef, err := json.Marshal([]manifest.ObjectRef{c.Ref()})
	if err != nil {
		return err
	}
	var next *int64
	if done.Requeue {
		ms := millis(done.RequeueAfter)
		next = &ms
	}
	readyCond := manifest.FindCondition(u.Conditions, manifest.ConditionReady)
	nowReady := readyCond != nil && readyCond.Status == manifest.ConditionTrue && u.ObservedGeneration == c.Generation
	if rec == nil {
		rec = &store.ReconcileRecord{}
	}
	a.ids = append(a.ids, c.ID)
	a.owners = append(a.owners, c.Lease.Owner)
	a.tokens = append(a.tokens, c.Lease.Token)
	a.gens = append(a.gens, c.Generation)
	a.requested = append(a.requested, c.ReconcileRequestedAt)
	a.deleting = append(a.deleting, c.DeletionRequestedAt != nil)
	a.phases = append(a.phases, string(u.Phase))
	a.messages = append(a.messages, u.Message)
	a.conds = append(a.conds, string(conds))
	a.observed = append(a.observed, u.ObservedGeneration)
	a.outputs = append(a.outputs, textDoc(u.Outputs))
	a.retries = append(a.retries, int32(u.RetryCount))
	a.last = append(a.last, u.LastReconcileTime)
	a.next = append(a.next, next)
	a.waiting = append(a.waiting, done.Waiting)
	a.ready = append(a.ready, nowReady)
	a.recorded = append(a.recorded, done.Record != nil)
	a.revision = append(a.revision, string(rec.SourceRevision))
	a.trigger = append(a.trigger, string(rec.Trigger))
	a.stage = append(a.stage, rec.Phase)
	a.success = append(a.success, rec.Success)
	a.errs = append(a.errs, rec.Error)
	a.created = append(a.created, int32(rec.Created))
	a.updated = append(a.updated, int32(rec.Updated))
	a.deleted = append(a.deleted, int32(rec.Deleted))
	a.recOutputs = append(a.recOutputs, textDoc(rec.Outputs))
	a.plan = append(a.plan, rec.PlanOutput)
	a.duration = append(a.duration, millis(rec.Duration))
	a.agent = append(a.agent, rec.AgentID)
	a.started = append(a.started, rec.StartedAt)
	a.finished = append(a.finished, rec.FinishedAt)
	a.depRef = append(a.depRef, string(dependsOnRef))
	a.keep = append(a.keep, done.KeepHandle)
	a.checks = append(a.checks, int32(rec.NoDriftChecks))
	return nil
}

// list is the statement's arguments.
func (a *completionArgs) list() []any {
	return []any{a.ids, a.owners, a.tokens, a.gens, a.requested, a.deleting,
		a.phases, a.messages, a.conds, a.observed, a.outputs, a.retries, a.last,
		a.next, a.waiting, a.ready, a.recorded, a.revision, a.trigger, a.stage, a.success,
		a.errs, a.created, a.updated, a.deleted, a.recOutputs, a.plan, a.duration, a.agent,
		a.started, a.finished, a.depRef, a.keep, a.checks}
}

// textDoc is jsonDoc for a text parameter: nil for an absent document.
func textDoc(m json.RawMessage) *string {
	if len(m) == 0 {
		return nil
	}
	s := string(m)
	return &s
}

// completePlain writes the completions batch[i] for i in idx with one
// statement, and fills in their results.
func (s *Store) completePlain(ctx context.Context, batch []store.ClaimCompletion, idx []int, out []store.CompletionResult) {
	var (
		args completionArgs
		// pos maps the statement's ordinality (from 1) to the batch index.
		pos []int
	)
	for _, i := range idx {
		if err := args.add(batch[i].Claim, batch[i].Done); err != nil {
			out[i].Err = err
			continue
		}
		pos = append(pos, i)
	}
	if len(pos) == 0 {
		return
	}
	failAll := func(err error) {
		for _, i := range pos {
			out[i].Err = mapErr(err, fmt.Sprintf("complete reconcile of resource %d", batch[i].Claim.ID))
		}
	}
	type row struct {
		r    *store.Resource
		ord  int64
		wake bool
	}
	// When no caller reads the rows, only their ids come back, and the
	// statement itself tells which of them are Ready.
	sql, idsOnly := completeBatchIDsSQL, true
	for _, i := range pos {
		if !batch[i].ErrOnly {
			sql, idsOnly = completeBatchSQL, false
			break
		}
	}
	// One round trip: the statement in a transaction of its own that
	// plans it once per connection. Left to choose, PostgreSQL plans it
	// afresh for most batches (the sizes of the arrays sway it), which
	// costs about as much as running it.
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SET LOCAL plan_cache_mode = force_generic_plan")
	b.Queue(sql, args.list()...)
	b.Queue("COMMIT")
	br := s.pool.SendBatch(ctx, b)
	got, err := func() ([]row, error) {
		for range 2 {
			if _, err := br.Exec(); err != nil {
				return nil, err
			}
		}
		rows, err := br.Query()
		if err != nil {
			return nil, err
		}
		got, err := pgx.CollectRows(rows, func(cr pgx.CollectableRow) (row, error) {
			var (
				w           row
				hist, notes int64
			)
			if idsOnly {
				var id int64
				err := cr.Scan(&id, &w.ord, &w.wake, &hist, &notes)
				return w, err
			}
			r, err := scanResource(cr, &w.ord, &w.wake, &hist, &notes)
			w.r = r
			return w, err
		})
		if err != nil {
			return nil, err
		}
		tag, err := br.Exec()
		if err == nil && tag.String() != "COMMIT" {
			err = fmt.Errorf("complete reconciles: the transaction ended with %s", tag)
		}
		return got, err
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		failAll(unavailable(err))
		return
	}
	written := make([]bool, len(pos))
	var wake [][]byte
	for _, w := range got {
		k := int(w.ord) - 1
		if k < 0 || k >= len(pos) {
			failAll(fmt.Errorf("complete reconciles: row %d out of %d", w.ord, len(pos)))
			return
		}
		written[k] = true
		out[pos[k]].Resource = w.r
		if w.wake && (idsOnly || isReady(w.r)) {
			wake = append(wake, []byte(args.depRef[k]))
		}
	}
	for k, i := range pos {
		if !written[k] {
			out[i].Err = mapErr(s.leaseLost(ctx, batch[i].Claim, "complete reconcile of"),
				fmt.Sprintf("complete reconcile of resource %d", batch[i].Claim.ID))
		}
	}
	if len(wake) == 0 {
		return
	}
	// The statement saw the rows as they were when it started: waiters are
	// woken by a statement of their own, as CompleteReconcile wakes them.
	// The completions are written: failing to wake is told, not undone.
	if _, err := s.q.Exec(ctx, wakeDependentsBatchSQL, wake); err != nil {
		for k, i := range pos {
			if written[k] {
				out[i].Err = mapErr(err, fmt.Sprintf("complete reconcile of resource %d: wake its dependents", batch[i].Claim.ID))
			}
		}
	}
}
