package api_test

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
	"github.com/no8s/no8s-agent/sync"
)

// request sends a request with the given headers and returns status,
// body and headers.
func (e *env) request(method, path string, headers map[string]string, body string) (int, string, http.Header) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.http.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, string(data), resp.Header
}

// resourceNames lists the names of the stored resources: what a refused
// request must leave as it was.
func (e *env) resourceNames() string {
	e.t.Helper()
	// Not the test's context: this also runs in cleanups, after it ends.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rs, err := e.store.ListResources(ctx, store.ResourceFilter{})
	if err != nil {
		e.t.Fatal(err)
	}
	var names []string
	for _, r := range rs {
		names = append(names, r.Name+"@"+r.SpecHash)
	}
	return strings.Join(names, ",")
}

func TestHostileBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.must("POST", "/api/v1/resource-types", writeToken, `{"name": "Counter", "version": "v1",
		"schema": {"type": "object", "properties": {"n": {"type": "integer", "maximum": 18446744073709551616}, "labels": {"type": "object"}}}}`, 201, nil)
	before := e.resourceNames()
	bearer := map[string]string{"Authorization": "Bearer " + writeToken, "Content-Type": "application/json"}
	tests := []struct {
		name, body string
		status     int
		contains   []string
	}{
		{"duplicate top-level key", `{"name": "c1", "name": "c2", "resource_type_name": "Counter", "spec": {"n": 1}}`,
			400, []string{`"error":"name: duplicate key \"name\""`, `"pointer":"/name"`}},
		{"duplicate label", `{"name": "c1", "resource_type_name": "Counter", "labels": {"team": "a", "team": "b"}, "spec": {"n": 1}}`,
			400, []string{`labels.team: duplicate key \"team\"`, `"pointer":"/labels/team"`}},
		{"duplicate key deep in the spec", `{"name": "c1", "resource_type_name": "Counter", "spec": {"labels": {"x": [{"k": 1, "k": 2}]}}}`,
			400, []string{`spec.labels.x[0].k: duplicate key \"k\"`}},
		{"integer above the maximum by one", `{"name": "c1", "resource_type_name": "Counter", "spec": {"n": 18446744073709551617}}`,
			400, []string{`spec.n`}},
		{"fraction is not an integer", `{"name": "c1", "resource_type_name": "Counter", "spec": {"n": 18446744073709551615.5}}`,
			400, []string{`spec.n`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, _ := e.request("POST", "/api/v1/resources", bearer, tt.body)
			if status != tt.status {
				t.Fatalf("status %d %s, want %d", status, body, tt.status)
			}
			for _, want := range tt.contains {
				if !strings.Contains(body, want) {
					t.Errorf("body %s does not contain %s", body, want)
				}
			}
			if after := e.resourceNames(); after != before {
				t.Errorf("the store changed: %s -> %s", before, after)
			}
		})
	}

	// Integers beyond float64's exact range keep every digit, stored and
	// served; written as 1e19-style exponents they are the same integer.
	var res api.Resource
	e.must("POST", "/api/v1/resources", writeToken, `{"name": "big", "resource_type_name": "Counter", "spec": {"n": 18446744073709551616}}`, 201, &res)
	if string(res.Spec) != `{"n":18446744073709551616}` {
		t.Errorf("created spec %s lost digits", res.Spec)
	}
	_, body, _ := e.call("GET", "/api/v1/resources/"+itoa(res.ID), "", "")
	if !strings.Contains(string(body), `"spec":{"n":18446744073709551616}`) {
		t.Errorf("served spec lost digits: %s", body)
	}
	var same api.Resource
	e.must("PUT", "/api/v1/resources/"+itoa(res.ID), writeToken, `{"spec": {"n": 1.8446744073709551616e19}}`, 200, &same)
	if same.SpecHash != res.SpecHash || same.Generation != res.Generation {
		t.Errorf("the same integer in another notation changed the resource: %s %s", same.Spec, res.Spec)
	}
	var exp api.Resource
	e.must("POST", "/api/v1/resources", writeToken, `{"name": "exp", "resource_type_name": "Counter", "spec": {"n": 1e19}}`, 201, &exp)
	if string(exp.Spec) != `{"n":10000000000000000000}` {
		t.Errorf("1e19 stored as %s", exp.Spec)
	}
}

