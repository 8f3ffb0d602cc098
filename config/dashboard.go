package config

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Dashboard configures signing in to the dashboard.
type Dashboard struct {
	// OIDC signs people in with the identity provider of api.oidc (the
	// authorization code flow with PKCE); a signed-in browser has the
	// grants of the api.tokens entry the claim of api.oidc names.
	OIDC *DashboardOIDC `json:"oidc,omitempty"`
	// SessionKeyEnv names the variable holding the key (at least
	// MinSessionKey bytes) that seals the session cookies. Unset, a
	// random key is made at every start: sessions end with a restart,
	// and agents behind one address do not share them.
	SessionKeyEnv string `json:"sessionKeyEnv,omitempty"`
	// SessionTTL is how long a session lasts; default DefaultSessionTTL.
	SessionTTL Duration `json:"sessionTTL,omitempty"`

	sessionKey *secret
}

// DashboardOIDC is the dashboard's OAuth client at the identity provider
// of api.oidc.
type DashboardOIDC struct {
	// ClientID is the client, and the audience the ID tokens of a sign-in
	// must have; default api.oidc.audience. Bearer ID tokens are still
	// taken for api.oidc.audience only.
	ClientID string `json:"clientID,omitempty"`
	// ClientSecretEnv names the variable holding the client's secret;
	// unset for a public client, which proves itself with PKCE only.
	ClientSecretEnv string `json:"clientSecretEnv,omitempty"`
	// RedirectURL is the agent's /auth/callback as browsers reach it,
	// registered with the identity provider: https, or http on a loopback
	// address.
	RedirectURL string `json:"redirectURL"`
	// Scopes are asked for; default [openid]. openid must be among them.
	Scopes []string `json:"scopes,omitempty"`

	clientSecret *secret
}

// Settings of dashboard sessions.
const (
	DefaultSessionTTL = 8 * time.Hour
	MinSessionTTL     = 5 * time.Minute
	MaxSessionTTL     = 30 * 24 * time.Hour
	// MinSessionKey is the least length, in bytes, of the session key.
	MinSessionKey = 32
	// CallbackPath is where the identity provider sends people back.
	CallbackPath = "/auth/callback"
)

// SessionKey returns the resolved session key, or "".
func (d Dashboard) SessionKey() string { return d.sessionKey.get() }

// ClientSecret returns the resolved client secret, or "".
func (o DashboardOIDC) ClientSecret() string { return o.clientSecret.get() }

// SessionLifetime is SessionTTL, or its default.
func (d Dashboard) SessionLifetime() time.Duration {
	if d.SessionTTL.Duration == 0 {
		return DefaultSessionTTL
	}
	return d.SessionTTL.Duration
}

// resolve reads the dashboard's secrets; a session key too short is a
// problem naming the variable, never its value.
func (d *Dashboard) resolve(get func(key, name string) *secret, ps *problems) {
	if o := d.OIDC; o != nil {
		o.clientSecret = get("dashboard.oidc.clientSecretEnv", o.ClientSecretEnv)
	}
	d.sessionKey = get("dashboard.sessionKeyEnv", d.SessionKeyEnv)
	if k := d.sessionKey; k != nil && len(k.get()) < MinSessionKey {
		ps.add("dashboard.sessionKeyEnv", "environment variable %s holds %d bytes: a session key needs at least %d (e.g. openssl rand -base64 48)",
			d.SessionKeyEnv, len(k.get()), MinSessionKey)
	}
}

// validateDashboard checks the dashboard's sign-in.
func (c *Config) validateDashboard(ps *problems) {
	d := c.Dashboard
	o := d.OIDC
	if o == nil {
		if d.SessionKeyEnv != "" {
			ps.add("dashboard.sessionKeyEnv", "set without dashboard.oidc: only sessions of a sign-in use it")
		}
		if d.SessionTTL.Duration != 0 {
			ps.add("dashboard.sessionTTL", "set without dashboard.oidc: only sessions of a sign-in use it")
		}
		return
	}
	if c.API.OIDC == nil {
		ps.add("dashboard.oidc", "needs api.oidc: the identity provider (issuerURL) and the claim naming the api.tokens entry are api.oidc's")
	}
	if !slices.ContainsFunc(c.API.Tokens, func(t APIToken) bool { return t.TokenEnv == "" }) {
		ps.add("dashboard.oidc", "no entry of api.tokens is for ID tokens (one without tokenEnv): whoever signed in could do nothing")
	}
	if o.ClientID == "" && (c.API.OIDC == nil || c.API.OIDC.Audience == "") {
		ps.add("dashboard.oidc.clientID", "required: the client registered with the identity provider (default api.oidc.audience)")
	}
	checkRedirectURL(ps, "dashboard.oidc.redirectURL", o.RedirectURL)
	if len(o.Scopes) > 0 && !slices.Contains(o.Scopes, "openid") {
		ps.add("dashboard.oidc.scopes", "must include openid, which asks for an ID token")
	}
	for i, sc := range o.Scopes {
		if sc == "" || strings.ContainsAny(sc, " \t\r\n\"\\") {
			ps.add(fmt.Sprintf("dashboard.oidc.scopes[%d]", i), "%q is not a scope", sc)
		}
	}
	if t := d.SessionTTL.Duration; t != 0 && (t < MinSessionTTL || t > MaxSessionTTL) {
		ps.add("dashboard.sessionTTL", "must be between %s and %s, not %s", MinSessionTTL, MaxSessionTTL, d.SessionTTL)
	}
}

// checkRedirectURL checks the URL the identity provider sends people back
// to: the agent's callback, over https, or http on a loopback address only
// (cookies and codes would cross the network in clear otherwise).
func checkRedirectURL(ps *problems, key, raw string) {
	if raw == "" {
		ps.add(key, "required: https://HOST%s, the agent's address as browsers reach it", CallbackPath)
		return
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "":
		ps.add(key, "%q is not an absolute URL: give https://HOST%s", raw, CallbackPath)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(raw, "?") || strings.HasSuffix(raw, "#"):
		ps.add(key, "%q: give the URL without user, query or fragment", raw)
	case u.Path != CallbackPath:
		ps.add(key, "%q: the path must be %s, where the agent completes sign-ins", raw, CallbackPath)
	case u.Scheme == "https":
	case u.Scheme == "http" && loopbackHost(u.Hostname()):
	case u.Scheme == "http":
		ps.add(key, "%q: must be https (http only on a loopback address such as 127.0.0.1 or localhost): the session cookie and the code would cross the network in clear", raw)
	default:
		ps.add(key, "%q: must be an https URL", raw)
	}
}

// loopbackHost reports whether host is localhost or a loopback address.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
