// Package oidctest is an OpenID Connect issuer for tests: it serves the
// discovery document and its signing keys over HTTP, as an identity
// provider does, and signs ID tokens with any claims. It counts the reads
// of its keys, signs tokens with keys it does not publish, and rotates its
// key, so that tests can play an attacker and an identity provider's life.
//
// It also signs people in with the authorization code flow and PKCE
// (S256): its authorization endpoint approves at once as the user SignInAs
// names, and its token endpoint checks the client, its secret, the
// redirect URI, the code verifier, and that each code is used once.
package oidctest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Issuer is an identity provider.
type Issuer struct {
	*httptest.Server
	keyReads atomic.Int64

	mu     gosync.Mutex
	key    *rsa.PrivateKey
	kid    string
	signer jose.Signer
	serial int
	// forged signs forged tokens; one key serves every key ID, since
	// generating one takes a while.
	forged *rsa.PrivateKey

	clients map[string]client
	codes   map[string]grant
	// user is who the authorization endpoint signs in; "" refuses.
	user       string
	userClaims map[string]any
	tamper     func(claims map[string]any)
	issued     int
}

// NewIssuer starts an issuer; it stops when the test ends.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	is := &Issuer{clients: map[string]client{}, codes: map[string]grant{}}
	is.Rotate(t)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"issuer": is.URL, "jwks_uri": is.URL + "/keys", "authorization_endpoint": is.URL + "/auth",
			"token_endpoint": is.URL + "/token", "id_token_signing_alg_values_supported": []string{"RS256"},
			"response_types_supported": []string{"code", "id_token"}, "subject_types_supported": []string{"public"},
			"code_challenge_methods_supported":      []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post", "none"},
		})
	})
	mux.HandleFunc("GET /auth", is.authorize)
	mux.HandleFunc("POST /token", is.token)
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, _ *http.Request) {
		is.keyReads.Add(1)
		is.mu.Lock()
		key, kid := is.key, is.kid
		is.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: kid, Algorithm: "RS256", Use: "sig"}}})
	})
	is.Server = httptest.NewServer(mux)
	t.Cleanup(is.Close)
	return is
}

// KeyReads is how many times the issuer's keys were read.
func (is *Issuer) KeyReads() int { return int(is.keyReads.Load()) }

// Rotate replaces the issuer's signing key with a new one, with a new key
// ID: the old key is no longer published, and tokens are signed with the new.
func (is *Issuer) Rotate(t testing.TB) {
	t.Helper()
	is.mu.Lock()
	defer is.mu.Unlock()
	is.serial++
	kid := fmt.Sprintf("k%d", is.serial)
	key := newKey(t)
	is.key, is.kid, is.signer = key, kid, newSigner(t, key, kid)
}

// KeyID is the ID of the key the issuer signs with now.
func (is *Issuer) KeyID() string {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.kid
}

func newKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func newSigner(t testing.TB, key *rsa.PrivateKey, kid string) jose.Signer {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	return signer
}

// Token signs an ID token for audience with the subject sub, valid for an
// hour, with extra claims.
func (is *Issuer) Token(t testing.TB, audience, sub string, extra map[string]any) string {
	t.Helper()
	is.mu.Lock()
	signer := is.signer
	is.mu.Unlock()
	return is.sign(t, signer, audience, sub, extra)
}

// ForgedToken signs an ID token with the issuer's name and the claims of
// Token, but with a key of its own that the issuer does not publish, whose
// key ID is kid: what an attacker can make.
func (is *Issuer) ForgedToken(t testing.TB, kid, audience, sub string) string {
	t.Helper()
	is.mu.Lock()
	if is.forged == nil {
		is.forged = newKey(t)
	}
	key := is.forged
	is.mu.Unlock()
	return is.sign(t, newSigner(t, key, kid), audience, sub, nil)
}

func (is *Issuer) sign(t testing.TB, signer jose.Signer, audience, sub string, extra map[string]any) string {
	t.Helper()
	now := time.Now()
	claims := jwt.Claims{Issuer: is.URL, Subject: sub, Audience: jwt.Audience{audience},
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Hour))}
	raw, err := jwt.Signed(signer).Claims(claims).Claims(extra).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
