package dashboard

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// TestPages requests every page of a dashboard over the synced and
// reconciled example repository.
func TestPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := New(f.st, Options{Version: "v1.2.3-test"})
	id := func(name string) string { return fmt.Sprint(f.ids[name]) }
	allNames := []string{"production-pg", "staging-pg", "prod-vpc", "db-production"}

	tests := []struct {
		name, path string
		code       int
		// want are texts the page shows; raw are strings of its HTML.
		want, raw []string
		// notWant are texts the page must not show.
		notWant []string
	}{
		{
			name: "overview", path: "/", code: http.StatusOK,
			want: append([]string{
				"Overview", "Sources", "Resources", sourceName, "dir", f.dir, "v1.2.3-test",
				"DatabaseCluster/production-pg", "Network/prod-vpc", "DNSRecord/db-production",
				"✓ ready", "in sync",
			}, allNames...),
			raw: []string{
				`<meta name="viewport" content="width=device-width, initial-scale=1">`,
				`<table class="cards" id="sources">`, `<table class="cards" id="resources">`,
				`href="/sources/examples"`,
				`href="/resources/` + id("production-pg") + `"`,
				`href="/resources/` + id("production-pg") + `#history"`,
				`data-label="Last reconcile"`,
				// Four resources, all ready: the summary counts them.
				`<span class="n">4</span> <span class="label"><span aria-hidden="true">✓</span> ready</span>`,
				`<span class="n">0</span> <span class="label"><span aria-hidden="true">✗</span> failed</span>`,
			},
			notWant: []string{"No resources."},
		},
		{
			name: "overview filtered by kind", path: "/?kind=Network", code: http.StatusOK,
			want: []string{"Network/prod-vpc", "Clear filters"}, raw: []string{`<option value="Network" selected>`},
			notWant: []string{"DatabaseCluster/production-pg", "DNSRecord/db-production"},
		},
		{
			name: "overview filtered by status", path: "/?status=failed", code: http.StatusOK,
			want: []string{"No resources."}, notWant: []string{"Network/prod-vpc"},
		},
		{
			name: "overview filtered by status and source", path: "/?status=ready&source=examples", code: http.StatusOK,
			want: allNames, raw: []string{`<option value="examples" selected>`, `<option value="ready" selected>`},
		},
		{
			name: "overview filtered by another source", path: "/?source=api", code: http.StatusOK,
			want: []string{"No resources."}, notWant: []string{"Network/prod-vpc"},
		},
		{
			name: "resource", path: "/resources/" + id("production-pg"), code: http.StatusOK,
			want: []string{
				"DatabaseCluster/production-pg", "infra.example.com/v1", "team=data", "env=production",
				"examples", "resources/databases.yaml", "provision-db",
				// Conditions: the table and the Ready condition.
				"Conditions", "Last transition", "Ready", "True",
				// Depends on the network, and the DNS record depends on it.
				"Depends on", "Network/prod-vpc", "Required by", "DNSRecord/db-production",
				// The spec, pretty-printed with its defaults.
				`"engine": "postgres"`, `"backup_retention_days": 14`,
				// Noop returns no outputs.
				"Outputs", "None: the action returned no outputs.",
				"Reconcile history", testAgentID, "create", "succeeded",
			},
			raw: []string{
				`id="history"`, `<tr class="attempt">`, `id="conditions"`, `<tr class="condition">`,
				`href="/resources/` + id("prod-vpc") + `"`, `href="/resources/` + id("db-production") + `"`,
				`<pre class="json">`,
			},
		},
		{
			name: "resource with a prune annotation", path: "/resources/" + id("staging-pg"), code: http.StatusOK,
			want: []string{"no8s.io/prune=disabled", `"replicas": 0`, `"day": "sun"`},
		},
		{
			name: "source", path: "/sources/examples", code: http.StatusOK,
			want: append([]string{
				"Source examples", "✓ ready", f.dir, "Applied revision", "sha256:",
				"Errors", "None: the last attempted revision is valid.",
				"Sync history", "4 created, 0 updated, 0 deleted, 0 unchanged",
			}, allNames...),
			raw: []string{`id="history"`, `<tr class="sync">`, `<table class="cards" id="resources">`},
		},
		{
			name: "API pseudo-source", path: "/sources/api", code: http.StatusOK,
			want: []string{"Source api", "created through the HTTP API", "No resources."},
		},
		{name: "unknown resource", path: "/resources/987654321", code: http.StatusNotFound,
			want: []string{"404", "no resource with id 987654321"}},
		{name: "unknown source", path: "/sources/nope", code: http.StatusNotFound,
			want: []string{"404", `no source named "nope"`}},
		{name: "unknown page", path: "/nope", code: http.StatusNotFound, want: []string{"404", "Not Found"}},
		{name: "resources without id", path: "/resources/", code: http.StatusNotFound},
		{name: "below a resource", path: "/resources/1/more", code: http.StatusNotFound},
		{name: "word id", path: "/resources/abc", code: http.StatusBadRequest, want: []string{"400", `Bad resource id "abc"`}},
		{name: "zero id", path: "/resources/0", code: http.StatusBadRequest},
		{name: "negative id", path: "/resources/-3", code: http.StatusBadRequest},
		{name: "huge id", path: "/resources/99999999999999999999", code: http.StatusBadRequest},
		{name: "unknown status", path: "/?status=sleepy", code: http.StatusBadRequest, want: []string{`Unknown status "sleepy"`}},
		{name: "bad cursor", path: "/?after=x", code: http.StatusBadRequest, want: []string{`Bad page cursor "x"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, body, hdr := get(t, h, tc.path)
			if code != tc.code {
				t.Fatalf("GET %s: status %d, want %d; body:\n%s", tc.path, code, tc.code, body)
			}
			if ct := hdr.Get("Content-Type"); ct != "text/html; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
			if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
				t.Errorf("Content-Security-Policy %q", csp)
			}
			page := text(body)
			for _, w := range tc.want {
				if !strings.Contains(page, w) {
					t.Errorf("GET %s does not show %q", tc.path, w)
				}
			}
			for _, w := range tc.raw {
				if !strings.Contains(body, w) {
					t.Errorf("GET %s: HTML lacks %s", tc.path, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(page, w) {
					t.Errorf("GET %s shows %q", tc.path, w)
				}
			}
			if t.Failed() && testing.Verbose() {
				t.Logf("body:\n%s", body)
			}
		})
	}
}

// TestOverviewShowsSourceDetails checks the sources table against the
// stored source: its revision, shortened, with the full one in a tooltip,
// and when it synced, relative with the absolute time in a tooltip.
func TestOverviewShowsSourceDetails(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	src, err := f.st.GetSource(t.Context(), sourceName)
	if err != nil {
		t.Fatal(err)
	}
	h := newHandler(f.st, Options{})
	synced := src.LastSyncTime.Add(42 * time.Second)
	h.now = func() time.Time { return synced }
	_, body, _ := get(t, h, "/")
	rev := string(src.LastAppliedRevision)
	if !strings.HasPrefix(rev, "sha256:") || len(rev) != len("sha256:")+64 {
		t.Fatalf("unexpected revision %q", rev)
	}
	for _, want := range []string{
		`<code class="rev" title="` + rev + `">` + rev[:len("sha256:")+12] + `</code>`,
		`title="` + absTime(*src.LastSyncTime) + `">42s ago</time>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("overview lacks %s", want)
		}
	}
}

