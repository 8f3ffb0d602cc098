package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/oidc"
	"github.com/no8s/no8s-agent/oidc/oidctest"
)

// TestOIDCTokens takes ID tokens of the configured issuer and audience, the
// claim naming the token whose grants apply; another audience, a forged
// token or an unknown name is refused.
func TestOIDCTokens(t *testing.T) {
	t.Parallel()
	is := oidctest.NewIssuer(t)
	e := newEnv(t, func(o *api.Options) {
		o.OIDC = oidc.New(is.URL, "no8s", "email")
		o.Tokens = []api.Token{{Name: "alice@example.com", Grants: []api.Grant{{Verbs: []string{api.VerbGet, api.VerbList}}}}}
	})
	alice := is.Token(t, "no8s", "u-1", map[string]any{"email": "alice@example.com"})
	tests := []struct {
		name, token string
		status      int
		contains    string
	}{
		{"the claim names a token", alice, 200, `"name":"prod-vpc"`},
		{"another audience", is.Token(t, "other-app", "u-1", map[string]any{"email": "alice@example.com"}), 401, `expected audience`},
		{"a forged signature", alice[:len(alice)-4] + "AAAA", 401, `not valid`},
		{"a name with no grants", is.Token(t, "no8s", "u-2", map[string]any{"email": "mallory@example.com"}), 403, `mallory@example.com`},
		{"no claim", is.Token(t, "no8s", "u-3", nil), 401, `no string claim \"email\"`},
	}
	for _, tt := range tests {
		status, body, _ := e.call("GET", "/api/v1/resources", tt.token, "")
		if status != tt.status || !strings.Contains(string(body), tt.contains) {
			t.Errorf("%s: %d %s; want %d with %s", tt.name, status, body, tt.status, tt.contains)
		}
	}
	// The grants are the named token's: reads, not writes.
	status, body, _ := e.call("POST", "/api/v1/sources/infra/sync", alice, "")
	if status != http.StatusForbidden || !strings.Contains(string(body), `token \"oidc:alice@example.com\" may not sync`) {
		t.Errorf("a write with a read-only ID token: %d %s", status, body)
	}
}

// TestOIDCIdentityConfusion sends ID tokens whose claim is the name of the
// write and read shorthands or of a token with a secret of its own: none of
// them gets that token's grants. An ID token gets only an entry declared
// for ID tokens, and the audit trail names it as one.
func TestOIDCIdentityConfusion(t *testing.T) {
	t.Parallel()
	is := oidctest.NewIssuer(t)
	const ci = "ci-token-3d91f0"
	e := newEnv(t, func(o *api.Options) {
		o.ReadToken = readToken
		o.OIDC = oidc.New(is.URL, "no8s", "sub")
		o.Tokens = []api.Token{
			{Name: "ci", Value: ci, Grants: []api.Grant{{Verbs: api.Verbs}}},
			{Name: "alice", Grants: []api.Grant{{Verbs: []string{api.VerbCreate, api.VerbSync, api.VerbGet, api.VerbList}}}},
		}
	})
	for _, sub := range []string{api.WriteTokenName, api.ReadTokenName, "ci"} {
		tok := is.Token(t, "no8s", sub, nil)
		for _, c := range []struct{ method, path, body string }{
			{"POST", "/api/v1/sources/infra/sync", ""},
			{"POST", "/api/v1/resource-types", widgetType},
			{"GET", "/api/v1/resources", ""},
		} {
			status, body, _ := e.call(c.method, c.path, tok, c.body)
			if status != http.StatusForbidden && status != http.StatusUnauthorized {
				t.Errorf("an ID token with sub %q: %s %s = %d %s; want 401 or 403", sub, c.method, c.path, status, body)
			}
		}
	}
	if calls := e.runner.calls(); len(calls) != 0 {
		t.Errorf("ID tokens naming other tokens triggered syncs: %v", calls)
	}
	if status, body, _ := e.call("GET", "/api/v1/resource-types?name=Widget", readToken, ""); status != http.StatusOK || string(body) != "[]\n" {
		t.Errorf("ID tokens naming other tokens wrote: %d %s", status, body)
	}

	// The entry declared for ID tokens: its grants, audited as oidc:<claim>.
	alice := is.Token(t, "no8s", "alice", nil)
	e.must("POST", "/api/v1/resource-types", alice, widgetType, http.StatusCreated, nil)
	status, body, _ := e.call("DELETE", "/api/v1/resources/"+itoa(e.gitRes.ID), alice, "")
	if status != http.StatusForbidden || !strings.Contains(string(body), `token \"oidc:alice\" may not delete`) {
		t.Errorf("a verb the ID token's entry lacks: %d %s", status, body)
	}
	status, body, _ = e.call("GET", "/api/v1/sources/api/history", readToken, "")
	if status != http.StatusOK || !strings.Contains(string(body), `"author":"oidc:alice"`) {
		t.Errorf("the API's sync history does not name the ID token's claim: %d %s", status, body)
	}
	if logs := e.logs.String(); !strings.Contains(logs, `msg="api request" token=oidc:alice method=POST path=/api/v1/resource-types`) {
		t.Errorf("the log does not audit the ID token by its claim:\n%s", logs)
	}
}

// TestOIDCIssuerDown: a token signed with a key the agent does not know is
// 401 while the issuer answers, and 503 once it is down and the agent may
// read its keys again; no answer names the issuer's or its keys' URL, and
// a token signed with a known key still works.
func TestOIDCIssuerDown(t *testing.T) {
	t.Parallel()
	is := oidctest.NewIssuer(t)
	e := newEnv(t, func(o *api.Options) {
		o.OIDC = oidc.New(is.URL, "no8s", "sub")
		o.Tokens = []api.Token{{Name: "alice", Grants: []api.Grant{{Verbs: []string{api.VerbGet, api.VerbList}}}}}
	})
	alice := is.Token(t, "no8s", "alice", nil)
	e.must("GET", "/api/v1/resources", alice, "", http.StatusOK, nil)
	forged := is.ForgedToken(t, "k-unknown", "no8s", "alice")
	noURL := func(what string, body []byte) {
		t.Helper()
		if strings.Contains(string(body), "http") || strings.Contains(string(body), "127.0.0.1") {
			t.Fatalf("%s names a URL: %s", what, body)
		}
	}
	status, body, _ := e.call("GET", "/api/v1/resources", forged, "")
	noURL("the answer to a forged token", body)
	if status != http.StatusUnauthorized {
		t.Errorf("a forged token while the issuer answers: %d %s", status, body)
	}
	is.Close()
	deadline := time.Now().Add(3 * oidc.KeyRefreshFloor)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		status, body, _ = e.call("GET", "/api/v1/resources", forged, "")
		noURL("the answer to an unknown key while the issuer is down", body)
		if status == http.StatusServiceUnavailable {
			break
		}
		if status != http.StatusUnauthorized || time.Now().After(deadline) {
			t.Fatalf("an unknown key while the issuer is down: %d %s; want 503", status, body)
		}
		<-tick.C
	}
	if !strings.Contains(string(body), "identity provider cannot be reached") {
		t.Errorf("503 body: %s", body)
	}
	e.must("GET", "/api/v1/resources", alice, "", http.StatusOK, nil)
}
