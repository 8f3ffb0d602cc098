package dashboard

import (
	"cmp"
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

// attentionLimit is how many items the overview's "needs attention" list
// shows; the rest are a link away.
const attentionLimit = 20

// severity orders states from the most to the least urgent: the overview
// lists trouble first, and the graph colours by it.
type severity int

const (
	sevFailing severity = iota
	// sevStalled: nothing moves until someone acts (a refused sync, an
	// orphaned source or its resources).
	sevStalled
	sevSuspended
	// sevWaiting: in progress or queued; it should settle by itself.
	sevWaiting
	sevReady
)

// String is the word the overview shows for the severity.
func (s severity) String() string {
	return [...]string{"failing", "stalled", "suspended", "waiting", "ready"}[s]
}

// resourceSeverity says how urgent a resource's state is.
func resourceSeverity(r *store.Resource) severity {
	switch {
	case r.Phase == manifest.PhaseFailed:
		return sevFailing
	case r.Orphaned:
		return sevStalled
	case r.Suspended():
		return sevSuspended
	case r.Phase != manifest.PhaseReady || r.ObservedGeneration < r.Generation:
		return sevWaiting
	}
	return sevReady
}

// sourceSeverity says how urgent a source's state is.
func sourceSeverity(s *store.Source) severity {
	switch {
	case s.Phase == store.SourceFailed:
		return sevFailing
	case s.Phase == store.SourceStalled || s.Phase == store.SourceOrphaned:
		return sevStalled
	case s.SuspendedBy != "":
		return sevSuspended
	case s.Phase != store.SourceReady:
		return sevWaiting
	}
	return sevReady
}

// sortKeys are the columns the resource list sorts by, with the direction
// each starts in when chosen.
var sortKeys = map[string]string{"name": "asc", "kind": "asc", "source": "asc", "status": "asc", "updated": "desc"}

// defaultSort lists trouble first.
const defaultSort = "status"

// query is what the overview's address asks for: the resource filter,
// the order and the page.
type query struct {
	Q, Kind, Status, Source, Namespace string
	// Labels are key=value pairs the resources must all carry.
	Labels    []string
	Sort, Dir string
	// After is the ID of the resource the page starts after, in the
	// chosen order; zero for the first page.
	After int64
}

// active reports whether the query filters anything.
func (q query) active() bool {
	return q.Q != "" || q.Kind != "" || q.Status != "" || q.Source != "" || q.Namespace != "" || len(q.Labels) > 0
}

// url returns the overview's address for q, leaving out what is default.
func (q query) url() string {
	v := url.Values{}
	set := func(k, val string) {
		if val != "" {
			v.Set(k, val)
		}
	}
	set("q", q.Q)
	set("kind", q.Kind)
	set("namespace", q.Namespace)
	set("status", q.Status)
	set("source", q.Source)
	for _, l := range q.Labels {
		v.Add("label", l)
	}
	sort := cmp.Or(q.Sort, defaultSort)
	if sort != defaultSort {
		v.Set("sort", sort)
	}
	if q.Dir != "" && q.Dir != sortKeys[sort] {
		v.Set("dir", q.Dir)
	}
	if q.After > 0 {
		v.Set("after", strconv.FormatInt(q.After, 10))
	}
	if len(v) == 0 {
		return "/"
	}
	return "/?" + v.Encode()
}

// parseQuery reads the overview's query, or says what is wrong with it in
// a sentence for the error page.
func parseQuery(v url.Values) (query, error) {
	q := query{Q: strings.TrimSpace(v.Get("q")), Kind: v.Get("kind"), Source: v.Get("source"),
		Status: v.Get("status"), Namespace: v.Get("namespace"), Sort: cmp.Or(v.Get("sort"), defaultSort), Dir: v.Get("dir")}
	if q.Status != "" && !manifest.Phase(q.Status).Valid() {
		return q, fmt.Errorf("Unknown status %q: use one of %s.", q.Status, strings.Join(phaseNames(), ", "))
	}
	if q.Namespace != "" && !manifest.ValidNamespace(q.Namespace) {
		return q, fmt.Errorf("Bad namespace %q: %s.", q.Namespace, strings.Join(manifest.NamespaceProblems(q.Namespace), "; "))
	}
	for _, l := range v["label"] {
		if l = strings.TrimSpace(l); l == "" {
			continue // the form's empty field
		}
		if k, _, ok := strings.Cut(l, "="); !ok || k == "" {
			return q, fmt.Errorf("Bad label filter %q: want key=value.", l)
		}
		q.Labels = append(q.Labels, l)
	}
	start, ok := sortKeys[q.Sort]
	if !ok {
		return q, fmt.Errorf("Unknown sort %q: use one of name, kind, source, status, updated.", q.Sort)
	}
	switch q.Dir {
	case "":
		q.Dir = start
	case "asc", "desc":
	default:
		return q, fmt.Errorf("Unknown sort direction %q: use asc or desc.", q.Dir)
	}
	if a := v.Get("after"); a != "" {
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil || n < 0 {
			return q, fmt.Errorf("Bad page cursor %q: want a resource id.", a)
		}
		q.After = n
	}
	return q, nil
}

// matches reports whether r passes q's filter.
func (q query) matches(r *store.Resource) bool {
	if q.Kind != "" && r.Kind != q.Kind || q.Source != "" && r.Source.Name != q.Source ||
		q.Status != "" && string(r.Phase) != q.Status || q.Namespace != "" && r.Namespace != q.Namespace {
		return false
	}
	for _, l := range q.Labels {
		k, val, _ := strings.Cut(l, "=")
		if got, ok := r.Labels[k]; !ok || got != val {
			return false
		}
	}
	return q.Q == "" || containsFold(r.Name, q.Q) || containsFold(r.Kind, q.Q) || containsFold(r.Ref().String(), q.Q)
}

// containsFold reports whether sub is in s, ignoring case.
func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// sortResources orders rs by key in direction dir. Ties fall to the kind,
// the name and finally the ID, so that the order is total and a page's
// cursor finds its place again.
func sortResources(rs []*store.Resource, key, dir string) {
	byRef := func(a, b *store.Resource) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	}
	var c func(a, b *store.Resource) int
	switch key {
	case "name":
		c = func(a, b *store.Resource) int { return cmp.Or(cmp.Compare(a.Name, b.Name), byRef(a, b)) }
	case "kind":
		c = byRef
	case "source":
		c = func(a, b *store.Resource) int { return cmp.Or(cmp.Compare(a.Source.Name, b.Source.Name), byRef(a, b)) }
	case "status":
		c = func(a, b *store.Resource) int {
			return cmp.Or(cmp.Compare(resourceSeverity(a), resourceSeverity(b)),
				cmp.Compare(slices.Index(manifest.Phases(), a.Phase), slices.Index(manifest.Phases(), b.Phase)), byRef(a, b))
		}
	case "updated":
		c = func(a, b *store.Resource) int { return cmp.Or(a.UpdatedAt.Compare(b.UpdatedAt), byRef(a, b)) }
	default:
		panic("dashboard: unknown sort key " + key)
	}
	slices.SortFunc(rs, func(a, b *store.Resource) int {
		n := cmp.Or(c(a, b), cmp.Compare(a.ID, b.ID))
		if dir == "desc" {
			return -n
		}
		return n
	})
}