// TestPagination pages through the resources two at a time.
func TestPagination(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := newHandler(f.st, Options{})
	h.pageSize = 2
	next := regexp.MustCompile(`<a rel="next" href="([^"]+)">`)
	seen := map[string]bool{}
	path := "/?source=examples"
	for page := 1; ; page++ {
		if page > 3 {
			t.Fatalf("more pages than expected, at %s", path)
		}
		code, body, _ := get(t, h, path)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, code)
		}
		rows := strings.Count(body, `<tr class="resource">`)
		if rows > 2 || rows == 0 {
			t.Fatalf("page %d has %d resources, want 1 or 2", page, rows)
		}
		for name := range exampleResources {
			if strings.Contains(body, `<span class="name">`+name+`</span>`) {
				if seen[name] {
					t.Errorf("%s is on two pages", name)
				}
				seen[name] = true
			}
		}
		if page > 1 && !strings.Contains(body, "« First page") {
			t.Errorf("page %d has no link to the first", page)
		}
		m := next.FindStringSubmatch(body)
		if m == nil {
			break
		}
		path = text(m[1])
		if !strings.Contains(path, "source=examples") || !strings.Contains(path, "after=") {
			t.Errorf("next page %s loses the filter or the cursor", path)
		}
	}
	if len(seen) != len(exampleResources) {
		t.Errorf("pages showed %v, want all of %v", seen, exampleResources)
	}
}

