package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	gosync "sync"
	"testing"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/redact"
)

// rawGet reads without asking for any store version: only what the agent
// itself guarantees (reads after its own writes) holds.
func rawGet(t *testing.T, base, path, token string, header ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
}

func names(t *testing.T, body string) []string {
	t.Helper()
	var rows []struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal([]byte(body), &rows); err != nil {
		t.Fatalf("%v in %s", err, body)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r.Name)
	}
	return out
}

// TestAttackSharedPagesScopedTokens primes the kept pages with the write
// token's lists of everything, then asks for them, and for lists of what
// they may see, with tokens limited by kind, by source and by action
// instance: a kept page must not answer a filter the token may not list,
// nor carry a resource outside the filter it was asked with.
func TestAttackSharedPagesScopedTokens(t *testing.T) {
	t.Parallel()
	const kindTok, srcTok, actTok = "kind-token-9c2e", "src-token-71ab", "act-token-5d0f"
	e := newEnv(t, func(o *api.Options) {
		o.Tokens = []api.Token{
			{Name: "kind", Value: kindTok, Grants: []api.Grant{{Verbs: []string{api.VerbGet, api.VerbList}, Kinds: []string{"Widget"}}}},
			{Name: "src", Value: srcTok, Grants: []api.Grant{{Verbs: []string{api.VerbGet, api.VerbList}, Sources: []string{"infra"}}}},
			{Name: "act", Value: actTok, Grants: []api.Grant{{Verbs: []string{api.VerbGet, api.VerbList, api.VerbCreate}, Actions: []string{"noop"}}}},
		}
	})
	e.must("POST", "/api/v1/resource-types", writeToken, widgetType, http.StatusCreated, nil)
	e.must("POST", "/api/v1/resources", writeToken, `{"name": "w1", "resource_type_name": "Widget", "spec": {"size": 1}}`, http.StatusCreated, nil)
	base := e.http.URL
	paths := []string{"/api/v1/resources", "/api/v1/resources?limit=1", "/api/v1/resources?kind=Network",
		"/api/v1/resources?source=infra", "/api/v1/resources?kind=Widget", "/api/v1/resources?action_plugin=noop",
		"/api/v1/resources?kind=Widget&source=infra", "/api/v1/resources?source=api"}
	for range 2 { // the second round answers from kept pages
		for _, p := range paths {
			if status, body, _ := rawGet(t, base, p, writeToken); status != http.StatusOK {
				t.Fatalf("GET %s = %d %s", p, status, body)
			}
		}
		for _, c := range []struct {
			token, path string
			want        int
			may         string // the only name the answer may hold
		}{
			{kindTok, "/api/v1/resources", http.StatusForbidden, ""},
			{kindTok, "/api/v1/resources?limit=1", http.StatusForbidden, ""},
			{kindTok, "/api/v1/resources?kind=Network", http.StatusForbidden, ""},
			{kindTok, "/api/v1/resources?source=infra", http.StatusForbidden, ""},
			{kindTok, "/api/v1/resources?action_plugin=noop", http.StatusForbidden, ""},
			{kindTok, "/api/v1/resources?kind=Widget", http.StatusOK, "w1"},
			{kindTok, "/api/v1/resources?kind=Widget&source=infra", http.StatusOK, "w1"},
			{srcTok, "/api/v1/resources", http.StatusForbidden, ""},
			{srcTok, "/api/v1/resources?kind=Widget", http.StatusForbidden, ""},
			{srcTok, "/api/v1/resources?source=api", http.StatusForbidden, ""},
			{srcTok, "/api/v1/resources?source=infra", http.StatusOK, "prod-vpc"},
			{srcTok, "/api/v1/resources?kind=Widget&source=infra", http.StatusOK, "-"},
			{actTok, "/api/v1/resources", http.StatusForbidden, ""},
			{actTok, "/api/v1/resources?action_plugin=noop", http.StatusForbidden, ""},
			{actTok, "/api/v1/resources?kind=Widget", http.StatusForbidden, ""},
		} {
			status, body, h := rawGet(t, base, c.path, c.token)
			if status != c.want {
				t.Errorf("%s: GET %s = %d %s, want %d", c.token, c.path, status, body, c.want)
				continue
			}
			if h.Get("X-Continue") != "" && status != http.StatusOK {
				t.Errorf("%s: GET %s refused with a cursor", c.token, c.path)
			}
			if status != http.StatusOK {
				if strings.Contains(body, "prod-vpc") || strings.Contains(body, `"w1"`) {
					t.Errorf("%s: GET %s refused with resources: %s", c.token, c.path, body)
				}
				continue
			}
			for _, n := range names(t, body) {
				if n != c.may {
					t.Errorf("%s: GET %s holds %q", c.token, c.path, n)
				}
			}
		}
	}
}

