package dashboard

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// res is a resource for the graph's unit tests: kind K in the default
// namespace, depending on the named resources of kind K.
func res(id int64, name string, phase manifest.Phase, deps ...string) *store.Resource {
	r := &store.Resource{ID: id, Phase: phase, Generation: 1, ObservedGeneration: 1, Source: store.SourceRef{Name: "s"}}
	r.Kind, r.Namespace, r.Name = "K", "default", name
	for _, d := range deps {
		r.DependsOn = append(r.DependsOn, manifest.ObjectRef{Kind: "K", Namespace: "default", Name: d})
	}
	return r
}

// nodeClasses maps each node's label to its classes.
func nodeClasses(v graphView) map[string]string {
	out := map[string]string{}
	for _, n := range v.Nodes {
		out[n.Label] = n.Class
	}
	return out
}

func TestBuildGraphMissingAndOutside(t *testing.T) {
	t.Parallel()
	all := []*store.Resource{
		res(1, "a", manifest.PhaseReady),
		res(2, "b", manifest.PhasePending, "a", "ghost"),
		res(3, "other", manifest.PhaseReady),
		res(4, "c", manifest.PhaseFailed, "other", "b"),
	}
	// The filter leaves "other" out: c's dependency on it is not drawn,
	// nor taken for a missing one; "ghost" does not exist: a dashed box.
	v := buildGraph(all, graphQuery{Q: "a"}) // a, ghost-free: matches "a" only
	if v.Shown != 1 || v.Missing != 0 || v.Outside != 0 {
		t.Errorf("q=a: shown %d, missing %d, outside %d; want 1, 0, 0", v.Shown, v.Missing, v.Outside)
	}
	v = buildGraph(all, graphQuery{Q: "K/"})
	if v.Shown != 4 || v.Missing != 1 || v.Outside != 0 || len(v.Nodes) != 5 || len(v.Edges) != 4 {
		t.Errorf("all: shown %d, missing %d, outside %d, %d nodes, %d edges; want 4, 1, 0, 5, 4",
			v.Shown, v.Missing, v.Outside, len(v.Nodes), len(v.Edges))
	}
	classes := nodeClasses(v)
	if classes["K/ghost"] != "missing" || classes["K/c"] != "bad" || classes["K/a"] != "ok" || classes["K/b"] != "idle" {
		t.Errorf("classes %v", classes)
	}
	all[2].Kind = "Other"
	all[3].DependsOn[0].Kind = "Other"
	v = buildGraph(all, graphQuery{Kind: "K"})
	if v.Shown != 3 || v.Outside != 1 || v.Missing != 1 {
		t.Errorf("kind=K: shown %d, outside %d, missing %d; want 3, 1, 1", v.Shown, v.Outside, v.Missing)
	}
	// Layers: a and ghost first, then b, then c.
	x := map[string]int{}
	for _, n := range v.Nodes {
		x[n.Label] = n.X
	}
	if !(x["K/a"] == x["K/ghost"] && x["K/a"] < x["K/b"] && x["K/b"] < x["K/c"]) {
		t.Errorf("columns %v: want a and ghost, then b, then c", x)
	}
}