// TestRefresh checks the meta refresh for each setting of Options.Refresh.
func TestRefresh(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tests := []struct {
		name    string
		refresh time.Duration
		want    string // "" means no refresh
	}{
		{"default", 0, "5"},
		{"thirty seconds", 30 * time.Second, "30"},
		{"rounded up", 1500 * time.Millisecond, "2"},
		{"below a second", time.Millisecond, "1"},
		{"disabled", -1, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := New(f.st, Options{Refresh: tc.refresh})
			for _, path := range []string{"/", "/resources/" + fmt.Sprint(f.ids["prod-vpc"]), "/sources/examples"} {
				_, body, _ := get(t, h, path)
				meta := regexp.MustCompile(`<meta http-equiv="refresh" content="([^"]*)">`).FindStringSubmatch(body)
				switch {
				case tc.want == "" && meta != nil:
					t.Errorf("GET %s refreshes (%s) though refresh is disabled", path, meta[0])
				case tc.want == "" && strings.Contains(body, "refresh"):
					if !strings.Contains(body, "automatic refresh off") {
						t.Errorf("GET %s mentions a refresh", path)
					}
				case tc.want != "" && meta == nil:
					t.Errorf("GET %s has no meta refresh", path)
				case tc.want != "" && meta[1] != tc.want:
					t.Errorf("GET %s refreshes every %q, want %q", path, meta[1], tc.want)
				}
			}
			// An address that does not exist does not become one by reloading.
			if _, body, _ := get(t, h, "/nope"); strings.Contains(body, `http-equiv="refresh"`) {
				t.Error("the 404 page refreshes")
			}
		})
	}
}

// TestEscaping stores data full of markup and checks that every page
// shows it as text.
func TestEscaping(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	const (
		label   = `<script>alert("label")</script>`
		status  = `<script>alert("status")</script>`
		reason  = `<b>Reason</b>`
		message = `<img src=x onerror=alert("condition")>`
		hist    = `<script>alert("history")</script>`
		problem = `<script>alert("problem")</script>`
		commit  = `<script>alert("commit")</script>`
	)
	spec := json.RawMessage(`{"note":"</pre><script>alert(\"spec\")</script>"}`)
	res, err := f.st.CreateResource(ctx, &manifest.Resource{
		Kind: "Widget", Group: "example.com", Version: "v1", Name: "hostile",
		Labels: map[string]string{"note": label}, Annotations: map[string]string{"a": `"><script>x</script>`},
		Spec: spec, SpecHash: manifest.HashJSON(spec), Action: `<i>act</i>`,
		PluginConfig: json.RawMessage(`{"ref":"<script>alert(\"plugin\")</script>"}`),
	}, store.SourceRef{Name: store.APISource})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	outputs := json.RawMessage(`{"endpoint":"db.example.com","port":5432,"html":"<script>alert(\"outputs\")</script>"}`)
	if _, err := f.st.SetResourceStatus(ctx, res.ID, store.StatusUpdate{
		Phase: manifest.PhaseFailed, Message: status, ObservedGeneration: res.Generation, Outputs: outputs,
		Conditions: []manifest.Condition{{Type: manifest.ConditionReady, Status: manifest.ConditionFalse,
			Reason: reason, Message: message, LastTransitionTime: now}},
		LastReconcileTime: &now,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.AddReconcileRecord(ctx, &store.ReconcileRecord{ResourceID: res.ID, Kind: res.Kind, Name: res.Name,
		Generation: res.Generation, Trigger: store.TriggerCreate, Phase: "applying", Error: hist, AgentID: `<u>agent</u>`,
		StartedAt: now, FinishedAt: now}); err != nil {
		t.Fatal(err)
	}
	src, err := f.st.GetSource(ctx, sourceName)
	if err != nil {
		t.Fatal(err)
	}
	src.Phase = store.SourceFailed
	src.Message = problem
	src.LastCommit = manifest.Commit{Author: commit, Message: commit + "\nsecond line"}
	src.Errors = []manifest.Problem{{File: `a<b>.yaml`, Line: 3, Pointer: "/spec/<x>", Message: problem}}
	if _, err := f.st.PutSource(ctx, src); err != nil {
		t.Fatal(err)
	}

	h := New(f.st, Options{Version: `<script>alert("version")</script>`})
	tests := []struct {
		path string
		want []string
	}{
		{"/", []string{reason, message, problem, commit, "a<b>.yaml:3"}},
		{fmt.Sprintf("/resources/%d", res.ID), []string{label, status, reason, message, hist, "<u>agent</u>",
			`"html": "<script>alert(\"outputs\")</script>"`, `"endpoint": "db.example.com"`, `"port": 5432`,
			`</pre><script>alert(\"spec\")</script>`, "<i>act</i>", `{"ref":"<script>alert(\"plugin\")</script>"}`}},
		{"/sources/examples", []string{problem, commit, "a<b>.yaml:3", "/spec/<x>"}},
		{"/sources/api", []string{reason, message, "Widget/hostile"}},
	}
	markup := regexp.MustCompile(`(?i)<(script|img|b>|i>|u>)`)
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			t.Parallel()
			code, body, hdr := get(t, h, tc.path)
			if code != http.StatusOK {
				t.Fatalf("GET %s: %d", tc.path, code)
			}
			// The page's own script, and no other, carries its nonce.
			body = withoutOwnScript(t, body, hdr)
			if m := markup.FindAllString(body, -1); m != nil {
				t.Errorf("GET %s renders markup from data: %q", tc.path, m)
			}
			if !strings.Contains(body, "&lt;script&gt;") {
				t.Errorf("GET %s shows no escaped <script>", tc.path)
			}
			page := text(body)
			for _, w := range tc.want {
				if !strings.Contains(page, w) {
					t.Errorf("GET %s does not show %q as text", tc.path, w)
				}
			}
		})
	}
}

