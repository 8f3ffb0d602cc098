package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/why"
)

// resourceRow is a resource as a list shows it.
type resourceRow struct {
	*store.Resource
	// Ready is the Ready condition, nil when the resource has none yet.
	Ready *manifest.Condition
	// Behind is true while the desired generation is not reconciled yet.
	Behind bool
}

func resourceRows(rs []*store.Resource) []resourceRow {
	out := make([]resourceRow, len(rs))
	for i, r := range rs {
		out[i] = resourceRow{Resource: r, Ready: manifest.FindCondition(r.Conditions, manifest.ConditionReady),
			Behind: r.ObservedGeneration < r.Generation}
	}
	return out
}

// sourceRow is a source as the overview shows it: its first errors only.
type sourceRow struct {
	*store.Source
	Errors     []manifest.Problem
	MoreErrors int
}

// count is one figure of the overview's summary.
type count struct {
	Label string
	// Phase is set for the counts of a phase, which link to their filter.
	Phase  string
	Count  int
	URL    string
	Active bool
	Hint   string
}

// filter is the resource filter of the overview, as its form shows it.
type filter struct {
	Kind, Status, Source string
	// Namespace selects the resources of one namespace; empty, all.
	Namespace     string
	Kinds, Phases []string
	Sources       []string
	Active        bool
}

type overviewPage struct {
	base
	Counts    []count
	Queue     []count
	Sources   []sourceRow
	Resources []resourceRow
	Filter    filter
	// After is the cursor of this page; FirstURL and NextURL page through.
	After    int64
	FirstURL string
	NextURL  string
}

// overview serves GET /: counts, sources and a page of resources.
func (h *handler) overview(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.ResourceFilter{Kind: q.Get("kind"), Source: q.Get("source"), Limit: h.pageSize + 1}
	if s := q.Get("status"); s != "" {
		f.Phase = manifest.Phase(s)
		if !f.Phase.Valid() {
			h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("Unknown status %q: use one of %s.", s, strings.Join(phaseNames(), ", ")))
			return
		}
	}
	if ns := q.Get("namespace"); ns != "" {
		if !manifest.ValidNamespace(ns) {
			h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("Bad namespace %q: %s.", ns, strings.Join(manifest.NamespaceProblems(ns), "; ")))
			return
		}
		f.Namespaces = []string{ns}
	}
	if a := q.Get("after"); a != "" {
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil || n < 0 {
			h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("Bad page cursor %q: want a resource id.", a))
			return
		}
		f.After = n
	}
	ctx := r.Context()
	stats, err := h.store.Stats(ctx)
	if err != nil {
		h.storeFailed(w, r, err)
		return
	}
	sources, err := h.store.ListSources(ctx)
	if err != nil {
		h.storeFailed(w, r, err)
		return
	}
	types, err := h.store.ListResourceTypes(ctx, store.TypeFilter{})
	if err != nil {
		h.storeFailed(w, r, err)
		return
	}
	rs, err := h.store.ListResources(ctx, f)
	if err != nil {
		h.storeFailed(w, r, err)
		return
	}

	p := overviewPage{base: h.base("Overview"), After: f.After}
	ns := q.Get("namespace")
	p.Filter = filter{Kind: f.Kind, Status: string(f.Phase), Source: f.Source, Namespace: ns, Phases: phaseNames(),
		Active: f.Kind != "" || f.Phase != "" || f.Source != "" || ns != ""}
	for _, t := range types {
		p.Filter.Kinds = append(p.Filter.Kinds, t.Name)
	}
	for _, s := range sources {
		p.Filter.Sources = append(p.Filter.Sources, s.Name)
	}
	p.Filter.Sources = append(p.Filter.Sources, store.APISource)
	// The form must be able to show the current choice even when nothing
	// of it exists (any more).
	p.Filter.Kinds = withValue(p.Filter.Kinds, f.Kind)
	p.Filter.Sources = withValue(p.Filter.Sources, f.Source)

	total := 0
	for _, ph := range manifest.Phases() {
		n := stats.ByPhase[ph]
		total += n
		p.Counts = append(p.Counts, count{Label: string(ph), Phase: string(ph), Count: n,
			URL: overviewURL(filter{Status: string(ph)}, 0), Active: f.Phase == ph && f.Kind == "" && f.Source == "" && ns == ""})
	}
	// The counts are of all resources, so they link to unfiltered lists.
	p.Counts = append([]count{{Label: "resources", Count: total, URL: "/",
		Active: !p.Filter.Active, Hint: "all resources"}}, p.Counts...)
	p.Queue = []count{
		{Label: "due", Count: stats.Due, Hint: "due for a reconcile, waiting for a free worker"},
		{Label: "in progress", Count: stats.Leased, Hint: "held by a worker now"},
		{Label: "waiting", Count: stats.Waiting, Hint: "waiting on dependencies or dependents"},
		{Label: "suspended", Count: stats.Suspended, Hint: "suspended: not reconciled until resumed"},
	}

	for _, s := range sources {
		row := sourceRow{Source: s, Errors: s.Errors}
		if len(row.Errors) > overviewErrors {
			row.MoreErrors = len(row.Errors) - overviewErrors
			row.Errors = row.Errors[:overviewErrors]
		}
		p.Sources = append(p.Sources, row)
	}

	if len(rs) > h.pageSize {
		rs = rs[:h.pageSize]
		p.NextURL = overviewURL(p.Filter, rs[len(rs)-1].ID)
	}
	if f.After > 0 {
		p.FirstURL = overviewURL(p.Filter, 0)
	}
	p.Resources = resourceRows(rs)
	h.render(w, r, http.StatusOK, "overview", p)
}