func TestBuildGraphCycleAndFocus(t *testing.T) {
	t.Parallel()
	all := []*store.Resource{
		res(1, "base", manifest.PhaseReady),
		res(2, "x", manifest.PhasePending, "base", "z"),
		res(3, "y", manifest.PhasePending, "x"),
		res(4, "z", manifest.PhasePending, "y"),
		res(5, "top", manifest.PhasePending, "z"),
		res(6, "alone", manifest.PhaseReady),
	}
	v := buildGraph(all, graphQuery{Focus: 3})
	if v.Cycles != 1 {
		t.Errorf("%d cycle edges, want 1", v.Cycles)
	}
	cycles := 0
	for _, e := range v.Edges {
		if strings.Contains(e.Class, "cycle") {
			cycles++
			if e.Marker != "arrow-cycle" {
				t.Errorf("a cycle edge has the marker %q", e.Marker)
			}
		}
	}
	if cycles != 1 {
		t.Errorf("%d edges drawn as closing a cycle, want 1", cycles)
	}
	// y waits on x, base and (round the cycle) z and y; x, z, top wait on y.
	if v.Focus == nil || v.Focus.ID != 3 || v.Upstream != 3 || v.Downstream != 3 {
		t.Errorf("focus %v: upstream %d, downstream %d; want y, 3, 3", v.Focus, v.Upstream, v.Downstream)
	}
	classes := nodeClasses(v)
	for name, want := range map[string]string{"K/y": "focus", "K/base": "up", "K/top": "down", "K/alone": "dim"} {
		if !strings.Contains(classes[name], want) {
			t.Errorf("%s has classes %q, want %q", name, classes[name], want)
		}
	}
	hl := 0
	for _, e := range v.Edges {
		if strings.Contains(e.Class, "hl") {
			hl++
		}
	}
	if hl == 0 {
		t.Error("no edge is highlighted")
	}
}

func TestBuildGraphGroups(t *testing.T) {
	t.Parallel()
	var all []*store.Resource
	for i := range graphThreshold + 1 {
		r := res(int64(i+1), fmt.Sprintf("r%03d", i), manifest.PhaseReady)
		r.Kind = []string{"Net", "DB", "App"}[i%3]
		switch r.Kind {
		case "DB":
			r.DependsOn = []manifest.ObjectRef{{Kind: "Net", Namespace: "default", Name: fmt.Sprintf("r%03d", i-1)}}
		case "App":
			r.DependsOn = []manifest.ObjectRef{{Kind: "DB", Namespace: "default", Name: fmt.Sprintf("r%03d", i-1)}}
			if i == 5 {
				r.Phase = manifest.PhaseFailed
			}
		}
		all = append(all, r)
	}
	v := buildGraph(all, graphQuery{})
	if v.GroupedBy != groupKind || !v.AutoGrouped || len(v.Nodes) != 3 || len(v.Edges) != 2 {
		t.Fatalf("above the threshold: grouped by %q (auto %v), %d nodes, %d edges; want kind, true, 3, 2",
			v.GroupedBy, v.AutoGrouped, len(v.Nodes), len(v.Edges))
	}
	classes := nodeClasses(v)
	if !strings.Contains(classes["App"], "bad") || !strings.Contains(classes["Net"], "ok") {
		t.Errorf("group classes %v: want App bad (one failed), Net ok", classes)
	}
	labels := map[string]bool{}
	for _, e := range v.Edges {
		labels[e.Label] = true
	}
	if !labels["×67"] {
		t.Errorf("edge labels %v, want ×67 (dependencies between two groups of 67)", labels)
	}
	if v := buildGraph(all, graphQuery{Group: groupNone}); v.GroupedBy != "" || len(v.Nodes) != len(all) {
		t.Errorf("group=none: grouped by %q, %d nodes", v.GroupedBy, len(v.Nodes))
	}
	if v := buildGraph(all[:10], graphQuery{Group: groupSource}); v.GroupedBy != groupSource || len(v.Nodes) != 1 {
		t.Errorf("group=source: grouped by %q, %d nodes", v.GroupedBy, len(v.Nodes))
	}
	// A focus on a large graph draws its relatives only.
	v = buildGraph(all, graphQuery{Focus: 6})
	if !v.Narrowed || v.GroupedBy != "" || len(v.Nodes) != 3 {
		t.Errorf("focus on a large graph: narrowed %v, grouped by %q, %d nodes; want true, none, 3", v.Narrowed, v.GroupedBy, len(v.Nodes))
	}
}