// TestStoreFailure makes each store read fail in turn: the page is a 500
// that does not show the error, and the error is logged.
func TestStoreFailure(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	res := fmt.Sprintf("/resources/%d", f.ids["production-pg"])
	tests := []struct{ method, path string }{
		{"Stats", "/"},
		{"ListSources", "/"},
		{"ListResources", "/"},
		{"GetResource", res},
		{"ListResources", res},
		{"ListReconcileRecords", res},
		{"GetSource", "/sources/examples"},
		{"ListSyncRecords", "/sources/examples"},
		{"ListResources", "/sources/examples"},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			t.Parallel()
			var logs logBuffer
			h := New(failingStore{Store: f.st, fail: tc.method}, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			code, body, _ := get(t, h, tc.path)
			if code != http.StatusInternalServerError {
				t.Fatalf("GET %s with %s failing: status %d, want 500", tc.path, tc.method, code)
			}
			if !strings.Contains(body, "The store could not be read") {
				t.Errorf("the 500 page does not say what failed:\n%s", body)
			}
			if strings.Contains(body, "boom") {
				t.Error("the 500 page shows the store's error")
			}
			if !strings.Contains(logs.String(), errBoom.Error()) || !strings.Contains(logs.String(), tc.path) {
				t.Errorf("the error is not logged with the path; log:\n%s", logs.String())
			}
		})
	}
	t.Run("closed store", func(t *testing.T) {
		t.Parallel()
		st := openStore(t)
		st.Close()
		code, body, _ := get(t, New(st, Options{}), "/")
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "cannot be reached") {
			t.Fatalf("GET / on a closed store: status %d, want 503 saying the store cannot be reached", code)
		}
	})
}

