// Package oidc verifies OpenID Connect ID tokens for the API: the
// signature against the issuer's published keys, the issuer, the audience
// and the expiry, with github.com/coreos/go-oidc, and reads the claim that
// names the API token whose grants the bearer gets.
//
// The issuer's keys are cached (see keySet): a token signed with a key the
// agent does not know reads them again at most once per KeyRefreshFloor,
// so that forged tokens cannot make the agent hammer the issuer.
package oidc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	gosync "sync"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// ErrInvalid means the token is not a valid ID token of the issuer for the
// audience (bad signature, unknown key, another issuer or audience,
// expired, no claim): the API answers 401. The message of an error wrapping
// it names no URL, since it is shown to whoever sent the token.
var ErrInvalid = errors.New("invalid ID token")

// ErrUnavailable means the issuer's discovery document or keys could not
// be read: the API answers 503, and a later request tries again. The
// message may name the issuer's URLs: it is for the agent's log.
var ErrUnavailable = errors.New("identity provider unavailable")

// KeyRefreshFloor is the least time between two reads of the issuer's
// keys, and between two attempts at its discovery document.
const KeyRefreshFloor = 5 * time.Second

// keyMaxAge is how long the keys are used before they are read again on
// the next verification, so that a key the issuer withdrew stops being
// trusted even when no token names an unknown key.
const keyMaxAge = time.Hour

// fetchTimeout bounds each read of the discovery document or the keys.
const fetchTimeout = 10 * time.Second

// Verifier checks ID tokens of one issuer for one audience.
type Verifier struct {
	issuer, audience, claim string
	client                  *http.Client

	mu       gosync.Mutex
	verifier *gooidc.IDTokenVerifier
	endpoint oauth2.Endpoint
	failedAt time.Time
}

// New returns a Verifier of tokens issued by issuerURL for audience, whose
// claim (sub, email, a custom one) names the API token to use. The issuer
// is read on first use, not here, so that an agent starts while its
// identity provider is down.
func New(issuerURL, audience, claim string) *Verifier {
	return &Verifier{issuer: issuerURL, audience: audience, claim: claim, client: &http.Client{Timeout: fetchTimeout}}
}

// supportedAlgs are the signing algorithms go-oidc verifies.
var supportedAlgs = []string{gooidc.RS256, gooidc.RS384, gooidc.RS512, gooidc.ES256, gooidc.ES384, gooidc.ES512,
	gooidc.PS256, gooidc.PS384, gooidc.PS512, gooidc.EdDSA}

func (v *Verifier) idVerifier(ctx context.Context) (*gooidc.IDTokenVerifier, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.verifier != nil {
		return v.verifier, nil
	}
	if time.Since(v.failedAt) < KeyRefreshFloor {
		return nil, fmt.Errorf("%w: %s did not answer a moment ago", ErrUnavailable, v.issuer)
	}
	// A client that goes away does not fail the discovery for the others.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
	defer cancel()
	p, err := gooidc.NewProvider(gooidc.ClientContext(ctx, v.client), v.issuer)
	var meta struct {
		JWKSURL string   `json:"jwks_uri"`
		Algs    []string `json:"id_token_signing_alg_values_supported"`
	}
	if err == nil {
		err = p.Claims(&meta)
	}
	if err == nil && meta.JWKSURL == "" {
		err = errors.New("the discovery document has no jwks_uri")
	}
	if err != nil {
		v.failedAt = time.Now()
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	var algs []string
	for _, a := range meta.Algs {
		if slices.Contains(supportedAlgs, a) {
			algs = append(algs, a)
		}
	}
	keys := &keySet{url: meta.JWKSURL, client: v.client, floor: KeyRefreshFloor, maxAge: keyMaxAge}
	v.verifier = gooidc.NewVerifier(v.issuer, keys, &gooidc.Config{ClientID: v.audience, SupportedSigningAlgs: algs})
	v.endpoint = p.Endpoint()
	return v.verifier, nil
}

// LooksLikeJWT reports whether a bearer token has the shape of a JWT, so
// that static tokens are never sent to the verifier.
func LooksLikeJWT(raw string) bool { return strings.Count(raw, ".") == 2 }

// Name verifies raw and returns the value of the claim that names the API
// token. Its errors wrap ErrInvalid or ErrUnavailable.
func (v *Verifier) Name(ctx context.Context, raw string) (string, error) {
	id, err := v.identity(ctx, raw, nil)
	return id.Name, err
}

// Identity is who an ID token says signed in.
type Identity struct {
	// Name is the value of the claim that names the API token.
	Name string
	// Subject is the token's sub, and Email its email claim when it has
	// one: for the audit trail.
	Subject, Email string
}

// identity verifies raw and reads the identity it carries; check, when
// set, refuses tokens by their claims (an unexpected nonce).
func (v *Verifier) identity(ctx context.Context, raw string, check func(*gooidc.IDToken) error) (Identity, error) {
	iv, err := v.idVerifier(ctx)
	if err != nil {
		return Identity{}, err
	}
	// go-oidc flattens the key set's error into text; the key set reports
	// it here too, so that its class (unavailable or invalid) survives.
	var sigErr error
	tok, err := iv.Verify(context.WithValue(ctx, sigErrKey{}, &sigErr), raw)
	switch {
	case sigErr != nil:
		return Identity{}, sigErr
	case err != nil:
		return Identity{}, invalid(err)
	}
	if check != nil {
		if err := check(tok); err != nil {
			return Identity{}, err
		}
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return Identity{}, invalid(err)
	}
	name, ok := claims[v.claim].(string)
	if !ok || name == "" {
		return Identity{}, fmt.Errorf("%w: no string claim %q", ErrInvalid, v.claim)
	}
	// An issuer that lets users give any address says so with
	// email_verified: false; an address it did not verify names whoever
	// typed it. Issuers that do not send the claim at all are trusted.
	if v.claim == "email" {
		if verified, ok := claims["email_verified"]; ok && verified != true && verified != "true" {
			return Identity{}, fmt.Errorf("%w: the issuer did not verify the email address (email_verified: %v)", ErrInvalid, verified)
		}
	}
	email, _ := claims["email"].(string)
	return Identity{Name: name, Subject: tok.Subject, Email: email}, nil
}

// urlRE matches URLs in go-oidc's messages.
var urlRE = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"']*`)

// invalid is err, a refusal of go-oidc's, as an ErrInvalid whose message
// names no URL: the issuer's, which go-oidc quotes when another issuer
// signed the token, is none of the sender's business.
func invalid(err error) error {
	var expired *gooidc.TokenExpiredError
	msg := err.Error()
	switch {
	case errors.As(err, &expired):
		msg = "the token expired at " + expired.Expiry.UTC().Format(time.RFC3339)
	case strings.Contains(msg, "issued by a different provider"):
		msg = "the token was issued by another issuer"
	default:
		msg = urlRE.ReplaceAllString(strings.TrimPrefix(msg, "oidc: "), "<url>")
	}
	return fmt.Errorf("%w: %s", ErrInvalid, msg)
}