// stall makes the source infra stall on a revision (an empty snapshot, which
// the prune guard refuses) and returns that revision.
func stall(t *testing.T, e *env) manifest.Revision {
	t.Helper()
	rev := manifest.Revision("main@sha1:" + strings.Repeat("cd", 20))
	snap := &source.Snapshot{Revision: rev, Files: []manifest.File{file("types/network.yaml", gitTypes)}}
	_, err := e.syncer.Sync(t.Context(), sync.Target{Name: "infra", Kind: store.SourceGit, URL: "https://git.example.com/infra.git"}, snap, false)
	var serr *sync.Error
	if !errors.As(err, &serr) || serr.Reason != sync.ReasonEmptySnapshot {
		t.Fatalf("want the empty snapshot refused, got %v", err)
	}
	return rev
}

func TestApproveOnlyTheStalledRevision(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	approved := func() manifest.Revision {
		src, err := e.store.GetSource(t.Context(), "infra")
		if err != nil {
			t.Fatal(err)
		}
		return src.ApprovedRevision
	}
	// Not stalled: nothing to approve.
	if st, body, _ := e.call("POST", "/api/v1/sources/infra/approve?revision=main@sha1:"+strings.Repeat("ef", 20), writeToken, ""); st != 409 ||
		!strings.Contains(string(body), "not stalled") {
		t.Fatalf("approve on a ready source = %d %s, want 409 saying it is not stalled", st, body)
	}
	stalled := stall(t, e)
	tests := []struct {
		name, query, body string
		status            int
		contains          string
	}{
		{"a revision never seen", "?revision=main@sha1:" + strings.Repeat("ef", 20), "", 409, "stalled on revision " + string(stalled)},
		{"an earlier revision", "?revision=main@sha1:" + strings.Repeat("ab", 20), "", 409, "stalled on revision " + string(stalled)},
		{"in the body", "", `{"revision": "main@sha1:1234"}`, 409, "stalled on revision " + string(stalled)},
		{"malformed", "?revision=" + url.QueryEscape("main@sha1:12 34"), "", 400, "is not a revision"},
		{"control characters", "?revision=" + url.QueryEscape("main\n@sha1:1234"), "", 400, "is not a revision"},
		{"too long", "?revision=" + strings.Repeat("a", 600), "", 400, "is not a revision"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, body, _ := e.call("POST", "/api/v1/sources/infra/approve"+tt.query, writeToken, tt.body)
			if st != tt.status || !strings.Contains(string(body), tt.contains) {
				t.Fatalf("= %d %s, want %d containing %q", st, body, tt.status, tt.contains)
			}
			if got := approved(); got != "" {
				t.Fatalf("a refused approval was recorded: %s", got)
			}
		})
	}
	if n := len(e.runner.calls()); n != 0 {
		t.Errorf("refused approvals triggered %d syncs", n)
	}
	// The stalled revision itself, named or not, is approved.
	e.must("POST", "/api/v1/sources/infra/approve?revision="+url.QueryEscape(string(stalled)), writeToken, "", 202, nil)
	if got := approved(); got != stalled {
		t.Fatalf("approved %q, want %q", got, stalled)
	}
	e.must("POST", "/api/v1/sources/infra/approve", writeToken, "", 202, nil)
}

// rawRequest writes head (request line and headers, CRLF-separated, without
// the blank line) on a fresh connection, sends no body, and returns the
// response's status and how long it took.
func rawRequest(t *testing.T, base, head string) (int, string, time.Duration) {
	t.Helper()
	u, _ := url.Parse(base)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if err := conn.SetDeadline(start.Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, head+"\r\nHost: "+u.Host+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data), time.Since(start)
}

func TestBodyReadDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *api.Options) { o.BodyReadTimeout = 300 * time.Millisecond })
	before := e.resourceNames()
	auth := "Authorization: Bearer " + writeToken
	for _, tt := range []struct{ name, head string }{
		{"create", "POST /api/v1/resources HTTP/1.1\r\n" + auth + "\r\nContent-Type: application/json\r\nContent-Length: 100"},
		{"sync ignores its body", "POST /api/v1/sources/infra/sync HTTP/1.1\r\n" + auth + "\r\nContent-Length: 10"},
		{"chunked", "POST /api/v1/resource-types HTTP/1.1\r\n" + auth + "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			status, body, took := rawRequest(t, e.http.URL, tt.head)
			if status != http.StatusRequestTimeout || !strings.Contains(body, "did not arrive within 300ms") {
				t.Errorf("= %d %s, want 408", status, body)
			}
			if took > 5*time.Second {
				t.Errorf("answered after %s", took)
			}
		})
	}
	t.Cleanup(func() {
		if after := e.resourceNames(); after != before {
			t.Errorf("the store changed: %s -> %s", before, after)
		}
		if calls := e.runner.calls(); len(calls) != 0 {
			t.Errorf("a sync was triggered: %v", calls)
		}
	})
	// A request without a body is not bounded by the body's deadline: the
	// connection stays usable past it.
	status, _, _ := rawRequest(t, e.http.URL, "GET /api/v1/resources HTTP/1.1")
	if status != 200 {
		t.Errorf("GET = %d", status)
	}
}

