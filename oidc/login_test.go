package oidc_test

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/no8s/no8s-agent/oidc"
	"github.com/no8s/no8s-agent/oidc/oidctest"
)

const redirect = "https://agent.example.com/auth/callback"

// authorize follows the login's authorization URL to the issuer, which
// approves at once, and returns the code it sends back with the state.
func authorize(t *testing.T, l *oidc.Login, state, nonce, verifier string) string {
	t.Helper()
	u, err := l.AuthURL(t.Context(), state, nonce, verifier)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc.String(), redirect+"?") {
		t.Fatalf("the issuer answered %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if got := loc.Query().Get("state"); got != state {
		t.Fatalf("state %q came back as %q", state, got)
	}
	code := loc.Query().Get("code")
	if code == "" {
		t.Fatalf("no code: %s", loc)
	}
	return code
}

func login(is *oidctest.Issuer, secret string) *oidc.Login {
	return oidc.NewLogin(oidc.LoginConfig{IssuerURL: is.URL, Claim: "email", ClientID: "dash", ClientSecret: secret,
		RedirectURL: redirect, Scopes: []string{"email"}})
}

// TestLoginCodeFlow signs in with a confidential and a public client.
func TestLoginCodeFlow(t *testing.T) {
	t.Parallel()
	is := oidctest.NewIssuer(t)
	is.AddClient("dash", "s3cret", redirect)
	is.SignInAs("u-1", map[string]any{"email": "alice@example.com", "email_verified": true})
	for _, secret := range []string{"s3cret", ""} {
		if secret == "" {
			is.AddClient("dash", "", redirect)
		}
		l := login(is, secret)
		verifier := oauth2.GenerateVerifier()
		code := authorize(t, l, "st-1", "n-1", verifier)
		id, err := l.Exchange(t.Context(), code, verifier, "n-1")
		if err != nil || id != (oidc.Identity{Name: "alice@example.com", Subject: "u-1", Email: "alice@example.com"}) {
			t.Errorf("secret %q: %+v, %v", secret, id, err)
		}
	}
}

// TestLoginAttacks: each way an exchange can be wrong is refused as
// invalid, and no error quotes the code, the verifier or a URL.
func TestLoginAttacks(t *testing.T) {
	t.Parallel()
	is := oidctest.NewIssuer(t)
	const other = "https://other.example.com/auth/callback"
	is.AddClient("dash", "s3cret", redirect, other)
	is.SignInAs("u-1", map[string]any{"email": "alice@example.com"})
	l := login(is, "s3cret")
	tests := []struct {
		name string
		run  func(t *testing.T) error
	}{
		{"a wrong verifier", func(t *testing.T) error {
			code := authorize(t, l, "s", "n", oauth2.GenerateVerifier())
			_, err := l.Exchange(t.Context(), code, oauth2.GenerateVerifier(), "n")
			return err
		}},
		{"no verifier", func(t *testing.T) error {
			code := authorize(t, l, "s", "n", oauth2.GenerateVerifier())
			_, err := l.Exchange(t.Context(), code, "", "n")
			return err
		}},
		{"a code used twice", func(t *testing.T) error {
			v := oauth2.GenerateVerifier()
			code := authorize(t, l, "s", "n", v)
			if _, err := l.Exchange(t.Context(), code, v, "n"); err != nil {
				t.Fatalf("first exchange: %v", err)
			}
			_, err := l.Exchange(t.Context(), code, v, "n")
			return err
		}},
		{"a wrong client secret", func(t *testing.T) error {
			v := oauth2.GenerateVerifier()
			code := authorize(t, l, "s", "n", v)
			_, err := login(is, "guessed").Exchange(t.Context(), code, v, "n")
			return err
		}},
		{"another redirect URI at the exchange", func(t *testing.T) error {
			v := oauth2.GenerateVerifier()
			code := authorize(t, l, "s", "n", v)
			o := oidc.NewLogin(oidc.LoginConfig{IssuerURL: is.URL, Claim: "email", ClientID: "dash", ClientSecret: "s3cret", RedirectURL: other})
			_, err := o.Exchange(t.Context(), code, v, "n")
			return err
		}},
		{"another sign-in's nonce", func(t *testing.T) error {
			v := oauth2.GenerateVerifier()
			code := authorize(t, l, "s", "n-mine", v)
			_, err := l.Exchange(t.Context(), code, v, "n-theirs")
			return err
		}},
		{"an ID token for another audience", func(t *testing.T) error {
			is.TamperIDTokens(func(c map[string]any) { c["aud"] = "other-app" })
			defer is.TamperIDTokens(nil)
			v := oauth2.GenerateVerifier()
			_, err := l.Exchange(t.Context(), authorize(t, l, "s", "n", v), v, "n")
			return err
		}},
		{"an expired ID token", func(t *testing.T) error {
			is.TamperIDTokens(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() })
			defer is.TamperIDTokens(nil)
			v := oauth2.GenerateVerifier()
			_, err := l.Exchange(t.Context(), authorize(t, l, "s", "n", v), v, "n")
			return err
		}},
		{"an ID token of another issuer", func(t *testing.T) error {
			is.TamperIDTokens(func(c map[string]any) { c["iss"] = "https://evil.example.com" })
			defer is.TamperIDTokens(nil)
			v := oauth2.GenerateVerifier()
			_, err := l.Exchange(t.Context(), authorize(t, l, "s", "n", v), v, "n")
			return err
		}},
		{"a made-up code", func(t *testing.T) error {
			_, err := l.Exchange(t.Context(), "made-up", oauth2.GenerateVerifier(), "n")
			return err
		}},
	}
	// Sequential: the tampering is the issuer's, for every exchange.
	for _, tt := range tests {
		err := tt.run(t)
		if !errors.Is(err, oidc.ErrInvalid) {
			t.Errorf("%s: %v; want ErrInvalid", tt.name, err)
			continue
		}
		if strings.Contains(err.Error(), "http") || strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("%s: the error names a URL: %v", tt.name, err)
		}
	}
}

// TestLoginRefused: a user who does not approve is sent back with an error,
// and an unknown redirect URI is not redirected to at all.
func TestLoginRefused(t *testing.T) {
	t.Parallel()
	is := oidctest.NewIssuer(t)
	is.AddClient("dash", "s3cret", redirect)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	u, err := login(is, "s3cret").AuthURL(t.Context(), "s", "n", oauth2.GenerateVerifier())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); !strings.Contains(loc, "error=access_denied") || !strings.HasPrefix(loc, redirect) {
		t.Errorf("no user signed in: %d %q", resp.StatusCode, loc)
	}
	evil := oidc.NewLogin(oidc.LoginConfig{IssuerURL: is.URL, Claim: "sub", ClientID: "dash", RedirectURL: "https://evil.example.com/cb"})
	u, err = evil.AuthURL(t.Context(), "s", "n", oauth2.GenerateVerifier())
	if err != nil {
		t.Fatal(err)
	}
	resp, err = c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
		t.Errorf("an unregistered redirect URI: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}
