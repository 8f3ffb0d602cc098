package dashboard

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// graphThreshold is how many resources the graph draws one by one before
// it groups them, unless the address says how to group.
const graphThreshold = 200

// The graph's geometry, in SVG user units (CSS pixels at scale 1).
const (
	graphPad   = 16
	nodeW      = 240
	nodeH      = 44
	groupH     = 64
	colGap     = 72
	rowGap     = 16
	labelRunes = 28
	// centreRows is the most rows a graph centres its columns on.
	centreRows = 16
	// wideGraph is the widest picture a phone shows scaled to fit.
	wideGraph   = 700
	arrowMargin = 2
)

// Ways of grouping the graph.
const (
	groupAuto   = ""
	groupNone   = "none"
	groupKind   = "kind"
	groupSource = "source"
)

// graphQuery is what the graph page's address asks for.
type graphQuery struct {
	Q, Kind, Source, Status string
	// Group is groupAuto, groupNone, groupKind or groupSource.
	Group string
	// Focus is the ID of the resource whose dependencies and dependents
	// stand out; zero for none.
	Focus int64
}

func parseGraphQuery(v url.Values) (graphQuery, error) {
	q := graphQuery{Q: strings.TrimSpace(v.Get("q")), Kind: v.Get("kind"), Source: v.Get("source"),
		Status: v.Get("status"), Group: v.Get("group")}
	if q.Status != "" && !manifest.Phase(q.Status).Valid() {
		return q, fmt.Errorf("Unknown status %q: use one of %s.", q.Status, strings.Join(phaseNames(), ", "))
	}
	switch q.Group {
	case groupAuto, groupNone, groupKind, groupSource:
	default:
		return q, fmt.Errorf("Unknown grouping %q: use kind, source or none.", q.Group)
	}
	if f := v.Get("focus"); f != "" {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || n <= 0 {
			return q, fmt.Errorf("Bad focus %q: want a resource id.", f)
		}
		q.Focus = n
	}
	return q, nil
}

func (q graphQuery) url() string {
	v := url.Values{}
	for k, val := range map[string]string{"q": q.Q, "kind": q.Kind, "source": q.Source, "status": q.Status, "group": q.Group} {
		if val != "" {
			v.Set(k, val)
		}
	}
	if q.Focus > 0 {
		v.Set("focus", strconv.FormatInt(q.Focus, 10))
	}
	if len(v) == 0 {
		return "/graph"
	}
	return "/graph?" + v.Encode()
}

func (q graphQuery) matches(r *store.Resource) bool {
	return (q.Kind == "" || r.Kind == q.Kind) && (q.Source == "" || r.Source.Name == q.Source) &&
		(q.Status == "" || string(r.Phase) == q.Status) &&
		(q.Q == "" || containsFold(r.Name, q.Q) || containsFold(r.Kind, q.Q) || containsFold(r.Ref().String(), q.Q))
}

// svgNode is a box of the graph as the page draws it.
type svgNode struct {
	X, Y, W, H int
	// Class colours the box (the badge classes) and marks focus, dimming
	// and missing dependencies.
	Class string
	// Label is the first line, cut to fit; Title the whole of it, for the
	// tooltip; Lines are the smaller lines below.
	Label, Title string
	Lines        []svgLine
	URL          string
	// TextX and LabelY place the first line.
	TextX, LabelY int
}

// svgLine is a line of text below a box's label, at height Y.
type svgLine struct {
	Text string
	Y    int
}

// text sets the node's label and the lines below it, placed in its box.
func (n *svgNode) text(label, title string, lines ...string) {
	n.Label, n.Title = cut(label), title
	n.TextX, n.LabelY = n.X+10, n.Y+18
	for i, l := range lines {
		n.Lines = append(n.Lines, svgLine{Text: l, Y: n.LabelY + 17*(i+1)})
	}
}

// svgEdge is an arrow of the graph.
type svgEdge struct {
	D     string
	Class string
	// Marker is the id of its arrowhead.
	Marker string
	// Label, at (LX, LY), counts the dependencies an arrow between groups
	// stands for.
	Label  string
	LX, LY int
}

