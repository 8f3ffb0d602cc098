package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	gosync "sync"
	"testing"

	"github.com/google/go-github/v60/github"
)

const testSecret = "whsec-7f3a9c-never-show-me"

// testSources covers every way a source can follow a ref, plus sources of
// another repository and one the runner does not know.
var testSources = []Source{
	{Name: "app-main", URL: "https://github.com/acme/app", Branch: "main"},
	{Name: "app-main-scp", URL: "git@github.com:Acme/App.git", Branch: "main"},
	{Name: "app-dev", URL: "https://github.com/acme/app.git", Branch: "dev"},
	{Name: "app-default", URL: "ssh://git@github.com/acme/app"},
	{Name: "app-pinned", URL: "https://github.com/acme/app", Branch: "main",
		Commit: "0123456789abcdef0123456789abcdef01234567"},
	{Name: "app-pinned-tag", URL: "https://github.com/acme/app", Tag: "v1.2.3", SemVer: ">=1.0.0",
		Commit: "0123456789abcdef0123456789abcdef01234567"},
	{Name: "app-tag", URL: "https://github.com/acme/app", Tag: "v1.2.3"},
	{Name: "app-semver", URL: "https://github.com/acme/app", Branch: "main", SemVer: ">=1.0.0 <2.0.0"},
	{Name: "app-semver-over-tag", URL: "https://github.com/acme/app", Tag: "v1.2.3", SemVer: ">=3.0.0"},
	{Name: "app-bad-semver", URL: "https://github.com/acme/app", SemVer: "not a range"},
	{Name: "app-unknown", URL: "https://github.com/acme/app", Branch: "release"},
	{Name: "app-local", URL: "file:///srv/git/app", Branch: "main"},
	{Name: "other-main", URL: "https://github.com/acme/other", Branch: "main"},
}

// recorder stands in for the sync runner and the metrics.
type recorder struct {
	mu         gosync.Mutex
	triggered  []string
	deliveries [][2]string
}

func (r *recorder) trigger(name string) bool {
	if name == "app-unknown" {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.triggered = append(r.triggered, name)
	return true
}

func (r *recorder) onDelivery(event, result string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deliveries = append(r.deliveries, [2]string{event, result})
}

func (r *recorder) calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.triggered)
}

func (r *recorder) lastDelivery(t *testing.T) [2]string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.deliveries) != 1 {
		t.Fatalf("OnDelivery called %d times, want 1: %v", len(r.deliveries), r.deliveries)
	}
	return r.deliveries[0]
}

func newHandler(opts GitHubOptions) (http.Handler, *recorder) {
	rec := &recorder{}
	if opts.Sources == nil {
		opts.Sources = testSources
	}
	opts.Trigger = rec.trigger
	opts.OnDelivery = rec.onDelivery
	return NewGitHub(opts), rec
}

func sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// request builds a delivery as GitHub sends it, signed with testSecret.
func request(event string, body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hooks/github", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-GitHub-Event", event)
	r.Header.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	r.Header.Set("X-Hub-Signature-256", sign(testSecret, body))
	return r
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// repo is the repository object of a push payload as GitHub sends it.
func repo(owner, name, defaultBranch string) map[string]any {
	full := owner + "/" + name
	return map[string]any{
		"id": 1296269, "name": name, "full_name": full,
		"url":            "https://github.com/" + full,
		"html_url":       "https://github.com/" + full,
		"clone_url":      "https://github.com/" + full + ".git",
		"git_url":        "git://github.com/" + full + ".git",
		"ssh_url":        "git@github.com:" + full + ".git",
		"svn_url":        "https://github.com/" + full,
		"default_branch": defaultBranch,
		"master_branch":  defaultBranch,
		// Push payloads carry Unix times where other events carry strings.
		"created_at": 1700000000, "pushed_at": 1700000100,
	}
}

