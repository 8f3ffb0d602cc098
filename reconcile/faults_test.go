package reconcile_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/reconcile"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
)

// partitionable is a store that can be cut off from the database, as an
// agent is when its network fails: once cut, the queue calls fail.
type partitionable struct {
	store.Store
	cut atomic.Bool
}

var errPartitioned = errors.New("dial tcp: connect: network is unreachable")

func (p *partitionable) ClaimResources(ctx context.Context, cp store.ClaimParams) ([]*store.Claim, error) {
	if p.cut.Load() {
		return nil, errPartitioned
	}
	return p.Store.ClaimResources(ctx, cp)
}

func (p *partitionable) Heartbeat(ctx context.Context, c *store.Claim, d time.Duration, pr *store.Progress) error {
	if p.cut.Load() {
		return errPartitioned
	}
	return p.Store.Heartbeat(ctx, c, d, pr)
}

func (p *partitionable) CompleteReconcile(ctx context.Context, c *store.Claim, done store.Completion) (*store.Resource, error) {
	if p.cut.Load() {
		return nil, errPartitioned
	}
	return p.Store.CompleteReconcile(ctx, c, done)
}

func (p *partitionable) NextDue(ctx context.Context) (time.Duration, bool, error) {
	if p.cut.Load() {
		return 0, false, errPartitioned
	}
	return p.Store.NextDue(ctx)
}

// TestLostLeaseIsTakenOver cuts an agent off from the database in the middle
// of an action. Its lease runs out; it must stop the action before it does,
// and drop the result; a second agent then takes the resource over.
func TestLostLeaseIsTakenOver(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	var (
		aStopped time.Time
		bStarted time.Time
		mu       gosync.Mutex
	)
	cutOff := &partitionable{Store: st}
	aAction := &scripted{started: make(chan call, 1), apply: func(ctx context.Context, _ *action.Request) (*action.Result, error) {
		cutOff.cut.Store(true)
		<-ctx.Done()
		mu.Lock()
		aStopped = time.Now()
		mu.Unlock()
		// A result the controller must not write: the lease is gone.
		return &action.Result{Outputs: json.RawMessage(`{"by":"a"}`)}, nil
	}}
	optsA := options("agent-a")
	optsA.LeaseDuration = time.Second
	start(t, cutOff, actionSet{"widgets": aAction}, optsA)
	r := apply(t, st, widget("a", `{}`, "widgets"))
	<-aAction.started

	bAction := &scripted{apply: func(context.Context, *action.Request) (*action.Result, error) {
		mu.Lock()
		bStarted = time.Now()
		mu.Unlock()
		return &action.Result{Outputs: json.RawMessage(`{"by":"b"}`)}, nil
	}}
	optsB := options("agent-b")
	optsB.PollInterval = 200 * time.Millisecond // B learns of the expiry by polling
	start(t, st, actionSet{"widgets": bAction}, optsB)

	got := waitPhase(t, st, "a", manifest.PhaseReady, 1)
	if string(got.Outputs) != `{"by":"b"}` {
		t.Errorf("outputs = %s, want agent b's", got.Outputs)
	}
	hist := history(t, st, r.ID)
	if len(hist) != 1 || hist[0].AgentID != "agent-b" || !hist[0].Success {
		t.Errorf("history = %+v, want agent b's attempt alone", hist)
	}
	mu.Lock()
	defer mu.Unlock()
	if aStopped.IsZero() || !aStopped.Before(bStarted) {
		t.Errorf("agent a's action stopped at %v, agent b's started at %v: they overlapped", aStopped, bStarted)
	}
}

