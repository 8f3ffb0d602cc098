package oidc_test

import (
	"errors"
	"fmt"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/oidc"
	"github.com/no8s/no8s-agent/oidc/oidctest"
)

// TestForgedKeysDoNotFloodTheIssuer sends tokens signed with keys the
// issuer never published, each with a key ID of its own, many at once: they
// are refused, and the issuer's keys are not read once per token.
func TestForgedKeysDoNotFloodTheIssuer(t *testing.T) {
	t.Parallel()
	is := oidctest.NewIssuer(t)
	v := oidc.New(is.URL, "no8s", "sub")
	if name, err := v.Name(t.Context(), is.Token(t, "no8s", "ci-bot", nil)); err != nil || name != "ci-bot" {
		t.Fatalf("a genuine token: %q, %v", name, err)
	}
	before, start := is.KeyReads(), time.Now()
	const forged = 60
	var wg gosync.WaitGroup
	errs := make(chan error, forged)
	for i := range forged {
		tok := is.ForgedToken(t, fmt.Sprintf("forged-%d", i), "no8s", "write")
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := v.Name(t.Context(), tok)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, oidc.ErrInvalid) {
			t.Errorf("a forged token: %v, want it invalid", err)
		}
	}
	// One read per refresh period at most, however many forged keys.
	allowed := 1 + int(time.Since(start)/oidc.KeyRefreshFloor)
	if reads := is.KeyReads() - before; reads > allowed {
		t.Errorf("%d forged tokens read the issuer's keys %d times, want at most %d", forged, reads, allowed)
	}
	// The genuine key is still known, without another read.
	reads := is.KeyReads()
	if _, err := v.Name(t.Context(), is.Token(t, "no8s", "ci-bot", nil)); err != nil {
		t.Errorf("a genuine token after the flood: %v", err)
	}
	if is.KeyReads() != reads {
		t.Errorf("a token signed with a known key read the keys again")
	}
}

// TestUnknownKeyWhileIssuerDown: once the issuer stops answering, a token
// signed with a key the agent does not know is unavailable (the API's 503),
// not invalid, as soon as the agent may read the keys again; tokens signed
// with a known key still verify; no error names the issuer's URL.
func TestUnknownKeyWhileIssuerDown(t *testing.T) {
	t.Parallel()
	is := oidctest.NewIssuer(t)
	v := oidc.New(is.URL, "no8s", "sub")
	genuine := is.Token(t, "no8s", "ci-bot", nil)
	if _, err := v.Name(t.Context(), genuine); err != nil {
		t.Fatal(err)
	}
	forged := is.ForgedToken(t, "rotated-maybe", "no8s", "ci-bot")
	is.Close()
	deadline := time.Now().Add(3 * oidc.KeyRefreshFloor)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := v.Name(t.Context(), forged)
		if errors.Is(err, oidc.ErrUnavailable) {
			break
		}
		// Within the refresh floor of the last read, the key is known not
		// to be the issuer's.
		if !errors.Is(err, oidc.ErrInvalid) {
			t.Fatalf("an unknown key while the issuer is down: %v", err)
		}
		if strings.Contains(err.Error(), "http") {
			t.Fatalf("the error names a URL: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("an unknown key while the issuer is down is still %v after %v, want unavailable", err, 3*oidc.KeyRefreshFloor)
		}
		<-tick.C
	}
	if name, err := v.Name(t.Context(), genuine); err != nil || name != "ci-bot" {
		t.Errorf("a token signed with a known key while the issuer is down: %q, %v", name, err)
	}
}

// TestInvalidTokensNameNoURL: the reasons a token is refused are shown to
// whoever sent it, so they name neither the issuer's URL nor its keys'.
func TestInvalidTokensNameNoURL(t *testing.T) {
	t.Parallel()
	is := oidctest.NewIssuer(t)
	v := oidc.New(is.URL, "no8s", "sub")
	for name, tok := range map[string]string{
		"another issuer": is.Token(t, "no8s", "ci-bot", map[string]any{"iss": "https://evil.example/"}),
		"an unknown key": is.ForgedToken(t, "nope", "no8s", "ci-bot"),
		"a bad key ID":   is.ForgedToken(t, is.KeyID(), "no8s", "ci-bot"),
		"expired":        is.Token(t, "no8s", "ci-bot", map[string]any{"exp": time.Now().Add(-time.Hour).Unix()}),
	} {
		_, err := v.Name(t.Context(), tok)
		if !errors.Is(err, oidc.ErrInvalid) || strings.Contains(err.Error(), "http") || strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("%s: %v; want invalid, naming no URL", name, err)
		}
	}
}

// TestKeyRotation: a token signed with the issuer's new key verifies once
// the agent may read the keys again, and one signed with the key it no
// longer publishes is refused from then on.
func TestKeyRotation(t *testing.T) {
	t.Parallel()
	is := oidctest.NewIssuer(t)
	v := oidc.New(is.URL, "no8s", "sub")
	old := is.Token(t, "no8s", "ci-bot", nil)
	if _, err := v.Name(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	is.Rotate(t)
	rotated := is.Token(t, "no8s", "ci-bot", nil)
	deadline := time.Now().Add(3 * oidc.KeyRefreshFloor)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := v.Name(t.Context(), rotated)
		if err == nil {
			break
		}
		if !errors.Is(err, oidc.ErrInvalid) || time.Now().After(deadline) {
			t.Fatalf("a token signed with the new key: %v", err)
		}
		<-tick.C
	}
	if _, err := v.Name(t.Context(), old); !errors.Is(err, oidc.ErrInvalid) {
		t.Errorf("a token signed with the key the issuer removed: %v, want invalid", err)
	}
}
