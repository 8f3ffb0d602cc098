package oidc_test

import (
	"errors"
	"testing"

	"golang.org/x/oauth2"

	"github.com/no8s/no8s-agent/oidc"
	"github.com/no8s/no8s-agent/oidc/oidctest"
)

// TestLoginAuthorizedParty: a sign-in's ID token whose azp names another
// client was issued to that client (OpenID Connect Core 3.1.3.7), even
// when our client is among its audiences: refused. One whose azp is ours,
// or that has none with our client alone as its audience, signs in.
func TestLoginAuthorizedParty(t *testing.T) {
	t.Parallel()
	is := oidctest.NewIssuer(t)
	is.AddClient("dash", "s3cret", redirect)
	is.SignInAs("u-1", map[string]any{"email": "alice@example.com"})
	l := login(is, "s3cret")
	for _, tt := range []struct {
		name   string
		tamper func(map[string]any)
		ok     bool
	}{
		{"azp of another client, ours among the audiences", func(c map[string]any) { c["aud"], c["azp"] = []string{"other-app", "dash"}, "other-app" }, false},
		{"azp of another client, ours the audience", func(c map[string]any) { c["azp"] = "other-app" }, false},
		{"azp that is not a string", func(c map[string]any) { c["azp"] = []string{"dash"} }, false},
		{"azp ours, several audiences", func(c map[string]any) { c["aud"], c["azp"] = []string{"other-app", "dash"}, "dash" }, true},
		{"no azp, ours the audience", func(map[string]any) {}, true},
	} {
		is.TamperIDTokens(tt.tamper)
		v := oauth2.GenerateVerifier()
		_, err := l.Exchange(t.Context(), authorize(t, l, "s", "n", v), v, "n")
		switch {
		case tt.ok && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case !tt.ok && !errors.Is(err, oidc.ErrInvalid):
			t.Errorf("%s: %v; want ErrInvalid", tt.name, err)
		}
	}
	is.TamperIDTokens(nil)
}