// sortLink is a column heading's link that sorts by it.
type sortLink struct {
	Text, URL, Hint string
	Active          bool
	// Arrow shows the direction of the active sort.
	Arrow string
}

// tableHead is a column heading of the resource table.
type tableHead struct {
	Label string
	Links []sortLink
	// ARIASort is the column's aria-sort, when the list is sorted by it.
	ARIASort string
}

// resourceTable is the resource table: its rows and, on the overview,
// headings that sort it.
type resourceTable struct {
	Rows  []resourceRow
	Heads []tableHead
}

// plainHeads are the headings of a table that does not sort.
func plainHeads() []tableHead {
	var out []tableHead
	for _, l := range []string{"Resource", "Namespace", "Status", "Ready", "Generation", "Action", "Source", "Last reconcile"} {
		out = append(out, tableHead{Label: l})
	}
	return out
}

// sortHeads are the overview's headings, linking to the list sorted by
// their column: the active column's link turns the direction round, the
// others start in their usual direction. They keep the filter and go back
// to the first page.
func sortHeads(q query) []tableHead {
	link := func(key, text string) sortLink {
		next := q
		next.After = 0
		next.Sort, next.Dir = key, sortKeys[key]
		l := sortLink{Text: text, Hint: "sort by " + text}
		if q.Sort == key {
			l.Active = true
			l.Arrow = map[string]string{"asc": "▲", "desc": "▼"}[q.Dir]
			next.Dir = map[string]string{"asc": "desc", "desc": "asc"}[q.Dir]
		}
		l.URL = next.url()
		return l
	}
	heads := plainHeads()
	heads[0] = tableHead{Links: []sortLink{link("kind", "Kind"), link("name", "Name")}}
	heads[2] = tableHead{Links: []sortLink{link("status", "Status")}}
	heads[6] = tableHead{Links: []sortLink{link("source", "Source")}}
	heads[7] = tableHead{Label: "Last reconcile", Links: []sortLink{link("updated", "changed")}}
	aria := map[string]string{"asc": "ascending", "desc": "descending"}[q.Dir]
	for i, h := range heads {
		for _, l := range h.Links {
			if l.Active {
				heads[i].ARIASort = aria
			}
		}
	}
	return heads
}

