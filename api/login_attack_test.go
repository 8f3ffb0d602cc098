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
