// Package oidc verifies OpenID Connect ID tokens for the API: the
// signature against the issuer's published keys, the issuer, the audience
// and the expiry, with github.com/coreos/go-oidc, and reads the claim that
// names the API token whose grants the bearer gets.
package oidc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	gosync "sync"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
)

// ErrInvalid means the token is not a valid ID token of the issuer for the
// audience (bad signature, another issuer or audience, expired, no claim):
// the API answers 401.
var ErrInvalid = errors.New("invalid ID token")

// ErrUnavailable means the issuer's discovery document or keys could not
// be read: the API answers 503, and the next request tries again.
var ErrUnavailable = errors.New("identity provider unavailable")

// Verifier checks ID tokens of one issuer for one audience.
type Verifier struct {
	issuer, audience, claim string

	mu       gosync.Mutex
	verifier *gooidc.IDTokenVerifier
	failedAt time.Time
}

// New returns a Verifier of tokens issued by issuerURL for audience, whose
// claim (sub, email, a custom one) names the API token to use. The issuer
// is read on first use, not here, so that an agent starts while its
// identity provider is down.
func New(issuerURL, audience, claim string) *Verifier {
	return &Verifier{issuer: issuerURL, audience: audience, claim: claim}
}

// retryAfter is how long a failed discovery is not tried again.
const retryAfter = 5 * time.Second

func (v *Verifier) idVerifier(ctx context.Context) (*gooidc.IDTokenVerifier, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.verifier != nil {
		return v.verifier, nil
	}
	if time.Since(v.failedAt) < retryAfter {
		return nil, fmt.Errorf("%w: %s did not answer a moment ago", ErrUnavailable, v.issuer)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	p, err := gooidc.NewProvider(ctx, v.issuer)
	if err != nil {
		v.failedAt = time.Now()
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	v.verifier = p.Verifier(&gooidc.Config{ClientID: v.audience})
	return v.verifier, nil
}

// LooksLikeJWT reports whether a bearer token has the shape of a JWT, so
// that static tokens are never sent to the verifier.
func LooksLikeJWT(raw string) bool { return strings.Count(raw, ".") == 2 }

// Name verifies raw and returns the value of the claim that names the API
// token.
func (v *Verifier) Name(ctx context.Context, raw string) (string, error) {
	iv, err := v.idVerifier(ctx)
	if err != nil {
		return "", err
	}
	tok, err := iv.Verify(ctx, raw)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	name, ok := claims[v.claim].(string)
	if !ok || name == "" {
		return "", fmt.Errorf("%w: no string claim %q", ErrInvalid, v.claim)
	}
	return name, nil
}
