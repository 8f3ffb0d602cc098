package e2e

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The queue floor is what the reconcile queue's guarantees cost on
// PostgreSQL with nothing else: no agent, no plugin, no read model, no
// trigger, no constraint. Each resource has a status row (the columns a
// status write touches, a spec, and the indexes the agent's table needs for
// its unique names and its listings) and a narrow lease row. A claim takes
// free rows with SKIP LOCKED and leases them (owner, fencing token,
// expiry), marks their status reconciling and sends one status
// notification for the statement. A completion, fenced by the token,
// releases the leases, writes the status (phase, observed generation,
// conditions, message), inserts a history row per attempt and sends one
// notification. Claims and completions are batched as River batches
// them. A connection listens, as the agent's read model does.
//
// It answers one question: could any implementation that keeps these
// guarantees, on this machine, do what River does?

const floorSchema = `
CREATE TABLE floor_resources (
	id bigserial PRIMARY KEY, kind text NOT NULL, namespace text NOT NULL, name text NOT NULL,
	labels jsonb NOT NULL DEFAULT '{}', spec json, spec_hash text NOT NULL, source_name text NOT NULL,
	type_version text NOT NULL DEFAULT 'v1', generation bigint NOT NULL DEFAULT 1,
	observed_generation bigint NOT NULL DEFAULT 0, phase text NOT NULL DEFAULT 'pending',
	status_message text NOT NULL DEFAULT '', conditions jsonb NOT NULL DEFAULT '[]',
	last_reconcile_time timestamptz, updated_at timestamptz NOT NULL DEFAULT now(),
	UNIQUE (kind, namespace, name));
CREATE INDEX floor_resources_source_idx ON floor_resources (source_name, id);
CREATE INDEX floor_resources_type_idx ON floor_resources (kind, type_version);
CREATE TABLE floor_leases (id bigint PRIMARY KEY, due boolean NOT NULL, owner text NOT NULL DEFAULT '',
	token bigint NOT NULL DEFAULT 0, expires_at timestamptz);
CREATE INDEX floor_leases_free_idx ON floor_leases (id) WHERE due AND owner = '';
CREATE TABLE floor_history (id bigserial PRIMARY KEY, resource_id bigint NOT NULL, kind text, namespace text,
	name text, generation bigint, success boolean, started_at timestamptz, finished_at timestamptz, agent_id text);
CREATE INDEX floor_history_resource_idx ON floor_history (resource_id, id DESC);
CREATE INDEX floor_history_name_idx ON floor_history (kind, namespace, name, id DESC);`

const floorFill = `INSERT INTO floor_resources (kind, namespace, name, spec, spec_hash, source_name, labels)
	SELECT 'Kind' || (i % 10), 'default', 'r' || i,
		json_build_object('size', i, 'region', 'eu-west-1', 'tier', 'gold', 'replicas', 3),
		'sha256:' || md5(i::text) || md5(i::text), 'infra', '{"team": "a"}'
	FROM generate_series(1, $1) AS i`

// floorLeases gives every resource its lease row.
const floorLeases = `INSERT INTO floor_leases (id, due) SELECT id, true FROM floor_resources; ANALYZE`

// floorClaimSQL takes %d free rows.
const floorClaimSQL = `WITH picked AS (
	SELECT id FROM floor_leases WHERE due AND owner = '' ORDER BY id LIMIT %d FOR UPDATE SKIP LOCKED
), leased AS (
	UPDATE floor_leases l SET owner = $1, token = l.token + 1, expires_at = now() + interval '30 seconds'
	FROM picked WHERE l.id = picked.id RETURNING l.id, l.token
), marked AS (
	UPDATE floor_resources r SET phase = 'reconciling' FROM leased WHERE r.id = leased.id RETURNING r.*, leased.token
), told AS (
	SELECT pg_notify('floor_status', coalesce(json_agg(json_build_object('id', id, 'status', phase))::text, '')) FROM marked
)
SELECT id, kind, namespace, name, spec, generation, token, (SELECT count(*) FROM told) FROM marked`

const floorCompleteSQL = `WITH done AS (
	SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::timestamptz[]) AS t(id, token, generation, started)
), released AS (
	UPDATE floor_leases l SET due = false, owner = '', expires_at = NULL FROM done
	WHERE l.id = done.id AND l.owner = $5 AND l.token = done.token RETURNING l.id, done.generation, done.started
), written AS (
	UPDATE floor_resources r SET phase = 'ready', observed_generation = released.generation, status_message = 'reconciled',
		conditions = '[{"type": "Ready", "status": "True", "reason": "Reconciled"}]', last_reconcile_time = now(), updated_at = now()
	FROM released WHERE r.id = released.id
	RETURNING r.id, r.kind, r.namespace, r.name, r.phase, released.generation, released.started
), recorded AS (
	INSERT INTO floor_history (resource_id, kind, namespace, name, generation, success, started_at, finished_at, agent_id)
	SELECT id, kind, namespace, name, generation, true, started, now(), $5 FROM written RETURNING 1
), told AS (
	SELECT pg_notify('floor_status', coalesce(json_agg(json_build_object('id', id, 'status', phase))::text, '')) FROM written
)
SELECT (SELECT count(*) FROM written), (SELECT count(*) FROM recorded), (SELECT count(*) FROM told)`

