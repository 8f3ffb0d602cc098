package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
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
	// Extras explain the source: see explainSource.
	Extras sourceExtras
}

// source serves GET /sources/{name}.
func (h *handler) source(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ctx := r.Context()
	p := sourcePage{base: h.base("Source " + name), HistoryLimit: syncHistoryLimit,
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
	h.explainSource(&p)
	h.render(w, r, http.StatusOK, "source", p)
}
