package dashboard

import (
	"context"
	"errors"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/reconcile"
	"github.com/no8s/no8s-agent/source/dir"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
	"github.com/no8s/no8s-agent/sync"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The example repository the tests sync, and what it declares.
const (
	examplesDir  = "../examples/repo"
	sourceName   = "examples"
	testAgentID  = "dashboard-test-agent"
	readyTimeout = 30 * time.Second
)

// exampleResources are the resources of examples/repo, by name, with their kind.
var exampleResources = map[string]string{
	"production-pg": "DatabaseCluster",
	"staging-pg":    "DatabaseCluster",
	"prod-vpc":      "Network",
	"db-production": "DNSRecord",
}

// fixture is a store holding the example repository, synced and reconciled.
type fixture struct {
	st *postgres.Store
	// ids are the example resources' IDs by name.
	ids map[string]int64
	// dir is the absolute path of the synced folder.
	dir string
}

// openStore returns a migrated store on a fresh database.
func openStore(t testing.TB) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st
}

// newFixture syncs examples/repo into a fresh store with the real sync code
// and reconciles every resource with the real controller, every action
// being the built-in noop. It returns once all are ready, with the
// controller stopped, so that the store stays as it is for the test.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := t.Context()
	st := openStore(t)
	path, err := filepath.Abs(examplesDir)
	if err != nil {
		t.Fatal(err)
	}
	src, err := dir.New(dir.Config{Name: sourceName, Path: path})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := src.Fetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	target := sync.Target{Name: sourceName, Kind: store.SourceKind(src.Kind()), Path: src.Location(),
		Prune: sync.Prune{Enabled: true}}
	if _, err := sync.New(st, nil).Sync(ctx, target, snap, false); err != nil {
		t.Fatalf("sync %s: %v", path, err)
	}
	reconcileAll(t, st)

	f := &fixture{st: st, ids: map[string]int64{}, dir: path}
	rs, err := st.ListResources(ctx, store.ResourceFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		f.ids[r.Name] = r.ID
	}
	for name := range exampleResources {
		if f.ids[name] == 0 {
			t.Fatalf("example resource %s was not synced; have %v", name, f.ids)
		}
	}
	return f
}

// anyID returns the id of one of the example's resources.
func (f *fixture) anyID() int64 {
	for _, id := range f.ids {
		return id
	}
	panic("the fixture holds no resource") // newFixture checked that it holds the example's
}

// noopActions resolves every action instance name to the built-in noop
// action, so that every example resource becomes ready.
type noopActions struct{ noop action.Action }

func newNoopActions(t *testing.T) noopActions {
	t.Helper()
	in, err := action.NewRegistry().Build(nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	noop, ok := in.Get(action.Noop)
	if !ok {
		t.Fatal("the registry has no noop instance")
	}
	return noopActions{noop: noop.Action}
}

func (a noopActions) Get(name string) (action.Instance, bool) {
	return action.Instance{Name: name, Plugin: action.Noop, Action: a.noop}, true
}

func (a noopActions) Names() []string { return []string{action.Noop} }

// reconcileAll runs the controller until every resource is ready at its
// generation with a history, then stops it.
func reconcileAll(t *testing.T, st store.Store) {
	t.Helper()
	ctrl := reconcile.New(st, newNoopActions(t), reconcile.Options{
		AgentID: testAgentID, Workers: 4, Logger: slog.New(slog.DiscardHandler),
		PollInterval: 500 * time.Millisecond, DependencyRecheck: 500 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	}
	defer stop()

	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		waiting, err := notReady(t.Context(), st)
		if err != nil {
			t.Fatal(err)
		}
		if len(waiting) == 0 {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("resources not ready after %s: %s", readyTimeout, strings.Join(waiting, "; "))
		case <-tick.C:
		}
	}
}

// notReady describes the resources that are not ready yet, reconciled at
// their generation, free and with at least one history record.
func notReady(ctx context.Context, st store.Store) ([]string, error) {
	rs, err := st.ListResources(ctx, store.ResourceFilter{})
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return []string{"no resources"}, nil
	}
	var out []string
	for _, r := range rs {
		if r.Phase != "ready" || r.ObservedGeneration != r.Generation || r.LeaseOwner != "" {
			out = append(out, r.Name+" is "+string(r.Phase)+": "+r.StatusMessage)
			continue
		}
		h, err := st.ListReconcileRecords(ctx, r.ID, 1)
		if err != nil {
			return nil, err
		}
		if len(h) == 0 {
			out = append(out, r.Name+" has no history")
		}
	}
	return out, nil
}

// get requests path from h and returns the status and body.
func get(t *testing.T, h http.Handler, path string) (int, string, http.Header) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, err := io.ReadAll(rec.Result().Body)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Code, string(body), rec.Header()
}

// tag matches an HTML tag. Escaped data holds no "<", so only the page's
// own tags match.
var tag = regexp.MustCompile(`<[^>]*>`)

// text returns what a page shows: its HTML without tags, entities decoded.
func text(body string) string { return html.UnescapeString(tag.ReplaceAllString(body, "")) }

// logBuffer collects log output from concurrent handlers.
type logBuffer struct {
	mu  gosync.Mutex
	buf strings.Builder
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// errBoom is what a failing store returns.
var errBoom = errors.New("boom: the database is on fire")

// failingStore is a store whose named read fails.
type failingStore struct {
	store.Store
	fail string
}

func (s failingStore) err(method string) error {
	if s.fail == method {
		return errBoom
	}
	return nil
}

func (s failingStore) Stats(ctx context.Context) (*store.Stats, error) {
	if err := s.err("Stats"); err != nil {
		return nil, err
	}
	return s.Store.Stats(ctx)
}

func (s failingStore) ListSources(ctx context.Context) ([]*store.Source, error) {
	if err := s.err("ListSources"); err != nil {
		return nil, err
	}
	return s.Store.ListSources(ctx)
}

func (s failingStore) ListResources(ctx context.Context, f store.ResourceFilter) ([]*store.Resource, error) {
	if err := s.err("ListResources"); err != nil {
		return nil, err
	}
	return s.Store.ListResources(ctx, f)
}

func (s failingStore) GetResource(ctx context.Context, id int64) (*store.Resource, error) {
	if err := s.err("GetResource"); err != nil {
		return nil, err
	}
	return s.Store.GetResource(ctx, id)
}

func (s failingStore) ListReconcileRecords(ctx context.Context, id int64, limit int) ([]*store.ReconcileRecord, error) {
	if err := s.err("ListReconcileRecords"); err != nil {
		return nil, err
	}
	return s.Store.ListReconcileRecords(ctx, id, limit)
}

func (s failingStore) GetSource(ctx context.Context, name string) (*store.Source, error) {
	if err := s.err("GetSource"); err != nil {
		return nil, err
	}
	return s.Store.GetSource(ctx, name)
}

func (s failingStore) ListSyncRecords(ctx context.Context, name string, limit int) ([]*store.SyncRecord, error) {
	if err := s.err("ListSyncRecords"); err != nil {
		return nil, err
	}
	return s.Store.ListSyncRecords(ctx, name, limit)
}