// withValue returns the sorted, distinct values with v among them when v is set.
func withValue(values []string, v string) []string {
	if v != "" {
		values = append(values, v)
	}
	slices.Sort(values)
	return slices.Compact(values)
}

func phaseNames() []string {
	var out []string
	for _, p := range manifest.Phases() {
		out = append(out, string(p))
	}
	return out
}

// overviewURL returns the overview with the given filter and cursor.
func overviewURL(f filter, after int64) string {
	v := url.Values{}
	if f.Kind != "" {
		v.Set("kind", f.Kind)
	}
	if f.Namespace != "" {
		v.Set("namespace", f.Namespace)
	}
	if f.Status != "" {
		v.Set("status", f.Status)
	}
	if f.Source != "" {
		v.Set("source", f.Source)
	}
	if after > 0 {
		v.Set("after", strconv.FormatInt(after, 10))
	}
	if len(v) == 0 {
		return "/"
	}
	return "/?" + v.Encode()
}

// dependency is one entry of a resource's dependsOn.
type dependency struct {
	Ref manifest.ObjectRef
	// Resource is the resource it names, nil when none exists.
	Resource *resourceRow
}

type resourcePage struct {
	base
	R          resourceRow
	DependsOn  []dependency
	Dependents []resourceRow
	// MoreDependents is true when there are more than the page lists.
	MoreDependents bool
	History        []*store.ReconcileRecord
	HistoryLimit   int
	Spec, Outputs  string
	// HolderGone is true when the lease holder missed its heartbeats (or
	// never recorded one): its lease runs out, then another agent takes
	// over. HolderSeen is its last heartbeat, when it had one.
	HolderGone bool
	HolderSeen *time.Time
	// Why explains why the resource is not ready; nil when it is.
	Why *why.Why
}

// resource serves GET /resources/{id}.
func (h *handler) resource(w http.ResponseWriter, r *http.Request) {
	raw := r.PathValue("id")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("Bad resource id %q: want a positive number.", raw))
		return
	}
	ctx := r.Context()
	res, err := h.store.GetResource(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("There is no resource with id %d. It may have been deleted.", id))
		return
	}
	if err != nil {
		h.storeFailed(w, r, err)
		return
	}
	p := resourcePage{base: h.base(res.Ref().String()), R: resourceRows([]*store.Resource{res})[0],
		HistoryLimit: historyLimit, Spec: prettyJSON(res.Spec), Outputs: prettyJSON(res.Outputs)}
	if res.LeaseOwner != "" {
		agents, err := h.store.ListAgents(ctx)
		if err != nil {
			h.storeFailed(w, r, err)
			return
		}
		p.HolderGone = true
		for _, a := range agents {
			if a.ID == res.LeaseOwner {
				seen := a.LastSeenAt
				p.HolderSeen = &seen
				p.HolderGone = time.Since(seen) >= store.AgentGoneAfter
			}
		}
	}

	if len(res.DependsOn) > 0 {
		deps, err := h.store.ListResources(ctx, store.ResourceFilter{Refs: res.DependsOn})
		if err != nil {
			h.storeFailed(w, r, err)
			return
		}
		found := make(map[manifest.ObjectRef]resourceRow, len(deps))
		for _, d := range resourceRows(deps) {
			found[d.Ref()] = d
		}
		for _, ref := range res.DependsOn {
			dep := dependency{Ref: ref}
			if d, ok := found[ref]; ok {
				dep.Resource = &d
			}
			p.DependsOn = append(p.DependsOn, dep)
		}
	}
	ref := res.Ref()
	dependents, err := h.store.ListResources(ctx, store.ResourceFilter{DependsOn: &ref, Limit: dependentsLimit + 1})
	if err != nil {
		h.storeFailed(w, r, err)
		return
	}
	if len(dependents) > dependentsLimit {
		dependents, p.MoreDependents = dependents[:dependentsLimit], true
	}
	p.Dependents = resourceRows(dependents)

	if p.History, err = h.store.ListReconcileRecords(ctx, id, historyLimit); err != nil {
		h.storeFailed(w, r, err)
		return
	}
	if p.Why, err = h.explain(r, res); err != nil {
		h.storeFailed(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "resource", p)
}

