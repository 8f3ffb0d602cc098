package metrics_test

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/metrics"
	"github.com/no8s/no8s-agent/store"
)

func TestStoreGauges(t *testing.T) {
	t.Parallel()
	applied := time.Date(2025, 3, 14, 15, 9, 26, 500_000_000, time.UTC)
	tests := []struct {
		name string
		seed func(t *testing.T, st store.Store)
		// phases are the expected resource counts; a phase left out must be 0.
		phases                   map[manifest.Phase]float64
		due, inProgress, waiting float64
		lastApplied              map[string]float64
	}{
		{
			name:        "empty store",
			seed:        func(*testing.T, store.Store) {},
			lastApplied: map[string]float64{},
		},
		{
			name: "resources in every state",
			seed: func(t *testing.T, st store.Store) {
				putWidgetType(t, st)
				create(t, st, "a", "b", "c", "d", "e", "f")
				// a becomes ready; b stays leased (reconciling).
				cs := claim(t, st, 2)
				complete(t, st, cs[0], readyCompletion(cs[0]))
				// c fails with a retry in an hour.
				cc := claim(t, st, 1)
				complete(t, st, cc[0], failedCompletion(cc[0]))
				// d waits on a resource that does not exist yet.
				cd := claim(t, st, 1)
				complete(t, st, cd[0], store.Completion{
					Status:  store.StatusUpdate{Phase: manifest.PhasePending, Message: "waiting for Widget/zz"},
					Waiting: true, WaitForReady: []manifest.ObjectRef{{Kind: "Widget", Name: "zz"}},
					Requeue: true, RequeueAfter: time.Hour})
				// e is to be deleted and due; f stays due (pending).
				e, err := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Widget", Namespace: "default", Name: "e"})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := st.RequestDeletion(t.Context(), e.ID); err != nil {
					t.Fatal(err)
				}
				for _, s := range []*store.Source{
					{Name: "infra", Kind: store.SourceGit, URL: "https://example.com/infra.git", Phase: store.SourceReady,
						LastAppliedRevision: src.Revision, LastAppliedTime: &applied},
					{Name: "never-applied", Kind: store.SourceDir, Path: "/srv/manifests", Phase: store.SourceFailed,
						Message: "ValidationFailed: bad"},
					{Name: "gone", Kind: store.SourceDir, Path: "/srv/gone", Phase: store.SourceOrphaned},
				} {
					if _, err := st.PutSource(t.Context(), s); err != nil {
						t.Fatal(err)
					}
				}
			},
			phases: map[manifest.Phase]float64{manifest.PhaseReady: 1, manifest.PhaseReconciling: 1,
				manifest.PhaseFailed: 1, manifest.PhasePending: 2, manifest.PhaseDeleting: 1},
			due: 2, inProgress: 1, waiting: 1,
			lastApplied: map[string]float64{"infra": float64(applied.Unix()) + 0.5},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := openStore(t)
			tt.seed(t, st)
			got := scrape(t, metrics.New(st, metrics.Options{}).Handler())

			if v := got.value(t, "no8s_store_up", nil); v != 1 {
				t.Errorf("no8s_store_up = %v, want 1", v)
			}
			if n := len(got["no8s_resources"].GetMetric()); n != len(manifest.Phases()) {
				t.Errorf("no8s_resources has %d series, want one per phase (%d)", n, len(manifest.Phases()))
			}
			for _, p := range manifest.Phases() {
				if v := got.value(t, "no8s_resources", map[string]string{"status": string(p)}); v != tt.phases[p] {
					t.Errorf("no8s_resources{status=%q} = %v, want %v", p, v, tt.phases[p])
				}
			}
			for name, want := range map[string]float64{"no8s_queue_depth": tt.due,
				"no8s_reconciles_in_progress": tt.inProgress, "no8s_resources_waiting": tt.waiting} {
				if v := got.value(t, name, nil); v != want {
					t.Errorf("%s = %v, want %v", name, v, want)
				}
			}
			if len(tt.lastApplied) > 0 {
				for source, phase := range map[string]store.SourcePhase{"infra": store.SourceReady, "never-applied": store.SourceFailed,
					"gone": store.SourceOrphaned} {
					for _, p := range store.SourcePhases() {
						want := 0.0
						if p == phase {
							want = 1
						}
						if v := got.value(t, "no8s_source_phase", map[string]string{"source": source, "phase": string(p)}); v != want {
							t.Errorf("no8s_source_phase{source=%q,phase=%q} = %v, want %v", source, p, v, want)
						}
					}
					ready := 0.0
					if phase == store.SourceReady {
						ready = 1
					}
					if v := got.value(t, "no8s_source_ready", map[string]string{"source": source}); v != ready {
						t.Errorf("no8s_source_ready{source=%q} = %v, want %v", source, v, ready)
					}
					kind := "dir"
					if source == "infra" {
						kind = "git"
					}
					if v := got.value(t, "no8s_source_info", map[string]string{"source": source, "kind": kind, "phase": string(phase)}); v != 1 {
						t.Errorf("no8s_source_info{source=%q,kind=%s,phase=%q} = %v, want 1", source, kind, phase, v)
					}
				}
			}
			series := got["no8s_source_last_applied_timestamp_seconds"].GetMetric()
			if len(series) != len(tt.lastApplied) {
				t.Errorf("no8s_source_last_applied_timestamp_seconds has %d series, want %d: %v",
					len(series), len(tt.lastApplied), series)
			}
			for source, want := range tt.lastApplied {
				v := got.value(t, "no8s_source_last_applied_timestamp_seconds", map[string]string{"source": source})
				if v != want {
					t.Errorf("no8s_source_last_applied_timestamp_seconds{source=%q} = %v, want %v", source, v, want)
				}
			}
		})
	}
}

