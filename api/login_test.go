package api_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/dashboard"
	"github.com/no8s/no8s-agent/oidc"
	"github.com/no8s/no8s-agent/oidc/oidctest"
)

// clientSecret is the dashboard's secret at the test issuer: it must
// appear in no page, log or cookie.
const clientSecret = "cs-7c1e0b9d4f2a61"

// lateLogin is the sign-in's provider, made once the agent's address (its
// redirect URL) is known.
type lateLogin struct{ l atomic.Pointer[oidc.Login] }

func (p *lateLogin) AuthURL(ctx context.Context, state, nonce, verifier string) (string, error) {
	return p.l.Load().AuthURL(ctx, state, nonce, verifier)
}

func (p *lateLogin) Exchange(ctx context.Context, code, verifier, nonce string) (oidc.Identity, error) {
	return p.l.Load().Exchange(ctx, code, verifier, nonce)
}

func (p *lateLogin) Issuer() string { return p.l.Load().Issuer() }

// signInEnv is an agent whose dashboard signs people in with a test
// issuer, as alice@example.com (allowed everything) by default; bob may
// read.
type signInEnv struct {
	*env
	is       *oidctest.Issuer
	provider *lateLogin
	key      []byte
}

var (
	everything = []api.Grant{{Verbs: api.Verbs}}
	readOnly   = []api.Grant{{Verbs: []string{api.VerbGet, api.VerbList}}}
)

func signInPages() func(http.ResponseWriter, *http.Request, api.SignInPage) {
	pages := dashboard.SignInPages(dashboard.Options{})
	return func(w http.ResponseWriter, r *http.Request, p api.SignInPage) {
		pages(w, r, dashboard.SignIn{Status: p.Status, Message: p.Message, SignInURL: p.SignInURL, TokenURL: p.TokenURL})
	}
}

func newSignInEnv(t *testing.T, mutate func(*api.Options)) *signInEnv {
	t.Helper()
	is := oidctest.NewIssuer(t)
	p := &lateLogin{}
	key := []byte(strings.Repeat("k", 16) + "-session-key-of-this-test")
	e := newEnv(t, func(o *api.Options) {
		o.OIDC = oidc.New(is.URL, "no8s", "email")
		o.Tokens = []api.Token{{Name: "alice@example.com", Grants: everything}, {Name: "bob@example.com", Grants: readOnly}}
		o.Dashboard = dashboard.New(o.Store, dashboard.Options{Caller: api.Caller, Refresh: -1})
		o.Login = &api.Login{Provider: p, SessionKey: key, Page: signInPages()}
		if mutate != nil {
			mutate(o)
		}
	})
	redirect := e.http.URL + "/auth/callback"
	is.AddClient("dash", clientSecret, redirect)
	is.SignInAs("u-alice", map[string]any{"email": "alice@example.com", "email_verified": true})
	p.l.Store(oidc.NewLogin(oidc.LoginConfig{IssuerURL: is.URL, Claim: "email", ClientID: "dash", ClientSecret: clientSecret,
		RedirectURL: redirect}))
	return &signInEnv{env: e, is: is, provider: p, key: key}
}

// answer is a response, read.
type answer struct {
	status int
	body   string
	header http.Header
}

func (a answer) location() string { return a.header.Get("Location") }