// noticeLimit is how many notifications a source page shows.
const noticeLimit = 20

type sourcePage struct {
	base
	S *store.Source
	// Pseudo is true for the API's pseudo-source, which has no stored state.
	Pseudo       bool
	History      []*store.SyncRecord
	HistoryLimit int
	// Notices are the last notifications about the source and its
	// resources, newest first.
	Notices       []*store.Notice
	Resources     []resourceRow
	MoreResources bool
	// AllURL lists all the source's resources on the overview.
	AllURL string
	// Why explains why the source is not ready; nil when it is.
	Why *why.Why
}

// source serves GET /sources/{name}.
func (h *handler) source(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ctx := r.Context()
	p := sourcePage{base: h.base("Source " + name), HistoryLimit: syncHistoryLimit,
		AllURL: overviewURL(filter{Source: name}, 0)}
	s, err := h.store.GetSource(ctx, name)
	switch {
	case errors.Is(err, store.ErrNotFound) && name == store.APISource:
		// Resources created through the HTTP API belong to a source that
		// never syncs: show its resources all the same.
		s, p.Pseudo = &store.Source{Name: name, Kind: store.SourceAPI}, true
	case errors.Is(err, store.ErrNotFound):
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("There is no source named %q.", name))
		return
	case err != nil:
		h.storeFailed(w, r, err)
		return
	}
	p.S = s
	if !p.Pseudo {
		p.Why = why.ForSource(s)
	}
	if !p.Pseudo {
		if p.History, err = h.store.ListSyncRecords(ctx, name, syncHistoryLimit); err != nil {
			h.storeFailed(w, r, err)
			return
		}
	}
	if p.Notices, err = h.store.ListNotices(ctx, name, noticeLimit); err != nil {
		h.storeFailed(w, r, err)
		return
	}
	rs, err := h.store.ListResources(ctx, store.ResourceFilter{Source: name, Limit: h.pageSize + 1})
	if err != nil {
		h.storeFailed(w, r, err)
		return
	}
	if len(rs) > h.pageSize {
		rs, p.MoreResources = rs[:h.pageSize], true
	}
	p.Resources = resourceRows(rs)
	h.render(w, r, http.StatusOK, "source", p)
}

// explain returns why res is not ready: as Options.Why says, or else from
// the store.
func (h *handler) explain(r *http.Request, res *store.Resource) (*why.Why, error) {
	if !why.Explained(res) {
		return nil, nil
	}
	if h.why != nil {
		// The read model may be a moment behind the store, or being
		// built: then the store answers.
		if out, err := h.why(r, res.ID); err == nil {
			return out, nil
		}
	}
	w := &storeWorld{ctx: r.Context(), st: h.store}
	out := why.ForResource(why.FromStore(res), w, h.now())
	return out, w.err
}

// storeWorld looks an explanation's resources, source and agents up in the
// store, for a dashboard that has no read model to ask.
type storeWorld struct {
	ctx    context.Context
	st     store.Store
	agents []*store.Agent
	read   bool
	err    error
}

func (w *storeWorld) Resource(ref manifest.ObjectRef) *why.Resource {
	r, err := w.st.GetResourceByName(w.ctx, ref)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) && w.err == nil {
			w.err = err
		}
		return nil
	}
	return why.FromStore(r)
}

func (w *storeWorld) Source(name string) *store.Source {
	s, err := w.st.GetSource(w.ctx, name)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) && w.err == nil {
			w.err = err
		}
		return nil
	}
	return s
}

func (w *storeWorld) Agent(id string) *store.Agent {
	if !w.read {
		w.read = true
		var err error
		if w.agents, err = w.st.ListAgents(w.ctx); err != nil && w.err == nil {
			w.err = err
		}
	}
	for _, a := range w.agents {
		if a.ID == id {
			return a
		}
	}
	return nil
}