func TestObserve(t *testing.T) {
	t.Parallel()
	type counter struct {
		name   string
		labels map[string]string
		value  float64
	}
	type histogram struct {
		name   string
		labels map[string]string
		count  uint64
		sum    float64
	}
	tests := []struct {
		name       string
		observe    func(m *metrics.Metrics)
		counters   []counter
		histograms []histogram
		// absent are families that must have no series.
		absent []string
	}{
		{
			name: "reconciles",
			observe: func(m *metrics.Metrics) {
				m.ObserveReconcile("Widget", "noop", "create", true, 2*time.Millisecond, false)
				m.ObserveReconcile("Widget", "noop", "create", true, 3*time.Millisecond, false)
				m.ObserveReconcile("Widget", "noop", "retry", false, 5*time.Second, false)
				m.ObserveReconcile("Database", "terraform", "drift", true, 20*time.Minute, true)
			},
			counters: []counter{
				{"no8s_reconciles_total", map[string]string{"kind": "Widget", "action": "noop", "trigger": "create", "result": "success"}, 2},
				{"no8s_reconciles_total", map[string]string{"kind": "Widget", "action": "noop", "trigger": "retry", "result": "failure"}, 1},
				{"no8s_reconciles_total", map[string]string{"kind": "Database", "action": "terraform", "trigger": "drift", "result": "success"}, 1},
				{"no8s_drift_detected_total", map[string]string{"kind": "Database", "action": "terraform"}, 1},
			},
			histograms: []histogram{
				{"no8s_reconcile_duration_seconds", map[string]string{"kind": "Widget", "action": "noop"}, 3, 5.005},
				{"no8s_reconcile_duration_seconds", map[string]string{"kind": "Database", "action": "terraform"}, 1, 1200},
			},
			absent: []string{"no8s_sync_runs_total", "no8s_webhook_deliveries_total"},
		},
		{
			name: "reconciles without drift",
			observe: func(m *metrics.Metrics) {
				m.ObserveReconcile("Widget", "http", "drift", true, time.Second, false)
			},
			counters: []counter{
				{"no8s_reconciles_total", map[string]string{"kind": "Widget", "action": "http", "trigger": "drift", "result": "success"}, 1},
			},
			absent: []string{"no8s_drift_detected_total"},
		},
		{
			name: "syncs",
			observe: func(m *metrics.Metrics) {
				m.ObserveSync("infra", metrics.SyncApplied, 1500*time.Millisecond)
				m.ObserveSync("infra", metrics.SyncUnchanged, 10*time.Millisecond)
				m.ObserveSync("infra", metrics.SyncUnchanged, 20*time.Millisecond)
				m.ObserveSync("apps", metrics.SyncRefused, 250*time.Millisecond)
				m.ObserveSync("apps", metrics.SyncFailed, 30*time.Second)
			},
			counters: []counter{
				{"no8s_sync_runs_total", map[string]string{"source": "infra", "result": "applied"}, 1},
				{"no8s_sync_runs_total", map[string]string{"source": "infra", "result": "unchanged"}, 2},
				{"no8s_sync_runs_total", map[string]string{"source": "apps", "result": "refused"}, 1},
				{"no8s_sync_runs_total", map[string]string{"source": "apps", "result": "failed"}, 1},
			},
			histograms: []histogram{
				{"no8s_sync_duration_seconds", map[string]string{"source": "infra", "result": "applied"}, 1, 1.5},
				{"no8s_sync_duration_seconds", map[string]string{"source": "infra", "result": "unchanged"}, 2, 0.03},
				{"no8s_sync_duration_seconds", map[string]string{"source": "apps", "result": "failed"}, 1, 30},
			},
			absent: []string{"no8s_reconciles_total"},
		},
		{
			name: "webhooks",
			observe: func(m *metrics.Metrics) {
				m.ObserveWebhook("push", "triggered")
				m.ObserveWebhook("push", "triggered")
				m.ObserveWebhook("", "unauthorized")
				m.ObserveWebhook("ping", "pong")
			},
			counters: []counter{
				{"no8s_webhook_deliveries_total", map[string]string{"event": "push", "result": "triggered"}, 2},
				{"no8s_webhook_deliveries_total", map[string]string{"event": metrics.UnknownEvent, "result": "unauthorized"}, 1},
				{"no8s_webhook_deliveries_total", map[string]string{"event": "ping", "result": "pong"}, 1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := metrics.New(openStore(t), metrics.Options{})
			tt.observe(m)
			got := scrape(t, m.Handler())
			for _, c := range tt.counters {
				if v := got.value(t, c.name, c.labels); v != c.value {
					t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.value)
				}
			}
			for _, h := range tt.histograms {
				n, sum := got.histogram(t, h.name, h.labels)
				if n != h.count || !approx(sum, h.sum) {
					t.Errorf("%s%v: count %d, sum %v; want %d, %v", h.name, h.labels, n, sum, h.count, h.sum)
				}
			}
			for _, name := range tt.absent {
				if mf, ok := got[name]; ok {
					t.Errorf("%s has series, want none: %v", name, mf.GetMetric())
				}
			}
		})
	}
}

