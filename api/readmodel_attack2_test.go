package api_test

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
	"github.com/no8s/no8s-agent/sync"
)

// freezableProxy forwards TCP connections to a PostgreSQL server; freeze
// makes the connections open at that moment stop passing bytes without
// closing them, as a network path that silently drops packets does. Later
// connections pass.
type freezableProxy struct {
	ln     net.Listener
	target func() (net.Conn, error)
	mu     gosync.Mutex
	conns  []*proxied
}

type proxied struct {
	a, b   net.Conn
	frozen chan struct{}
	once   gosync.Once
}

// startProxy returns a URL like rawURL that goes through a proxy.
func startProxy(t *testing.T, rawURL string) (*freezableProxy, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	var network, addr string
	if h := q.Get("host"); strings.HasPrefix(h, "/") {
		port := q.Get("port")
		if port == "" {
			port = u.Port()
		}
		if port == "" {
			port = "5432"
		}
		network, addr = "unix", filepath.Join(h, ".s.PGSQL."+port)
		q.Del("host")
		q.Del("port")
		u.RawQuery = q.Encode()
	} else {
		network, addr = "tcp", u.Host
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezableProxy{ln: ln, target: func() (net.Conn, error) { return net.Dial(network, addr) }}
	go p.accept()
	t.Cleanup(p.close)
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *freezableProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := p.target()
		if err != nil {
			c.Close()
			continue
		}
		pc := &proxied{a: c, b: s, frozen: make(chan struct{})}
		p.mu.Lock()
		p.conns = append(p.conns, pc)
		p.mu.Unlock()
		go pc.pipe(c, s)
		go pc.pipe(s, c)
	}
}

func (pc *proxied) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-pc.frozen:
			// Swallow: nothing more reaches the other end.
			if err != nil {
				return
			}
			continue
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

func (p *freezableProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.once.Do(func() { close(c.frozen) })
	}
}

func (p *freezableProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.a.Close()
		c.b.Close()
	}
}

// TestReadModelSilentNotificationLoss freezes the network path of the
// agent's connections to PostgreSQL (no reset, no close: packets stop), and
// changes a resource through another agent's connection: within a few
// seconds the agent's reads must show the change or be refused, not keep
// answering the resource as it was, as if current.
func TestReadModelSilentNotificationLoss(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := pgtest.URL(t)
	other, err := postgres.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	if err := other.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	syncNetworks(t, other)
	vpc, err := other.GetResourceByName(ctx, manifest.ObjectRef{Kind: "Network", Namespace: "default", Name: "prod-vpc"})
	if err != nil {
		t.Fatal(err)
	}
	proxy, proxied := startProxy(t, dbURL)
	st, err := postgres.Open(ctx, proxied)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	_, hs := serve(t, api.Options{Store: st, Syncer: sync.New(st, nil), WriteToken: writeToken, ReadWait: time.Second})
	t.Cleanup(proxy.close) // before the server stops: nothing waits on a frozen connection
	path := "/api/v1/resources/" + strconv.FormatInt(vpc.ID, 10)
	if status, body, _ := versionedCall(t, hs.URL, "GET", path, "", 0); status != http.StatusOK {
		t.Fatalf("GET = %d %s", status, body)
	}
	proxy.freeze()
	if _, err := other.SetResourceStatus(ctx, vpc.ID, store.StatusUpdate{Phase: manifest.PhaseFailed, Message: "changed after the freeze"}); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	const bound = 20 * time.Second
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		status, body, _ := versionedCall(t, hs.URL, "GET", path, "", 0)
		if status == http.StatusServiceUnavailable || strings.Contains(string(body), "changed after the freeze") {
			return
		}
		if time.Since(changed) > bound {
			t.Fatalf("%s after the change, the agent still answers %d with the resource as it was, as if current: %.200s", bound, status, body)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal(context.Cause(ctx))
		}
	}
}

// TestReadModelScopedTokenLearnsNothing reads, with a token that may see
// only Widgets, a Network, its type and lists of them through every route
// the read model answers: each is refused (403) or not found (404) as the
// store-backed handlers answered, and no answer carries the Network.
func TestReadModelScopedTokenLearnsNothing(t *testing.T) {
	t.Parallel()
	const ci = "ci-token-4f1a"
	e := newEnv(t, func(o *api.Options) {
		o.Tokens = []api.Token{{Name: "ci", Value: ci, Grants: []api.Grant{{Verbs: []string{api.VerbGet, api.VerbList}, Kinds: []string{"Widget"}}}}}
	})
	e.must("POST", "/api/v1/resource-types", writeToken, widgetType, http.StatusCreated, nil)
	e.must("POST", "/api/v1/resources", writeToken, `{"name": "w1", "resource_type_name": "Widget", "spec": {"size": 1}}`, http.StatusCreated, nil)
	nt, err := e.store.GetResourceTypeByName(t.Context(), "Network", "v1")
	if err != nil {
		t.Fatal(err)
	}
	// e.call asks for a version fenced before each read.
	for _, c := range []struct {
		path string
		want int
	}{
		{"/api/v1/resources/" + itoa(e.gitRes.ID), http.StatusForbidden},
		{"/api/v1/resources/by-name/Network/v1/prod-vpc", http.StatusForbidden},
		// Asked at another version, it does not learn the stored one.
		{"/api/v1/resources/by-name/Network/v9/prod-vpc", http.StatusForbidden},
		{"/api/v1/resources?kind=Network", http.StatusForbidden},
		{"/api/v1/resources", http.StatusForbidden},
		{"/api/v1/resources?source=infra", http.StatusForbidden},
		{"/api/v1/resource-types/" + itoa(nt.ID), http.StatusForbidden},
		{"/api/v1/resource-types/Network/v1", http.StatusForbidden},
		{"/api/v1/resource-types?name=Network", http.StatusForbidden},
		{"/api/v1/resource-types", http.StatusForbidden},
		{"/api/v1/resources/999999", http.StatusNotFound},
	} {
		status, body, _ := e.call("GET", c.path, ci, "")
		if status != c.want || strings.Contains(string(body), "10.0.0.0/16") {
			t.Errorf("GET %s = %d %s; want %d and nothing of the Network", c.path, status, body, c.want)
		}
	}
	// What it may see, it sees, and only that.
	status, body, _ := e.call("GET", "/api/v1/resources?kind=Widget", ci, "")
	if status != http.StatusOK || !strings.Contains(string(body), `"w1"`) || strings.Contains(string(body), "prod-vpc") {
		t.Errorf("Widgets = %d %s", status, body)
	}
}