// TestGraphPage renders the graph of the example repository, with a
// focus, and refuses bad addresses.
func TestGraphPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := newHandler(f.st, Options{})
	code, body, hdr := get(t, h, "/graph")
	if code != http.StatusOK {
		t.Fatalf("GET /graph: %d\n%s", code, body)
	}
	if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	page := text(body)
	for _, want := range []string{"Dependency graph", "DatabaseCluster/production-pg", "Network/prod-vpc", "DNSRecord/db-production", "✓ ready", "4 of 4 resources"} {
		if !strings.Contains(page, want) {
			t.Errorf("the graph does not show %q", want)
		}
	}
	if n := strings.Count(body, `<g class="node `); n != 4 {
		t.Errorf("%d nodes, want 4", n)
	}
	// Two dependencies: the network's and the database's.
	if n := strings.Count(body, `<path class="edge`); n != 2 {
		t.Errorf("%d edges, want 2", n)
	}
	for _, want := range []string{`<svg class="graph wide"`, `viewBox="0 0 `, `marker-end="url(#arrow)"`,
		fmt.Sprintf(`href="/graph?focus=%d"`, f.ids["prod-vpc"])} {
		if !strings.Contains(body, want) {
			t.Errorf("the graph's HTML lacks %s", want)
		}
	}
	if regexp.MustCompile(`\sstyle=`).MatchString(body) {
		t.Error("the graph has an inline style, which the CSP blocks")
	}
	if _, overview, _ := get(t, h, "/"); !strings.Contains(overview, `<a href="/graph">Graph</a>`) {
		t.Error("the navigation does not link to the graph")
	}
	_, resPage, _ := get(t, h, fmt.Sprintf("/resources/%d", f.ids["production-pg"]))
	if !strings.Contains(resPage, fmt.Sprintf(`href="/graph?focus=%d"`, f.ids["production-pg"])) {
		t.Error("the resource page does not link to its graph")
	}

	// Focused on the database: the network it waits on and the record
	// that waits on it stand out, the staging database is dimmed.
	_, body, _ = get(t, h, fmt.Sprintf("/graph?focus=%d", f.ids["production-pg"]))
	if page := text(body); !strings.Contains(page, "Selected DatabaseCluster/production-pg") || !strings.Contains(page, "waits on 1, 1 waits on it") {
		t.Errorf("focused graph:\n%s", page)
	}
	for _, want := range []string{`<g class="node ok focus">`, `<g class="node ok up">`, `<g class="node ok down">`, `<g class="node ok dim">`, `class="edge hl"`} {
		if !strings.Contains(body, want) {
			t.Errorf("focused graph lacks %s", want)
		}
	}

	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/graph?kind=Network", http.StatusOK, "1 of 4 resources"},
		{"/graph?group=kind", http.StatusOK, "4 resources in groups by kind"},
		{"/graph?group=source", http.StatusOK, "4 resources in groups by source"},
		{"/graph?q=nothing-like-this", http.StatusOK, "No resources match the filter."},
		{"/graph?group=planet", http.StatusBadRequest, `Unknown grouping "planet"`},
		{"/graph?focus=x", http.StatusBadRequest, `Bad focus "x"`},
		{"/graph?status=sleepy", http.StatusBadRequest, `Unknown status "sleepy"`},
		{"/graph?focus=987654321", http.StatusNotFound, "no resource with id 987654321"},
	} {
		code, body, _ := get(t, h, tc.path)
		if code != tc.code || !strings.Contains(text(body), tc.want) {
			t.Errorf("GET %s: %d, want %d showing %q:\n%s", tc.path, code, tc.code, tc.want, text(body))
		}
	}
}