// cookie returns the Set-Cookie of name, nil when the answer sets none.
func (a answer) cookie(name string) *http.Cookie {
	for _, c := range (&http.Response{Header: a.header}).Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// agentBrowser keeps cookies and follows no redirect, so that each step of
// a sign-in can be looked at.
type agentBrowser struct {
	t *testing.T
	c *http.Client
}

func newBrowser(t *testing.T) *agentBrowser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &agentBrowser{t: t, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *agentBrowser) do(method, u string, headers map[string]string, body string) answer {
	b.t.Helper()
	req, err := http.NewRequestWithContext(b.t.Context(), method, u, strings.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return answer{resp.StatusCode, string(data), resp.Header}
}

func (b *agentBrowser) get(u string) answer { b.t.Helper(); return b.do("GET", u, nil, "") }

// toIssuer starts a sign-in and follows it to the issuer, which approves:
// it returns the callback URL the issuer sends the browser to.
func (e *signInEnv) toIssuer(b *agentBrowser, next string) string {
	e.t.Helper()
	a := b.get(e.http.URL + "/auth/login?next=" + url.QueryEscape(next))
	if a.status != http.StatusSeeOther || !strings.HasPrefix(a.location(), e.is.URL+"/auth?") {
		e.t.Fatalf("GET /auth/login: %d %q %s", a.status, a.location(), a.body)
	}
	a = b.get(a.location())
	if a.status != http.StatusFound || !strings.HasPrefix(a.location(), e.http.URL+"/auth/callback?") {
		e.t.Fatalf("the issuer: %d %q %s", a.status, a.location(), a.body)
	}
	return a.location()
}

// signIn signs b in and returns the callback's answer.
func (e *signInEnv) signIn(b *agentBrowser, next string) answer {
	e.t.Helper()
	return b.get(e.toIssuer(b, next))
}

// sessionOf returns the session cookie an answer set.
func sessionOf(t *testing.T, a answer) *http.Cookie {
	t.Helper()
	c := a.cookie("no8s_session")
	if c == nil || c.Value == "" || c.MaxAge <= 0 {
		t.Fatalf("no session cookie: %d %v %s", a.status, a.header, a.body)
	}
	return c
}

// TestDashboardSignIn signs in through the issuer and reads the dashboard
// and the API with the session: the identity shows on the page and in the
// audit trail; the cookie is HttpOnly, SameSite=Lax, for every path, as
// long as a session lasts, and opaque; no secret is in it, on the page or
// in the log.
func TestDashboardSignIn(t *testing.T) {
	t.Parallel()
	e := newSignInEnv(t, nil)
	b := newBrowser(t)

	// Without a credential: the dashboard offers both ways to sign in, and
	// does not have the browser ask for a password; the API answers JSON.
	a := b.get(e.http.URL + "/resources/" + itoa(e.gitRes.ID) + "?x=1")
	if a.status != http.StatusUnauthorized || !strings.Contains(a.body, `href="/auth/login?next=%2Fresources%2F`+itoa(e.gitRes.ID)+`%3Fx%3D1"`) ||
		!strings.Contains(a.body, `href="/auth/token?next=`) || strings.Contains(a.header.Get("WWW-Authenticate"), "Basic") {
		t.Fatalf("a dashboard page without a credential: %d %v\n%s", a.status, a.header, a.body)
	}
	if a := b.get(e.http.URL + "/api/v1/resources"); a.status != http.StatusUnauthorized || !strings.Contains(a.body, `sign in at /auth/login`) {
		t.Errorf("the API without a credential: %d %s", a.status, a.body)
	}
	if a := b.get(e.http.URL + "/static/dashboard.css"); a.status != http.StatusOK {
		t.Errorf("the sign-in page's stylesheet: %d", a.status)
	}

	a = e.signIn(b, "/graph")
	if a.status != http.StatusSeeOther || a.location() != "/graph" {
		t.Fatalf("the callback: %d %q %s", a.status, a.location(), a.body)
	}
	c := sessionOf(t, a)
	if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.Secure || c.MaxAge != int(api.DefaultSessionTTL/time.Second) {
		t.Errorf("session cookie attributes: %+v", c)
	}
	if f := a.cookie("no8s_login"); f == nil || f.MaxAge >= 0 {
		t.Errorf("the flow cookie is not cleared: %+v", f)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(c.Value)
	for _, secret := range []string{"alice", "u-alice", clientSecret, "eyJ"} {
		if strings.Contains(c.Value, secret) || strings.Contains(string(raw), secret) {
			t.Errorf("the session cookie shows %q: %s", secret, c.Value)
		}
	}

	a = b.get(e.http.URL + "/")
	if a.status != http.StatusOK || !strings.Contains(a.body, "oidc:alice@example.com") || !strings.Contains(a.body, `action="/auth/logout"`) {
		t.Fatalf("the dashboard with a session: %d\n%s", a.status, a.body)
	}
	if a := b.get(e.http.URL + "/api/v1/resources"); a.status != http.StatusOK || !strings.Contains(a.body, `"prod-vpc"`) {
		t.Errorf("the API with a session: %d %s", a.status, a.body)
	}
	// The grants are the entry's: another entry's session has its own.
	e.is.SignInAs("u-bob", map[string]any{"email": "bob@example.com"})
	bob := newBrowser(t)
	sessionOf(t, e.signIn(bob, "/"))
	if a := bob.do("POST", e.http.URL+"/api/v1/sources/infra/sync", map[string]string{"Content-Type": "application/json",
		"Sec-Fetch-Site": "same-origin"}, "{}"); a.status != http.StatusForbidden || !strings.Contains(a.body, `token \"oidc:bob@example.com\" may not sync`) {
		t.Errorf("a read-only session writes: %d %s", a.status, a.body)
	}

	logs := e.logs.String()
	for _, want := range []string{
		`msg="signed in to the dashboard" token=oidc:alice@example.com subject=u-alice email=alice@example.com`,
		`msg="api request" token=oidc:alice@example.com method=GET path=/api/v1/resources session=true subject=u-alice email=alice@example.com`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %s:\n%s", want, logs)
		}
	}
	for _, secret := range []string{clientSecret, "eyJ", c.Value} {
		if strings.Contains(logs, secret) || strings.Contains(a.body, secret) {
			t.Errorf("%q is in the log or on the page", secret)
		}
	}
}

// TestSessionWritesAreBrowserWrites: a write with the session cookie is
// checked as one with basic auth: it must be JSON and come from the
// agent's own pages; a bearer token wins over the cookie.
func TestSessionWritesAreBrowserWrites(t *testing.T) {
	t.Parallel()
	e := newSignInEnv(t, nil)
	b := newBrowser(t)
	sessionOf(t, e.signIn(b, "/"))
	sync := e.http.URL + "/api/v1/sources/infra/sync"
	for _, tt := range []struct {
		name    string
		headers map[string]string
	}{
		{"a cross-site form", map[string]string{"Content-Type": "text/plain", "Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}},
		{"a same-site form", map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "same-origin"}},
		{"cross-site JSON", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}},
		{"a sibling subdomain", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "same-site"}},
		{"JSON without Origin", map[string]string{"Content-Type": "application/json"}},
		{"JSON from another origin", map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"}},
	} {
		if a := b.do("POST", sync, tt.headers, "{}"); a.status != http.StatusForbidden {
			t.Errorf("%s with the session: %d %s", tt.name, a.status, a.body)
		}
	}
	if calls := e.runner.calls(); len(calls) != 0 {
		t.Fatalf("refused writes triggered syncs: %v", calls)
	}
	if a := b.do("POST", sync, map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "same-origin"}, "{}"); a.status >= 300 {
		t.Fatalf("a same-origin JSON write with the session: %d %s", a.status, a.body)
	}
	if a := b.do("POST", sync, map[string]string{"Content-Type": "application/json", "Origin": e.http.URL}, "{}"); a.status >= 300 {
		t.Fatalf("a JSON write from the agent's origin: %d %s", a.status, a.body)
	}
	if calls := e.runner.calls(); len(calls) != 2 {
		t.Errorf("syncs: %v", calls)
	}
	if !strings.Contains(e.logs.String(), `msg="api request" token=oidc:alice@example.com method=POST path=/api/v1/sources/infra/sync session=true`) {
		t.Errorf("the write is not audited with the session:\n%s", e.logs.String())
	}
	// A bearer token wins: it is the credential, checked as scripts' are,
	// and a wrong one is refused rather than made up for by the cookie.
	if a := b.do("POST", sync, map[string]string{"Authorization": "Bearer " + writeToken, "Content-Type": "text/plain"}, ""); a.status >= 300 {
		t.Errorf("a bearer token with the cookie: %d %s", a.status, a.body)
	}
	if a := b.do("GET", e.http.URL+"/api/v1/resources", map[string]string{"Authorization": "Bearer wrong"}, ""); a.status != http.StatusUnauthorized {
		t.Errorf("a wrong bearer token with a good cookie: %d %s", a.status, a.body)
	}
	if a := b.do("GET", e.http.URL+"/api/v1/resources", map[string]string{"Authorization": "Basic " +
		base64.StdEncoding.EncodeToString([]byte("x:wrong"))}, ""); a.status != http.StatusUnauthorized {
		t.Errorf("a wrong basic password with a good cookie: %d %s", a.status, a.body)
	}
}

// TestSessionCookieAttacks: an altered cookie, one sealed by another
// agent's key, and one whose name no entry has any more are refused;
// changed grants apply at once.
func TestSessionCookieAttacks(t *testing.T) {
	t.Parallel()
	e := newSignInEnv(t, nil)
	b := newBrowser(t)
	c := sessionOf(t, e.signIn(b, "/"))
	read := func(url, cookie string) answer {
		t.Helper()
		return newBrowser(t).do("GET", url+"/api/v1/resources", map[string]string{"Cookie": "no8s_session=" + cookie}, "")
	}
	if a := read(e.http.URL, c.Value); a.status != http.StatusOK {
		t.Fatalf("the session: %d %s", a.status, a.body)
	}
	raw, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		t.Fatal(err)
	}
	for i := range []int{0, 1, 2} {
		// The nonce, the sealed contents, the tag.
		at := []int{0, len(raw) / 2, len(raw) - 1}[i]
		bad := append([]byte(nil), raw...)
		bad[at] ^= 0x01
		if a := read(e.http.URL, base64.RawURLEncoding.EncodeToString(bad)); a.status != http.StatusUnauthorized {
			t.Errorf("a cookie altered at byte %d: %d %s", at, a.status, a.body)
		}
	}
	for _, forged := range []string{"", "x", c.Value[:len(c.Value)-8], c.Value + "AAAA", `{"v":1,"n":"alice@example.com"}`,
		base64.RawURLEncoding.EncodeToString([]byte(`{"v":1,"n":"alice@example.com","i":1,"x":9999999999}`))} {
		if a := read(e.http.URL, forged); a.status != http.StatusUnauthorized {
			t.Errorf("a forged cookie %q: %d %s", forged, a.status, a.body)
		}
	}

	// Other agents on the same store: one with another key, one with the
	// same key whose configuration no longer has alice, one where alice
	// may only read.
	other := func(key []byte, tokens []api.Token) string {
		_, hs := serve(t, api.Options{Store: e.store, Syncer: e.syncer, Sources: e.runner, Tokens: tokens,
			Dashboard: dashboard.New(e.store, dashboard.Options{Caller: api.Caller}),
			Login:     &api.Login{Provider: e.provider, SessionKey: key}})
		return hs.URL
	}
	alice := []api.Token{{Name: "alice@example.com", Grants: everything}}
	if a := read(other([]byte(strings.Repeat("o", 32)), alice), c.Value); a.status != http.StatusUnauthorized {
		t.Errorf("a cookie of another agent's key: %d %s", a.status, a.body)
	}
	if a := read(other(nil, alice), c.Value); a.status != http.StatusUnauthorized {
		t.Errorf("a cookie at an agent with a random key: %d %s", a.status, a.body)
	}
	gone := other(e.key, []api.Token{{Name: "bob@example.com", Grants: everything}})
	if a := read(gone, c.Value); a.status != http.StatusForbidden || !strings.Contains(a.body, "any more") {
		t.Errorf("a session whose entry was removed: %d %s", a.status, a.body)
	}
	// An entry of the same name with a secret is no entry for ID tokens.
	secretAlice := other(e.key, []api.Token{{Name: "alice@example.com", Value: "alice-secret-token", Grants: everything}})
	if a := read(secretAlice, c.Value); a.status != http.StatusForbidden {
		t.Errorf("a session naming a token with a secret: %d %s", a.status, a.body)
	}
	narrowed := other(e.key, []api.Token{{Name: "alice@example.com", Grants: []api.Grant{{Verbs: []string{api.VerbGet}, Kinds: []string{"Other"}}}}})
	if a := read(narrowed, c.Value); a.status != http.StatusForbidden {
		t.Errorf("a session whose grants were narrowed: %d %s", a.status, a.body)
	}
}

