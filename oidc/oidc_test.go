package oidc_test

import (
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/no8s/no8s-agent/oidc"
	"github.com/no8s/no8s-agent/oidc/oidctest"
)

func TestName(t *testing.T) {
	t.Parallel()
	is := oidctest.NewIssuer(t)
	v := oidc.New(is.URL, "no8s", "sub")
	if name, err := v.Name(t.Context(), is.Token(t, "no8s", "ci-bot", nil)); err != nil || name != "ci-bot" {
		t.Errorf("Name = %q, %v", name, err)
	}
	if _, err := v.Name(t.Context(), is.Token(t, "elsewhere", "ci-bot", nil)); !errors.Is(err, oidc.ErrInvalid) {
		t.Errorf("another audience: %v", err)
	}
	if oidc.LooksLikeJWT("plain-static-token") || !oidc.LooksLikeJWT("a.b.c") {
		t.Error("LooksLikeJWT")
	}
}

func TestIssuerDown(t *testing.T) {
	t.Parallel()
	down := httptest.NewServer(nil)
	down.Close()
	v := oidc.New(down.URL, "no8s", "sub")
	if _, err := v.Name(t.Context(), "a.b.c"); !errors.Is(err, oidc.ErrUnavailable) {
		t.Errorf("an issuer that is down: %v", err)
	}
	// Not asked again at once.
	if _, err := v.Name(t.Context(), "a.b.c"); !errors.Is(err, oidc.ErrUnavailable) {
		t.Errorf("right after: %v", err)
	}
}