// floorAttempt is one claimed resource on its way to completion.
type floorAttempt struct {
	id, token, generation int64
	started               time.Time
}

// QueueFloor runs n resources through the queue floor described above with
// 8 workers and returns how long they took, from the first claim to the
// last completion.
func QueueFloor(ctx context.Context, dbURL string, n int, deadline time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	pool, err := peerPool(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, floorSchema); err != nil {
		return 0, fmt.Errorf("queue floor: schema: %w", err)
	}
	if _, err := pool.Exec(ctx, floorFill, n); err != nil {
		return 0, fmt.Errorf("queue floor: fill: %w", err)
	}
	if _, err := pool.Exec(ctx, floorLeases); err != nil {
		return 0, fmt.Errorf("queue floor: leases: %w", err)
	}
	listener, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer listener.Close(context.WithoutCancel(ctx))
	if _, err := listener.Exec(ctx, "LISTEN floor_status"); err != nil {
		return 0, err
	}
	listenCtx, stopListening := context.WithCancel(ctx)
	listened := make(chan struct{})
	go func() {
		defer close(listened)
		for listenCtx.Err() == nil {
			if _, err := listener.WaitForNotification(listenCtx); err != nil {
				return
			}
		}
	}()
	defer func() {
		stopListening()
		<-listened
	}()

	const workers, owner = 8, "floor"
	var (
		jobs      = make(chan floorAttempt, workers)
		finished  = make(chan floorAttempt, workers)
		freed     = make(chan int, workers)
		completed = make(chan error, 1)
	)
	for range workers {
		go func() {
			for a := range jobs {
				finished <- a // the work itself: nothing
			}
		}()
	}
	defer close(jobs)
	start := time.Now()
	go func() { completed <- floorComplete(ctx, pool, owner, n, finished, freed) }()
	free := workers
	for claimed := 0; claimed < n; {
		if free == 0 {
			select {
			case k := <-freed:
				free += k
			case err := <-completed:
				return 0, fmt.Errorf("queue floor: completions stopped: %v", err)
			}
		}
	gather:
		for {
			select {
			case k := <-freed:
				free += k
			default:
				break gather
			}
		}
		got, err := floorClaim(ctx, pool, owner, free)
		if err != nil {
			return 0, err
		}
		for _, a := range got {
			jobs <- a
		}
		free -= len(got)
		claimed += len(got)
		if len(got) == 0 {
			// As River's FetchCooldown of 1 ms.
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
	}
	if err := <-completed; err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// floorClaim claims up to limit resources.
func floorClaim(ctx context.Context, pool *pgxpool.Pool, owner string, limit int) ([]floorAttempt, error) {
	rows, err := pool.Query(ctx, fmt.Sprintf(floorClaimSQL, limit), owner)
	if err != nil {
		return nil, fmt.Errorf("queue floor: claim: %w", err)
	}
	defer rows.Close()
	var out []floorAttempt
	for rows.Next() {
		var (
			a              floorAttempt
			kind, ns, name string
			spec           []byte
			notifications  int64
		)
		if err := rows.Scan(&a.id, &kind, &ns, &name, &spec, &a.generation, &a.token, &notifications); err != nil {
			return nil, fmt.Errorf("queue floor: claim: %w", err)
		}
		a.started = time.Now()
		out = append(out, a)
	}
	return out, rows.Err()
}

// floorComplete writes the completions that arrive, a batch of all those
// waiting at a time, until n are written, and tells freed how many workers
// each batch freed.
func floorComplete(ctx context.Context, pool *pgxpool.Pool, owner string, n int, finished <-chan floorAttempt, freed chan<- int) error {
	for done := 0; done < n; {
		var batch []floorAttempt
		select {
		case a := <-finished:
			batch = append(batch, a)
		case <-ctx.Done():
			return ctx.Err()
		}
	gather:
		for {
			select {
			case a := <-finished:
				batch = append(batch, a)
			default:
				break gather
			}
		}
		ids, tokens, generations, started := make([]int64, len(batch)), make([]int64, len(batch)), make([]int64, len(batch)), make([]time.Time, len(batch))
		for i, a := range batch {
			ids[i], tokens[i], generations[i], started[i] = a.id, a.token, a.generation, a.started
		}
		var written, recorded, told int64
		if err := pool.QueryRow(ctx, floorCompleteSQL, ids, tokens, generations, started, owner).Scan(&written, &recorded, &told); err != nil {
			return fmt.Errorf("queue floor: complete: %w", err)
		}
		if written != int64(len(batch)) || recorded != written {
			return fmt.Errorf("queue floor: %d completions wrote %d statuses and %d history rows", len(batch), written, recorded)
		}
		done += len(batch)
		freed <- len(batch)
	}
	return nil
}