func TestBasicAuthWritesMustBeSameOrigin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *api.Options) { o.ReadToken = readToken })
	e.must("POST", "/api/v1/resource-types", writeToken, dbType, 201, nil)
	before := e.resourceNames()
	host := strings.TrimPrefix(e.http.URL, "http://")
	basic := "Basic " + basicAuth("admin", writeToken)
	tests := []struct {
		name     string
		headers  map[string]string
		status   int
		contains string
	}{
		{"cross-site text/plain form", map[string]string{"Authorization": basic, "Content-Type": "text/plain", "Origin": "https://evil.example"},
			403, "must send Content-Type: application/json"},
		{"form-urlencoded", map[string]string{"Authorization": basic, "Content-Type": "application/x-www-form-urlencoded", "Origin": e.http.URL},
			403, "must send Content-Type: application/json"},
		{"JSON from another origin", map[string]string{"Authorization": basic, "Content-Type": "application/json", "Origin": "https://evil.example"},
			403, `Origin \"https://evil.example\" is not this agent`},
		{"cross-site fetch metadata", map[string]string{"Authorization": basic, "Content-Type": "application/json", "Sec-Fetch-Site": "cross-site", "Origin": e.http.URL},
			403, "another site"},
		{"same-site is not same-origin", map[string]string{"Authorization": basic, "Content-Type": "application/json", "Sec-Fetch-Site": "same-site"},
			403, "another site"},
		{"no origin at all", map[string]string{"Authorization": basic, "Content-Type": "application/json"},
			403, "no Origin"},
		{"same origin", map[string]string{"Authorization": basic, "Content-Type": "application/json; charset=utf-8", "Origin": "http://" + host},
			201, `"name":"pg-1"`},
		{"same origin by fetch metadata", map[string]string{"Authorization": basic, "Content-Type": "application/json", "Sec-Fetch-Site": "same-origin"},
			201, `"name":"pg-2"`},
		{"bearer tokens are not browsers'", map[string]string{"Authorization": "Bearer " + writeToken, "Content-Type": "text/plain", "Origin": "https://evil.example"},
			201, `"name":"pg-3"`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"name": "pg-%d", "resource_type_name": "DatabaseCluster", "spec": {"engine": "postgres", "storage_gb": 10}}`, i-5)
			status, resp, _ := e.request("POST", "/api/v1/resources", tt.headers, body)
			if status != tt.status || !strings.Contains(resp, tt.contains) {
				t.Fatalf("= %d %s, want %d containing %s", status, resp, tt.status, tt.contains)
			}
			if status == 403 {
				if after := e.resourceNames(); after != before {
					t.Errorf("the store changed: %s -> %s", before, after)
				}
			}
		})
	}
	// Reads with basic auth (the dashboard) are not affected.
	if st, _, _ := e.request("GET", "/api/v1/resources", map[string]string{"Authorization": "Basic " + basicAuth("x", readToken)}, ""); st != 200 {
		t.Errorf("basic-auth read = %d", st)
	}
}

func basicAuth(user, pass string) string {
	r, _ := http.NewRequest("GET", "/", nil)
	r.SetBasicAuth(user, pass)
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Basic ")
}

// tcpProxy forwards connections to a PostgreSQL server until Down, after
// which it refuses them and has cut those it carried: the database as an
// agent sees it when the server is stopped or the network fails.
type tcpProxy struct {
	ln              net.Listener
	network, target string
	mu              gosync.Mutex
	conns           []net.Conn
	down            bool
	wg              gosync.WaitGroup
}

func newTCPProxy(t *testing.T, network, listen, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen(network, listen)
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, network: network, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Down)
	return p
}

func (p *tcpProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial(p.network, p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.down {
			// Accepted just before Down, which has cut the others already.
			p.mu.Unlock()
			c.Close()
			up.Close()
			return
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(up, c); up.Close() }()
		go func() { defer p.wg.Done(); _, _ = io.Copy(c, up); c.Close() }()
	}
}

// Down stops accepting and cuts every connection; it is idempotent.
func (p *tcpProxy) Down() {
	p.ln.Close()
	p.mu.Lock()
	p.down = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

func TestStoreUnavailableIs503(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := pgtest.URL(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	// Through a proxy in front of the server, on a Unix socket (as pgtest's
	// server listens) or TCP.
	var proxy *tcpProxy
	if q := u.Query(); strings.HasPrefix(q.Get("host"), "/") {
		port := cmp.Or(u.Port(), q.Get("port"), "5432")
		dir := t.TempDir()
		sock := "/.s.PGSQL." + port
		proxy = newTCPProxy(t, "unix", dir+sock, q.Get("host")+sock)
		q.Set("host", dir)
		u.RawQuery = q.Encode()
	} else {
		proxy = newTCPProxy(t, "tcp", "127.0.0.1:0", u.Host)
		u.Host = proxy.ln.Addr().String()
	}
	st, err := postgres.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	syncer := sync.New(st, nil)
	snap := &source.Snapshot{Revision: manifest.Revision("main@sha1:" + strings.Repeat("ab", 20)), Files: []manifest.File{
		file("net/network.yaml", gitResources), file("types/network.yaml", gitTypes)}}
	if _, err := syncer.Sync(ctx, sync.Target{Name: "infra", Kind: store.SourceGit}, snap, false); err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	_, hs := serve(t, api.Options{Store: st, Syncer: syncer, Sources: &fakeRunner{known: map[string]bool{"infra": true}},
		WriteToken: writeToken, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	e := &env{t: t, http: hs}
	e.must("GET", "/api/v1/resources", "", "", 200, nil)

	proxy.Down()
	// The read model hears at once that the store's notifications are cut,
	// and from then on refuses reads rather than answer from a copy that
	// may be stale.
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		status, _, _ := e.call("GET", "/api/v1/resources/1", "", "")
		if status == http.StatusServiceUnavailable {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("reads still answered %d 10s after the store went down", status)
		case <-tick.C:
		}
	}
	tests := []struct{ method, path, body string }{
		{"GET", "/api/v1/resources", ""},
		{"GET", "/api/v1/resources/1", ""},
		{"GET", "/api/v1/resources/by-name/Network/v1/prod-vpc", ""},
		{"GET", "/api/v1/resource-types", ""},
		{"GET", "/api/v1/sources", ""},
		{"GET", "/api/v1/sources/infra/history", ""},
		{"POST", "/api/v1/resources", `{"name": "n2", "resource_type_name": "Network", "spec": {"cidr": "10.1.0.0/16"}}`},
		{"DELETE", "/api/v1/resources/1", ""},
		{"POST", "/api/v1/sources/infra/approve", ""},
		{"GET", "/readyz", ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			// The pool may hand out a connection the proxy cut before it
			// notices; a retry, as Retry-After asks, sees a refused connect.
			status, body, hdr := e.call(tt.method, tt.path, writeToken, tt.body)
			if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
				t.Fatalf("= %d %s (Retry-After %q), want 503 with Retry-After", status, body, hdr.Get("Retry-After"))
			}
			var eb struct {
				Error  string `json:"error"`
				Status string `json:"status"`
			}
			if err := json.Unmarshal(body, &eb); err != nil || (eb.Error == "" && eb.Status == "") {
				t.Errorf("body %s says nothing", body)
			}
			if strings.Contains(string(body), "127.0.0.1") {
				t.Errorf("body names the database's address: %s", body)
			}
		})
	}
	if strings.Contains(logs.String(), "request failed") {
		t.Errorf("an unreachable store was logged as an internal error:\n%s", logs.String())
	}
}

// TestStoreClosedIs503 checks the other face of an unreachable store: a
// closed pool.
func TestStoreClosedIs503(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.store.Close()
	// Reads the read model answers need no pool; these read the store.
	for _, path := range []string{"/api/v1/sources/infra/history", "/api/v1/agents", "/readyz"} {
		status, body, hdr := e.call("GET", path, "", "")
		if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
			t.Errorf("GET %s = %d %s, want 503 with Retry-After", path, status, body)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := e.store.ListResources(ctx, store.ResourceFilter{}); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("closed pool: %v, want store.ErrUnavailable", err)
	}
}