// TestAttackSharedPagesCursorOfAnotherFilter takes the cursor of a page a
// kind-limited token may list and asks with it for lists it may not, or
// for another kind: the cursor must not open a kept page of another filter.
func TestAttackSharedPagesCursorOfAnotherFilter(t *testing.T) {
	t.Parallel()
	const kindTok = "kind-token-31aa"
	e := newEnv(t, func(o *api.Options) {
		o.Tokens = []api.Token{{Name: "kind", Value: kindTok, Grants: []api.Grant{{Verbs: []string{api.VerbGet, api.VerbList}, Kinds: []string{"Widget"}}}}}
	})
	e.must("POST", "/api/v1/resource-types", writeToken, widgetType, http.StatusCreated, nil)
	for _, n := range []string{"w1", "w2"} {
		e.must("POST", "/api/v1/resources", writeToken, `{"name": "`+n+`", "resource_type_name": "Widget", "spec": {"size": 1}}`, http.StatusCreated, nil)
	}
	base := e.http.URL
	// Kept pages of everything, past every ID.
	for _, p := range []string{"/api/v1/resources?limit=1", "/api/v1/resources?limit=1&after=0", "/api/v1/resources?kind=Network&limit=1"} {
		rawGet(t, base, p, writeToken)
	}
	status, body, h := rawGet(t, base, "/api/v1/resources?kind=Widget&limit=1", kindTok)
	cur := h.Get("X-Continue")
	if status != http.StatusOK || cur == "" {
		t.Fatalf("first page = %d %s, cursor %q", status, body, cur)
	}
	for _, p := range []string{"/api/v1/resources?limit=1&continue=" + cur, "/api/v1/resources?kind=Network&limit=1&continue=" + cur,
		"/api/v1/resources?kind=Widget&label=a=b&limit=1&continue=" + cur, "/api/v1/resources?kind=Widget&limit=1&continue=" + cur + "&after=0"} {
		status, body, _ := rawGet(t, base, p, kindTok)
		if status == http.StatusOK || strings.Contains(body, "prod-vpc") {
			t.Errorf("GET %s = %d %s", p, status, body)
		}
	}
	status, body, _ = rawGet(t, base, "/api/v1/resources?kind=Widget&limit=1&continue="+cur, kindTok)
	if got := names(t, body); status != http.StatusOK || len(got) != 1 || got[0] != "w2" {
		t.Errorf("second page = %d %s", status, body)
	}
}

// TestAttackSharedPagesReadYourWrites keeps pages of several filters, then
// writes through the API (create, update of labels, delete) and reads at
// once without asking for a version, from the agent written through, and
// from another agent on the store with the version the write answered:
// no kept page may hide the write.
func TestAttackSharedPagesReadYourWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	_, hs2 := serve(t, api.Options{Store: e.store, Syncer: e.syncer, Sources: e.runner, WriteToken: writeToken})
	e.must("POST", "/api/v1/resource-types", writeToken, widgetType, http.StatusCreated, nil)
	paths := []string{"/api/v1/resources", "/api/v1/resources?kind=Widget", "/api/v1/resources?label=team=a",
		"/api/v1/resources?label=team=b", "/api/v1/resources?label=team=", "/api/v1/resources?kind=Widget&limit=1"}
	read := func(base, p string, header ...string) []string {
		t.Helper()
		status, body, _ := rawGet(t, base, p, writeToken, header...)
		if status != http.StatusOK {
			t.Fatalf("GET %s = %d %s", p, status, body)
		}
		return names(t, body)
	}
	prime := func() {
		for _, base := range []string{e.http.URL, hs2.URL} {
			for _, p := range paths {
				read(base, p)
			}
		}
	}
	has := func(got []string, n string) bool {
		for _, g := range got {
			if g == n {
				return true
			}
		}
		return false
	}
	write := func(method, path, body string, want int) (string, map[string]any) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, e.http.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+writeToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s = %d %s", method, path, resp.StatusCode, b)
		}
		_ = json.Unmarshal(b, &out)
		return resp.Header.Get(api.HeaderStoreVersion), out
	}
	check := func(v, p, n string, want bool) {
		t.Helper()
		if got := read(e.http.URL, p); has(got, n) != want {
			t.Errorf("same agent: GET %s = %q, want %q there: %v", p, got, n, want)
		}
		if v == "" {
			t.Fatalf("write answered no %s", api.HeaderStoreVersion)
		}
		if got := read(hs2.URL, p, api.HeaderMinVersion, v); has(got, n) != want {
			t.Errorf("other agent at %s: GET %s = %q, want %q there: %v", v, p, got, n, want)
		}
	}
	prime()
	v, created := write("POST", "/api/v1/resources", `{"name": "w1", "resource_type_name": "Widget", "labels": {"team": "a"}, "spec": {"size": 1}}`, http.StatusCreated)
	id := itoa(int64(created["id"].(float64)))
	check(v, "/api/v1/resources", "w1", true)
	check(v, "/api/v1/resources?kind=Widget", "w1", true)
	check(v, "/api/v1/resources?kind=Widget&limit=1", "w1", true)
	check(v, "/api/v1/resources?label=team=a", "w1", true)
	check(v, "/api/v1/resources?label=team=", "w1", false)
	prime()
	v, _ = write("PUT", "/api/v1/resources/"+id, `{"labels": {"team": "b"}}`, http.StatusOK)
	check(v, "/api/v1/resources?label=team=a", "w1", false)
	check(v, "/api/v1/resources?label=team=b", "w1", true)
	prime()
	v, _ = write("PUT", "/api/v1/resources/"+id, `{"labels": {"team": ""}}`, http.StatusOK)
	check(v, "/api/v1/resources?label=team=b", "w1", false)
	check(v, "/api/v1/resources?label=team=", "w1", true)
}