// TestLoginFlowAttacks plays an attacker against the sign-in: a callback
// this browser did not start (login CSRF), another sign-in's state, a
// replayed callback, an issuer's refusal, an ID token with another nonce
// or audience, and a name without an entry; none yields a session.
func TestLoginFlowAttacks(t *testing.T) {
	t.Parallel()
	e := newSignInEnv(t, nil)
	noSession := func(what string, a answer, status int, contains string) {
		t.Helper()
		if a.status != status || !strings.Contains(a.body, contains) {
			t.Errorf("%s: %d %s; want %d with %q", what, a.status, a.body, status, contains)
		}
		if c := a.cookie("no8s_session"); c != nil && c.MaxAge > 0 {
			t.Errorf("%s set a session", what)
		}
	}

	// The attacker's own callback URL, sent to a victim's browser that
	// started no sign-in: refused.
	attacker := newBrowser(t)
	cb := e.toIssuer(attacker, "/")
	noSession("a callback without the flow cookie", newBrowser(t).get(cb), http.StatusBadRequest, "No sign-in was started")
	// ... or to one that started its own: the state is not its.
	victim := newBrowser(t)
	e.toIssuer(victim, "/")
	noSession("another sign-in's callback", victim.get(cb), http.StatusBadRequest, "not for the sign-in this browser started")

	// A replayed callback, with the flow cookie as it was.
	b := newBrowser(t)
	cb = e.toIssuer(b, "/")
	u, _ := url.Parse(e.http.URL)
	flow := b.c.Jar.Cookies(u)
	sessionOf(t, b.get(cb))
	replay := newBrowser(t)
	replay.c.Jar.SetCookies(u, flow)
	noSession("a replayed callback", replay.get(cb), http.StatusBadRequest, "completed already")

	// The flow cookie cleared by a failed callback is not good for another.
	b = newBrowser(t)
	cb = e.toIssuer(b, "/")
	noSession("a callback with a wrong state", b.get(strings.Replace(cb, "state=", "state=x", 1)), http.StatusBadRequest, "not for the sign-in")
	noSession("the right callback after a wrong one", b.get(cb), http.StatusBadRequest, "No sign-in was started")

	for _, tt := range []struct {
		name     string
		tamper   func(map[string]any)
		contains string
	}{
		{"another nonce", func(c map[string]any) { c["nonce"] = "not-this-sign-in" }, "nonce"},
		{"no nonce", func(c map[string]any) { delete(c, "nonce") }, "nonce"},
		{"another audience", func(c map[string]any) { c["aud"] = "no8s" }, "audience"},
		{"an expired ID token", func(c map[string]any) { c["exp"] = time.Now().Add(-time.Minute).Unix() }, "expired"},
		{"an unverified email", func(c map[string]any) { c["email_verified"] = false }, "did not verify"},
	} {
		e.is.TamperIDTokens(tt.tamper)
		noSession(tt.name, e.signIn(newBrowser(t), "/"), http.StatusUnauthorized, tt.contains)
	}
	e.is.TamperIDTokens(nil)

	e.is.SignInAs("", nil)
	noSession("a user who did not approve", e.signIn(newBrowser(t), "/"), http.StatusUnauthorized, "access_denied")
	e.is.SignInAs("u-mallory", map[string]any{"email": "mallory@example.com"})
	noSession("a name without an entry", e.signIn(newBrowser(t), "/"), http.StatusForbidden, "mallory@example.com")
	e.is.SignInAs("u-w", map[string]any{"email": api.WriteTokenName})
	noSession("the write token's name", e.signIn(newBrowser(t), "/"), http.StatusForbidden, "no entry of api.tokens")
	if strings.Contains(e.logs.String(), clientSecret) {
		t.Error("the log shows the client secret")
	}
}

