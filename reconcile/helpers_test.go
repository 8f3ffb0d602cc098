package reconcile_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/reconcile"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// openStore returns a migrated store on a fresh database.
func openStore(t *testing.T) (*postgres.Store, string) {
	t.Helper()
	url := pgtest.URL(t)
	st, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st, url
}

var src = store.SourceRef{Name: "infra", Path: "widgets.yaml", Revision: "main@sha1:0123456789abcdef0123456789abcdef01234567"}

// widget declares a Widget named name with spec, reconciled by instance.
func widget(name, spec, instance string, deps ...string) *manifest.Resource {
	sum := sha256.Sum256([]byte(spec))
	r := &manifest.Resource{Kind: "Widget", Group: "example.com", Version: "v1", Name: name,
		Spec: json.RawMessage(spec), SpecHash: "sha256:" + hex.EncodeToString(sum[:]), Action: instance}
	for _, d := range deps {
		r.DependsOn = append(r.DependsOn, manifest.ObjectRef{Kind: "Widget", Name: d})
	}
	return r
}

func apply(t *testing.T, st store.Store, r *manifest.Resource) *store.Resource {
	t.Helper()
	got, _, err := st.ApplyResource(t.Context(), r, src)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// actionSet is the action instances of a test: name -> action.
type actionSet map[string]action.Action

func (s actionSet) Get(name string) (action.Instance, bool) {
	a, ok := s[name]
	return action.Instance{Name: name, Plugin: "test", Action: a}, ok
}

func (s actionSet) Names() []string {
	var names []string
	for n := range s {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// call is one operation a scripted action received.
type call struct {
	op         action.Operation
	name       string
	generation int64
	spec       string
	trigger    string
}

// scripted is an action whose behaviour each test writes, recording calls.
type scripted struct {
	mu      gosync.Mutex
	calls   []call
	apply   func(ctx context.Context, req *action.Request) (*action.Result, error)
	destroy func(ctx context.Context, req *action.Request) (*action.Result, error)
	timeout time.Duration
	// started receives every call as it starts, when not nil.
	started chan call
}

func (s *scripted) record(op action.Operation, req *action.Request) {
	c := call{op: op, name: req.Resource.Name, generation: req.Resource.Generation,
		spec: string(req.Resource.Spec), trigger: req.Trigger}
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
	if s.started != nil {
		s.started <- c
	}
}

func (s *scripted) Apply(ctx context.Context, req *action.Request) (*action.Result, error) {
	s.record(action.OperationApply, req)
	if s.apply != nil {
		return s.apply(ctx, req)
	}
	return &action.Result{}, nil
}

func (s *scripted) Destroy(ctx context.Context, req *action.Request) (*action.Result, error) {
	s.record(action.OperationDestroy, req)
	if s.destroy != nil {
		return s.destroy(ctx, req)
	}
	return &action.Result{}, nil
}

func (s *scripted) Timeout() time.Duration { return s.timeout }

func (s *scripted) callsOf(name string) []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []call
	for _, c := range s.calls {
		if c.name == name {
			out = append(out, c)
		}
	}
	return out
}

// planning is a scripted action that can observe the world.
type planning struct {
	*scripted
	plan func(ctx context.Context, req *action.Request) (*action.Plan, error)
}

func (p *planning) Plan(ctx context.Context, req *action.Request) (*action.Plan, error) {
	p.record(action.OperationPlan, req)
	return p.plan(ctx, req)
}

// quiet is a logger for tests; failures show in assertions, not logs.
func quiet() *slog.Logger {
	if os.Getenv("NO8S_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// options are fast settings for tests.
func options(id string) reconcile.Options {
	return reconcile.Options{AgentID: id, Workers: 4, LeaseDuration: 2 * time.Second,
		BackoffInitial: 200 * time.Millisecond, BackoffMax: time.Second, DependencyRecheck: time.Hour,
		PollInterval: time.Hour, Logger: quiet()}
}

// start runs a controller until the test ends and returns a function that
// stops it and waits for Run to return.
func start(t *testing.T, st store.Store, actions reconcile.Actions, opts reconcile.Options) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := reconcile.New(st, actions, opts)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		if err := c.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var once gosync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				t.Error("controller did not stop within 30s")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last state: %s", timeout, what, state)
		}
		<-tick.C
	}
}

// waitPhase waits until the resource kind/name reaches phase with
// observed generation gen, and returns it.
func waitPhase(t *testing.T, st store.Store, name string, phase manifest.Phase, gen int64) *store.Resource {
	t.Helper()
	var r *store.Resource
	waitFor(t, 20*time.Second, fmt.Sprintf("%s to be %s at generation %d", name, phase, gen), func() (bool, string) {
		var err error
		r, err = st.GetResourceByName(context.Background(), manifest.ObjectRef{Kind: "Widget", Name: name})
		if err != nil {
			return false, err.Error()
		}
		return r.Phase == phase && r.ObservedGeneration == gen && r.LeaseOwner == "",
			fmt.Sprintf("phase %s observed %d/%d owner %q message %q", r.Phase, r.ObservedGeneration, r.Generation, r.LeaseOwner, r.StatusMessage)
	})
	return r
}

// history returns a resource's attempts, oldest first.
func history(t *testing.T, st store.Store, id int64) []*store.ReconcileRecord {
	t.Helper()
	recs, err := st.ListReconcileRecords(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(recs)
	return recs
}

// condition returns the resource's condition of type typ, failing if absent.
func condition(t *testing.T, r *store.Resource, typ string) manifest.Condition {
	t.Helper()
	c := manifest.FindCondition(r.Conditions, typ)
	if c == nil {
		t.Fatalf("%s has no %s condition: %+v", r.Name, typ, r.Conditions)
	}
	return *c
}
