package config

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// dashboardBase is a configuration the dashboard's sign-in can use: an
// issuer, and an entry for ID tokens.
const dashboardBase = `api:
  oidc: {issuerURL: "https://id.example.com", audience: no8s-cli, claim: email}
  tokens: [{name: alice@example.com, allow: [{verbs: [get, list]}]}]
`

func TestDashboardSignIn(t *testing.T) {
	t.Parallel()
	key := strings.Repeat("k", MinSessionKey)
	c, err := Parse([]byte(dashboardBase+`dashboard:
  oidc: {clientID: no8s-dashboard, clientSecretEnv: DASH_SECRET, redirectURL: "https://agent.example.com/auth/callback", scopes: [openid, email]}
  sessionKeyEnv: DASH_KEY
  sessionTTL: 12h
`), env(map[string]string{"DASH_SECRET": "client-secret-value", "DASH_KEY": key}))
	if err != nil {
		t.Fatal(err)
	}
	d := c.Dashboard
	if d.OIDC.ClientSecret() != "client-secret-value" || d.SessionKey() != key || d.SessionLifetime() != 12*time.Hour {
		t.Errorf("resolved: %q %q %s", d.OIDC.ClientSecret(), d.SessionKey(), d.SessionLifetime())
	}
	var settings []string
	for _, s := range c.Secrets() {
		settings = append(settings, s.Setting)
	}
	if got := strings.Join(settings, ","); !strings.Contains(got, "dashboard.oidc.clientSecretEnv,dashboard.sessionKeyEnv") {
		t.Errorf("secrets: %s", got)
	}
	if s := fmt.Sprintf("%+v %v", c, d); strings.Contains(s, "client-secret-value") || strings.Contains(s, key) {
		t.Errorf("printing the configuration shows a secret: %s", s)
	}

	// The least: a public client on a loopback address, default TTL.
	c, err = Parse([]byte(dashboardBase+"dashboard: {oidc: {redirectURL: \"http://127.0.0.1:8080/auth/callback\"}}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Dashboard.SessionLifetime() != DefaultSessionTTL || c.Dashboard.OIDC.ClientSecret() != "" {
		t.Errorf("defaults: %s %q", c.Dashboard.SessionLifetime(), c.Dashboard.OIDC.ClientSecret())
	}
}

func TestDashboardSignInInvalid(t *testing.T) {
	t.Parallel()
	const ok = `"https://agent.example.com/auth/callback"`
	oidc := func(fields string) string { return dashboardBase + "dashboard: {oidc: {" + fields + "}}\n" }
	tests := []struct{ name, yaml, key, msg string }{
		{"no api.oidc", "api: {tokens: [{name: a, tokenEnv: T, allow: [{verbs: [get]}]}]}\ndashboard: {oidc: {clientID: d, redirectURL: " + ok + "}}\n",
			"dashboard.oidc", "needs api.oidc"},
		{"no entry for ID tokens", "api: {oidc: {issuerURL: \"https://id.example.com\", audience: a}, tokens: [{name: a, tokenEnv: T, allow: [{verbs: [get]}]}]}\n" +
			"dashboard: {oidc: {redirectURL: " + ok + "}}\n", "dashboard.oidc", "could do nothing"},
		{"no redirect URL", oidc(""), "dashboard.oidc.redirectURL", "required"},
		{"http redirect URL", oidc(`redirectURL: "http://agent.example.com/auth/callback"`), "dashboard.oidc.redirectURL", "must be https"},
		{"http on a name resolving anywhere", oidc(`redirectURL: "http://localhost.evil.example/auth/callback"`), "dashboard.oidc.redirectURL", "must be https"},
		{"another path", oidc(`redirectURL: "https://agent.example.com/callback"`), "dashboard.oidc.redirectURL", "path must be /auth/callback"},
		{"a query", oidc(`redirectURL: "https://agent.example.com/auth/callback?x=1"`), "dashboard.oidc.redirectURL", "without user, query or fragment"},
		{"a relative URL", oidc(`redirectURL: "/auth/callback"`), "dashboard.oidc.redirectURL", "not an absolute URL"},
		{"another scheme", oidc(`redirectURL: "ftp://agent.example.com/auth/callback"`), "dashboard.oidc.redirectURL", "must be an https URL"},
		{"scopes without openid", oidc(`redirectURL: ` + ok + `, scopes: [email]`), "dashboard.oidc.scopes", "must include openid"},
		{"an empty scope", oidc(`redirectURL: ` + ok + `, scopes: [openid, ""]`), "dashboard.oidc.scopes[1]", "is not a scope"},
		{"a scope with a space", oidc(`redirectURL: ` + ok + `, scopes: ["openid email"]`), "dashboard.oidc.scopes[0]", "is not a scope"},
		{"unknown key", oidc(`redirectURL: ` + ok + `, clientSecret: x`), "dashboard.oidc.clientSecret", "unknown"},
		{"secret unset", oidc(`redirectURL: ` + ok + `, clientSecretEnv: NO8S_TEST_UNSET_DASH`), "dashboard.oidc.clientSecretEnv", "is not set"},
		{"short session key", dashboardBase + "dashboard: {oidc: {redirectURL: " + ok + "}, sessionKeyEnv: T}\n", "dashboard.sessionKeyEnv",
			"environment variable T holds 1 bytes: a session key needs at least 32"},
		{"short TTL", dashboardBase + "dashboard: {oidc: {redirectURL: " + ok + "}, sessionTTL: 1m}\n", "dashboard.sessionTTL", "must be between 5m0s and 720h0m0s"},
		{"long TTL", dashboardBase + "dashboard: {oidc: {redirectURL: " + ok + "}, sessionTTL: 1000h}\n", "dashboard.sessionTTL", "must be between"},
		{"TTL not a duration", dashboardBase + "dashboard: {oidc: {redirectURL: " + ok + "}, sessionTTL: 8}\n", "dashboard.sessionTTL", ""},
		{"session key without oidc", "dashboard: {sessionKeyEnv: K32}\n", "dashboard.sessionKeyEnv", "without dashboard.oidc"},
		{"TTL without oidc", "dashboard: {sessionTTL: 1h}\n", "dashboard.sessionTTL", "without dashboard.oidc"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.yaml), env(map[string]string{"T": "x", "K32": strings.Repeat("k", 32)}))
			if err == nil || !strings.Contains(err.Error(), tc.key+": ") || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error\n%v\ndoes not contain %q and %q", err, tc.key+": ", tc.msg)
			}
			if err != nil && strings.Contains(err.Error(), "client-secret") {
				t.Errorf("the error shows a secret: %v", err)
			}
		})
	}
}
