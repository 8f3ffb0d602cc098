// Package metrics exposes the agent's Prometheus metrics: reconcile
// attempts and their duration, drift found, source syncs, webhook
// deliveries and HTTP requests, counted as they happen, and the state of
// the store (resources by status, the reconcile queue, when each source's
// revision was last applied), read from the store at every scrape.
//
// The package takes plain values so that it depends on no other part of
// the agent but the store's records; the caller translates its hooks
// (reconcile attempts, sync results, webhook deliveries) into the Observe
// methods. Every Metrics has its own registry, so several can live in one
// process (tests) without clashing.
package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/no8s/no8s-agent/store"
)

// Namespace prefixes every metric the agent defines.
const Namespace = "no8s"

// DefaultScrapeTimeout bounds the store reads of one scrape when
// Options.ScrapeTimeout is not set.
const DefaultScrapeTimeout = 5 * time.Second

// Results of ObserveSync. The set is fixed so that it can be a label.
const (
	// SyncApplied: a new revision was applied to the store.
	SyncApplied = "applied"
	// SyncUnchanged: the revision was already applied, so nothing was done
	// (the sync result is Skipped).
	SyncUnchanged = "unchanged"
	// SyncRefused: the snapshot was refused (a *sync.Error: invalid
	// manifests, an ownership conflict, the prune guard, an empty snapshot,
	// a type still in use), or it is one refused before and nothing that
	// could change that changed. The store kept the last applied state.
	SyncRefused = "refused"
	// SyncFailed: the fetch or the store failed.
	SyncFailed = "failed"
	// SyncSuspended: the source is suspended, so it was neither fetched
	// nor synced.
	SyncSuspended = "suspended"
)

// syncResults are the results of ObserveSync.
var syncResults = []string{SyncApplied, SyncUnchanged, SyncRefused, SyncFailed, SyncSuspended}

// Defaults of the per-resource series.
const (
	// DefaultResourceSeriesLimit is how many resources get series of
	// their own when Options.ResourceSeriesLimit is not set.
	DefaultResourceSeriesLimit = 1000
	// DefaultResourceSeriesEvery is how often the per-resource series are
	// read from the store when Options.ResourceSeriesEvery is not set.
	DefaultResourceSeriesEvery = 10 * time.Second
)

// Binding is a resource kind and the action instance its type binds it to.
type Binding struct{ Kind, Action string }

// Results of reconciles, the values of the result label of
// no8s_reconciles_total.
const (
	ReconcileSuccess = "success"
	ReconcileFailure = "failure"
)

// Source is what the scrape-time metrics read from the store.
// store.Store satisfies it.
type Source interface {
	// Stats counts resources by phase and the queue's state.
	Stats(ctx context.Context) (*store.Stats, error)
	// ListSources returns every source's stored state.
	ListSources(ctx context.Context) ([]*store.Source, error)
	// ResourceStates returns the state of up to limit resources, those
	// not ready first.
	ResourceStates(ctx context.Context, limit int) ([]store.ResourceState, error)
	// ListAgents returns the agents that record heartbeats in the store.
	ListAgents(ctx context.Context) ([]*store.Agent, error)
}

// store.Store is the Source the agent uses.
var _ Source = store.Store(nil)

// Options configures New.
type Options struct {
	// ScrapeTimeout bounds the store reads of one scrape; when they take
	// longer the scrape reports no8s_store_up 0 instead of the store's
	// gauges. Zero or less means DefaultScrapeTimeout.
	ScrapeTimeout time.Duration
	// Logger receives store read failures during scrapes and errors
	// serving metrics; nil discards them.
	Logger *slog.Logger
	// Version and Commit label no8s_build_info.
	Version, Commit string
	// ResourceSeriesLimit is how many resources get no8s_resource_info and
	// no8s_resource_ready series, those not ready first; zero means
	// DefaultResourceSeriesLimit, and less than zero none. ResourceSeriesEvery is how often they are
	// read from the store (scrapes in between get the last reading); zero
	// or less means DefaultResourceSeriesEvery.
	ResourceSeriesLimit int
	ResourceSeriesEvery time.Duration
	// Sources, Bindings and Webhooks (results by event) name what the
	// counters count from the start, so that each of their series exists
	// at 0 before the first event: rates and alerts need a first sample.
	Sources  []string
	Bindings []Binding
	Webhooks map[string][]string
	// NotificationProviders are the providers notifications go to.
	NotificationProviders []string
}

