package main

import (
	"fmt"
	"testing"

	"github.com/no8s/no8s-agent/config"
	"github.com/no8s/no8s-agent/dashboard"
)

// TestDashboardLoginSecure: the cookies are Secure and __Host- whenever the
// redirect URL the configuration accepts is https, however its scheme is
// spelled: a proxy ending TLS leaves the agent no other way to know, and a
// cookie without them crosses plain HTTP and can be planted by a sibling
// subdomain (session fixation, login CSRF).
func TestDashboardLoginSecure(t *testing.T) {
	t.Parallel()
	for redirect, want := range map[string]bool{
		"https://agent.example/auth/callback": true,
		"HTTPS://agent.example/auth/callback": true,
		"Https://agent.example/auth/callback": true,
		"http://127.0.0.1:8080/auth/callback": false,
		"HTTP://localhost:8080/auth/callback": false,
	} {
		cfg, err := config.Parse(fmt.Appendf(nil, `api:
  oidc: {issuerURL: "https://idp.example", audience: no8s, claim: email}
  tokens: [{name: alice@example.com, allow: [{verbs: [get, list]}]}]
dashboard:
  oidc: {redirectURL: %q}
`, redirect), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatalf("%s: %v", redirect, err)
		}
		l := dashboardLogin(cfg, dashboard.Options{})
		if l == nil || l.Secure != want {
			t.Errorf("redirect URL %s: Secure %v; want %v", redirect, l != nil && l.Secure, want)
		}
	}
}