// graphView is the graph as the page draws it, with what the page says
// about it.
type graphView struct {
	Width, Height int
	// Wide is true for a picture too wide to read on a phone once
	// scaled to its width: there it keeps a readable size and scrolls
	// within its box.
	Wide  bool
	Nodes []svgNode
	Edges []svgEdge
	// Shown counts the resources drawn (or counted in groups), Total all.
	Shown, Total int
	// GroupedBy is "kind" or "source" when the graph shows groups.
	GroupedBy string
	// AutoGrouped is true when the graph grouped itself for its size.
	AutoGrouped bool
	// Narrowed is true when a focus on a large graph drew only the
	// focused resource's dependencies and dependents.
	Narrowed bool
	// Outside counts dependencies on resources the filter leaves out,
	// which are not drawn; Missing counts dependencies on resources that
	// do not exist, drawn as dashed boxes; Cycles counts the dependencies
	// that close a cycle.
	Outside, Missing, Cycles int
	// Focus is the focused resource, nil when none (or it does not exist);
	// Upstream and Downstream count what it waits on and what waits on it,
	// transitively.
	Focus                *store.Resource
	Upstream, Downstream int
}

// buildGraph lays out the dependency graph of the resources that pass q,
// among all (every resource, so that it can tell a dependency the filter
// leaves out from one that does not exist).
func buildGraph(all []*store.Resource, q graphQuery) graphView {
	v := graphView{Total: len(all)}
	byRef := make(map[manifest.ObjectRef]*store.Resource, len(all))
	byID := make(map[int64]*store.Resource, len(all))
	for _, r := range all {
		byRef[r.Ref()] = r
		byID[r.ID] = r
	}

	// What the focused resource waits on and what waits on it, over every
	// resource: a filter hides boxes, not dependencies.
	var up, down map[int64]bool
	if f := byID[q.Focus]; f != nil {
		v.Focus = f
		up, down = relatives(all, byRef, f)
		v.Upstream, v.Downstream = len(up), len(down)
	}

	var shown []*store.Resource
	for _, r := range all {
		if q.matches(r) || v.Focus != nil && r.ID == v.Focus.ID {
			shown = append(shown, r)
		}
	}
	group := q.Group
	if group == groupAuto && v.Focus != nil && len(shown) > graphThreshold {
		// Too many to draw: draw the focused resource's relatives only.
		var near []*store.Resource
		for _, r := range shown {
			if r.ID == v.Focus.ID || up[r.ID] || down[r.ID] {
				near = append(near, r)
			}
		}
		shown, v.Narrowed = near, true
	}
	if group == groupAuto && len(shown) > graphThreshold {
		group, v.AutoGrouped = groupKind, true
	}
	slices.SortFunc(shown, func(a, b *store.Resource) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	v.Shown = len(shown)
	if group == groupKind || group == groupSource {
		v.GroupedBy = group
		v.groups(shown, byRef, group, q, up, down)
	} else {
		v.resources(shown, byRef, q, up, down)
	}
	return v
}

// relatives returns the IDs of what f waits on (up) and what waits on it
// (down), transitively.
func relatives(all []*store.Resource, byRef map[manifest.ObjectRef]*store.Resource, f *store.Resource) (up, down map[int64]bool) {
	idx := make(map[int64]int, len(all))
	for i, r := range all {
		idx[r.ID] = i
	}
	deps := make([][]int, len(all))
	dependents := make([][]int, len(all))
	for i, r := range all {
		for _, ref := range r.DependsOn {
			if d, ok := byRef[ref]; ok {
				deps[i] = append(deps[i], idx[d.ID])
				dependents[idx[d.ID]] = append(dependents[idx[d.ID]], i)
			}
		}
	}
	ids := func(set map[int]bool) map[int64]bool {
		out := make(map[int64]bool, len(set))
		for i := range set {
			out[all[i].ID] = true
		}
		return out
	}
	return ids(closure(idx[f.ID], deps)), ids(closure(idx[f.ID], dependents))
}

// resources draws one box per resource, and one per missing dependency.
func (v *graphView) resources(shown []*store.Resource, byRef map[manifest.ObjectRef]*store.Resource, q graphQuery, up, down map[int64]bool) {
	index := make(map[manifest.ObjectRef]int, len(shown))
	for i, r := range shown {
		index[r.Ref()] = i
	}
	n := len(shown)
	var missing []manifest.ObjectRef
	var edges []graphEdge
	for i, r := range shown {
		for _, ref := range r.DependsOn {
			j, ok := index[ref]
			switch {
			case ok:
			case byRef[ref] != nil:
				v.Outside++
				continue
			default:
				v.Missing++
				j = n + len(missing)
				index[ref] = j
				missing = append(missing, ref)
			}
			edges = append(edges, graphEdge{From: j, To: i})
		}
	}
	l := layered(n+len(missing), edges)
	boxes := v.place(l, nodeH)

	focused := v.Focus != nil
	// side says whether node i is on the focused resource's side of
	// dependencies, of dependents, or both (the focus itself).
	side := func(i int) (upSide, downSide bool) {
		if i >= n {
			return false, false
		}
		id := shown[i].ID
		return id == v.Focus.ID || up[id], id == v.Focus.ID || down[id]
	}
	for i, b := range boxes {
		node := svgNode{X: b.X, Y: b.Y, W: nodeW, H: nodeH}
		if i >= n {
			ref := missing[i-n]
			node.text(ref.String(), ref.String()+": missing, no such resource", "⚠ missing")
			node.Class = "missing"
			if focused {
				node.Class += " dim"
			}
			v.Nodes = append(v.Nodes, node)
			continue
		}
		r := shown[i]
		bd := badgeOf(r.Phase)
		ref := r.Ref().String()
		line := bd.Icon + " " + bd.Text
		if r.Suspended() {
			line += " · suspended"
		}
		if r.Orphaned {
			line += " · orphaned"
		}
		node.text(ref, ref+": "+line, line)
		node.Class = bd.Class
		if r.Suspended() || r.Orphaned {
			node.Class += " flagged"
		}
		switch {
		case !focused:
		case r.ID == v.Focus.ID:
			node.Class += " focus"
		case up[r.ID]:
			node.Class += " up"
		case down[r.ID]:
			node.Class += " down"
		default:
			node.Class += " dim"
		}
		fq := q
		fq.Focus = r.ID
		node.URL = fq.url()
		v.Nodes = append(v.Nodes, node)
	}
	for i, e := range edges {
		edge := svgEdge{Class: "edge", Marker: "arrow"}
		if l.Cycle[i] {
			v.Cycles++
			edge.Class, edge.Marker = "edge cycle", "arrow-cycle"
		}
		if focused {
			fu, fd := side(e.From)
			tu, td := side(e.To)
			switch {
			case fu && tu || fd && td:
				edge.Class += " hl"
				if !l.Cycle[i] {
					edge.Marker = "arrow-hl"
				}
			case !(fu || fd) || !(tu || td):
				edge.Class += " dim"
			}
		}
		edge.D = path(boxes[e.From], boxes[e.To], nodeH)
		v.Edges = append(v.Edges, edge)
	}
}

// groups draws one box per kind or source, with its resources counted by
// status, and one arrow per pair of groups, counting the dependencies
// between them.
func (v *graphView) groups(shown []*store.Resource, byRef map[manifest.ObjectRef]*store.Resource, by string, q graphQuery, up, down map[int64]bool) {
	key := func(r *store.Resource) string {
		if by == groupSource {
			return r.Source.Name
		}
		return r.Kind
	}
	type groupInfo struct {
		name    string
		members int
		phases  map[manifest.Phase]int
		worst   severity
		inside  int // dependencies within the group
		missing int
		mark    string
	}
	index := map[string]int{}
	var gs []*groupInfo
	member := map[manifest.ObjectRef]int{}
	for _, r := range shown {
		k := key(r)
		i, ok := index[k]
		if !ok {
			i = len(gs)
			index[k] = i
			gs = append(gs, &groupInfo{name: k, phases: map[manifest.Phase]int{}, worst: sevReady})
		}
		g := gs[i]
		g.members++
		g.phases[r.Phase]++
		g.worst = min(g.worst, resourceSeverity(r))
		member[r.Ref()] = i
		switch {
		case v.Focus == nil:
		case r.ID == v.Focus.ID:
			g.mark = "focus"
		case up[r.ID] && g.mark != "focus":
			g.mark = "up"
		case down[r.ID] && g.mark == "":
			g.mark = "down"
		}
	}
	type pair struct{ from, to int }
	counts := map[pair]int{}
	var pairs []pair
	for _, r := range shown {
		to := member[r.Ref()]
		for _, ref := range r.DependsOn {
			from, ok := member[ref]
			switch {
			case ok && from == to:
				gs[to].inside++
			case ok:
				p := pair{from, to}
				if counts[p] == 0 {
					pairs = append(pairs, p)
				}
				counts[p]++
			case byRef[ref] != nil:
				v.Outside++
			default:
				v.Missing++
				gs[to].missing++
			}
		}
	}
	edges := make([]graphEdge, len(pairs))
	for i, p := range pairs {
		edges[i] = graphEdge{From: p.from, To: p.to}
	}
	l := layered(len(gs), edges)
	boxes := v.place(l, groupH)
	for i, g := range gs {
		b := boxes[i]
		node := svgNode{X: b.X, Y: b.Y, W: nodeW, H: groupH}
		var parts []string
		for _, ph := range manifest.Phases() {
			if n := g.phases[ph]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s%d", badgeOf(ph).Icon, n))
			}
		}
		detail := fmt.Sprintf("%d resources", g.members)
		if g.missing > 0 {
			detail += fmt.Sprintf(" · %d missing deps", g.missing)
		}
		node.text(g.name, fmt.Sprintf("%s %s: %d resources", by, g.name, g.members), detail, strings.Join(parts, " "))
		node.Class = "group " + [...]string{"bad", "warn", "warn", "busy", "ok"}[g.worst]
		switch {
		case v.Focus == nil:
		case g.mark != "":
			node.Class += " " + g.mark
		default:
			node.Class += " dim"
		}
		fq := q
		fq.Group = groupAuto
		if by == groupSource {
			fq.Source = g.name
		} else {
			fq.Kind = g.name
		}
		node.URL = fq.url()
		v.Nodes = append(v.Nodes, node)
	}
	for i, p := range pairs {
		edge := svgEdge{Class: "edge", Marker: "arrow", D: path(boxes[p.from], boxes[p.to], groupH)}
		if l.Cycle[i] {
			// Groups that depend on each other are common (a kind's
			// resources on another's, and back), and say nothing of a
			// cycle among resources: the arrow goes back, that is all.
			edge.Class = "edge back"
		}
		if v.Focus != nil && (gs[p.from].mark == "" || gs[p.to].mark == "") {
			edge.Class += " dim"
		}
		a, b := boxes[p.from], boxes[p.to]
		edge.Label = fmt.Sprintf("×%d", counts[p])
		edge.LX, edge.LY = (a.X+nodeW+b.X)/2, (a.Y+b.Y+groupH)/2-4
		v.Edges = append(v.Edges, edge)
	}
}