func pushBody(t *testing.T, ref string, deleted bool, repository map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"ref": ref, "before": "6113728f27ae82c7b1a177c8d03f9e96e0adf246",
		"after": "0000000000000000000000000000000000000000", "created": false, "deleted": deleted,
		"repository": repository, "pusher": map[string]any{"name": "octocat"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decode(t *testing.T, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatalf("body %q is not JSON: %v", w.Body, err)
	}
	return m
}

func TestPush(t *testing.T) {
	t.Parallel()
	app := repo("acme", "app", "main")
	only := func(key string) map[string]any {
		return map[string]any{key: app[key], "default_branch": "main", "full_name": "acme/app"}
	}
	masterOnly := repo("acme", "app", "")
	delete(masterOnly, "default_branch")
	masterOnly["master_branch"] = "trunk"
	tests := []struct {
		name       string
		ref        string
		deleted    bool
		repository map[string]any
		want       []string
	}{
		{"default branch push", "refs/heads/main", false, app, []string{"app-main", "app-main-scp", "app-default"}},
		{"other branch", "refs/heads/dev", false, app, []string{"app-dev"}},
		{"branch nobody follows", "refs/heads/feature/x", false, app, nil},
		{"branch of a source the runner does not know", "refs/heads/release", false, app, nil},
		{"main is not the default branch", "refs/heads/main", false, repo("acme", "app", "trunk"),
			[]string{"app-main", "app-main-scp"}},
		{"default branch trunk", "refs/heads/trunk", false, repo("acme", "app", "trunk"), []string{"app-default"}},
		{"default branch from master_branch", "refs/heads/trunk", false, masterOnly, []string{"app-default"}},
		{"deleted branch", "refs/heads/main", true, app, nil},
		{"deleted tag", "refs/tags/v1.2.3", true, app, nil},
		{"other repository", "refs/heads/main", false, repo("acme", "other", "main"), []string{"other-main"}},
		{"unknown repository", "refs/heads/main", false, repo("evil", "app", "main"), nil},
		{"repository case differs", "refs/heads/main", false, repo("ACME", "App", "main"),
			[]string{"app-main", "app-main-scp", "app-default"}},
		{"only clone_url", "refs/heads/dev", false, only("clone_url"), []string{"app-dev"}},
		{"only ssh_url", "refs/heads/dev", false, only("ssh_url"), []string{"app-dev"}},
		{"only git_url", "refs/heads/dev", false, only("git_url"), []string{"app-dev"}},
		{"only html_url", "refs/heads/dev", false, only("html_url"), []string{"app-dev"}},
		{"only url", "refs/heads/dev", false, only("url"), []string{"app-dev"}},
		{"no repository", "refs/heads/main", false, nil, nil},
		{"exact tag and semver", "refs/tags/v1.2.3", false, app, []string{"app-tag", "app-semver"}},
		{"tag in semver range", "refs/tags/v1.5.0", false, app, []string{"app-semver"}},
		{"tag in semver range without v", "refs/tags/1.9.9", false, app, []string{"app-semver"}},
		{"tag above semver range", "refs/tags/v2.0.0", false, app, nil},
		{"semver wins over tag", "refs/tags/v3.1.0", false, app, []string{"app-semver-over-tag"}},
		{"prerelease outside range", "refs/tags/v1.6.0-rc.1", false, app, nil},
		{"tag that is no version", "refs/tags/latest", false, app, nil},
		{"branch named like the tag", "refs/heads/v1.2.3", false, app, nil},
		{"tag named like the branch", "refs/tags/main", false, app, nil},
		{"ref of another kind", "refs/notes/commits", false, app, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, rec := newHandler(GitHubOptions{Secret: testSecret})
			w := serve(h, request("push", pushBody(t, tt.ref, tt.deleted, tt.repository)))
			if w.Code != http.StatusOK {
				t.Fatalf("status = %d, want 200; body %s", w.Code, w.Body)
			}
			body := decode(t, w)
			var answered []string
			list, ok := body["triggered"].([]any)
			if !ok || body["event"] != "push" {
				t.Fatalf("body = %s, want event push and a triggered list", w.Body)
			}
			for _, v := range list {
				answered = append(answered, v.(string))
			}
			want := tt.want
			if want == nil {
				want = []string{}
			}
			if got := rec.calls(); !slices.Equal(sorted(got), sorted(want)) {
				t.Errorf("Trigger called for %v, want %v", got, want)
			}
			if !slices.Equal(sorted(answered), sorted(want)) {
				t.Errorf("answered triggered %v, want %v", answered, want)
			}
			result := ResultTriggered
			if len(want) == 0 {
				result = ResultUnmatched
			}
			if got := rec.lastDelivery(t); got != [2]string{"push", result} {
				t.Errorf("OnDelivery(%q, %q), want (push, %q)", got[0], got[1], result)
			}
		})
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	if s == nil {
		s = []string{}
	}
	slices.Sort(s)
	return s
}

// TestPushForm covers the form content type GitHub offers besides JSON: the
// signature is over the form body, not the JSON in it.
func TestPushForm(t *testing.T) {
	t.Parallel()
	h, rec := newHandler(GitHubOptions{Secret: testSecret})
	form := []byte(url.Values{"payload": {string(pushBody(t, "refs/heads/dev", false, repo("acme", "app", "main")))}}.Encode())
	r := request("push", form)
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w := serve(h, r)
	if w.Code != http.StatusOK {
		t.Fatalf("status = %d, want 200; body %s", w.Code, w.Body)
	}
	if got := rec.calls(); !slices.Equal(got, []string{"app-dev"}) {
		t.Errorf("Trigger called for %v, want [app-dev]", got)
	}
}

func TestRejected(t *testing.T) {
	t.Parallel()
	push := pushBody(t, "refs/heads/main", false, repo("acme", "app", "main"))
	big := pushBody(t, "refs/heads/main", false, repo("acme", "app", strings.Repeat("x", 2048)))
	tests := []struct {
		name    string
		secret  string
		maxBody int64
		req     func() *http.Request
		status  int
		result  string
		event   string // reported to OnDelivery
		errText string // in the error message
	}{
		{"forged signature", testSecret, 0, func() *http.Request {
			r := request("push", push)
			r.Header.Set("X-Hub-Signature-256", sign("guessed", push))
			return r
		}, http.StatusUnauthorized, ResultUnauthorized, "", "signature"},
		{"signature of another body", testSecret, 0, func() *http.Request {
			r := request("push", push)
			r.Header.Set("X-Hub-Signature-256", sign(testSecret, []byte("{}")))
			return r
		}, http.StatusUnauthorized, ResultUnauthorized, "", "signature"},
		{"missing signature", testSecret, 0, func() *http.Request {
			r := request("push", push)
			r.Header.Del("X-Hub-Signature-256")
			return r
		}, http.StatusUnauthorized, ResultUnauthorized, "", "X-Hub-Signature-256"},
		{"empty signature", testSecret, 0, func() *http.Request {
			r := request("push", push)
			r.Header.Set("X-Hub-Signature-256", "sha256=")
			return r
		}, http.StatusUnauthorized, ResultUnauthorized, "", "signature"},
		{"signature not hex", testSecret, 0, func() *http.Request {
			r := request("push", push)
			r.Header.Set("X-Hub-Signature-256", "sha256=zz")
			return r
		}, http.StatusUnauthorized, ResultUnauthorized, "", "signature"},
		{"only the SHA-1 signature", testSecret, 0, func() *http.Request {
			r := request("push", push)
			r.Header.Del("X-Hub-Signature-256")
			r.Header.Set("X-Hub-Signature", "sha1=0000000000000000000000000000000000000000")
			return r
		}, http.StatusUnauthorized, ResultUnauthorized, "", "X-Hub-Signature-256"},
		{"SHA-1 in the SHA-256 header", testSecret, 0, func() *http.Request {
			r := request("push", push)
			r.Header.Set("X-Hub-Signature-256", "sha1=0000000000000000000000000000000000000000")
			return r
		}, http.StatusUnauthorized, ResultUnauthorized, "", "X-Hub-Signature-256"},
		{"no secret configured", "", 0, func() *http.Request {
			return request("push", push)
		}, http.StatusForbidden, ResultUnconfigured, "", "webhooks.githubSecretEnv"},
		{"no secret configured, unsigned", "", 0, func() *http.Request {
			r := request("push", push)
			r.Header.Del("X-Hub-Signature-256")
			return r
		}, http.StatusForbidden, ResultUnconfigured, "", "webhooks.githubSecretEnv"},
		{"GET", testSecret, 0, func() *http.Request {
			r := request("push", push)
			r.Method = http.MethodGet
			return r
		}, http.StatusMethodNotAllowed, ResultInvalid, "", "POST"},
		{"body over the limit", testSecret, 1024, func() *http.Request {
			return request("push", big)
		}, http.StatusRequestEntityTooLarge, ResultInvalid, "", "1024"},
		{"body over the limit without Content-Length", testSecret, 1024, func() *http.Request {
			r := request("push", big)
			r.ContentLength = -1
			return r
		}, http.StatusRequestEntityTooLarge, ResultInvalid, "", "1024"},
		{"body over the default limit", testSecret, 0, func() *http.Request {
			huge := make([]byte, DefaultMaxBodyBytes+1)
			r := request("push", nil)
			r.Body = io.NopCloser(bytes.NewReader(huge))
			r.ContentLength = -1
			return r
		}, http.StatusRequestEntityTooLarge, ResultInvalid, "", "26214400"},
		{"malformed JSON", testSecret, 0, func() *http.Request {
			return request("push", []byte(`{"ref": "refs/heads/main",`))
		}, http.StatusBadRequest, ResultInvalid, "push", "JSON"},
		{"malformed JSON of an ignored event", testSecret, 0, func() *http.Request {
			return request("issues", []byte(`{"action":`))
		}, http.StatusBadRequest, ResultInvalid, "issues", "JSON"},
		{"push of the wrong shape", testSecret, 0, func() *http.Request {
			return request("push", []byte(`{"ref": 5, "repository": {"clone_url": "https://github.com/acme/app"}}`))
		}, http.StatusBadRequest, ResultInvalid, "push", "push"},
		{"form without payload", testSecret, 0, func() *http.Request {
			body := []byte("other=1")
			r := request("push", body)
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return r
		}, http.StatusBadRequest, ResultInvalid, "push", "JSON"},
		{"missing event type", testSecret, 0, func() *http.Request {
			r := request("push", push)
			r.Header.Del("X-GitHub-Event")
			return r
		}, http.StatusBadRequest, ResultInvalid, "", "X-GitHub-Event"},
		{"wrong content type", testSecret, 0, func() *http.Request {
			r := request("push", push)
			r.Header.Set("Content-Type", "text/plain")
			return r
		}, http.StatusUnsupportedMediaType, ResultInvalid, "", "Content-Type"},
		{"no content type", testSecret, 0, func() *http.Request {
			r := request("push", push)
			r.Header.Del("Content-Type")
			return r
		}, http.StatusUnsupportedMediaType, ResultInvalid, "", "Content-Type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, rec := newHandler(GitHubOptions{Secret: tt.secret, MaxBodyBytes: tt.maxBody})
			w := serve(h, tt.req())
			if w.Code != tt.status {
				t.Errorf("status = %d, want %d; body %s", w.Code, tt.status, w.Body)
			}
			var e struct {
				Error   string `json:"error"`
				Details *[]struct {
					Message string `json:"message"`
				} `json:"details"`
			}
			decode(t, w)
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Details == nil {
				t.Errorf("body %s is not {error, details}: %v", w.Body, err)
			}
			if !strings.Contains(e.Error, tt.errText) {
				t.Errorf("error %q does not mention %q", e.Error, tt.errText)
			}
			if got := rec.calls(); len(got) != 0 {
				t.Errorf("Trigger called for %v, want never", got)
			}
			if got := rec.lastDelivery(t); got != [2]string{tt.event, tt.result} {
				t.Errorf("OnDelivery(%q, %q), want (%q, %q)", got[0], got[1], tt.event, tt.result)
			}
		})
	}
}

