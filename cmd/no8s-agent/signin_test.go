package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/oidc/oidctest"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// TestRunDashboardSignIn runs an agent configured with dashboard.oidc and
// signs in to its dashboard through the test issuer, with the client
// secret the configuration names; without sessionKeyEnv the agent says
// sessions will not survive a restart.
func TestRunDashboardSignIn(t *testing.T) {
	t.Parallel()
	url0 := pgtest.URL(t)
	is := oidctest.NewIssuer(t)
	const secret = "dash-client-secret-4b7e19"
	// The agent's port is chosen when it starts: the redirect URL the
	// issuer sends browsers to names another, and the test takes the
	// callback's query to the agent itself.
	const redirect = "http://127.0.0.1:1/auth/callback"
	is.AddClient("no8s-dashboard", secret, redirect)
	is.SignInAs("u-alice", map[string]any{"email": "alice@example.com", "email_verified": true})
	cfg := fmt.Sprintf(`api:
  oidc: {issuerURL: %q, audience: no8s, claim: email}
  tokens: [{name: alice@example.com, allow: [{verbs: [get, list]}]}]
dashboard:
  oidc: {clientID: no8s-dashboard, clientSecretEnv: %s, redirectURL: %q, scopes: [openid, email]}
`, is.URL, setSecret(t, secret), redirect)
	path := filepath.Join(t.TempDir(), "no8s.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := startAgent(t, url0, "--config", path)
	base := agent.addr()

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(u string) (int, string, http.Header) {
		t.Helper()
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body), resp.Header
	}
	if st, body, _ := get(base + "/"); st != http.StatusUnauthorized || !strings.Contains(body, `href="/auth/login?next=%2F"`) {
		t.Fatalf("the dashboard without a credential: %d\n%s", st, body)
	}
	st, _, h := get(base + "/auth/login")
	if st != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), is.URL+"/auth?") {
		t.Fatalf("/auth/login: %d %v", st, h)
	}
	st, _, h = get(h.Get("Location"))
	back, err := url.Parse(h.Get("Location"))
	if st != http.StatusFound || err != nil || back.Query().Get("code") == "" {
		t.Fatalf("the issuer: %d %v", st, h)
	}
	if st, body, h := get(base + "/auth/callback?" + back.RawQuery); st != http.StatusSeeOther || h.Get("Location") != "/" {
		t.Fatalf("the callback: %d %v\n%s", st, h, body)
	}
	if st, body, _ := get(base + "/"); st != http.StatusOK || !strings.Contains(body, "oidc:alice@example.com") || !strings.Contains(body, "Sign out") {
		t.Errorf("the dashboard signed in: %d\n%s", st, body)
	}
	log := agent.log.String()
	if !strings.Contains(log, "sessions are sealed with a key made at start") || !strings.Contains(log, `msg="signed in to the dashboard"`) {
		t.Errorf("the log:\n%s", log)
	}
	if strings.Contains(log, secret) {
		t.Error("the log shows the client secret")
	}
}
