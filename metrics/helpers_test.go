package metrics_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	gosync "sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/metrics"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// openStore returns a migrated store on a fresh database.
func openStore(t *testing.T) *postgres.Store {
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

var src = store.SourceRef{Name: "infra", Path: "widgets.yaml", Revision: "main@sha1:0123456789abcdef0123456789abcdef01234567"}

// widget declares a Widget named name, in the default namespace.
func widget(name string) *manifest.Resource { return widgetIn(manifest.DefaultNamespace, name) }

// widgetIn declares a Widget named name in namespace ns.
func widgetIn(ns, name string) *manifest.Resource {
	spec := `{"name":"` + name + `"}`
	sum := sha256.Sum256([]byte(spec))
	return &manifest.Resource{Kind: "Widget", Group: "example.com", Version: "v1", Namespace: ns, Name: name,
		Spec: json.RawMessage(spec), SpecHash: "sha256:" + hex.EncodeToString(sum[:]), Action: "noop",
		Origin: manifest.Origin{File: "widgets.yaml", Line: 1}}
}

func putWidgetType(t *testing.T, st store.Store) {
	t.Helper()
	_, err := st.PutResourceType(t.Context(), &store.ResourceType{Name: "Widget", Version: "v1", Group: "example.com",
		Action: "noop", Schema: json.RawMessage(`{"type":"object"}`), Source: src})
	if err != nil {
		t.Fatal(err)
	}
}

func create(t *testing.T, st store.Store, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := st.CreateResource(t.Context(), widget(n), src); err != nil {
			t.Fatal(err)
		}
	}
}

func claim(t *testing.T, st store.Store, limit int) []*store.Claim {
	t.Helper()
	cs, err := st.ClaimResources(t.Context(), store.ClaimParams{Owner: "agent-1", Limit: limit, Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != limit {
		t.Fatalf("claimed %d resources, want %d", len(cs), limit)
	}
	return cs
}

func complete(t *testing.T, st store.Store, c *store.Claim, done store.Completion) {
	t.Helper()
	if _, err := st.CompleteReconcile(t.Context(), c, done); err != nil {
		t.Fatalf("CompleteReconcile(%s): %v", c.Name, err)
	}
}

func readyCompletion(c *store.Claim) store.Completion {
	at := time.Now()
	return store.Completion{
		Status: store.StatusUpdate{Phase: manifest.PhaseReady, Message: "applied", ObservedGeneration: c.Generation,
			LastReconcileTime: &at},
		Record: &store.ReconcileRecord{ResourceID: c.ID, Kind: c.Kind, Name: c.Name, Generation: c.Generation,
			Trigger: store.TriggerCreate, Phase: "completed", Success: true, AgentID: c.Lease.Owner,
			StartedAt: at, FinishedAt: at},
	}
}

func failedCompletion(c *store.Claim) store.Completion {
	at := time.Now()
	return store.Completion{
		Status: store.StatusUpdate{Phase: manifest.PhaseFailed, Message: "boom", RetryCount: 1,
			LastReconcileTime: &at},
		Requeue: true, RequeueAfter: time.Hour,
	}
}

// families is a parsed scrape, by metric family name.
type families map[string]*dto.MetricFamily

// scrape serves h over HTTP, fetches it once and parses the text format.
func scrape(t *testing.T, h http.Handler) families {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s\n%s", resp.Status, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse scrape: %v\n%s", err, body)
	}
	return mfs
}

// names returns the family names, sorted.
func (f families) names() []string { return slices.Sorted(maps.Keys(f)) }

// find returns the metric of family name whose labels are exactly labels,
// or nil.
func (f families) find(name string, labels map[string]string) *dto.Metric {
	mf := f[name]
	if mf == nil {
		return nil
	}
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		if maps.Equal(got, labels) {
			return m
		}
	}
	return nil
}

// value returns the value of a gauge or counter, failing the test when the
// series is missing.
func (f families) value(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	m := f.find(name, labels)
	switch {
	case m == nil:
		t.Errorf("no series %s%v; families: %s", name, labels, strings.Join(f.names(), " "))
		return -1
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	}
	t.Errorf("%s%v is neither a gauge nor a counter", name, labels)
	return -1
}

// histogram returns the sample count and sum of a histogram series.
func (f families) histogram(t *testing.T, name string, labels map[string]string) (uint64, float64) {
	t.Helper()
	m := f.find(name, labels)
	if m == nil || m.Histogram == nil {
		t.Errorf("no histogram %s%v", name, labels)
		return 0, 0
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// exercise records one of everything, so that every family has a series.
func exercise(t *testing.T, m *metrics.Metrics) {
	t.Helper()
	m.ObserveReconcile("Widget", "noop", string(store.TriggerDrift), true, 20*time.Millisecond, true)
	m.ObserveSync("infra", metrics.SyncApplied, time.Second)
	m.ObserveWebhook("push", "triggered")
	m.ObserveNotification("ops-hook", "delivered")
	h := m.InstrumentHandler("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/healthz", nil))
}

// scrapeAll scrapes metrics on a store with an applied source after
// exercise, so that every family has a series.
func scrapeAll(t *testing.T) families {
	t.Helper()
	st := openStore(t)
	now := time.Now()
	if _, err := st.PutSource(t.Context(), &store.Source{Name: "infra", Kind: store.SourceGit,
		URL: "https://example.com/infra.git", LastAppliedRevision: src.Revision, LastAppliedTime: &now}); err != nil {
		t.Fatal(err)
	}
	putWidgetType(t, st)
	create(t, st, "a")
	m := metrics.New(st, metrics.Options{})
	exercise(t, m)
	return scrape(t, m.Handler())
}

// faultySource wraps a Source, failing or stalling its reads on demand.
type faultySource struct {
	metrics.Source
	statsErr, listErr error
	// stall makes both reads wait for their context to end (at most maxStall).
	stall bool
}

func (f faultySource) Stats(ctx context.Context) (*store.Stats, error) {
	if f.stall {
		return nil, stall(ctx)
	}
	if f.statsErr != nil {
		return nil, f.statsErr
	}
	return f.Source.Stats(ctx)
}

func (f faultySource) ListSources(ctx context.Context) ([]*store.Source, error) {
	if f.stall {
		return nil, stall(ctx)
	}
	if f.listErr != nil {
		return nil, f.listErr
	}
	return f.Source.ListSources(ctx)
}

// maxStall bounds a stalled read, so that a collector that ignores its
// timeout fails the test instead of hanging it.
const maxStall = 5 * time.Second

// stall waits for ctx to end, or maxStall.
func stall(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(maxStall):
		return errors.New("stalled read was not cancelled")
	}
}

// logBuffer collects log output from concurrent writers.
type logBuffer struct {
	mu  gosync.Mutex
	buf bytes.Buffer
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
