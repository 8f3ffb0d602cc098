package oidc_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/no8s/no8s-agent/oidc"
	"github.com/no8s/no8s-agent/oidc/oidctest"
)

// issuerKeys reads the key set the issuer publishes, as anyone can.
func issuerKeys(t *testing.T, is *oidctest.Issuer) (raw []byte, set jose.JSONWebKeySet) {
	t.Helper()
	resp, err := http.Get(is.URL + "/keys")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	raw, _ = json.Marshal(set)
	return raw, set
}

// TestAttackerTokens sends ID tokens an attacker can make from what the
// issuer publishes, and tokens of the issuer whose claims are not what the
// agent takes: each is refused as invalid. A token for several audiences,
// ours among them, is the issuer's word and is taken.
func TestAttackerTokens(t *testing.T) {
	t.Parallel()
	is := oidctest.NewIssuer(t)
	rawKeys, set := issuerKeys(t, is)
	der, err := x509.MarshalPKIXPublicKey(set.Keys[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	now := time.Now()
	claims := map[string]any{"iss": is.URL, "aud": "no8s", "sub": "ci-bot", "email": "ci@example.com",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	b64 := func(v any) string {
		data, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(data)
	}
	// hmac signs the claims with HS256 and secret, the public key's bytes:
	// a verifier that took the algorithm from the token would use the key
	// it holds as the HMAC secret.
	hmac := func(secret []byte) string {
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: jose.JSONWebKey{Key: secret, KeyID: is.KeyID()}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := jwt.Signed(signer).Claims(claims).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	// embedded signs the claims with a key of its own that it sends in the
	// token's header: a verifier that took the key from the token would
	// take anything.
	embedded := func() string {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{EmbedJWK: true}))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := jwt.Signed(signer).Claims(claims).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	tests := []struct {
		name, claim, token string
		want               string // the name, or "" for invalid
	}{
		{"alg none", "sub", b64(map[string]string{"alg": "none", "typ": "JWT"}) + "." + b64(claims) + ".", ""},
		{"alg none, with the key's ID", "sub", b64(map[string]string{"alg": "none", "kid": is.KeyID()}) + "." + b64(claims) + ".", ""},
		{"HS256 keyed with the key set", "sub", hmac(rawKeys), ""},
		{"HS256 keyed with the public key's PEM", "sub", hmac(pemKey), ""},
		{"HS256 keyed with the public key's DER", "sub", hmac(der), ""},
		{"a key of its own in the header", "sub", embedded(), ""},
		{"the issuer with a trailing slash", "sub", is.Token(t, "no8s", "ci-bot", map[string]any{"iss": is.URL + "/"}), ""},
		{"no expiry", "sub", is.Token(t, "no8s", "ci-bot", map[string]any{"exp": nil}), ""},
		{"not valid for ten minutes", "sub", is.Token(t, "no8s", "ci-bot", map[string]any{"nbf": now.Add(10 * time.Minute).Unix()}), ""},
		{"no audience", "sub", is.Token(t, "no8s", "ci-bot", map[string]any{"aud": nil}), ""},
		{"a claim that is a number", "uid", is.Token(t, "no8s", "ci-bot", map[string]any{"uid": 1000}), ""},
		{"a claim that is a list", "groups", is.Token(t, "no8s", "ci-bot", map[string]any{"groups": []string{"ci-bot"}}), ""},
		{"an empty claim", "sub", is.Token(t, "no8s", "", nil), ""},
		{"an email the issuer did not verify", "email", is.Token(t, "no8s", "u-1", map[string]any{"email": "alice@example.com", "email_verified": false}), ""},
		{"an email the issuer did not verify, as text", "email", is.Token(t, "no8s", "u-1", map[string]any{"email": "alice@example.com", "email_verified": "false"}), ""},
		{"several audiences, ours among them", "sub", is.Token(t, "no8s", "ci-bot", map[string]any{"aud": []string{"other-app", "no8s"}}), "ci-bot"},
		{"a verified email", "email", is.Token(t, "no8s", "u-1", map[string]any{"email": "alice@example.com", "email_verified": true}), "alice@example.com"},
	}
	for _, tt := range tests {
		name, err := oidc.New(is.URL, "no8s", tt.claim).Name(t.Context(), tt.token)
		switch {
		case tt.want == "" && !errors.Is(err, oidc.ErrInvalid):
			t.Errorf("%s: Name = %q, %v; want invalid", tt.name, name, err)
		case tt.want != "" && (err != nil || name != tt.want):
			t.Errorf("%s: Name = %q, %v; want %q", tt.name, name, err, tt.want)
		}
	}
}
