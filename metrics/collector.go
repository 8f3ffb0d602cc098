package metrics

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	gosync "sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// storeCollector reads the store at every scrape and reports what it found.
// When the store cannot be read within the timeout it reports
// no8s_store_up 0 and leaves out the gauges it could not read, rather than
// failing the scrape or reporting made-up values.
type storeCollector struct {
	src     Source
	timeout time.Duration
	log     *slog.Logger
	// limit and every bound the per-resource series: at most limit
	// resources, read from the store at most once every so often.
	limit int
	every time.Duration

	mu       gosync.Mutex
	states   []store.ResourceState
	statesAt time.Time

	up          *prometheus.Desc
	resources   *prometheus.Desc
	queueDepth  *prometheus.Desc
	inProgress  *prometheus.Desc
	waiting     *prometheus.Desc
	lastApplied *prometheus.Desc
	sourcePhase *prometheus.Desc
	sourceInfo  *prometheus.Desc
	sourceReady *prometheus.Desc
	sourceSusp  *prometheus.Desc
	suspended   *prometheus.Desc
	resInfo     *prometheus.Desc
	resReady    *prometheus.Desc
	resDropped  *prometheus.Desc
	agents      *prometheus.Desc
}

func newStoreCollector(src Source, opts Options) *storeCollector {
	name := func(n string) string { return prometheus.BuildFQName(Namespace, "", n) }
	return &storeCollector{
		src:     src,
		timeout: opts.ScrapeTimeout,
		log:     opts.Logger,
		limit:   opts.ResourceSeriesLimit,
		every:   opts.ResourceSeriesEvery,
		agents: prometheus.NewDesc(name("agents"),
			"Agents sharing the store by state: alive (recording heartbeats), stopped (shut down cleanly, "+
				"listed for a day) or gone (no heartbeat for "+store.AgentGoneAfter.String()+
				" and no clean shutdown; its leases end when they expire).",
			[]string{"state"}, nil),
		sourceSusp: prometheus.NewDesc(name("source_suspended"),
			"1 while the source is suspended (neither fetched nor synced), through the API or its configuration.",
			[]string{"source"}, nil),
		suspended: prometheus.NewDesc(name("resources_suspended"),
			"Resources suspended through the API or by their no8s.io/suspend annotation.", nil, nil),
		resInfo: prometheus.NewDesc(name("resource_info"),
			"Always 1, one series per resource (up to the limit, those not ready first): "+
				"its kind, namespace (empty for a cluster-scoped kind), name, source, action instance, status and whether it is suspended, to join on.",
			[]string{"kind", "namespace", "name", "source", "action", "phase", "suspended"}, nil),
		resReady: prometheus.NewDesc(name("resource_ready"),
			"1 when the resource is ready at its current generation, 0 otherwise (up to the limit, those not ready first).",
			[]string{"kind", "namespace", "name"}, nil),
		resDropped: prometheus.NewDesc(name("resource_series_dropped"),
			"Resources left out of no8s_resource_info and no8s_resource_ready by the limit on their series; "+
				"all of them are ready, unless more resources than the limit are not.", nil, nil),
		up: prometheus.NewDesc(name("store_up"),
			"Whether the store could be read during this scrape: 1 if it answered within the scrape timeout, "+
				"0 if not (the gauges read from it are then missing).", nil, nil),
		resources: prometheus.NewDesc(name("resources"),
			"Resources in the store by status; every status is reported, 0 when no resource has it.",
			[]string{"status"}, nil),
		queueDepth: prometheus.NewDesc(name("queue_depth"),
			"Resources due for a reconcile that no worker holds yet: the reconcile queue's depth.", nil, nil),
		inProgress: prometheus.NewDesc(name("reconciles_in_progress"),
			"Resources a worker of any agent sharing the store holds a lease on: reconciles in progress.", nil, nil),
		waiting: prometheus.NewDesc(name("resources_waiting"),
			"Resources waiting on other resources: dependencies to become ready, or dependents to be destroyed.",
			nil, nil),
		lastApplied: prometheus.NewDesc(name("source_last_applied_timestamp_seconds"),
			"Unix time at which the source's last applied revision was applied; absent until a revision is applied.",
			[]string{"source"}, nil),
		sourcePhase: prometheus.NewDesc(name("source_phase"),
			"Each stored source's phase: 1 for the phase it is in, 0 for the others "+
				"(pending, ready, failed, stalled, orphaned: no longer configured, pruning).",
			[]string{"source", "phase"}, nil),
		sourceInfo: prometheus.NewDesc(name("source_info"),
			"Always 1, one series per stored source: its kind (git, dir, api) and phase, to join on.",
			[]string{"source", "kind", "phase"}, nil),
		sourceReady: prometheus.NewDesc(name("source_ready"),
			"1 when the source's last sync applied its revision (phase ready), 0 otherwise: "+
				"failing, refused by the prune guard, pending, orphaned or pruning.",
			[]string{"source"}, nil),
	}
}

// errNoStats reports a Source that returned neither counts nor an error.
var errNoStats = errors.New("no counts returned")

// unixSeconds is t as seconds since the Unix epoch, with its fraction.
func unixSeconds(t time.Time) float64 {
	return float64(t.Unix()) + float64(t.Nanosecond())/1e9
}