// TestStaticAndMethods checks the stylesheet and that the dashboard
// accepts reads only.
func TestStaticAndMethods(t *testing.T) {
	t.Parallel()
	h := New(nil, Options{})
	_, page, _ := get(t, h, "/nope")
	m := regexp.MustCompile(`<link rel="stylesheet" href="([^"]+)">`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no stylesheet link in:\n%s", page)
	}
	code, css, hdr := get(t, h, text(m[1]))
	if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "text/css") {
		t.Fatalf("GET %s: %d %s", m[1], code, hdr.Get("Content-Type"))
	}
	// The phone layout: cards instead of wide tables.
	for _, want := range []string{"@media (max-width:", "table.cards td::before", "content: attr(data-label)"} {
		if !strings.Contains(css, want) {
			t.Errorf("the stylesheet lacks %q", want)
		}
	}
	// Nothing is loaded from elsewhere.
	for _, bad := range []string{"@import", "url(", "http://", "https://"} {
		if strings.Contains(css, bad) || strings.Contains(page, bad) {
			t.Errorf("the dashboard refers to %q", bad)
		}
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, m[1], nil)
	req.Header.Set("If-None-Match", hdr.Get("ETag"))
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Errorf("revalidating the stylesheet: %d, want 304", rec.Code)
	}

	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, "/", nil))
		if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("%s /: %d, Allow %q", method, rec.Code, rec.Header().Get("Allow"))
		}
	}
}