// Buckets of the duration histograms, in seconds.
var (
	// reconcileBuckets spans actions that take from a millisecond (noop,
	// a quick HTTP call) to an hour (provisioning infrastructure).
	reconcileBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
		1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}
	// syncBuckets spans a skipped sync (a query or two) to a large
	// repository validated and applied in minutes.
	syncBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
	// httpBuckets spans API reads to slow writes; long-lived streams (the
	// events endpoint) land in the last buckets.
	httpBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
)

// Metrics holds the agent's metrics and serves them. Its methods are safe
// for concurrent use; the Observe methods never block.
type Metrics struct {
	reg *prometheus.Registry
	log *slog.Logger

	reconciles        *prometheus.CounterVec
	reconcileDuration *prometheus.HistogramVec
	drift             *prometheus.CounterVec
	syncs             *prometheus.CounterVec
	syncDuration      *prometheus.HistogramVec
	webhooks          *prometheus.CounterVec
	notifications     *prometheus.CounterVec
	httpRequests      *prometheus.CounterVec
	httpDuration      *prometheus.HistogramVec

	handler http.Handler
}

// New returns the agent's metrics on a registry of their own, which also
// holds the Go runtime and process collectors. src is read at every scrape,
// with opts.ScrapeTimeout as a deadline.
func New(src Source, opts Options) *Metrics {
	if opts.ScrapeTimeout <= 0 {
		opts.ScrapeTimeout = DefaultScrapeTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ResourceSeriesLimit == 0 {
		opts.ResourceSeriesLimit = DefaultResourceSeriesLimit
	}
	if opts.ResourceSeriesEvery <= 0 {
		opts.ResourceSeriesEvery = DefaultResourceSeriesEvery
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		log: opts.Logger,
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace,
			Name:      "reconciles_total",
			Help: "Reconcile attempts that finished, by resource kind, action instance, " +
				"trigger (create, update, retry, drift, manual, delete) and result (success or failure).",
		}, []string{"kind", "action", "trigger", "result"}),
		reconcileDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace,
			Name:      "reconcile_duration_seconds",
			Help:      "Time a reconcile attempt took, successful or not, by resource kind and action instance.",
			Buckets:   reconcileBuckets,
		}, []string{"kind", "action"}),
		drift: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace,
			Name:      "drift_detected_total",
			Help: "Drift checks that found the actual state differed from the desired state " +
				"(and applied the desired state again), by resource kind and action instance.",
		}, []string{"kind", "action"}),
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace,
			Name:      "sync_runs_total",
			Help: "Sync attempts of a source, by source and result: applied (a new revision was applied), " +
				"unchanged (the revision was already applied), refused (the snapshot was refused and the " +
				"last applied state kept), failed (the fetch or the store failed), suspended (the source is " +
				"suspended: it was looked at, neither fetched nor synced).",
		}, []string{"source", "result"}),
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace,
			Name:      "sync_duration_seconds",
			Help:      "Time a sync attempt of a source took, by source and result.",
			Buckets:   syncBuckets,
		}, []string{"source", "result"}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace,
			Name:      "webhook_deliveries_total",
			Help: "Webhook deliveries received, by event type (GitHub's as sent, unknown while the signature is not verified; " +
				"GitLab's prefixed gitlab_, such as gitlab_push, gitlab_unknown while not authenticated) " +
				"and result (triggered, unmatched, handled, pong, ignored, unauthorized, invalid, unconfigured, failed, duplicate).",
		}, []string{"event", "result"}),
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace,
			Name:      "notifications_total",
			Help: "Notification delivery attempts, by provider and result: delivered, failed (to be retried), " +
				"gave-up, waiting (a commit status waiting for the resources to settle).",
		}, []string{"provider", "result"}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace,
			Name:      "http_requests_total",
			Help:      "HTTP requests served, by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace,
			Name:      "http_request_duration_seconds",
			Help: "Time taken to serve HTTP requests, by route pattern and method; " +
				"streaming responses are observed when the stream ends.",
			Buckets: httpBuckets,
		}, []string{"route", "method"}),
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "build_info",
		Help:      "Always 1; its labels say which build of the agent runs: version, commit and Go version.",
	}, []string{"version", "commit", "goversion"})
	build.WithLabelValues(opts.Version, opts.Commit, runtime.Version()).Set(1)
	m.reg.MustRegister(
		build,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.reconciles, m.reconcileDuration, m.drift,
		m.syncs, m.syncDuration,
		m.webhooks, m.notifications,
		m.httpRequests, m.httpDuration,
		newStoreCollector(src, opts),
	)
	m.zeroCounters(opts)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog: errorLog{m.log},
		// A collector that fails must not hide every other metric.
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.reg,
		// Every scrape reads the store; a burst of scrapers must not
		// exhaust its connections.
		MaxRequestsInFlight: 10,
	})
	return m
}