// TestLoginNext: a sign-in goes on only to a path of this agent; whatever a
// browser could take for another site goes to the overview.
func TestLoginNext(t *testing.T) {
	t.Parallel()
	e := newSignInEnv(t, nil)
	for next, want := range map[string]string{
		"/resources/1?tab=history": "/resources/1?tab=history",
		"":                         "/",
		"//evil.example":           "/",
		"///evil.example":          "/",
		`/\evil.example`:           "/",
		`\\evil.example`:           "/",
		"https://evil.example/":    "/",
		"HTTPS:evil.example":       "/",
		"javascript:alert(1)":      "/",
		"evil.example":             "/",
		"/\t/evil.example":         "/",
		"/\n/evil.example":         "/",
		"/auth/logout":             "/",
		"/auth/login?next=//evil":  "/",
		"/%2F%2Fevil.example":      "/",
		"/a/%2e%2e/b":              "/a/%2e%2e/b",
	} {
		a := e.signIn(newBrowser(t), next)
		if a.status != http.StatusSeeOther || a.location() != want {
			t.Errorf("next %q: %d to %q; want %q", next, a.status, a.location(), want)
		}
		if l, err := url.Parse(a.location()); err != nil || l.Host != "" || l.Scheme != "" {
			t.Errorf("next %q: Location %q leaves the agent", next, a.location())
		}
	}
}