func TestFormat(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, tc := range []struct {
		t    time.Time
		want string
	}{
		{now, "just now"},
		{now.Add(-12 * time.Second), "12s ago"},
		{now.Add(-5*time.Minute - 59*time.Second), "5m ago"},
		{now.Add(-3 * time.Hour), "3h ago"},
		{now.Add(-47 * time.Hour), "47h ago"},
		{now.Add(-72 * time.Hour), "3d ago"},
		{now.Add(40 * time.Second), "in 40s"},
	} {
		if got := relative(now, tc.t); got != tc.want {
			t.Errorf("relative(%s) = %q, want %q", now.Sub(tc.t), got, tc.want)
		}
	}
	for rev, want := range map[manifest.Revision]string{
		"main@sha1:0123456789abcdef0123456789abcdef01234567":                      "main@sha1:0123456",
		"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef": "sha256:0123456789ab",
		"feature/x@sha1:abc": "feature/x@sha1:abc",
		"plain":              "plain",
		"":                   "",
	} {
		if got := shortRevision(rev); got != want {
			t.Errorf("shortRevision(%q) = %q, want %q", rev, got, want)
		}
	}
	for d, want := range map[time.Duration]string{
		0: "0s", 850 * time.Microsecond: "850µs", 42*time.Millisecond + 300*time.Microsecond: "42ms",
		1254 * time.Millisecond: "1.25s", 192 * time.Second: "3m12s",
	} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%s) = %q, want %q", d, got, want)
		}
	}
	for in, want := range map[string]string{"subject\n\nbody": "subject", "one": "one", "\n  x\r\ny": "x", "": ""} {
		if got := firstLine(in); got != want {
			t.Errorf("firstLine(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{`{"a":[1,2]}`: "{\n  \"a\": [\n    1,\n    2\n  ]\n}", "null": "", "": "", "{bad": "{bad"} {
		if got := prettyJSON(json.RawMessage(in)); got != want {
			t.Errorf("prettyJSON(%s) = %q, want %q", in, got, want)
		}
	}
}

// TestResourceShowsGoneHolder shows a held resource's holder, and marks
// one that never beat or stopped beating; a live one is not marked.
func TestResourceShowsGoneHolder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	id := f.anyID()
	if _, err := f.st.RequestReconcile(ctx, id); err != nil {
		t.Fatal(err)
	}
	claims, err := f.st.ClaimResources(ctx, store.ClaimParams{Owner: "ghost-agent", Limit: 1, Duration: time.Hour})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %v %v", claims, err)
	}
	h := newHandler(f.st, Options{})
	path := fmt.Sprintf("/resources/%d", id)
	_, body, _ := get(t, h, path)
	if page := text(body); !strings.Contains(page, "ghost-agent since just now, lease ends") || !strings.Contains(page, "agent stopped") ||
		!strings.Contains(page, "never recorded a heartbeat") {
		t.Errorf("page of a resource held by an agent that never beat:\n%s", page)
	}
	if err := f.st.RecordAgent(ctx, &store.Agent{ID: "ghost-agent", Host: "h", StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	_, body, _ = get(t, h, path)
	if page := text(body); !strings.Contains(page, "ghost-agent since just now, lease ends") || strings.Contains(page, "agent stopped") {
		t.Errorf("page of a resource held by a live agent:\n%s", page)
	}
}

// TestFoldedChecksShown shows a record that stands for several no-drift
// checks with their count.
func TestFoldedChecksShown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	id := f.anyID()
	at := time.Now().Add(-time.Hour)
	for i := range 3 {
		rec := &store.ReconcileRecord{ResourceID: id, Kind: "X", Name: "x", Generation: 1, Trigger: store.TriggerDrift,
			Phase: "completed", Success: true, PlanOutput: "no changes", NoDriftChecks: 1,
			StartedAt: at.Add(time.Duration(i) * time.Minute), FinishedAt: at.Add(time.Duration(i) * time.Minute)}
		if _, err := f.st.AddReconcileRecord(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	_, body, _ := get(t, newHandler(f.st, Options{}), fmt.Sprintf("/resources/%d", id))
	if page := text(body); !strings.Contains(page, "no drift ×3, last") {
		t.Errorf("page lacks the folded checks:\n%s", page)
	}
}

// TestSuspensionShown shows a suspended resource and source, and counts
// suspended resources on the overview.
func TestSuspensionShown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	id := f.anyID()
	h := newHandler(f.st, Options{})
	path := fmt.Sprintf("/resources/%d", id)
	if _, body, _ := get(t, h, path); strings.Contains(text(body), "until resumed") {
		t.Fatalf("a resource not suspended reads as suspended:\n%s", text(body))
	}
	if _, err := f.st.SuspendResource(ctx, id, true, store.Suspension{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.SuspendSource(ctx, sourceName, store.SuspendedByConfig, true, store.Suspension{}); err != nil {
		t.Fatal(err)
	}
	if _, body, _ := get(t, h, path); !strings.Contains(text(body), "yes through the API just now not reconciled, checked for drift or destroyed until resumed") {
		t.Errorf("page of a suspended resource:\n%s", text(body))
	}
	if _, body, _ := get(t, h, "/sources/"+sourceName); !strings.Contains(text(body), "yes by suspend: true in the configuration") {
		t.Errorf("page of a suspended source:\n%s", text(body))
	}
	if _, body, _ := get(t, h, "/"); !regexp.MustCompile(`\b1\s+suspended\b`).MatchString(text(body)) {
		t.Errorf("overview does not count the suspended resource:\n%s", text(body))
	}
	// Suspended by its annotation, it says since when as well.
	var other int64
	for _, o := range f.ids {
		if o != id {
			other = o
		}
	}
	cur, err := f.st.GetResource(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	annotated := cur.Resource
	annotated.Annotations = map[string]string{manifest.AnnotationSuspend: "true"}
	if _, _, err := f.st.ApplyResource(ctx, &annotated, cur.Source); err != nil {
		t.Fatal(err)
	}
	if _, body, _ := get(t, h, fmt.Sprintf("/resources/%d", other)); !strings.Contains(text(body), "yes by its annotation no8s.io/suspend just now not reconciled") {
		t.Errorf("page of a resource suspended by its annotation:\n%s", text(body))
	}
}

// TestNotificationsShown lists a source's notifications and how their
// deliveries went.
func TestNotificationsShown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	id := f.anyID()
	if _, err := f.st.SetResourceStatus(ctx, id, store.StatusUpdate{Phase: manifest.PhaseFailed, Message: "boom <b>"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.RouteNotices(ctx, 10, func(*store.Notice) []string { return []string{"ops-hook"} }); err != nil {
		t.Fatal(err)
	}
	claimed, err := f.st.ClaimNotices(ctx, "a1", 10, time.Minute)
	if err != nil || len(claimed) == 0 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	for _, n := range claimed {
		if err := f.st.CompleteNotice(ctx, n, store.NoticeCompletion{Pending: []string{"ops-hook"},
			Results: map[string]store.Delivery{"ops-hook": {Result: store.DeliveryFailed, Error: "POST https://hooks.example.com: 503", Attempts: 2}}}); err != nil {
			t.Fatal(err)
		}
	}
	h := newHandler(f.st, Options{})
	_, body, _ := get(t, h, "/sources/"+sourceName)
	page := text(body)
	for _, want := range []string{"Notifications", "ResourceFailed", "ops-hook failed after 2 attempts POST https://hooks.example.com: 503",
		"to retry: ops-hook", "boom <b>"} {
		if !strings.Contains(page, want) {
			t.Errorf("source page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(body, "boom <b>") {
		t.Error("a notice's message is not escaped")
	}
}
