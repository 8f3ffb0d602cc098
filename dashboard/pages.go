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

// dependency is one entry of a resource's dependsOn.
type dependency struct {
	Ref manifest.ObjectRef
	// Resource is the resource it names, nil when none exists.
	Resource *resourceRow
}

type resourcePage struct {
	base
	R resourceRow
	// Actions are those the caller may take on the resource.
	Actions    []actionButton
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
	// Extras explain the resource: see explainResource.
	Extras resourceExtras
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
	p := resourcePage{base: h.base(r, res.Ref().String()), R: resourceRows([]*store.Resource{res})[0],
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
	// The page shows the state of its dependencies and dependents too.
	ids := []string{strconv.FormatInt(id, 10)}
	for _, d := range p.DependsOn {
		if d.Resource != nil {
			ids = append(ids, strconv.FormatInt(d.Resource.ID, 10))
		}
	}
	for _, d := range p.Dependents {
		ids = append(ids, strconv.FormatInt(d.ID, 10))
	}
	p.WatchIDs = strings.Join(ids, " ")
	p.Actions = h.resourceActions(r, res)
	if p.Why, err = h.explain(r, res); err != nil {
		h.storeFailed(w, r, err)
		return
	}
	if err := h.explainResource(ctx, r.URL.Query(), res, &p); err != nil {
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
	// Actions are those the caller may take on the source.
	Actions []actionButton
	// Pseudo is true for the API's pseudo-source, which has no stored state.
	Pseudo       bool
	History      []*store.SyncRecord
	HistoryLimit int
	// Notices are the last notifications about the source and its
	// resources, newest first.
	Notices       []*store.Notice
	Resources     resourceTable
	MoreResources bool
	// AllURL lists all the source's resources on the overview.
	AllURL string
	// Why explains why the source is not ready; nil when it is.
	Why *why.Why
	// Extras explain the source: see explainSource.
	Extras sourceExtras
}

// source serves GET /sources/{name}.
func (h *handler) source(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ctx := r.Context()
	p := sourcePage{base: h.base(r, "Source "+name), HistoryLimit: syncHistoryLimit,
		AllURL: query{Source: name}.url()}
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
	p.Resources = resourceTable{Rows: resourceRows(rs), Heads: plainHeads()}
	if p.Events != "" {
		// The source's own events and its resources'.
		p.Events += "?" + url.Values{"source": {name}}.Encode()
	}
	if !p.Pseudo {
		p.Actions = h.sourceActions(r, s)
	}
	h.explainSource(&p)
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