// TestAttackSharedPagesMaskedEachTime lists, through the agent's masking,
// resources whose specs carry a secret in several escapes, again and again
// so that the kept page answers: every answer is masked and whole, and
// the kept page is not changed by masking one answer (the next one would
// then differ).
func TestAttackSharedPagesMaskedEachTime(t *testing.T) {
	t.Parallel()
	const secret = `<s3cr3t-"pa&ss">`
	e := newEnv(t, nil)
	srv := api.New(api.Options{Store: e.store, Syncer: e.syncer, Sources: e.runner, WriteToken: writeToken})
	hs := httptest.NewServer(redact.New(secret).HTTP(srv.Handler()))
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Run(runCtx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done; hs.Close() })
	// The spec's strings are fields of the type, as unknown ones are refused.
	e.must("POST", "/api/v1/resource-types", writeToken, strings.Replace(widgetType, `"size": {"type": "integer"}`,
		`"size": {"type": "integer"}, "note": {"type": "string"}, "again": {"type": "string"}`, 1), http.StatusCreated, nil)
	spec, _ := json.Marshal(map[string]any{"size": 1, "note": secret, "again": "x" + secret + secret})
	e.must("POST", "/api/v1/resources", writeToken, `{"name": "w1", "resource_type_name": "Widget", "spec": `+string(spec)+`}`, http.StatusCreated, nil)
	v, err := e.store.Fence(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var first string
	for i := range 4 {
		status, body, _ := rawGet(t, hs.URL, "/api/v1/resources?kind=Widget", writeToken, api.HeaderMinVersion, strconv.FormatInt(v, 10))
		if status != http.StatusOK || strings.Contains(body, "s3cr3t") || !json.Valid([]byte(body)) || !strings.Contains(body, redact.Placeholder) {
			t.Fatalf("answer %d = %d %s", i, status, body)
		}
		if i == 0 {
			first = body
		} else if body != first {
			t.Fatalf("answer %d = %s, first %s", i, body, first)
		}
	}
}

// TestAttackSharedPagesUnderConcurrentReads creates resources through the
// API while readers poll the same lists (so that pages are prepared, kept
// and answered concurrently); after each write answers, a read of every
// list from the same agent, without a version, holds what was written.
func TestAttackSharedPagesUnderConcurrentReads(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.must("POST", "/api/v1/resource-types", writeToken, widgetType, http.StatusCreated, nil)
	paths := []string{"/api/v1/resources", "/api/v1/resources?kind=Widget", "/api/v1/resources?kind=Widget&limit=500"}
	stop := make(chan struct{})
	var wg gosync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequestWithContext(t.Context(), "GET", e.http.URL+paths[i%len(paths)], nil)
				req.Header.Set("Authorization", "Bearer "+writeToken)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	for n := range 15 {
		name := "w" + strconv.Itoa(n)
		status, body, _ := e.call("POST", "/api/v1/resources", writeToken, `{"name": "`+name+`", "resource_type_name": "Widget", "spec": {"size": 1}}`)
		if status != http.StatusCreated {
			t.Fatalf("create %s = %d %s", name, status, body)
		}
		for _, p := range paths {
			status, body, _ := rawGet(t, e.http.URL, p, writeToken)
			if status != http.StatusOK || !strings.Contains(body, `"name":"`+name+`"`) && !strings.Contains(body, `"name": "`+name+`"`) {
				t.Fatalf("after creating %s: GET %s = %d %s", name, p, status, body)
			}
		}
	}
}
