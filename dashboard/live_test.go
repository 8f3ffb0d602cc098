package dashboard

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

// scriptTag matches the start tag of a script element.
var scriptTag = regexp.MustCompile(`(?i)<script\b[^>]*>`)

// cspNonce reads the nonce of a Content-Security-Policy.
var cspNonce = regexp.MustCompile(`script-src 'nonce-([A-Za-z0-9_-]+)'`)

// pageNonce returns the script nonce of a page's Content-Security-Policy.
func pageNonce(t *testing.T, hdr http.Header) string {
	t.Helper()
	m := cspNonce.FindStringSubmatch(hdr.Get("Content-Security-Policy"))
	if m == nil {
		t.Fatalf("the Content-Security-Policy has no script nonce: %q", hdr.Get("Content-Security-Policy"))
	}
	return m[1]
}

// withoutOwnScript checks that the page has exactly one script element, its
// own script with the nonce of its Content-Security-Policy, and returns the
// page without it.
func withoutOwnScript(t *testing.T, body string, hdr http.Header) string {
	t.Helper()
	own := regexp.MustCompile(`<script src="/static/live\.js\?v=[0-9a-f]+" nonce="` + regexp.QuoteMeta(pageNonce(t, hdr)) + `" defer></script>`)
	if n := len(own.FindAllString(body, -1)); n != 1 {
		t.Errorf("the page has its own script %d times, want once", n)
	}
	return own.ReplaceAllString(body, "")
}

// TestContentSecurityPolicy checks the policy of every kind of page: a
// fresh nonce in each response, carried by the one script tag, and nothing
// else allowed but the page's own stylesheet, event stream and actions.
func TestContentSecurityPolicy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := New(f.st, Options{EventsURL: api.EventsPath})
	failing := New(failingStore{Store: f.st, fail: "ListSources"}, Options{EventsURL: api.EventsPath})
	res := fmt.Sprintf("/resources/%d", f.ids["production-pg"])
	const want = "default-src 'none'; script-src 'nonce-N'; connect-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
	for _, tc := range []struct {
		name, method, path string
		h                  http.Handler
		code               int
	}{
		{"overview", "GET", "/", h, 200},
		{"resource", "GET", res, h, 200},
		{"source", "GET", "/sources/" + sourceName, h, 200},
		{"API source", "GET", "/sources/api", h, 200},
		{"not found", "GET", "/nope", h, 404},
		{"bad request", "GET", "/resources/abc", h, 400},
		{"wrong method", "POST", "/", h, 405},
		{"store failure", "GET", "/", failing, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var nonces []string
			for range 2 {
				rec := httptest.NewRecorder()
				tc.h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
				body, hdr := rec.Body.String(), rec.Header()
				if rec.Code != tc.code {
					t.Fatalf("%s %s: %d, want %d", tc.method, tc.path, rec.Code, tc.code)
				}
				csp := hdr.Get("Content-Security-Policy")
				nonce := pageNonce(t, hdr)
				if len(nonce) < 22 {
					t.Errorf("the nonce %q is short", nonce)
				}
				if got := strings.Replace(csp, nonce, "N", 1); got != want {
					t.Errorf("Content-Security-Policy\n %s\nwant\n %s", got, want)
				}
				for _, bad := range []string{"unsafe-inline", "unsafe-eval", "unsafe-hashes", "strict-dynamic", "*", "http:", "https:"} {
					if strings.Contains(csp, bad) {
						t.Errorf("the policy allows %s: %s", bad, csp)
					}
				}
				tags := scriptTag.FindAllString(body, -1)
				for _, tag := range tags {
					if !strings.Contains(tag, `nonce="`+nonce+`"`) {
						t.Errorf("a script tag without the page's nonce: %s", tag)
					}
				}
				if rest := withoutOwnScript(t, body, hdr); strings.Contains(strings.ToLower(rest), "<script") || strings.Contains(rest, nonce) {
					t.Errorf("the page has script tags besides its own, or shows its nonce elsewhere: %v", tags)
				}
				// No inline handlers or styles, which the policy would block.
				if m := regexp.MustCompile(`(?i)\s(on[a-z]+|style)=`).FindAllString(body, -1); m != nil {
					t.Errorf("inline handlers or styles: %q", m)
				}
				nonces = append(nonces, nonce)
			}
			if nonces[0] == nonces[1] {
				t.Errorf("two responses share the nonce %s", nonces[0])
			}
		})
	}
}