// box is a node's top left corner.
type box struct{ X, Y int }

// place turns layers into columns, left to right, each centred on the
// tallest, and sets the picture's size.
func (v *graphView) place(l graphLayout, h int) []box {
	rows := 0
	for _, layer := range l.Layers {
		rows = max(rows, len(layer))
	}
	rowH := h + rowGap
	out := make([]box, len(l.Layer))
	for c, layer := range l.Layers {
		// Small graphs look best centred; in a tall one, the top of every
		// column must be where the scroll starts.
		top := graphPad
		if rows <= centreRows {
			top += (rows - len(layer)) * rowH / 2
		}
		for p, n := range layer {
			out[n] = box{X: graphPad + c*(nodeW+colGap), Y: top + p*rowH}
		}
	}
	v.Width = max(nodeW, graphPad*2+len(l.Layers)*(nodeW+colGap)-colGap)
	v.Height = max(h, graphPad*2+rows*rowH-rowGap)
	v.Wide = v.Width > wideGraph
	return out
}

// path is an arrow's curve from a dependency's box to its dependent's: from
// the right edge of one to the left edge of the other, or, for an arrow
// that goes back (a cycle), looping above both.
func path(a, b box, h int) string {
	sx, sy := a.X+nodeW, a.Y+h/2
	ex, ey := b.X-arrowMargin, b.Y+h/2
	if a == b {
		// A resource that depends on itself.
		return fmt.Sprintf("M%d %d C%d %d %d %d %d %d", sx, sy, sx+48, sy, a.X+nodeW/2, a.Y-48, a.X+nodeW/2, a.Y-arrowMargin)
	}
	if ex > sx {
		mid := (ex - sx) / 2
		return fmt.Sprintf("M%d %d C%d %d %d %d %d %d", sx, sy, sx+mid, sy, ex-mid, ey, ex, ey)
	}
	lift := min(a.Y, b.Y) - 40
	return fmt.Sprintf("M%d %d C%d %d %d %d %d %d", sx, sy, sx+80, lift, ex-80, lift, ex, ey)
}