// TestLogout: signing out is a same-origin POST; another site can neither
// make the browser sign out nor, by GET, reach it.
func TestLogout(t *testing.T) {
	t.Parallel()
	e := newSignInEnv(t, nil)
	b := newBrowser(t)
	sessionOf(t, e.signIn(b, "/"))
	for _, tt := range []struct {
		method  string
		headers map[string]string
		status  int
	}{
		{"GET", nil, http.StatusMethodNotAllowed},
		{"POST", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, http.StatusForbidden},
		{"POST", map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"POST", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"POST", nil, http.StatusForbidden},
	} {
		if a := b.do(tt.method, e.http.URL+"/auth/logout", tt.headers, ""); a.status != tt.status || a.cookie("no8s_session") != nil {
			t.Errorf("%s /auth/logout %v: %d %v", tt.method, tt.headers, a.status, a.header)
		}
	}
	if a := b.get(e.http.URL + "/"); a.status != http.StatusOK {
		t.Fatalf("refused sign-outs ended the session: %d", a.status)
	}
	a := b.do("POST", e.http.URL+"/auth/logout", map[string]string{"Sec-Fetch-Site": "same-origin", "Content-Type": "application/x-www-form-urlencoded"}, "")
	if c := a.cookie("no8s_session"); a.status != http.StatusSeeOther || c == nil || c.MaxAge >= 0 || !c.HttpOnly {
		t.Fatalf("signing out: %d %v", a.status, a.header)
	}
	if a := b.get(e.http.URL + "/"); a.status != http.StatusUnauthorized || !strings.Contains(a.body, "/auth/login") {
		t.Errorf("after signing out: %d", a.status)
	}
	if !strings.Contains(e.logs.String(), `msg="signed out of the dashboard" token=oidc:alice@example.com`) {
		t.Errorf("signing out is not logged:\n%s", e.logs.String())
	}
}