// TestGraphEscaping draws resources whose kind, name and labels are
// markup: the SVG shows them as text.
func TestGraphEscaping(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := t.Context()
	spec := json.RawMessage(`{}`)
	evil := &manifest.Resource{Kind: `<b>Kind</b>`, Group: "example.com", Version: "v1", Name: `<script>alert("name")</script>`,
		Labels: map[string]string{"x": `"><script>alert("label")</script>`}, Spec: spec, SpecHash: manifest.HashJSON(spec),
		DependsOn: []manifest.ObjectRef{{Kind: `<img src=x onerror=alert(1)>`, Name: `</title><script>x</script>`}}}
	if _, err := st.CreateResource(ctx, evil, store.SourceRef{Name: store.APISource}); err != nil {
		t.Fatal(err)
	}
	h := newHandler(st, Options{})
	for _, path := range []string{"/graph", "/graph?group=kind", "/graph?q=" + "%3Cscript", "/"} {
		code, body, hdr := get(t, h, path)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, code, body)
		}
		if m := regexp.MustCompile(`(?i)<(script|img|b>)`).FindAllString(withoutOwnScript(t, body, hdr), -1); m != nil {
			t.Errorf("GET %s renders markup from data: %q", path, m)
		}
		if !strings.Contains(body, "&lt;script&gt;") && !strings.Contains(body, "&lt;b&gt;Kind") {
			t.Errorf("GET %s shows none of the data escaped", path)
		}
	}
	_, body, _ := get(t, h, "/graph")
	for _, want := range []string{`<b>Kind</b>/<script>alert("name")</script>`, `<img src=x onerror=alert(1)>/</title><script>x</script>`} {
		if !strings.Contains(text(body), want) {
			t.Errorf("the graph does not show %q as text", want)
		}
	}
}

// seedMany stores n resources through the API source, as a tree: each
// resource but the first depends on (i-1)/3, and every seventh on i/2 as
// well; the kind says how deep it is, two kinds a level, so that the
// kinds form layers as in real infrastructure. Every 37th failed.
func seedMany(t testing.TB, st store.Store, n int) {
	t.Helper()
	ctx := t.Context()
	spec := json.RawMessage(`{}`)
	depth := make([]int, n)
	for i := 1; i < n; i++ {
		depth[i] = depth[(i-1)/3] + 1
	}
	ref := func(i int) manifest.ObjectRef {
		return manifest.ObjectRef{Kind: fmt.Sprintf("Tier%d%c", depth[i], 'a'+rune(i%2)), Namespace: manifest.DefaultNamespace,
			Name: fmt.Sprintf("res-%04d", i)}
	}
	var rs []*manifest.Resource
	for i := range n {
		r := &manifest.Resource{Kind: ref(i).Kind, Group: "example.com", Version: "v1", Namespace: manifest.DefaultNamespace,
			Name: ref(i).Name, Spec: spec, SpecHash: manifest.HashJSON(spec), Labels: map[string]string{"tier": fmt.Sprint(depth[i])}}
		if i > 0 {
			r.DependsOn = append(r.DependsOn, ref((i-1)/3))
		}
		if i > 10 && i%7 == 0 {
			r.DependsOn = append(r.DependsOn, ref(i/2))
		}
		rs = append(rs, r)
	}
	applied, err := st.ApplyResources(ctx, rs, store.SourceRef{Name: store.APISource})
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range applied {
		if i%37 == 0 {
			if _, err := st.SetResourceStatus(ctx, a.ID, store.StatusUpdate{Phase: manifest.PhaseFailed,
				Message: "boom " + fmt.Sprint(i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// BenchmarkGraphPage1000 renders the graph page of 1,000 resources, from
// the store read to the HTML: grouped (the default at that size) and
// drawn one by one.
func BenchmarkGraphPage1000(b *testing.B) {
	st := openStore(b)
	seedMany(b, st, 1000)
	h := newHandler(st, Options{})
	for _, bc := range []struct{ name, path string }{
		{"grouped", "/graph"},
		{"every-resource", "/graph?group=none"},
		{"focus", "/graph?focus=1"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			size := 0
			for b.Loop() {
				rec := httptestRecorder(b, h, bc.path)
				size = rec
			}
			b.ReportMetric(float64(size)/1024, "KiB/page")
		})
	}
}

// httptestRecorder requests path from h, fails unless it is a 200, and
// returns the size of the page.
func httptestRecorder(tb testing.TB, h http.Handler, path string) int {
	tb.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequestWithContext(tb.Context(), http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		tb.Fatalf("GET %s: %d", path, rec.Code)
	}
	return rec.Body.Len()
}
