package api_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/builtin"
	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/oidc"
	"github.com/no8s/no8s-agent/oidc/oidctest"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

// TestGrantActionsTypeVersions: the versions of a type the API declared may
// have different default actions (a PUT changes one version's). A token
// limited to instance a writes a resource of the version whose default is
// a, naming no action: the resource runs a, not the default of the type's
// first version, b.
func TestGrantActionsTypeVersions(t *testing.T) {
	t.Parallel()
	instances, err := builtin.Registry().Build(map[string]action.Spec{
		"a": {Plugin: "noop"},
		"b": {Plugin: "exec", Config: json.RawMessage(`{"command": ["true"]}`)},
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	const deployer = "deployer-token-8e41"
	e := newEnv(t, func(o *api.Options) {
		o.Actions = instances
		o.Tokens = []api.Token{{Name: "deployer", Value: deployer, Grants: []api.Grant{
			{Verbs: []string{api.VerbCreate, api.VerbUpdate}, Kinds: []string{"Widget"}, Actions: []string{"a"}},
		}}}
	})
	withAction := func(version, inst string) string {
		return strings.Replace(strings.Replace(widgetType, `"v1"`, `"`+version+`"`, 1), `"schema"`, `"action": "`+inst+`", "schema"`, 1)
	}
	e.must("POST", "/api/v1/resource-types", writeToken, withAction("v1", "b"), http.StatusCreated, nil)
	e.must("POST", "/api/v1/resource-types", writeToken, withAction("v2", "a"), http.StatusCreated, nil)

	status, body, _ := e.call("POST", "/api/v1/resources", deployer,
		`{"name": "w1", "resource_type_name": "Widget", "resource_type_version": "v2", "spec": {"size": 1}}`)
	if status == http.StatusForbidden {
		return
	}
	var got api.Resource
	e.must("GET", "/api/v1/resources/by-name/Widget/v2/w1", writeToken, "", http.StatusOK, &got)
	if got.ActionPlugin != "a" {
		t.Errorf("a token limited to a wrote a resource that runs %q: %d %s", got.ActionPlugin, status, body)
	}
	// Refused: version v1's default is b.
	status, body, _ = e.call("POST", "/api/v1/resources", deployer,
		`{"name": "w2", "resource_type_name": "Widget", "resource_type_version": "v1", "spec": {"size": 1}}`)
	if status != http.StatusForbidden || !strings.Contains(string(body), "actions [b]") {
		t.Errorf("a resource of v1, whose default is b: %d %s", status, body)
	}
}

// TestOIDCClaimSpellings sends ID tokens of the issuer whose claim is the
// entry's name spelt otherwise (case, spaces, a NUL, a look-alike letter,
// a zero-width space): none gets its grants. The genuine token sent as a
// basic-auth password gets the same grants as a bearer token, no more; a
// static token shaped like a JWT is that token, not an ID token.
func TestOIDCClaimSpellings(t *testing.T) {
	t.Parallel()
	is := oidctest.NewIssuer(t)
	const jwtShaped = "ci.token-4f1e.static"
	e := newEnv(t, func(o *api.Options) {
		o.OIDC = oidc.New(is.URL, "no8s", "email")
		o.Tokens = []api.Token{
			{Name: "alice@example.com", Grants: []api.Grant{{Verbs: []string{api.VerbGet, api.VerbList}, Kinds: []string{"Network"}}}},
			{Name: "ci", Value: jwtShaped, Grants: []api.Grant{{Verbs: []string{api.VerbGet, api.VerbList}}}},
		}
	})
	for _, claim := range []string{"Alice@example.com", "alice@example.com ", " alice@example.com", "alice@example.com\x00",
		"alice@\u0435xample.com", "alice@example.com\u200b", "ALICE@EXAMPLE.COM"} {
		tok := is.Token(t, "no8s", "u-1", map[string]any{"email": claim})
		status, body, _ := e.call("GET", "/api/v1/resources?kind=Network", tok, "")
		if status != http.StatusForbidden || !strings.Contains(string(body), "no entry of api.tokens") {
			t.Errorf("an ID token naming %q: %d %s; want 403", claim, status, body)
		}
	}
	alice := is.Token(t, "no8s", "u-1", map[string]any{"email": "alice@example.com"})
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{"GET", "/api/v1/resources?kind=Network", "", http.StatusOK},
		{"GET", "/api/v1/resources", "", http.StatusForbidden},
		{"GET", "/api/v1/sources/infra", "", http.StatusForbidden},
		{"POST", "/api/v1/sources/infra/sync", "", http.StatusForbidden},
		{"POST", "/api/v1/resource-types", widgetType, http.StatusForbidden},
	} {
		headers := map[string]string{"Authorization": "Basic " + basicAuth("alice", alice), "Content-Type": "application/json",
			"Sec-Fetch-Site": "same-origin"}
		if status, body, _ := e.request(c.method, c.path, headers, c.body); status != c.status {
			t.Errorf("the ID token as a basic-auth password: %s %s = %d %s; want %d", c.method, c.path, status, body, c.status)
		}
	}
	e.must("GET", "/api/v1/resources", jwtShaped, "", http.StatusOK, nil)
}

// TestLoopbackHostSpellings sends an agent on a loopback address requests
// written by hand: the Host the guard judges is the one the server routes
// by (an absolute request target's), forwarding headers count for nothing,
// and only what is a loopback name or address with a numeric port passes,
// however spelt (a Host with user info is refused by the server itself).
func TestLoopbackHostSpellings(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveOn(t, e.srv, ln)
	p := itoa(int64(ln.Addr().(*net.TCPAddr).Port))
	tests := []struct {
		name, head string
		status     int
	}{
		{"an absolute target of another host", "GET http://evil.example/healthz HTTP/1.1\r\nHost: localhost:" + p, 421},
		{"a forwarded host", "GET /healthz HTTP/1.1\r\nHost: evil.example\r\nX-Forwarded-Host: localhost", 421},
		{"user info in the host", "GET /healthz HTTP/1.1\r\nHost: localhost:" + p + "@evil.example", 400},
		{"a port that is no number", "GET /healthz HTTP/1.1\r\nHost: localhost:evil", 421},
		{"0.0.0.0", "GET /healthz HTTP/1.1\r\nHost: 0.0.0.0:" + p, 421},
		{"127.1", "GET /healthz HTTP/1.1\r\nHost: 127.1:" + p, 421},
		{"a loopback name ending in a dot", "GET /healthz HTTP/1.1\r\nHost: localhost.:" + p, 200},
		{"an IPv4-mapped loopback address", "GET /healthz HTTP/1.1\r\nHost: [::ffff:127.0.0.1]:" + p, 200},
		{"an absolute target of a loopback host", "GET http://127.0.0.1:" + p + "/healthz HTTP/1.1\r\nHost: evil.example", 200},
		{"HTTP/1.0 without Host", "GET /healthz HTTP/1.0", 200},
	}
	for _, tt := range tests {
		if status := sendRaw(t, ln.Addr().String(), tt.head+"\r\n\r\n"); status != tt.status {
			t.Errorf("%s: %d, want %d", tt.name, status, tt.status)
		}
	}
}

// sendRaw writes req to addr as it is and returns the answer's status.
func sendRaw(t *testing.T, addr, req string) int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to %q: %v", req, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestEventsOfOtherKinds: a token limited to Widget cannot open the event
// stream of every kind, of another kind or source, or of a resource of
// another kind; the stream of its kind, whatever other filter the request
// names beside, carries no event of another kind.
func TestEventsOfOtherKinds(t *testing.T) {
	t.Parallel()
	const ci = "ci-token-e7d2"
	e := newEnv(t, func(o *api.Options) {
		o.Tokens = []api.Token{{Name: "ci", Value: ci, Grants: []api.Grant{{Verbs: []string{api.VerbGet, api.VerbList}, Kinds: []string{"Widget"}}}}}
	})
	for _, path := range []string{"/api/v1/events", "/api/v1/events?resource_type=Network", "/api/v1/events?source=infra",
		"/api/v1/events?kind=&resource_type=Network", "/api/v1/resources/" + itoa(e.gitRes.ID) + "/events"} {
		if status, body, _ := e.call("GET", path, ci, ""); status != http.StatusForbidden {
			t.Errorf("GET %s = %d %s; want 403", path, status, body)
		}
	}
	if status, _, _ := e.call("GET", "/api/v1/events?kind=Widget&token="+ci, "", ""); status != http.StatusUnauthorized {
		t.Errorf("a token in the query string = %d; want 401", status)
	}
	all := streamWith(t, e.http.URL+"/api/v1/events", writeToken)
	mine := streamWith(t, e.http.URL+"/api/v1/events?kind=Widget&resource_type=Network&source=", ci)
	// A change of the Network, which the unfiltered stream carries.
	snap := &source.Snapshot{Revision: "main@sha1:" + manifest.Revision(strings.Repeat("cd", 20)), Files: []manifest.File{
		file("net/network.yaml", strings.Replace(gitResources, "10.0.0.0/16", "10.2.0.0/16", 1)), file("types/network.yaml", gitTypes)}}
	if _, err := e.syncer.Sync(t.Context(), sync.Target{Name: "infra", Kind: store.SourceGit, URL: "https://git.example.com/infra.git"}, snap, false); err != nil {
		t.Fatal(err)
	}
	if ev := all.nextResource(); ev.Kind != "Network" {
		t.Fatalf("the change of the Network sent %+v", ev)
	}
	e.must("POST", "/api/v1/resource-types", writeToken, widgetType, http.StatusCreated, nil)
	e.must("POST", "/api/v1/resources", writeToken, `{"name": "w1", "resource_type_name": "Widget", "spec": {"size": 1}}`, http.StatusCreated, nil)
	if ev := mine.nextResource(); ev.Kind != "Widget" {
		t.Errorf("the stream of Widget sent an event of %s: %+v", ev.Kind, ev)
	}
}