// Describe implements prometheus.Collector.
func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.resources, c.queueDepth, c.inProgress, c.waiting, c.lastApplied, c.sourcePhase,
		c.sourceInfo, c.sourceReady, c.sourceSusp, c.suspended, c.resInfo, c.resReady, c.resDropped, c.agents} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()

	up := 1.0
	fail := func(read string, err error) {
		up = 0
		c.log.Warn("metrics cannot read the store", "read", read, "error", err, "timeout", c.timeout)
	}
	if stats, err := c.src.Stats(ctx); err != nil || stats == nil {
		fail("stats", cmp.Or(err, errNoStats))
	} else {
		c.collectStats(ch, stats.ByPhase, stats.Due, stats.Leased, stats.Waiting)
		ch <- prometheus.MustNewConstMetric(c.suspended, prometheus.GaugeValue, float64(stats.Suspended))
		if states, err := c.resourceStates(ctx); err != nil {
			fail("resource states", err)
		} else {
			c.collectResources(ch, states, stats)
		}
	}
	if sources, err := c.src.ListSources(ctx); err != nil {
		fail("sources", err)
	} else {
		for _, s := range sources {
			ch <- prometheus.MustNewConstMetric(c.sourceInfo, prometheus.GaugeValue, 1, s.Name, string(s.Kind), string(s.Phase))
			ready := 0.0
			if s.Phase == store.SourceReady {
				ready = 1
			}
			ch <- prometheus.MustNewConstMetric(c.sourceReady, prometheus.GaugeValue, ready, s.Name)
			suspended := 0.0
			if s.SuspendedBy != "" {
				suspended = 1
			}
			ch <- prometheus.MustNewConstMetric(c.sourceSusp, prometheus.GaugeValue, suspended, s.Name)
			for _, p := range store.SourcePhases() {
				v := 0.0
				if s.Phase == p {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(c.sourcePhase, prometheus.GaugeValue, v, s.Name, string(p))
			}
			if s.LastAppliedTime == nil || s.LastAppliedTime.IsZero() {
				continue
			}
			ch <- prometheus.MustNewConstMetric(c.lastApplied, prometheus.GaugeValue,
				unixSeconds(*s.LastAppliedTime), s.Name)
		}
	}
	if agents, err := c.src.ListAgents(ctx); err != nil {
		fail("agents", err)
	} else {
		n := map[store.AgentState]int{}
		for _, a := range agents {
			// The store's clock wrote LastSeenAt; this one is close enough
			// for a threshold of several heartbeats.
			n[a.State(time.Now())]++
		}
		for _, st := range []store.AgentState{store.AgentAlive, store.AgentStopped, store.AgentGone} {
			ch <- prometheus.MustNewConstMetric(c.agents, prometheus.GaugeValue, float64(n[st]), string(st))
		}
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
}

// collectStats reports the resource counts. Every known phase is reported,
// and any other phase the store counts as well.
func (c *storeCollector) collectStats(ch chan<- prometheus.Metric, byPhase map[manifest.Phase]int, due, leased, waiting int) {
	phases := manifest.Phases()
	for p := range byPhase {
		if !slices.Contains(phases, p) {
			phases = append(phases, p)
		}
	}
	for _, p := range phases {
		ch <- prometheus.MustNewConstMetric(c.resources, prometheus.GaugeValue, float64(byPhase[p]), string(p))
	}
	ch <- prometheus.MustNewConstMetric(c.queueDepth, prometheus.GaugeValue, float64(due))
	ch <- prometheus.MustNewConstMetric(c.inProgress, prometheus.GaugeValue, float64(leased))
	ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(waiting))
}

// resourceStates returns the resources' states as read at most c.every
// ago: at thousands of resources, reading and sending them all at every
// scrape would cost more than the scrape is worth.
func (c *storeCollector) resourceStates(ctx context.Context) ([]store.ResourceState, error) {
	if c.limit < 0 {
		return []store.ResourceState{}, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.states != nil && time.Since(c.statesAt) < c.every {
		return c.states, nil
	}
	states, err := c.src.ResourceStates(ctx, c.limit)
	if err != nil {
		return nil, err
	}
	if states == nil {
		states = []store.ResourceState{}
	}
	c.states, c.statesAt = states, time.Now()
	return states, nil
}

// collectResources reports one info and one ready series per resource, and
// how many resources the limit left out.
func (c *storeCollector) collectResources(ch chan<- prometheus.Metric, states []store.ResourceState, stats *store.Stats) {
	for _, s := range states {
		ch <- prometheus.MustNewConstMetric(c.resInfo, prometheus.GaugeValue, 1,
			s.Kind, s.Namespace, s.Name, s.Source, s.Action, string(s.Phase), strconv.FormatBool(s.Suspended))
		ready := 0.0
		if s.Ready {
			ready = 1
		}
		ch <- prometheus.MustNewConstMetric(c.resReady, prometheus.GaugeValue, ready, s.Kind, s.Namespace, s.Name)
	}
	total := 0
	for _, n := range stats.ByPhase {
		total += n
	}
	ch <- prometheus.MustNewConstMetric(c.resDropped, prometheus.GaugeValue, float64(max(0, total-len(states))))
}
