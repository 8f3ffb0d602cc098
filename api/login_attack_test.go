package api_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/api"
)

// TestLoginCallbackMixUp: a callback whose iss (RFC 9207) names another
// issuer is an answer of another identity provider, whatever its state
// says: refused before the code is sent to ours. Our own iss signs in.
func TestLoginCallbackMixUp(t *testing.T) {
	t.Parallel()
	e := newSignInEnv(t, nil)
	for _, tt := range []struct {
		iss string
		ok  bool
	}{
		{"https://evil.example", false},
		{e.is.URL + "/", false},
		{strings.ToUpper(e.is.URL), false},
		{e.is.URL, true},
	} {
		b := newBrowser(t)
		cb := e.toIssuer(b, "/")
		issued := e.is.Issued()
		a := b.get(cb + "&iss=" + url.QueryEscape(tt.iss))
		got := a.cookie("no8s_session") != nil && a.cookie("no8s_session").MaxAge > 0
		if got != tt.ok {
			t.Errorf("iss %q: %d session %v; want %v\n%s", tt.iss, a.status, got, tt.ok, a.body)
		}
		if !tt.ok && (a.status != http.StatusBadRequest || e.is.Issued() != issued) {
			t.Errorf("iss %q: %d, %d exchanges; want 400 and the code not sent", tt.iss, a.status, e.is.Issued()-issued)
		}
	}
}

// TestLoginCallbackShapes: the callback is a GET whose query carries the
// answer; a POST (form_post, or another site's form) signs no one in, and
// names that only look like an entry's or a built-in token's get nothing.
func TestLoginCallbackShapes(t *testing.T) {
	t.Parallel()
	e := newSignInEnv(t, nil)
	b := newBrowser(t)
	cb, err := url.Parse(e.toIssuer(b, "/"))
	if err != nil {
		t.Fatal(err)
	}
	a := b.do("POST", e.http.URL+"/auth/callback", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, cb.RawQuery)
	if c := a.cookie("no8s_session"); a.status < 400 || c != nil && c.MaxAge > 0 {
		t.Errorf("a POSTed callback: %d %v", a.status, a.header)
	}
	for _, name := range []string{"oidc:alice@example.com", "ALICE@example.com", "alice@example.com ", api.ReadTokenName, "oidc:" + api.WriteTokenName} {
		e.is.SignInAs("u-x", map[string]any{"email": name})
		a := e.signIn(newBrowser(t), "/")
		if c := a.cookie("no8s_session"); a.status != http.StatusForbidden || c != nil && c.MaxAge > 0 {
			t.Errorf("claim %q: %d %v", name, a.status, a.header)
		}
	}
}

// TestSignInPagesReflect: what a request carries (its path and query, an
// identity provider's error and description) is escaped on the sign-in
// pages, which have the dashboard's Content-Security-Policy; the code, the
// state and the nonce of a sign-in reach neither the log nor a page.
func TestSignInPagesReflect(t *testing.T) {
	t.Parallel()
	e := newSignInEnv(t, nil)
	b := newBrowser(t)
	a := b.get(e.http.URL + `/x%22%3E%3Cscript%3Ealert(1)%3C/script%3E?a=%3Cimg%20src=x%3E&b=` + strings.Repeat("%0d%0a", 4000))
	csp := a.header.Get("Content-Security-Policy")
	if a.status != http.StatusUnauthorized || strings.Contains(a.body, "<script>alert") || strings.Contains(a.body, "<img src=x") ||
		!strings.Contains(csp, "script-src 'nonce-") || strings.Contains(a.header.Get("Location"), "\n") {
		t.Errorf("the sign-in page: %d CSP %q\n%s", a.status, csp, a.body)
	}
	cb, err := url.Parse(e.toIssuer(b, "/"))
	if err != nil {
		t.Fatal(err)
	}
	a = b.get(e.http.URL + "/auth/callback?state=" + url.QueryEscape(cb.Query().Get("state")) +
		"&error=%3Cscript%3Ealert(1)%3C/script%3E&error_description=%3Cb%3Ecall%20%2B1-555%3C/b%3E")
	if a.status != http.StatusUnauthorized || strings.Contains(a.body, "<script>alert") || strings.Contains(a.body, "call +1-555") ||
		!strings.Contains(a.header.Get("Content-Security-Policy"), "script-src 'nonce-") {
		t.Errorf("a refused sign-in's page: %d\n%s", a.status, a.body)
	}

	b = newBrowser(t)
	start := b.get(e.http.URL + "/auth/login?next=%2F")
	authURL, err := url.Parse(start.location())
	if err != nil {
		t.Fatal(err)
	}
	cb, err = url.Parse(b.get(authURL.String()).location())
	if err != nil {
		t.Fatal(err)
	}
	a = b.get(cb.String())
	sessionOf(t, a)
	page := b.get(e.http.URL + "/")
	for what, v := range map[string]string{"code": cb.Query().Get("code"), "state": authURL.Query().Get("state"),
		"nonce": authURL.Query().Get("nonce"), "challenge": authURL.Query().Get("code_challenge")} {
		if v == "" {
			t.Fatalf("no %s in the sign-in", what)
		}
		if strings.Contains(e.logs.String(), v) || strings.Contains(page.body, v) || strings.Contains(a.body, v) {
			t.Errorf("the sign-in's %s is in the log or on a page", what)
		}
	}
}

// TestLoginFreshSecrets: every sign-in has its own state, nonce and PKCE
// challenge (so its own verifier), none guessable from another's; and
// without a sign-in configured, no route under /auth makes or clears a
// cookie or redirects anywhere.
func TestLoginFreshSecrets(t *testing.T) {
	t.Parallel()
	e := newSignInEnv(t, nil)
	seen := map[string]bool{}
	for range 3 {
		a := newBrowser(t).get(e.http.URL + "/auth/login")
		u, err := url.Parse(a.location())
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		if q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43 {
			t.Errorf("the PKCE challenge: %v", q)
		}
		for _, k := range []string{"state", "nonce", "code_challenge"} {
			v := q.Get(k)
			if len(v) < 43 || seen[v] {
				t.Errorf("%s %q is short or was used before", k, v)
			}
			seen[v] = true
		}
	}

	plain := newEnv(t, func(o *api.Options) { o.ReadToken = readToken })
	for _, path := range []string{"/auth/login?next=//evil.example", "/auth/callback?state=x&code=y", "/auth/token?next=//evil.example", "/auth/logout"} {
		for _, method := range []string{"GET", "POST"} {
			a := newBrowser(t).do(method, plain.http.URL+path, map[string]string{"Sec-Fetch-Site": "same-origin"}, "")
			if a.status < 400 || a.header.Get("Location") != "" || len(a.header["Set-Cookie"]) != 0 {
				t.Errorf("%s %s without a sign-in: %d %v", method, path, a.status, a.header)
			}
		}
	}
}