// TestLiveScriptServed checks that the script is served as the stylesheet
// is, and uses nothing the policy forbids.
func TestLiveScriptServed(t *testing.T) {
	t.Parallel()
	h := New(nil, Options{})
	_, page, _ := get(t, h, "/nope")
	m := regexp.MustCompile(`<script src="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no script in:\n%s", page)
	}
	code, js, hdr := get(t, h, text(m[1]))
	if code != http.StatusOK || hdr.Get("Content-Type") != "text/javascript; charset=utf-8" || hdr.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("GET %s: %d %v", m[1], code, hdr)
	}
	for _, want := range []string{"EventSource", "fetch(", `"Content-Type": "application/json"`, `credentials: "same-origin"`, "showModal"} {
		if !strings.Contains(js, want) {
			t.Errorf("the script lacks %q", want)
		}
	}
	for _, bad := range []string{"eval(", "new Function", "innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
		".style", "setAttribute(\"style", "http://", "https://", "import "} {
		if strings.Contains(js, bad) {
			t.Errorf("the script uses %q", bad)
		}
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, text(m[1]), nil)
	req.Header.Set("If-None-Match", hdr.Get("ETag"))
	h.ServeHTTP(rec, req)
	if hdr.Get("ETag") == "" || rec.Code != http.StatusNotModified {
		t.Errorf("revalidating the script (ETag %q): %d, want 304", hdr.Get("ETag"), rec.Code)
	}
}

// TestLiveMarkup checks what the pages tell the script: the stream to
// listen to and which resources concern them, and that the meta refresh is
// left to browsers that run no script.
func TestLiveMarkup(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	pg, vpc, dns := f.ids["production-pg"], f.ids["prod-vpc"], f.ids["db-production"]
	live := New(f.st, Options{EventsURL: api.EventsPath})
	for _, tc := range []struct {
		path, events, ids string
	}{
		{"/", "/api/v1/events", ""},
		{"/sources/" + sourceName, "/api/v1/events?source=" + sourceName, ""},
		// production-pg depends on prod-vpc, and db-production on it.
		{fmt.Sprintf("/resources/%d", pg), "/api/v1/events", fmt.Sprintf("%d %d %d", pg, vpc, dns)},
	} {
		_, body, _ := get(t, live, tc.path)
		m := regexp.MustCompile(`<main data-region="main"([^>]*)>`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("GET %s: no main region", tc.path)
		}
		want := ` data-events="` + tc.events + `"`
		if tc.ids != "" {
			want += ` data-ids="` + tc.ids + `"`
		}
		if m[1] != want {
			t.Errorf("GET %s: main has%s, want%s", tc.path, m[1], want)
		}
		if !strings.Contains(body, `<noscript><meta http-equiv="refresh" content="5"></noscript>`) ||
			strings.Count(body, `http-equiv="refresh"`) != 1 {
			t.Errorf("GET %s: the meta refresh is not (only) in <noscript>", tc.path)
		}
	}
	// Without a stream, or with refreshing off, pages do not listen.
	for _, h := range []http.Handler{New(f.st, Options{}), New(f.st, Options{EventsURL: api.EventsPath, Refresh: -1})} {
		if _, body, _ := get(t, h, "/"); strings.Contains(body, "data-events") || strings.Contains(body, "<noscript><meta") {
			t.Errorf("a page listens though it should not:\n%s", body)
		}
	}
	// A page that will not come back by reloading does not listen either.
	if _, body, _ := get(t, live, "/nope"); strings.Contains(body, "data-events") {
		t.Error("the 404 page listens to the event stream")
	}
}

// Tokens of the agent the tests below run: the write and read tokens, and
// a scoped one.
const (
	writeSecret = "write-secret-for-the-dashboard"
	readSecret  = "read-secret-for-the-dashboard"
	opsSecret   = "ops-secret-for-the-dashboard"
)

// opsToken may read everything, reconcile Networks, and suspend and resume
// what is in the example source.
var opsToken = api.Token{Name: "ops", Value: opsSecret, Grants: []api.Grant{
	{Verbs: []string{api.VerbGet, api.VerbList}},
	{Verbs: []string{api.VerbReconcile}, Kinds: []string{"Network"}},
	{Verbs: []string{api.VerbSuspend}, Sources: []string{sourceName}},
}}

// liveServer is the agent's API with the dashboard mounted as the agent
// mounts it, over the fixture's store.
type liveServer struct {
	url  string
	logs *logBuffer
	// writes records the bodies of the requests that reached the API's
	// write endpoints, by path.
	mu     gosync.Mutex
	writes map[string][]string
	// pageHits counts the requests for pages (not the API's), by path.
	pageHits map[string]int
	// streams are the event streams open now, which the test may cut;
	// while down, new ones are answered 503.
	streams map[*http.Request]context.CancelFunc
	down    bool
}

// triggerer knows the example source.
type triggerer struct{}

func (triggerer) Trigger(name string, _ bool) bool { return name == sourceName }
func (triggerer) Sources() []string                { return []string{sourceName} }

func newLiveServer(t *testing.T, st store.Store, refresh time.Duration) *liveServer {
	t.Helper()
	ls := &liveServer{logs: &logBuffer{}, writes: map[string][]string{}, pageHits: map[string]int{},
		streams: map[*http.Request]context.CancelFunc{}}
	log := slog.New(slog.NewTextHandler(ls.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var srv *api.Server
	dash := New(st, Options{Logger: log, Version: "live-test", Refresh: refresh, EventsURL: api.EventsPath,
		Allows: func(r *http.Request, verb string, o Object) bool {
			return srv.Allows(r, verb, o.Kind, o.Namespace, o.Source, o.Action)
		}})
	srv = api.New(api.Options{Store: st, Syncer: sync.New(st, nil), Sources: triggerer{}, Dashboard: dash,
		WriteToken: writeSecret, ReadToken: readSecret, Tokens: []api.Token{opsToken}, Logger: log, Heartbeat: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	hs := httptest.NewServer(ls.record(srv.Handler()))
	t.Cleanup(func() {
		cancel()
		<-done
		hs.Close()
	})
	ls.url = hs.URL
	return ls
}

// record notes the writes and the page requests, and lets the test cut
// the event streams.
func (ls *liveServer) record(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost:
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			ls.mu.Lock()
			ls.writes[r.URL.Path] = append(ls.writes[r.URL.Path], string(body))
			ls.mu.Unlock()
		case r.URL.Path == api.EventsPath:
			ls.mu.Lock()
			if ls.down {
				ls.mu.Unlock()
				http.Error(w, "down for the test", http.StatusServiceUnavailable)
				return
			}
			ctx, cancel := context.WithCancel(r.Context())
			r = r.WithContext(ctx)
			ls.streams[r] = cancel
			ls.mu.Unlock()
			defer func() {
				ls.mu.Lock()
				delete(ls.streams, r)
				ls.mu.Unlock()
				cancel()
			}()
		case !strings.HasPrefix(r.URL.Path, "/api/") && !strings.HasPrefix(r.URL.Path, "/static/"):
			ls.mu.Lock()
			ls.pageHits[r.URL.Path]++
			ls.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

// cutStreams ends the open event streams, and refuses new ones while down.
func (ls *liveServer) cutStreams(down bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.down = down
	for _, cancel := range ls.streams {
		cancel()
	}
}

// openStreams is how many event streams are open.
func (ls *liveServer) openStreams() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return len(ls.streams)
}

func (ls *liveServer) written(path string) []string {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return slices.Clone(ls.writes[path])
}

func (ls *liveServer) hits(path string) int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.pageHits[path]
}

// do sends a request as the dashboard's script does: basic-auth
// credentials, JSON, from the agent's own origin.
func (ls *liveServer) do(t *testing.T, method, path, secret, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, ls.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if secret != "" {
		req.SetBasicAuth("someone", secret)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", ls.url)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(data)
}

// buttonURL matches the endpoint of an action button.
var buttonURL = regexp.MustCompile(`<button type="button" class="action[^"]*" data-url="([^"]+)"`)

// buttons returns the endpoints of the action buttons of a page as the
// caller with secret sees it.
func (ls *liveServer) buttons(t *testing.T, path, secret string) []string {
	t.Helper()
	code, body := ls.do(t, http.MethodGet, path, secret, "")
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", path, code, body)
	}
	var out []string
	for _, m := range buttonURL.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	if len(out) > 0 && !strings.Contains(body, `<div class="actions" data-actions hidden>`) {
		t.Errorf("GET %s: the buttons are not hidden until the script shows them", path)
	}
	return out
}

// TestActionsByGrant checks that the pages offer each caller the actions
// its grants allow and no other, that the endpoints refuse the others, and
// that the writes the buttons send are accepted and audited with the
// caller's name.
func TestActionsByGrant(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ls := newLiveServer(t, f.st, 0)
	pg, vpc := f.ids["production-pg"], f.ids["prod-vpc"]
	res := func(id int64, verb string) string { return fmt.Sprintf("/api/v1/resources/%d/%s", id, verb) }
	src := func(verb string) string { return "/api/v1/sources/" + sourceName + "/" + verb }
	pgPage, vpcPage, srcPage := fmt.Sprintf("/resources/%d", pg), fmt.Sprintf("/resources/%d", vpc), "/sources/"+sourceName

	for _, tc := range []struct {
		who, secret      string
		pg, vpc, sources []string
	}{
		{"write token", writeSecret, []string{res(pg, "reconcile"), res(pg, "suspend")},
			[]string{res(vpc, "reconcile"), res(vpc, "suspend")}, []string{src("sync"), src("suspend")}},
		{"read token", readSecret, nil, nil, nil},
		{"scoped token", opsSecret, []string{res(pg, "suspend")}, []string{res(vpc, "reconcile"), res(vpc, "suspend")},
			[]string{src("suspend")}},
	} {
		for _, page := range []struct {
			path string
			want []string
		}{{pgPage, tc.pg}, {vpcPage, tc.vpc}, {srcPage, tc.sources}} {
			if got := ls.buttons(t, page.path, tc.secret); !slices.Equal(got, page.want) {
				t.Errorf("%s on %s: buttons %v, want %v", tc.who, page.path, got, page.want)
			}
		}
		// The overview is not redesigned here: it offers nothing.
		if got := ls.buttons(t, "/", tc.secret); got != nil {
			t.Errorf("%s on the overview: buttons %v", tc.who, got)
		}
	}

	// What a caller is not offered, the API refuses.
	for _, tc := range []struct{ secret, path string }{
		{readSecret, res(pg, "reconcile")}, {readSecret, res(pg, "suspend")}, {readSecret, src("sync")},
		{opsSecret, res(pg, "reconcile")}, {opsSecret, src("sync")}, {opsSecret, src("approve")},
	} {
		if code, body := ls.do(t, http.MethodPost, tc.path, tc.secret, `{}`); code != http.StatusForbidden {
			t.Errorf("POST %s refused? %d %s, want 403", tc.path, code, body)
		}
	}
	if code, _ := ls.do(t, http.MethodPost, res(pg, "reconcile"), "", `{}`); code != http.StatusUnauthorized {
		t.Errorf("POST without credentials: %d, want 401", code)
	}

	// What it is offered goes through, as the buttons send it.
	if code, body := ls.do(t, http.MethodPost, res(vpc, "reconcile"), opsSecret, `{}`); code != http.StatusAccepted {
		t.Fatalf("reconcile by ops: %d %s", code, body)
	}
	if code, body := ls.do(t, http.MethodPost, res(pg, "suspend"), opsSecret, `{"reason":"maintenance window"}`); code != http.StatusOK {
		t.Fatalf("suspend with a reason by ops: %d %s", code, body)
	}
	got, err := f.st.GetResource(t.Context(), pg)
	if err != nil || got.SuspendedBy() != store.SuspendedByAPI {
		t.Fatalf("production-pg after the suspend: %v %v", got, err)
	}
	// Suspended, it offers resume instead, and no reconcile.
	if b := ls.buttons(t, pgPage, writeSecret); !slices.Equal(b, []string{res(pg, "resume")}) {
		t.Errorf("a suspended resource offers %v, want resume only", b)
	}
	if code, body := ls.do(t, http.MethodPost, res(pg, "resume"), writeSecret, `{"reason":"done"}`); code != http.StatusOK {
		t.Fatalf("resume: %d %s", code, body)
	}
	// The API's rule against cross-site writes holds for these callers:
	// a form's post is refused.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, ls.url+res(vpc, "reconcile"), strings.NewReader("a=b"))
	req.SetBasicAuth("someone", writeSecret)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("a form's post with basic auth: %v %v, want 403", resp, err)
	} else {
		resp.Body.Close()
	}
	logs := ls.logs.String()
	for _, want := range []string{
		fmt.Sprintf(`level=INFO msg="api request" token=ops method=POST path=/api/v1/resources/%d/reconcile`, vpc),
		fmt.Sprintf(`level=INFO msg="api request" token=ops method=POST path=/api/v1/resources/%d/suspend`, pg),
		fmt.Sprintf(`level=INFO msg="api request" token=write method=POST path=/api/v1/resources/%d/resume`, pg),
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %s:\n%s", want, logs)
		}
	}

	// A source stalled on the prune guard offers its approval, of the
	// revision the page shows.
	s, err := f.st.GetSource(t.Context(), sourceName)
	if err != nil {
		t.Fatal(err)
	}
	s.Phase, s.Message = store.SourceStalled, "the revision would delete 4 of 4 resources"
	s.LastAttemptedRevision = manifest.Revision("main@sha1:" + strings.Repeat("c", 40))
	if _, err := f.st.PutSource(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	if b := ls.buttons(t, srcPage, writeSecret); !slices.Equal(b, []string{src("sync"), src("approve"), src("suspend")}) {
		t.Errorf("a stalled source offers %v", b)
	}
	if _, body := ls.do(t, http.MethodGet, srcPage, writeSecret, ""); !strings.Contains(body, `data-revision="`+string(s.LastAttemptedRevision)+`"`) {
		t.Error("the approve button does not carry the revision the page shows")
	}
	if b := ls.buttons(t, srcPage, opsSecret); !slices.Equal(b, []string{src("suspend")}) {
		t.Errorf("ops is offered %v on a stalled source", b)
	}
}