// filter is the resource filter of the overview, as its form shows it.
type filter struct {
	query
	Kinds, Phases, Sources []string
	// Labels are the form's label fields: at least one, empty to add one.
	LabelFields []string
	Active      bool
	ClearURL    string
}

// count is one figure of the overview's summary.
type count struct {
	Label string
	// Phase is set for the counts of a phase: it colours them and gives
	// them its icon. Class colours the counts of a flag (suspended,
	// orphaned), which have no icon: they are not states of their own.
	Phase, Class string
	Count        int
	URL          string
	Active       bool
	Hint         string
}

// attention is an item of the overview's "needs attention" list: a source
// or a resource that is not ready.
type attention struct {
	Severity severity
	Source   *store.Source
	Resource *store.Resource
	Why      attentionWhy
}

// attentionWhy explains why a source or a resource is not ready: the
// agent's computed explanation (Computed: the reason, the dependency chain
// down to the root cause, who suspended it), with what the list shows
// beside it: its phase, reason and message, and for a resource the
// dependencies it waits on.
type attentionWhy struct {
	// Computed is the agent's explanation; nil when it has none.
	Computed *why.Why
	// Phase is the phase as stored; Reason a short cause when there is
	// one beyond the phase.
	Phase, Reason, Message string
	// Problems are a source's first errors; MoreProblems counts the rest.
	Problems     []manifest.Problem
	MoreProblems int
	// Suspended says by whom, when it is.
	Suspended string
	// Orphaned names the source no configuration lists any more.
	Orphaned string
	// WaitsOn are the dependencies that are not ready, or do not exist.
	WaitsOn []dependency
}

// resourceWhy explains a resource's state from its own fields and its
// direct dependencies (byRef maps every resource by reference). It is the
// one place that does, so that a computed explanation can replace it.
func resourceWhy(r *store.Resource, byRef map[manifest.ObjectRef]*store.Resource, world why.World, now time.Time) attentionWhy {
	w := attentionWhy{Computed: why.ForResource(why.FromStore(r), world, now), Phase: string(r.Phase), Message: r.StatusMessage, Suspended: r.SuspendedBy()}
	if c := manifest.FindCondition(r.Conditions, manifest.ConditionReady); c != nil && c.Status != manifest.ConditionTrue {
		w.Reason = c.Reason
		if w.Message == "" {
			w.Message = c.Message
		}
	}
	if r.Orphaned {
		w.Orphaned = r.Source.Name
	}
	for _, ref := range r.DependsOn {
		d, ok := byRef[ref]
		switch {
		case !ok:
			w.WaitsOn = append(w.WaitsOn, dependency{Ref: ref})
		case resourceSeverity(d) != sevReady:
			row := resourceRows([]*store.Resource{d})[0]
			w.WaitsOn = append(w.WaitsOn, dependency{Ref: ref, Resource: &row})
		}
	}
	return w
}

// sourceWhy explains a source's state.
func sourceWhy(s *store.Source) attentionWhy {
	w := attentionWhy{Computed: why.ForSource(s), Phase: string(s.Phase), Message: s.Message, Suspended: s.SuspendedBy, Problems: s.Errors}
	if len(w.Problems) > overviewErrors {
		w.MoreProblems = len(w.Problems) - overviewErrors
		w.Problems = w.Problems[:overviewErrors]
	}
	return w
}