// TestStopHandsResourcesBack stops an agent during a long action: Run
// returns promptly, the action is cancelled, the resource is handed back
// as it was, and another agent finishes it.
func TestStopHandsResourcesBack(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	cancelled := make(chan struct{})
	long := &scripted{started: make(chan call, 1), apply: func(ctx context.Context, _ *action.Request) (*action.Result, error) {
		<-ctx.Done()
		close(cancelled)
		return nil, ctx.Err()
	}}
	opts := options("agent-a")
	opts.LeaseDuration = time.Hour // only a hand-back can free the resource in time
	stop := start(t, st, actionSet{"widgets": long}, opts)
	r := apply(t, st, widget("a", `{}`, "widgets"))
	<-long.started
	stopped := time.Now()
	stop()
	if d := time.Since(stopped); d > 10*time.Second {
		t.Errorf("stopping took %v", d)
	}
	select {
	case <-cancelled:
	default:
		t.Fatal("the running action was not cancelled")
	}
	got, err := st.GetResource(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.LeaseOwner != "" || got.Phase != manifest.PhasePending || got.ObservedGeneration != 0 || got.RetryCount != 0 {
		t.Fatalf("after stop: owner %q phase %s observed %d retries %d", got.LeaseOwner, got.Phase, got.ObservedGeneration, got.RetryCount)
	}
	if c := condition(t, got, manifest.ConditionReconciling); c.Reason != reconcile.ReasonInterrupted {
		t.Errorf("Reconciling = %+v", c)
	}
	hist := history(t, st, r.ID)
	if len(hist) != 1 || hist[0].Success || hist[0].Error == "" {
		t.Errorf("history = %+v, want one interrupted attempt", hist)
	}
	start(t, st, actionSet{"widgets": &scripted{}}, options("agent-b"))
	waitPhase(t, st, "a", manifest.PhaseReady, 1)
}

// TestTwoControllersShareTheWork runs two agents of eight workers each on
// one database: every generation of 500 resources is applied exactly once,
// and no resource is ever in two actions at once.
func TestTwoControllersShareTheWork(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	const n = 500
	var (
		mu       gosync.Mutex
		inFlight = map[string]bool{}
		overlaps []string
		byAgent  = map[string]int{}
	)
	counting := func(agent string) *scripted {
		return &scripted{apply: func(_ context.Context, req *action.Request) (*action.Result, error) {
			key := req.Resource.Name
			mu.Lock()
			if inFlight[key] {
				overlaps = append(overlaps, key)
			}
			inFlight[key] = true
			byAgent[agent]++
			mu.Unlock()
			// Stands for the work of a real action, so that runs last long
			// enough for the other agent to collide if it could.
			time.Sleep(time.Millisecond)
			mu.Lock()
			delete(inFlight, key)
			mu.Unlock()
			return &action.Result{}, nil
		}}
	}
	for _, id := range []string{"agent-a", "agent-b"} {
		opts := options(id)
		opts.Workers = 8
		start(t, st, actionSet{"widgets": counting(id)}, opts)
	}
	for gen := 1; gen <= 2; gen++ {
		var rs []*manifest.Resource
		for i := range n {
			rs = append(rs, widget(fmt.Sprintf("w%03d", i), fmt.Sprintf(`{"gen":%d}`, gen), "widgets"))
		}
		if _, err := st.ApplyResources(t.Context(), rs, src); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, fmt.Sprintf("all %d resources reconciled at generation %d", n, gen), func() (bool, string) {
			list, err := st.ListResources(t.Context(), store.ResourceFilter{Phase: manifest.PhaseReady})
			if err != nil {
				return false, err.Error()
			}
			done := 0
			for _, r := range list {
				if r.ObservedGeneration == int64(gen) {
					done++
				}
			}
			return done == n, fmt.Sprintf("%d done", done)
		})
	}
	all, err := st.ListResources(t.Context(), store.ResourceFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		hist := history(t, st, r.ID)
		count := map[int64]int{}
		for _, h := range hist {
			if h.Success {
				count[h.Generation]++
			}
		}
		if count[1] != 1 || count[2] != 1 || len(hist) != 2 {
			t.Errorf("%s: %d attempts, successes per generation %v; want one for each", r.Name, len(hist), count)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(overlaps) > 0 {
		t.Errorf("resources in two actions at once: %v", overlaps)
	}
	if byAgent["agent-a"] == 0 || byAgent["agent-b"] == 0 {
		t.Errorf("work per agent %v: one agent did nothing", byAgent)
	}
}

// TestSurvivesDroppedConnections kills every database connection of a
// running agent; it reconnects and reconciles the next change without
// waiting for a poll.
func TestSurvivesDroppedConnections(t *testing.T) {
	t.Parallel()
	st, url := openStore(t)
	ctrlStore, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctrlStore.Close)
	start(t, ctrlStore, actionSet{"widgets": &scripted{}}, options("agent-a")) // polls hourly
	apply(t, st, widget("before", `{}`, "widgets"))
	waitPhase(t, st, "before", manifest.PhaseReady, 1)

	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var killed int
	if err := conn.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed == 0 {
		t.Fatal("no connections to drop")
	}
	// The test's own pool lost its connections too; a write may fail once.
	waitFor(t, 20*time.Second, "a write after the drop", func() (bool, string) {
		_, _, err := st.ApplyResource(t.Context(), widget("after", `{}`, "widgets"), src)
		return err == nil, fmt.Sprint(err)
	})
	waitPhase(t, st, "after", manifest.PhaseReady, 1)
}
