package dashboard

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/oidc"
	"github.com/no8s/no8s-agent/oidc/oidctest"
	"github.com/no8s/no8s-agent/sync"
)

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

// TestBrowserSignIn signs in to the dashboard, served by the API as the
// agent serves it, in headless Chromium: the page asked for without a
// credential offers to sign in; the link goes through the test issuer
// (which approves at once) and back to the overview, which names who
// signed in; Sign out ends the session.
func TestBrowserSignIn(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	is := oidctest.NewIssuer(t)
	is.SignInAs("u-alice", map[string]any{"email": "alice@example.com", "email_verified": true})
	provider := &lateLogin{}
	pages := SignInPages(Options{Version: "browser-test"})
	srv := api.New(api.Options{Store: st, Syncer: sync.New(st, nil),
		OIDC:      oidc.New(is.URL, "no8s", "email"),
		Tokens:    []api.Token{{Name: "alice@example.com", Grants: []api.Grant{{Verbs: api.Verbs}}}},
		Dashboard: New(st, Options{Caller: api.Caller, Refresh: -1, Version: "browser-test"}),
		Login: &api.Login{Provider: provider, SessionKey: []byte(strings.Repeat("b", api.MinSessionKey)),
			Page: func(w http.ResponseWriter, r *http.Request, p api.SignInPage) {
				pages(w, r, SignIn{Status: p.Status, Message: p.Message, SignInURL: p.SignInURL, TokenURL: p.TokenURL})
			}},
	})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	redirect := hs.URL + "/auth/callback"
	is.AddClient("no8s-dashboard", "dashboard-client-secret", redirect)
	provider.l.Store(oidc.NewLogin(oidc.LoginConfig{IssuerURL: is.URL, Claim: "email", ClientID: "no8s-dashboard",
		ClientSecret: "dashboard-client-secret", RedirectURL: redirect, Scopes: []string{"email"}}))

	save := screenshots(t)
	bctx := browser(t, browserTimeout)
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		doSteps(t, bctx, what, steps...)
	}
	do("open the graph without a credential",
		chromedp.Navigate(hs.URL+"/graph"),
		chromedp.WaitVisible(chromedp.CSS("a.signin-link")),
	)
	if body := run(bctx, t, "read the sign-in page", chromedp.Text(chromedp.CSS("main"))); !strings.Contains(body, "Sign in") ||
		!strings.Contains(body, "Use a token") {
		t.Errorf("the sign-in page: %s", body)
	}
	save("signin.png", screenshot(bctx, t, "screenshot the sign-in page"))

	do("sign in through the issuer",
		chromedp.Click(chromedp.CSS("a.signin-link")),
		chromedp.WaitVisible(chromedp.CSS("header.top .caller .who")),
	)
	if loc := run(bctx, t, "read the location", chromedp.Location()); loc != hs.URL+"/graph" {
		t.Errorf("signed in at %s; want the page asked for, %s/graph", loc, hs.URL)
	}
	if who := run(bctx, t, "read who signed in", chromedp.Text(chromedp.CSS("header.top .caller .who"))); who != "oidc:alice@example.com" {
		t.Errorf("the dashboard names %q as signed in", who)
	}
	// The session cookie is out of scripts' reach.
	if c := run(bctx, t, "read the cookies", chromedp.Evaluate[string]("document.cookie")); c != "" {
		t.Errorf("a script reads the cookies: %q", c)
	}
	save("signed-in.png", screenshot(bctx, t, "screenshot the signed-in page"))
	if is.Issued() != 1 {
		t.Errorf("the issuer exchanged %d codes; want 1", is.Issued())
	}

	do("sign out",
		chromedp.Click(chromedp.CSS("header.top form.signout button")),
		chromedp.WaitVisible(chromedp.CSS("a.signin-link")),
	)
	do("the overview asks to sign in again",
		chromedp.Navigate(hs.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS("a.signin-link")),
	)
}