// TestBodyLimit checks that the limit is inclusive, so the 25 MiB GitHub
// allows get through.
func TestBodyLimit(t *testing.T) {
	t.Parallel()
	body := []byte(`{"zen":"x"}`)
	tests := []struct {
		name   string
		limit  int64
		status int
	}{
		{"at the limit", int64(len(body)), http.StatusOK},
		{"one byte over", int64(len(body)) - 1, http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		for _, chunked := range []bool{false, true} {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				h, _ := newHandler(GitHubOptions{Secret: testSecret, MaxBodyBytes: tt.limit})
				r := request("ping", body)
				if chunked {
					r.ContentLength = -1
				}
				if w := serve(h, r); w.Code != tt.status {
					t.Errorf("chunked %v: status = %d, want %d; body %s", chunked, w.Code, tt.status, w.Body)
				}
			})
		}
	}
}

func TestEvents(t *testing.T) {
	t.Parallel()
	pr := []byte(`{"action":"opened","number":42,"pull_request":{"number":42,"head":{"ref":"feature"}},` +
		`"repository":{"full_name":"acme/app"}}`)
	tests := []struct {
		name   string
		event  string
		body   []byte
		onPR   func(context.Context, *github.PullRequestEvent) error
		status int
		want   map[string]any
		result string
		prSeen bool
	}{
		{"ping", "ping", []byte(`{"zen":"Design for failure.","hook_id":1}`), nil,
			http.StatusOK, map[string]any{"event": "ping"}, ResultPong, false},
		{"unknown event", "issues", []byte(`{"action":"opened"}`), nil,
			http.StatusAccepted, map[string]any{"event": "issues", "ignored": true}, ResultIgnored, false},
		{"event go-github does not know", "no_such_event", []byte(`{}`), nil,
			http.StatusAccepted, map[string]any{"event": "no_such_event", "ignored": true}, ResultIgnored, false},
		{"pull_request without a handler", "pull_request", pr, nil,
			http.StatusAccepted, map[string]any{"event": "pull_request", "ignored": true}, ResultIgnored, false},
		{"pull_request handled", "pull_request", pr, func(context.Context, *github.PullRequestEvent) error { return nil },
			http.StatusOK, map[string]any{"event": "pull_request", "handled": true}, ResultHandled, true},
		{"pull_request handler fails", "pull_request", pr,
			func(context.Context, *github.PullRequestEvent) error { return errors.New("store is down") },
			http.StatusInternalServerError, map[string]any{"error": "handling the pull_request event failed", "details": []any{}},
			ResultFailed, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var seen *github.PullRequestEvent
			var onPR func(context.Context, *github.PullRequestEvent) error
			if tt.onPR != nil {
				onPR = func(ctx context.Context, ev *github.PullRequestEvent) error {
					seen = ev
					return tt.onPR(ctx, ev)
				}
			}
			h, rec := newHandler(GitHubOptions{Secret: testSecret, OnPullRequest: onPR})
			w := serve(h, request(tt.event, tt.body))
			if w.Code != tt.status {
				t.Errorf("status = %d, want %d; body %s", w.Code, tt.status, w.Body)
			}
			got, _ := json.Marshal(decode(t, w))
			want, _ := json.Marshal(tt.want)
			if !bytes.Equal(got, want) {
				t.Errorf("body = %s, want %s", got, want)
			}
			if tt.prSeen != (seen != nil) || (seen != nil && seen.GetNumber() != 42) {
				t.Errorf("OnPullRequest got %v, want called: %v with number 42", seen, tt.prSeen)
			}
			if got := rec.calls(); len(got) != 0 {
				t.Errorf("Trigger called for %v, want never", got)
			}
			if got := rec.lastDelivery(t); got != [2]string{tt.event, tt.result} {
				t.Errorf("OnDelivery(%q, %q), want (%q, %q)", got[0], got[1], tt.event, tt.result)
			}
		})
	}
}