// TestTokenSignIn: the sign-in page's other way has the browser ask for a
// token, sent as a basic-auth password, and goes on to the page.
func TestTokenSignIn(t *testing.T) {
	t.Parallel()
	e := newSignInEnv(t, func(o *api.Options) { o.ReadToken = readToken })
	b := newBrowser(t)
	if a := b.get(e.http.URL + "/auth/token?next=%2Fgraph"); a.status != http.StatusUnauthorized || !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Basic") {
		t.Errorf("/auth/token without a token: %d %v", a.status, a.header)
	}
	basic := map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("me:"+readToken))}
	if a := b.do("GET", e.http.URL+"/auth/token?next=%2Fgraph", basic, ""); a.status != http.StatusSeeOther || a.location() != "/graph" {
		t.Errorf("/auth/token with a token: %d %q", a.status, a.location())
	}
	if a := b.do("GET", e.http.URL+"/auth/token?next=%2F%2Fevil.example", basic, ""); a.location() != "/" {
		t.Errorf("/auth/token to another site: %d %q", a.status, a.location())
	}
	a := b.do("GET", e.http.URL+"/", basic, "")
	if a.status != http.StatusOK || !strings.Contains(a.body, `title="signed in as">read<`) || strings.Contains(a.body, "/auth/logout") {
		t.Errorf("the dashboard with a token shows no sign-out: %d\n%s", a.status, a.body)
	}
}

// TestSecureCookies: over TLS, or when the agent is reached over HTTPS
// through a proxy, the cookies are Secure and __Host- prefixed, which a
// plain-HTTP page or a sibling subdomain cannot set.
func TestSecureCookies(t *testing.T) {
	t.Parallel()
	for _, secure := range []bool{false, true} {
		e := newSignInEnv(t, func(o *api.Options) { o.Login.Secure = secure })
		for _, scheme := range []string{"http", "https"} {
			// httptest sets TLS on a request for an https URL.
			r := httptest.NewRequestWithContext(t.Context(), "GET", scheme+"://agent.example/auth/login", nil)
			w := httptest.NewRecorder()
			e.srv.Handler().ServeHTTP(w, r)
			a := answer{w.Code, w.Body.String(), w.Header()}
			want := secure || scheme == "https"
			name := "no8s_login"
			if want {
				name = "__Host-no8s_login"
			}
			c := a.cookie(name)
			if c == nil || c.Secure != want || !c.HttpOnly || c.Path != "/" || c.Domain != "" || c.SameSite != http.SameSiteLaxMode {
				t.Errorf("Secure %v over %s: %v", secure, scheme, a.header["Set-Cookie"])
			}
		}
	}
}