// needsAttention lists the sources and resources that are not ready, the
// most urgent first; sources come before resources of the same urgency, as
// a source's trouble is often the cause of theirs.
func needsAttention(sources []*store.Source, rs []*store.Resource, byRef map[manifest.ObjectRef]*store.Resource,
	agents []*store.Agent, now time.Time) []attention {
	world := &listWorld{byRef: byRef, sources: map[string]*store.Source{}, agents: map[string]*store.Agent{}}
	for _, s := range sources {
		world.sources[s.Name] = s
	}
	for _, a := range agents {
		world.agents[a.ID] = a
	}
	var out []attention
	for _, s := range sources {
		if sev := sourceSeverity(s); sev != sevReady {
			out = append(out, attention{Severity: sev, Source: s, Why: sourceWhy(s)})
		}
	}
	for _, r := range rs {
		if sev := resourceSeverity(r); sev != sevReady {
			out = append(out, attention{Severity: sev, Resource: r, Why: resourceWhy(r, byRef, world, now)})
		}
	}
	slices.SortStableFunc(out, func(a, b attention) int {
		isResource := func(x attention) int {
			if x.Source == nil {
				return 1
			}
			return 0
		}
		return cmp.Or(cmp.Compare(a.Severity, b.Severity), cmp.Compare(isResource(a), isResource(b)))
	})
	return out
}

// listWorld looks an explanation's resources, sources and agents up in
// the lists the overview read.
type listWorld struct {
	byRef   map[manifest.ObjectRef]*store.Resource
	sources map[string]*store.Source
	agents  map[string]*store.Agent
}

func (w *listWorld) Resource(ref manifest.ObjectRef) *why.Resource {
	if r := w.byRef[ref]; r != nil {
		return why.FromStore(r)
	}
	return nil
}

func (w *listWorld) Source(name string) *store.Source { return w.sources[name] }

func (w *listWorld) Agent(id string) *store.Agent { return w.agents[id] }

type overviewPage struct {
	base
	SourceCounts []count
	Counts       []count
	Queue        []count
	// Attention lists what is not ready, the most urgent first, cut at
	// attentionLimit; MoreAttention counts the rest.
	Attention     []attention
	MoreAttention int
	// AttentionURL lists every resource, trouble first.
	AttentionURL string
	Sources      []sourceRow
	Resources    resourceTable
	Filter       filter
	// Total is how many resources pass the filter; From and To number the
	// rows of this page, from 1.
	Total, From, To int
	// LostCursor is true when the resource the page was to start after is
	// gone from the list, so that it starts over.
	LostCursor bool
	// FirstURL and NextURL page through.
	FirstURL string
	NextURL  string
	// GraphURL draws the filtered resources' dependencies.
	GraphURL string
}