// TestSecretNeverShown sends every kind of delivery and checks that neither
// an answer nor a log line (at debug level) holds the secret.
func TestSecretNeverShown(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var mu gosync.Mutex
	log := slog.New(slog.NewJSONHandler(&lockedWriter{w: &logs, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sources := append(slices.Clone(testSources),
		Source{Name: "with-token", URL: "https://x-access-token:" + testSecret + "@github.com/acme/app", Branch: "main"},
		Source{Name: "bad-range", URL: "https://github.com/acme/app", SemVer: testSecret})
	failPR := func(context.Context, *github.PullRequestEvent) error { return errors.New("failed near " + testSecret) }
	h, _ := newHandler(GitHubOptions{Secret: testSecret, Sources: sources, Logger: log, OnPullRequest: failPR, MaxBodyBytes: 4096})
	push := pushBody(t, "refs/heads/main", false, repo("acme", "app", "main"))
	requests := map[string]*http.Request{
		"push":      request("push", push),
		"ping":      request("ping", []byte(`{"zen":"x"}`)),
		"unknown":   request("issues", []byte(`{}`)),
		"pr fails":  request("pull_request", []byte(`{"number":1}`)),
		"malformed": request("push", []byte(`{`)),
		"oversized": request("push", bytes.Repeat([]byte(" "), 5000)),
	}
	forged := request("push", push)
	forged.Header.Set("X-Hub-Signature-256", sign(testSecret+"x", push))
	requests["forged"] = forged
	unsigned := request("push", push)
	unsigned.Header.Del("X-Hub-Signature-256")
	requests["unsigned"] = unsigned

	for name, r := range requests {
		w := serve(h, r)
		if strings.Contains(w.Body.String(), testSecret) {
			t.Errorf("%s: answer holds the secret: %s", name, w.Body)
		}
		for k, vs := range w.Header() {
			for _, v := range vs {
				if strings.Contains(v, testSecret) {
					t.Errorf("%s: header %s holds the secret", name, k)
				}
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	out := logs.String()
	// Prove the log was written, so that the check below can fail.
	if n := strings.Count(out, `"delivery":"72d3162e-cc78-11e3-81ab-4c9367dc0958"`); n < len(requests) {
		t.Fatalf("%d delivery lines logged, want at least %d:\n%s", n, len(requests), out)
	}
	if strings.Contains(out, testSecret) {
		t.Errorf("log holds the secret:\n%s", out)
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *gosync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestLogLine checks the delivery line carries what an operator needs to
// find the delivery on GitHub and see what it did.
func TestLogLine(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	h, _ := newHandler(GitHubOptions{Secret: testSecret, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	serve(h, request("push", pushBody(t, "refs/heads/dev", false, repo("acme", "app", "main"))))
	var line struct {
		Level      string   `json:"level"`
		Event      string   `json:"event"`
		Delivery   string   `json:"delivery"`
		Repository string   `json:"repository"`
		Triggered  []string `json:"triggered"`
		Result     string   `json:"result"`
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &line); err != nil {
		t.Fatalf("log %q: %v", logs.String(), err)
	}
	if line.Level != "INFO" || line.Event != "push" || line.Delivery != "72d3162e-cc78-11e3-81ab-4c9367dc0958" ||
		line.Repository != "acme/app" || !slices.Equal(line.Triggered, []string{"app-dev"}) || line.Result != ResultTriggered {
		t.Errorf("log line = %+v", line)
	}
}

// TestConcurrentDeliveries lets the race detector look at the handler
// serving many deliveries at once.
func TestConcurrentDeliveries(t *testing.T) {
	t.Parallel()
	h, rec := newHandler(GitHubOptions{Secret: testSecret})
	body := pushBody(t, "refs/heads/dev", false, repo("acme", "app", "main"))
	var wg gosync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if w := serve(h, request("push", body)); w.Code != http.StatusOK {
				t.Errorf("status = %d", w.Code)
			}
		})
	}
	wg.Wait()
	if got := len(rec.calls()); got != 20 {
		t.Errorf("Trigger called %d times, want 20", got)
	}
}

// TestNilOptions checks that the optional callbacks may be left out.
func TestNilOptions(t *testing.T) {
	t.Parallel()
	h := NewGitHub(GitHubOptions{Secret: testSecret, Sources: testSources})
	w := serve(h, request("push", pushBody(t, "refs/heads/dev", false, repo("acme", "app", "main"))))
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"triggered":[]`) {
		t.Errorf("status %d, body %s: want 200 and nothing triggered without Trigger", w.Code, w.Body)
	}
}