func approx(a, b float64) bool {
	d := a - b
	return d < 1e-9 && d > -1e-9
}

func TestStoreDown(t *testing.T) {
	t.Parallel()
	boom := errors.New("connection refused")
	tests := []struct {
		name string
		// source returns the Source to scrape, given a seeded healthy store.
		source  func(st store.Store) metrics.Source
		timeout time.Duration
		// resources says whether the resource gauges are still reported.
		resources bool
		// lastApplied says whether the source timestamps are still reported.
		lastApplied bool
		logged      string
	}{
		{
			name:   "closed store",
			source: func(st store.Store) metrics.Source { st.Close(); return st },
			logged: "closed",
		},
		{
			name:   "both reads fail",
			source: func(st store.Store) metrics.Source { return faultySource{Source: st, statsErr: boom, listErr: boom} },
			logged: "connection refused",
		},
		{
			name:        "counting fails",
			source:      func(st store.Store) metrics.Source { return faultySource{Source: st, statsErr: boom} },
			lastApplied: true,
			logged:      "read=stats error=\"connection refused\"",
		},
		{
			name:      "listing sources fails",
			source:    func(st store.Store) metrics.Source { return faultySource{Source: st, listErr: boom} },
			resources: true,
			logged:    "read=sources error=\"connection refused\"",
		},
		{
			name:    "store too slow",
			source:  func(st store.Store) metrics.Source { return faultySource{Source: st, stall: true} },
			timeout: 50 * time.Millisecond,
			logged:  "deadline exceeded",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := openStore(t)
			putWidgetType(t, st)
			create(t, st, "a")
			now := time.Now()
			if _, err := st.PutSource(t.Context(), &store.Source{Name: "infra", Kind: store.SourceGit,
				URL: "https://example.com/infra.git", LastAppliedRevision: src.Revision, LastAppliedTime: &now}); err != nil {
				t.Fatal(err)
			}
			var logs logBuffer
			m := metrics.New(tt.source(st), metrics.Options{ScrapeTimeout: tt.timeout,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			m.ObserveReconcile("Widget", "noop", "create", true, time.Millisecond, false)

			start := time.Now()
			got := scrape(t, m.Handler())
			if took := time.Since(start); took >= maxStall/2 {
				t.Errorf("scrape took %v; the scrape timeout must bound it", took)
			}
			if v := got.value(t, "no8s_store_up", nil); v != 0 {
				t.Errorf("no8s_store_up = %v, want 0", v)
			}
			// The rest of the scrape is served.
			if v := got.value(t, "no8s_reconciles_total",
				map[string]string{"kind": "Widget", "action": "noop", "trigger": "create", "result": "success"}); v != 1 {
				t.Errorf("no8s_reconciles_total = %v, want 1", v)
			}
			if _, ok := got["go_goroutines"]; !ok {
				t.Error("go_goroutines missing: the Go collector's metrics must be served")
			}
			for name, want := range map[string]bool{"no8s_resources": tt.resources, "no8s_queue_depth": tt.resources,
				"no8s_source_last_applied_timestamp_seconds": tt.lastApplied} {
				if _, ok := got[name]; ok != want {
					t.Errorf("%s present = %v, want %v", name, ok, want)
				}
			}
			if v := got.value(t, "promhttp_metric_handler_errors_total", map[string]string{"cause": "gathering"}); v != 0 {
				t.Errorf("promhttp_metric_handler_errors_total{cause=gathering} = %v: the store failure failed the gathering", v)
			}
			if l := logs.String(); !strings.Contains(l, tt.logged) || !strings.Contains(l, "level=WARN") {
				t.Errorf("log does not report %q as a warning:\n%s", tt.logged, l)
			}
		})
	}
}

func TestInstrumentHandler(t *testing.T) {
	t.Parallel()
	m := metrics.New(openStore(t), metrics.Options{})
	mux := http.NewServeMux()
	route := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, m.InstrumentHandler(pattern, h)) }
	route("GET /api/v1/resources/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "404" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		io.WriteString(w, `{"id":`+r.PathValue("id")+`}`)
	})
	route("POST /api/v1/resources/{id}/reconcile", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
	})
	route("GET /api/v1/events", func(w http.ResponseWriter, r *http.Request) {
		// Streams need the ResponseWriter's Flusher through the wrapper.
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("Flush through the instrumented writer: %v", err)
		}
		if _, ok := w.(http.Flusher); !ok {
			t.Error("the instrumented writer is not an http.Flusher")
		}
		io.WriteString(w, "data: {}\n\n")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, req := range []struct{ method, path string }{
		{"GET", "/api/v1/resources/1"}, {"GET", "/api/v1/resources/2"}, {"GET", "/api/v1/resources/3"},
		{"GET", "/api/v1/resources/404"}, {"POST", "/api/v1/resources/7/reconcile"}, {"GET", "/api/v1/events"},
	} {
		r, err := http.NewRequest(req.method, srv.URL+req.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	got := scrape(t, m.Handler())
	const byID = "GET /api/v1/resources/{id}"
	tests := []struct {
		route, method, code string
		want                float64
	}{
		{byID, "get", "200", 3},
		{byID, "get", "404", 1},
		{"POST /api/v1/resources/{id}/reconcile", "post", "202", 1},
		{"GET /api/v1/events", "get", "200", 1},
	}
	for _, tt := range tests {
		labels := map[string]string{"route": tt.route, "method": tt.method, "code": tt.code}
		if v := got.value(t, "no8s_http_requests_total", labels); v != tt.want {
			t.Errorf("no8s_http_requests_total%v = %v, want %v", labels, v, tt.want)
		}
	}
	if n, _ := got.histogram(t, "no8s_http_request_duration_seconds", map[string]string{"route": byID, "method": "get"}); n != 4 {
		t.Errorf("no8s_http_request_duration_seconds count for %s = %d, want 4", byID, n)
	}
	// Only route patterns, never raw paths, become label values.
	for _, name := range []string{"no8s_http_requests_total", "no8s_http_request_duration_seconds"} {
		for _, s := range got[name].GetMetric() {
			for _, lp := range s.GetLabel() {
				if strings.Contains(lp.GetValue(), "/api/v1/resources/") && !strings.Contains(lp.GetValue(), "{id}") {
					t.Errorf("%s has a raw path as label %s=%q", name, lp.GetName(), lp.GetValue())
				}
			}
		}
	}
}

func TestLint(t *testing.T) {
	t.Parallel()
	got := scrapeAll(t)
	var mfs []*dto.MetricFamily
	for _, name := range got.names() {
		mfs = append(mfs, got[name])
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	// Every family the agent defines is there, with the prefix and help.
	var ours int
	for name, mf := range got {
		if !strings.HasPrefix(name, "no8s_") {
			continue
		}
		ours++
		if len(mf.GetHelp()) < 20 {
			t.Errorf("%s: help %q is too short to explain it", name, mf.GetHelp())
		}
	}
	if want := len(allFamilies); ours != want {
		t.Errorf("%d no8s_ families, want %d: %v", ours, want, got.names())
	}
}

// allFamilies are the families the package defines, with their types.
var allFamilies = map[string]dto.MetricType{
	"no8s_reconciles_total":                      dto.MetricType_COUNTER,
	"no8s_reconcile_duration_seconds":            dto.MetricType_HISTOGRAM,
	"no8s_drift_detected_total":                  dto.MetricType_COUNTER,
	"no8s_resources":                             dto.MetricType_GAUGE,
	"no8s_queue_depth":                           dto.MetricType_GAUGE,
	"no8s_reconciles_in_progress":                dto.MetricType_GAUGE,
	"no8s_resources_waiting":                     dto.MetricType_GAUGE,
	"no8s_sync_runs_total":                       dto.MetricType_COUNTER,
	"no8s_sync_duration_seconds":                 dto.MetricType_HISTOGRAM,
	"no8s_source_last_applied_timestamp_seconds": dto.MetricType_GAUGE,
	"no8s_source_phase":                          dto.MetricType_GAUGE,
	"no8s_webhook_deliveries_total":              dto.MetricType_COUNTER,
	"no8s_http_requests_total":                   dto.MetricType_COUNTER,
	"no8s_http_request_duration_seconds":         dto.MetricType_HISTOGRAM,
	"no8s_store_up":                              dto.MetricType_GAUGE,
	"no8s_build_info":                            dto.MetricType_GAUGE,
	"no8s_source_info":                           dto.MetricType_GAUGE,
	"no8s_source_ready":                          dto.MetricType_GAUGE,
	"no8s_source_suspended":                      dto.MetricType_GAUGE,
	"no8s_resources_suspended":                   dto.MetricType_GAUGE,
	"no8s_resource_info":                         dto.MetricType_GAUGE,
	"no8s_resource_ready":                        dto.MetricType_GAUGE,
	"no8s_resource_series_dropped":               dto.MetricType_GAUGE,
	"no8s_agents":                                dto.MetricType_GAUGE,
	"no8s_notifications_total":                   dto.MetricType_COUNTER,
}

func TestFamilyTypes(t *testing.T) {
	t.Parallel()
	got := scrapeAll(t)
	for name, typ := range allFamilies {
		mf, ok := got[name]
		if !ok {
			t.Errorf("%s missing", name)
			continue
		}
		if mf.GetType() != typ {
			t.Errorf("%s is a %v, want a %v", name, mf.GetType(), typ)
		}
	}
	// Reconcile durations span actions of a millisecond to an hour.
	buckets := got["no8s_reconcile_duration_seconds"].GetMetric()[0].GetHistogram().GetBucket()
	if len(buckets) < 2 || buckets[0].GetUpperBound() > 0.001 || buckets[len(buckets)-1].GetUpperBound() < 3600 {
		t.Errorf("no8s_reconcile_duration_seconds buckets %v do not span 1ms to 1h", buckets)
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	m := metrics.New(openStore(t), metrics.Options{})
	h := m.InstrumentHandler("GET /x", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	const workers, rounds = 8, 50
	var wg gosync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			for range rounds {
				m.ObserveReconcile("Widget", "noop", "create", i%2 == 0, time.Millisecond, i%3 == 0)
				m.ObserveSync("infra", metrics.SyncUnchanged, time.Millisecond)
				m.ObserveWebhook("push", "triggered")
				h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/x", nil))
			}
		})
	}
	wg.Go(func() {
		for range 5 {
			rec := httptest.NewRecorder()
			m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			if rec.Code != http.StatusOK {
				t.Errorf("scrape during updates: %d", rec.Code)
			}
		}
	})
	wg.Wait()
	got := scrape(t, m.Handler())
	if v := got.value(t, "no8s_sync_runs_total", map[string]string{"source": "infra", "result": "unchanged"}); v != workers*rounds {
		t.Errorf("no8s_sync_runs_total = %v, want %d", v, workers*rounds)
	}
	if v := got.value(t, "no8s_http_requests_total", map[string]string{"route": "GET /x", "method": "get", "code": "200"}); v != workers*rounds {
		t.Errorf("no8s_http_requests_total = %v, want %d", v, workers*rounds)
	}
}

func TestBuildInfo(t *testing.T) {
	t.Parallel()
	got := scrape(t, metrics.New(openStore(t), metrics.Options{Version: "v1.2.3", Commit: "abc123"}).Handler())
	labels := map[string]string{"version": "v1.2.3", "commit": "abc123", "goversion": runtime.Version()}
	if v := got.value(t, "no8s_build_info", labels); v != 1 {
		t.Errorf("no8s_build_info%v = %v, want 1", labels, v)
	}
}

// TestResourceSeries checks the per-resource series: those not ready come
// first within the limit, the rest are counted as dropped, and the series
// are read from the store at most once per interval.
func TestResourceSeries(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	putWidgetType(t, st)
	create(t, st, "a", "b", "c", "d")
	// a and b become ready, c fails, d is suspended and stays pending.
	cs := claim(t, st, 3)
	complete(t, st, cs[0], readyCompletion(cs[0]))
	complete(t, st, cs[1], readyCompletion(cs[1]))
	complete(t, st, cs[2], failedCompletion(cs[2]))
	d, err := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Widget", Namespace: "default", Name: "d"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.SuspendResource(t.Context(), d.ID, true, store.Suspension{}); err != nil {
		t.Fatal(err)
	}
	m := metrics.New(st, metrics.Options{ResourceSeriesLimit: 3, ResourceSeriesEvery: time.Hour})
	got := scrape(t, m.Handler())
	info := func(name, phase, suspended string) map[string]string {
		return map[string]string{"kind": "Widget", "namespace": "default", "name": name, "source": "infra", "action": "noop", "phase": phase, "suspended": suspended}
	}
	for _, want := range []map[string]string{info("c", "failed", "false"), info("d", "pending", "true"), info("a", "ready", "false")} {
		if v := got.value(t, "no8s_resource_info", want); v != 1 {
			t.Errorf("no8s_resource_info%v = %v, want 1", want, v)
		}
	}
	if got.find("no8s_resource_info", info("b", "ready", "false")) != nil {
		t.Error("b is beyond the limit but has a series")
	}
	for name, want := range map[string]float64{"a": 1, "c": 0, "d": 0} {
		if v := got.value(t, "no8s_resource_ready", map[string]string{"kind": "Widget", "namespace": "default", "name": name}); v != want {
			t.Errorf("no8s_resource_ready{name=%q} = %v, want %v", name, v, want)
		}
	}
	if v := got.value(t, "no8s_resource_series_dropped", nil); v != 1 {
		t.Errorf("no8s_resource_series_dropped = %v, want 1", v)
	}
	if v := got.value(t, "no8s_resources_suspended", nil); v != 1 {
		t.Errorf("no8s_resources_suspended = %v, want 1", v)
	}
	// Within the interval a scrape shows the last reading, while the
	// counts read at every scrape move on.
	if _, err := st.SuspendResource(t.Context(), d.ID, false, store.Suspension{}); err != nil {
		t.Fatal(err)
	}
	got = scrape(t, m.Handler())
	if v := got.value(t, "no8s_resource_info", info("d", "pending", "true")); v != 1 {
		t.Errorf("a second scrape within the interval read the resources again")
	}
	if v := got.value(t, "no8s_resources_suspended", nil); v != 0 {
		t.Errorf("no8s_resources_suspended after the resume = %v, want 0", v)
	}
	// A negative limit turns the series off.
	got = scrape(t, metrics.New(st, metrics.Options{ResourceSeriesLimit: -1}).Handler())
	if got.find("no8s_resource_info", info("c", "failed", "false")) != nil {
		t.Error("no8s_resource_info with the series turned off")
	}
	if v := got.value(t, "no8s_resource_series_dropped", nil); v != 4 {
		t.Errorf("no8s_resource_series_dropped with the series turned off = %v, want 4", v)
	}
}

// TestCountersStartAtZero checks that the counters the options name exist
// at 0 before anything is observed.
func TestCountersStartAtZero(t *testing.T) {
	t.Parallel()
	m := metrics.New(openStore(t), metrics.Options{Sources: []string{"infra"},
		Bindings: []metrics.Binding{{Kind: "Widget", Action: "noop"}},
		Webhooks: map[string][]string{"push": {"triggered"}}})
	got := scrape(t, m.Handler())
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{
		{"no8s_sync_runs_total", map[string]string{"source": "infra", "result": metrics.SyncFailed}},
		{"no8s_sync_runs_total", map[string]string{"source": "infra", "result": metrics.SyncSuspended}},
		{"no8s_reconciles_total", map[string]string{"kind": "Widget", "action": "noop", "trigger": "create", "result": "failure"}},
		{"no8s_reconciles_total", map[string]string{"kind": "Widget", "action": "noop", "trigger": "drift", "result": "success"}},
		{"no8s_drift_detected_total", map[string]string{"kind": "Widget", "action": "noop"}},
		{"no8s_webhook_deliveries_total", map[string]string{"event": "push", "result": "triggered"}},
	} {
		if got.find(c.name, c.labels) == nil {
			t.Errorf("%s%v is missing", c.name, c.labels)
		} else if v := got.value(t, c.name, c.labels); v != 0 {
			t.Errorf("%s%v = %v, want 0", c.name, c.labels, v)
		}
	}
}

// TestAgentsGauge counts the agents recording heartbeats.
func TestAgentsGauge(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	m := metrics.New(st, metrics.Options{})
	if v := scrape(t, m.Handler()).value(t, "no8s_agents", map[string]string{"state": "alive"}); v != 0 {
		t.Errorf("no8s_agents{state=alive} before any heartbeat = %v, want 0", v)
	}
	if err := st.RecordAgent(t.Context(), &store.Agent{ID: "a1", Host: "h", StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	got := scrape(t, m.Handler())
	if v := got.value(t, "no8s_agents", map[string]string{"state": "alive"}); v != 1 {
		t.Errorf("no8s_agents{state=alive} = %v, want 1", v)
	}
	if v := got.value(t, "no8s_agents", map[string]string{"state": "gone"}); v != 0 {
		t.Errorf("no8s_agents{state=gone} = %v, want 0", v)
	}
}

// TestResourceSeriesNamespaces: one kind and name in two namespaces are two
// resources, with a series each that the namespace tells apart; without
// it, the scrape would hold two series of the same labels and fail.
func TestResourceSeriesNamespaces(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	putWidgetType(t, st)
	for _, ns := range []string{"team-a", "team-b"} {
		if _, err := st.CreateResource(t.Context(), widgetIn(ns, "web"), src); err != nil {
			t.Fatal(err)
		}
	}
	got := scrape(t, metrics.New(st, metrics.Options{ResourceSeriesLimit: 10}).Handler())
	for _, ns := range []string{"team-a", "team-b"} {
		labels := map[string]string{"kind": "Widget", "namespace": ns, "name": "web", "source": "infra", "action": "noop",
			"phase": "pending", "suspended": "false"}
		if v := got.value(t, "no8s_resource_info", labels); v != 1 {
			t.Errorf("no8s_resource_info%v = %v, want 1", labels, v)
		}
		if v := got.value(t, "no8s_resource_ready", map[string]string{"kind": "Widget", "namespace": ns, "name": "web"}); v != 0 {
			t.Errorf("no8s_resource_ready in %s = %v, want 0", ns, v)
		}
	}
}