// overview serves GET /: what needs attention, counts of sources and
// resources, the sources, and a page of resources, searched and sorted.
// It reads every resource: the counts, the list of trouble and the search
// all need them.
func (h *handler) overview(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.Query())
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err.Error())
		return
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
	all, err := h.store.ListResources(ctx, store.ResourceFilter{})
	if err != nil {
		h.storeFailed(w, r, err)
		return
	}
	byRef := make(map[manifest.ObjectRef]*store.Resource, len(all))
	for _, res := range all {
		byRef[res.Ref()] = res
	}

	p := overviewPage{base: h.base(r, "Overview")}
	p.Filter = filter{query: q, Phases: phaseNames(), Active: q.active(), LabelFields: q.Labels,
		ClearURL: query{Sort: q.Sort, Dir: q.Dir}.url()}
	if len(p.Filter.LabelFields) == 0 {
		p.Filter.LabelFields = []string{""}
	}
	for _, t := range types {
		p.Filter.Kinds = append(p.Filter.Kinds, t.Name)
	}
	for _, s := range sources {
		p.Filter.Sources = append(p.Filter.Sources, s.Name)
	}
	p.Filter.Sources = append(p.Filter.Sources, store.APISource)
	// The form must be able to show the current choice even when nothing
	// of it exists (any more).
	p.Filter.Kinds = withValue(p.Filter.Kinds, q.Kind)
	p.Filter.Sources = withValue(p.Filter.Sources, q.Source)

	p.SourceCounts = sourceCounts(sources)
	// A phase's count is active when the list is filtered by that phase
	// alone.
	rest := q
	rest.Status = ""
	total := 0
	for _, ph := range manifest.Phases() {
		n := stats.ByPhase[ph]
		total += n
		p.Counts = append(p.Counts, count{Label: string(ph), Phase: string(ph), Count: n,
			URL: query{Status: string(ph)}.url(), Active: q.Status == string(ph) && !rest.active()})
	}
	// The counts are of all resources, so they link to unfiltered lists.
	p.Counts = append([]count{{Label: "resources", Count: total, URL: "/",
		Active: !q.active(), Hint: "all resources"}}, p.Counts...)
	orphaned := 0
	for _, res := range all {
		if res.Orphaned {
			orphaned++
		}
	}
	p.Counts = append(p.Counts,
		count{Label: "suspended", Class: "warn", Count: stats.Suspended, Hint: "suspended: not reconciled until resumed"},
		count{Label: "orphaned", Class: "warn", Count: orphaned, Hint: "their source is in no agent's configuration: left untouched"})
	p.Queue = []count{
		{Label: "due", Count: stats.Due, Hint: "due for a reconcile, waiting for a free worker"},
		{Label: "in progress", Count: stats.Leased, Hint: "held by a worker now"},
		{Label: "waiting", Count: stats.Waiting, Hint: "waiting on dependencies or dependents"},
	}

	agents, err := h.store.ListAgents(r.Context())
	if err != nil {
		h.storeFailed(w, r, err)
		return
	}
	p.Attention = needsAttention(sources, all, byRef, agents, h.now())
	if len(p.Attention) > attentionLimit {
		p.MoreAttention = len(p.Attention) - attentionLimit
		p.Attention = p.Attention[:attentionLimit]
	}
	p.AttentionURL = query{}.url() + "#resources"

	for _, s := range sources {
		row := sourceRow{Source: s, Errors: s.Errors}
		if len(row.Errors) > overviewErrors {
			row.MoreErrors = len(row.Errors) - overviewErrors
			row.Errors = row.Errors[:overviewErrors]
		}
		p.Sources = append(p.Sources, row)
	}

	var rs []*store.Resource
	for _, res := range all {
		if q.matches(res) {
			rs = append(rs, res)
		}
	}
	sortResources(rs, q.Sort, q.Dir)
	p.Total = len(rs)
	start := 0
	if q.After > 0 {
		i := slices.IndexFunc(rs, func(res *store.Resource) bool { return res.ID == q.After })
		if i < 0 {
			// The resource the page started after was deleted, or no
			// longer passes the filter: its place is lost.
			p.LostCursor = true
		}
		start = i + 1
		first := q
		first.After = 0
		p.FirstURL = first.url()
	}
	page := rs[start:min(len(rs), start+h.pageSize)]
	if start+len(page) < len(rs) {
		next := q
		next.After = page[len(page)-1].ID
		p.NextURL = next.url()
	}
	p.From, p.To = start+1, start+len(page)
	p.Resources = resourceTable{Rows: resourceRows(page), Heads: sortHeads(q)}
	p.GraphURL = graphQuery{Q: q.Q, Kind: q.Kind, Source: q.Source, Status: q.Status}.url()
	h.render(w, r, http.StatusOK, "overview", p)
}

// sourceCounts are the summary's figures of the sources: all, then by
// state. A state that no source is in is counted all the same, so that
// "0 failing" reads as plainly as "2 failing".
func sourceCounts(sources []*store.Source) []count {
	n := map[string]int{}
	for _, s := range sources {
		switch s.Phase {
		case store.SourceReady:
			n["ready"]++
		case store.SourceFailed:
			n["failing"]++
		case store.SourceStalled:
			n["stalled"]++
		case store.SourceOrphaned, store.SourcePruning:
			n["orphaned"]++
		default:
			n["pending"]++
		}
		if s.SuspendedBy != "" {
			n["suspended"]++
		}
	}
	out := []count{{Label: "sources", Count: len(sources), URL: "#sources", Hint: "all sources"}}
	for _, c := range []struct{ label, phase, hint string }{
		{"ready", "ready", "synced the last revision they fetched"},
		{"failing", "failed", "the last sync failed"},
		{"stalled", "stalled", "refused to sync until someone acts, e.g. past the prune guard"},
		{"pending", "pending", "not synced yet"},
		// A suspended source is in one of the phases as well: suspended
		// is a flag, counted apart, without a phase's icon.
		{"suspended", "", "neither fetched nor synced until resumed"},
		{"orphaned", "orphaned", "in no agent's configuration any more (or being pruned)"},
	} {
		if c.label == "pending" && n[c.label] == 0 {
			continue // a passing state: shown only while it lasts
		}
		k := count{Label: c.label, Phase: c.phase, Count: n[c.label], Hint: c.hint}
		if c.phase == "" {
			k.Class = "warn"
		}
		out = append(out, k)
	}
	return out
}
