package api_test

import (
	"net/http"
	"strings"
	"testing"

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
	if status != http.StatusForbidden || !strings.Contains(string(body), `token \"alice@example.com\" may not sync`) {
		t.Errorf("a write with a read-only ID token: %d %s", status, body)
	}
}
