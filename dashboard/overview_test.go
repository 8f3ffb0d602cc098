package dashboard

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// section returns the part of a page from the element with the given id
// to the start of the next section.
func section(t *testing.T, body, id string) string {
	t.Helper()
	i := strings.Index(body, `id="`+id+`"`)
	if i < 0 {
		t.Fatalf("the page has no #%s", id)
	}
	rest := body[i:]
	if j := strings.Index(rest, "</section>"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// tile is a count of the summary as the page writes it.
func tile(n int, icon, label string) string {
	if icon == "" {
		return fmt.Sprintf(`<span class="n">%d</span> <span class="label">%s</span>`, n, label)
	}
	return fmt.Sprintf(`<span class="n">%d</span> <span class="label"><span aria-hidden="true">%s</span> %s</span>`, n, icon, label)
}

// addResource stores a resource of the API source in phase, with a status
// message, labels and dependencies on resources of kind Widget.
func addResource(t *testing.T, st store.Store, name string, phase manifest.Phase, msg string, labels map[string]string, deps ...string) *store.Resource {
	t.Helper()
	spec := json.RawMessage(`{}`)
	m := &manifest.Resource{Kind: "Widget", Group: "example.com", Version: "v1", Namespace: manifest.DefaultNamespace,
		Name: name, Labels: labels, Spec: spec, SpecHash: manifest.HashJSON(spec)}
	for _, d := range deps {
		m.DependsOn = append(m.DependsOn, manifest.ObjectRef{Kind: "Widget", Namespace: manifest.DefaultNamespace, Name: d})
	}
	r, err := st.CreateResource(t.Context(), m, store.SourceRef{Name: store.APISource})
	if err != nil {
		t.Fatal(err)
	}
	if phase != manifest.PhasePending {
		if r, err = st.SetResourceStatus(t.Context(), r.ID, store.StatusUpdate{Phase: phase, Message: msg, ObservedGeneration: r.Generation}); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// TestOverviewCountsSources counts the sources beside the resources: a
// failing source no longer reads as all ready, and leads the list of what
// needs attention.
func TestOverviewCountsSources(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := newHandler(f.st, Options{})
	_, body, _ := get(t, h, "/")
	for _, want := range []string{tile(1, "", "sources"), tile(1, "✓", "ready"), tile(0, "✗", "failing"), tile(0, "", "suspended"), tile(0, "", "orphaned"),
		tile(4, "", "resources"), tile(4, "✓", "ready")} {
		if !strings.Contains(body, want) {
			t.Errorf("the summary lacks %s", want)
		}
	}
	if att := text(section(t, body, "attention")); !strings.Contains(att, "Nothing: every source and resource is ready.") {
		t.Errorf("all ready, yet needs attention says:\n%s", att)
	}

	src, err := f.st.GetSource(t.Context(), sourceName)
	if err != nil {
		t.Fatal(err)
	}
	src.Phase, src.Message = store.SourceFailed, "cannot parse resources/broken.yaml"
	src.Errors = []manifest.Problem{{File: "resources/broken.yaml", Line: 7, Message: "mapping values are not allowed here"}}
	if _, err := f.st.PutSource(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	_, body, _ = get(t, h, "/")
	sourceTiles := body[strings.Index(body, `aria-label="Sources by state"`):strings.Index(body, `aria-label="Resources by status"`)]
	for _, want := range []string{tile(0, "✓", "ready"), tile(1, "✗", "failing")} {
		if !strings.Contains(sourceTiles, want) {
			t.Errorf("the source counts lack %s:\n%s", want, sourceTiles)
		}
	}
	att := text(section(t, body, "attention"))
	for _, want := range []string{"✗ failing source examples", "✗ failed cannot parse resources/broken.yaml",
		"resources/broken.yaml:7 mapping values are not allowed here"} {
		if !strings.Contains(att, want) {
			t.Errorf("needs attention lacks %q:\n%s", want, att)
		}
	}
}

// TestOverviewNeedsAttention lists what is not ready, failing first, then
// stalled, suspended and waiting, each with its why.
func TestOverviewNeedsAttention(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	addResource(t, f.st, "broken", manifest.PhaseFailed, "apply failed: quota exceeded", nil)
	waiter := addResource(t, f.st, "waiter", manifest.PhasePending, "", nil, "broken", "ghost")
	sleeper := addResource(t, f.st, "sleeper", manifest.PhaseReady, "", nil)
	if _, err := f.st.SuspendResource(ctx, sleeper.ID, true, store.Suspension{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.SuspendSource(ctx, sourceName, store.SuspendedByAPI, true, store.Suspension{}); err != nil {
		t.Fatal(err)
	}
	h := newHandler(f.st, Options{})
	_, body, _ := get(t, h, "/")
	att := section(t, body, "attention")
	items := strings.Split(att, `<li class="attn `)[1:]
	var got []string
	for _, it := range items {
		got = append(got, strings.Join(strings.Fields(text(`<x class="`+it)), " "))
	}
	if len(got) != 4 {
		t.Fatalf("needs attention has %d items, want 4:\n%s", len(got), strings.Join(got, "\n"))
	}
	for i, want := range []string{
		"✗ failing Widget/broken from api graph ✗ failed apply failed: quota exceeded",
		"⏸ suspended source examples ✓ ready",
		"⏸ suspended Widget/sleeper",
		"◷ waiting Widget/waiter from api graph ○ pending waits on Widget/broken ✗ failed, Widget/ghost missing",
	} {
		if !strings.HasPrefix(got[i], want) {
			t.Errorf("item %d is\n\t%s\nwant it to start with\n\t%s", i+1, got[i], want)
		}
	}
	if !strings.Contains(got[1], "suspended through the API: not reconciled until resumed") {
		t.Errorf("the suspended source does not say by whom: %s", got[1])
	}
	if !strings.Contains(att, fmt.Sprintf(`href="/graph?focus=%d"`, waiter.ID)) {
		t.Error("a resource that needs attention does not link to its graph")
	}
	// The summary counts the suspended source and resource.
	if !strings.Contains(body, `<li class="count warn"><span class="tile" title="neither fetched nor synced until resumed">`+tile(1, "", "suspended")) {
		t.Error("the source counts do not count the suspended source")
	}
}

// rowNames returns the names of the resources a page lists, in order.
func rowNames(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<tr class="resource">\s*<td data-label="Resource"><a class="ref" href="[^"]*"><span class="kind">[^<]*</span>/<wbr><span class="name">([^<]*)</span>`).FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestOverviewSearchAndSort searches by name, kind and label, and sorts by
// every column both ways, failing first by default.
func TestOverviewSearchAndSort(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	addResource(t, f.st, "zz-broken", manifest.PhaseFailed, "boom", map[string]string{"env": "production", "note": "a=b"})
	h := newHandler(f.st, Options{})
	for _, tc := range []struct {
		path string
		want []string
	}{
		// Trouble first, then by kind and name.
		{"/", []string{"zz-broken", "db-production", "production-pg", "staging-pg", "prod-vpc"}},
		{"/?sort=status&dir=desc", []string{"prod-vpc", "staging-pg", "production-pg", "db-production", "zz-broken"}},
		{"/?sort=name", []string{"db-production", "prod-vpc", "production-pg", "staging-pg", "zz-broken"}},
		{"/?sort=name&dir=desc", []string{"zz-broken", "staging-pg", "production-pg", "prod-vpc", "db-production"}},
		{"/?sort=kind", []string{"db-production", "production-pg", "staging-pg", "prod-vpc", "zz-broken"}},
		{"/?sort=source", []string{"zz-broken", "db-production", "production-pg", "staging-pg", "prod-vpc"}},
		// Search: name or kind, any case, kept with the sort.
		{"/?q=PROD&sort=name", []string{"db-production", "prod-vpc", "production-pg"}},
		{"/?q=network", []string{"prod-vpc"}},
		{"/?q=Widget/zz", []string{"zz-broken"}},
		// Labels, alone, together, with "=" in the value, and with the other filters.
		{"/?label=env%3Dproduction&sort=name", []string{"db-production", "prod-vpc", "production-pg", "zz-broken"}},
		{"/?label=env%3Dproduction&label=team%3Ddata", []string{"production-pg"}},
		{"/?label=note%3Da%3Db", []string{"zz-broken"}},
		{"/?label=env%3Dproduction&source=examples&kind=Network", []string{"prod-vpc"}},
		{"/?label=env%3Dnowhere", nil},
	} {
		code, body, _ := get(t, h, tc.path)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d", tc.path, code)
		}
		if got := rowNames(body); !slices.Equal(got, tc.want) {
			t.Errorf("GET %s lists %v, want %v", tc.path, got, tc.want)
		}
	}
	// The updated column: the newest change first, then turned round.
	_, body, _ := get(t, h, "/?sort=updated")
	if got := rowNames(body); len(got) != 5 || got[0] != "zz-broken" {
		t.Errorf("sorted by change, newest first: %v, want zz-broken first", got)
	}
	_, body2, _ := get(t, h, "/?sort=updated&dir=asc")
	if got, rev := rowNames(body2), rowNames(body); !slices.Equal(got, reversed(rev)) {
		t.Errorf("sorted by change, oldest first: %v, want %v reversed", got, rev)
	}

	// The headings link to the sorts, keeping the filter; the active one
	// turns round and says so.
	_, body, _ = get(t, h, "/?q=prod&sort=name")
	for _, want := range []string{
		`<th scope="col" aria-sort="ascending"><a class="sort" href="/?q=prod&amp;sort=kind" title="sort by Kind">Kind</a> / <a class="sort active" href="/?dir=desc&amp;q=prod&amp;sort=name" title="sort by Name">Name <span aria-hidden="true">▲</span></a></th>`,
		`<a class="sort" href="/?q=prod&amp;sort=updated" title="sort by changed">changed</a>`, // newest first
		`href="/?q=prod"`, // status, the default sort
		`<input type="hidden" name="sort" value="name">`, `<input type="search" name="q" value="prod"`,
		`<a href="/graph?q=prod">See them as a graph</a>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("GET /?q=prod&sort=name lacks %s", want)
		}
	}
	for path, want := range map[string]string{
		"/?sort=color":        `Unknown sort "color"`,
		"/?sort=name&dir=up":  `Unknown sort direction "up"`,
		"/?label=env":         `Bad label filter "env": want key=value.`,
		"/?label=%3Dvalue":    `Bad label filter "=value"`,
		"/?namespace=Bad_One": `Bad namespace "Bad_One"`,
	} {
		if code, body, _ := get(t, h, path); code != http.StatusBadRequest || !strings.Contains(text(body), want) {
			t.Errorf("GET %s: %d, want 400 saying %s", path, code, want)
		}
	}
}

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// TestPaginationSorted pages through a search sorted by name, two at a
// time: every page keeps the search and the order, and together they list
// each match once, in order.
func TestPaginationSorted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for i := range 5 {
		addResource(t, f.st, fmt.Sprintf("prod-extra-%d", 4-i), manifest.PhaseReady, "", nil)
	}
	h := newHandler(f.st, Options{})
	h.pageSize = 2
	_, all, _ := get(t, newHandler(f.st, Options{}), "/?q=prod&sort=name&dir=desc")
	want := rowNames(all)
	if len(want) != 8 {
		t.Fatalf("the search finds %v, want 8", want)
	}
	next := regexp.MustCompile(`<a rel="next" href="([^"]+)">`)
	var got []string
	path := "/?q=prod&sort=name&dir=desc"
	for page := 1; ; page++ {
		if page > 4 {
			t.Fatalf("more pages than expected, at %s", path)
		}
		code, body, _ := get(t, h, path)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, code)
		}
		got = append(got, rowNames(body)...)
		if want := fmt.Sprintf("%d–%d of 8 resources matching the filter, sorted by name, descending.", 2*page-1, 2*page); !strings.Contains(text(body), want) {
			t.Errorf("page %d does not say %q", page, want)
		}
		m := next.FindStringSubmatch(body)
		if m == nil {
			break
		}
		path = text(m[1])
		for _, keep := range []string{"q=prod", "sort=name", "dir=desc", "after="} {
			if !strings.Contains(path, keep) {
				t.Errorf("next page %s loses %s", path, keep)
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("the pages list %v, want %v", got, want)
	}

	// A cursor whose resource is gone starts over, and says so.
	_, body, _ := get(t, h, "/?q=prod&after=987654321")
	if !strings.Contains(text(body), "The resource this page started after is gone from the list") || len(rowNames(body)) != 2 {
		t.Errorf("a lost cursor: %v\n%s", rowNames(body), text(body))
	}
}

// TestOverviewEscapesData shows hostile names, labels and messages as
// text in the list of what needs attention, the table and the form.
func TestOverviewEscapesData(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const (
		name  = `<script>alert("name")</script>`
		label = `"><img src=x onerror=alert("label")>`
		msg   = `<b onmouseover=alert("msg")>boom</b>`
	)
	addResource(t, f.st, name, manifest.PhaseFailed, msg, map[string]string{"x": label})
	addResource(t, f.st, "dependent", manifest.PhasePending, "", nil, name)
	h := newHandler(f.st, Options{})
	for _, path := range []string{"/", "/?q=" + "%3Cscript", "/?label=x%3D" + strings.ReplaceAll(label, " ", "%20"), "/?sort=name&q=%22%3E%3Cimg"} {
		code, body, hdr := get(t, h, path)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, code, text(body))
		}
		if m := regexp.MustCompile(`(?i)<(script|img|b[ >])`).FindAllString(withoutOwnScript(t, body, hdr), -1); m != nil {
			t.Errorf("GET %s renders markup from data: %q", path, m)
		}
	}
	_, body, _ := get(t, h, "/")
	att := text(section(t, body, "attention"))
	for _, want := range []string{"Widget/" + name, msg, "waits on Widget/" + name + " ✗ failed"} {
		if !strings.Contains(att, want) {
			t.Errorf("needs attention does not show %q as text:\n%s", want, att)
		}
	}
	_, body, _ = get(t, h, "/?label=x%3D"+strings.ReplaceAll(label, " ", "%20"))
	if got := rowNames(body); len(got) != 1 || text(got[0]) != name {
		t.Errorf("the label filter finds %v, want the hostile resource", got)
	}
}