// zeroCounters creates the counters' series that opts names, at 0.
func (m *Metrics) zeroCounters(opts Options) {
	for _, s := range opts.Sources {
		for _, r := range syncResults {
			m.syncs.WithLabelValues(s, r)
		}
	}
	for _, b := range opts.Bindings {
		for _, trigger := range []store.Trigger{store.TriggerCreate, store.TriggerUpdate, store.TriggerRetry,
			store.TriggerDrift, store.TriggerManual, store.TriggerDelete} {
			for _, r := range []string{ReconcileSuccess, ReconcileFailure} {
				m.reconciles.WithLabelValues(b.Kind, b.Action, string(trigger), r)
			}
		}
		m.drift.WithLabelValues(b.Kind, b.Action)
	}
	for _, p := range opts.NotificationProviders {
		for _, r := range []string{store.DeliveryDelivered, store.DeliveryFailed, store.DeliveryGaveUp, store.DeliveryWaiting} {
			m.notifications.WithLabelValues(p, r)
		}
	}
	for e, results := range opts.Webhooks {
		for _, r := range results {
			m.webhooks.WithLabelValues(e, r)
		}
	}
}

// Handler serves the metrics in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler { return m.handler }

// ObserveReconcile counts one finished reconcile attempt of a resource of
// kind bound to the action instance, started by trigger (a store.Trigger),
// that took d; drift says a drift check found changes.
func (m *Metrics) ObserveReconcile(kind, action, trigger string, success bool, d time.Duration, drift bool) {
	result := ReconcileFailure
	if success {
		result = ReconcileSuccess
	}
	m.reconciles.WithLabelValues(kind, action, trigger, result).Inc()
	m.reconcileDuration.WithLabelValues(kind, action).Observe(d.Seconds())
	if drift {
		m.drift.WithLabelValues(kind, action).Inc()
	}
}

// ObserveSync counts one sync attempt of the named source, with one of the
// Sync result constants, that took d.
func (m *Metrics) ObserveSync(source, result string, d time.Duration) {
	m.syncs.WithLabelValues(source, result).Inc()
	m.syncDuration.WithLabelValues(source, result).Observe(d.Seconds())
}

// ObserveNotification counts one delivery attempt of a notification to
// the provider, with its result (a store.Delivery result).
func (m *Metrics) ObserveNotification(provider, result string) {
	m.notifications.WithLabelValues(provider, result).Inc()
}

// UnknownEvent is the event label of webhook deliveries observed without
// an event type, such as those whose signature was not verified.
const UnknownEvent = "unknown"

// ObserveWebhook counts one webhook delivery of the event type with its
// result. Both must come from bounded sets (the event only once the
// delivery is authenticated), as each pair makes a series; an empty event
// is counted as UnknownEvent.
func (m *Metrics) ObserveWebhook(event, result string) {
	if event == "" {
		event = UnknownEvent
	}
	m.webhooks.WithLabelValues(event, result).Inc()
}

// InstrumentHandler returns h counting its requests and observing their
// durations under route, which must be the pattern h is registered at
// (such as "GET /api/v1/resources/{id}"), never the request's path, so that
// the number of series stays bounded. The method label is in lower case
// (get, post), and methods outside the standard ones are counted as
// "unknown". The wrapper keeps the optional
// interfaces of the ResponseWriter (http.Flusher for streams, Unwrap for
// http.ResponseController).
func (m *Metrics) InstrumentHandler(route string, h http.Handler) http.Handler {
	labels := prometheus.Labels{"route": route}
	counter := m.httpRequests.MustCurryWith(labels)
	duration := m.httpDuration.MustCurryWith(labels)
	return promhttp.InstrumentHandlerDuration(duration, promhttp.InstrumentHandlerCounter(counter, h))
}

// errorLog writes promhttp's errors to a slog.Logger.
type errorLog struct{ log *slog.Logger }

// Println implements promhttp.Logger.
func (l errorLog) Println(v ...any) {
	l.log.Error("serving metrics", "error", fmt.Sprint(v...))
}