// cut shortens s to what a box holds, marking the cut.
func cut(s string) string {
	r := []rune(s)
	if len(r) <= labelRunes {
		return s
	}
	return string(r[:labelRunes-1]) + "…"
}

// graphFilter is the graph page's form.
type graphFilter struct {
	graphQuery
	Kinds, Sources, Phases []string
	Active                 bool
	ClearURL               string
}

type graphPage struct {
	base
	Filter graphFilter
	View   graphView
	// FocusRow is the focused resource as a list shows it; UnfocusURL
	// drops the focus.
	FocusRow   *resourceRow
	UnfocusURL string
	// NoneURL draws every resource, GroupURLs group them.
	NoneURL, KindURL, SourceURL string
	Threshold                   int
	// Legend shows what the colours mean.
	Legend []badge
}

// graph serves GET /graph: the dependency graph of the resources.
func (h *handler) graph(w http.ResponseWriter, r *http.Request) {
	q, err := parseGraphQuery(r.URL.Query())
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	ctx := r.Context()
	all, err := h.store.ListResources(ctx, store.ResourceFilter{})
	if err != nil {
		h.storeFailed(w, r, err)
		return
	}
	sources, err := h.store.ListSources(ctx)
	if err != nil {
		h.storeFailed(w, r, err)
		return
	}
	p := graphPage{base: h.base(r, "Dependency graph"), View: buildGraph(all, q), Threshold: graphThreshold}
	if q.Focus > 0 && p.View.Focus == nil {
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("There is no resource with id %d to focus on. It may have been deleted.", q.Focus))
		return
	}
	p.Filter = graphFilter{graphQuery: q, Phases: phaseNames(),
		Active: q.Q != "" || q.Kind != "" || q.Source != "" || q.Status != ""}
	p.Filter.ClearURL = graphQuery{Group: q.Group, Focus: q.Focus}.url()
	kinds := map[string]bool{}
	for _, res := range all {
		kinds[res.Kind] = true
	}
	for k := range kinds {
		p.Filter.Kinds = append(p.Filter.Kinds, k)
	}
	for _, s := range sources {
		p.Filter.Sources = append(p.Filter.Sources, s.Name)
	}
	p.Filter.Sources = append(p.Filter.Sources, store.APISource)
	p.Filter.Kinds = withValue(p.Filter.Kinds, q.Kind)
	p.Filter.Sources = withValue(p.Filter.Sources, q.Source)
	if f := p.View.Focus; f != nil {
		row := resourceRows([]*store.Resource{f})[0]
		p.FocusRow = &row
		unfocus := q
		unfocus.Focus = 0
		p.UnfocusURL = unfocus.url()
	}
	for by, dst := range map[string]*string{groupNone: &p.NoneURL, groupKind: &p.KindURL, groupSource: &p.SourceURL} {
		g := q
		g.Group = by
		*dst = g.url()
	}
	for _, ph := range manifest.Phases() {
		p.Legend = append(p.Legend, badgeOf(ph))
	}
	h.render(w, r, http.StatusOK, "graph", p)
}
