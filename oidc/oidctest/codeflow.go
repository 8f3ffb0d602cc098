package oidctest

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
)

// codeLifetime is how long a code may wait to be exchanged.
const codeLifetime = time.Minute

// client is an OAuth client registered with the issuer.
type client struct {
	// secret is "" for a public client, which proves itself with PKCE only.
	secret    string
	redirects []string
}

// grant is what a code stands for until it is exchanged.
type grant struct {
	clientID, redirectURI, challenge, nonce string
	sub                                     string
	claims                                  map[string]any
	expires                                 time.Time
}

// AddClient registers an OAuth client: its secret ("" for a public client)
// and the redirect URIs it may use, compared exactly.
func (is *Issuer) AddClient(id, secret string, redirectURIs ...string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.clients[id] = client{secret: secret, redirects: redirectURIs}
}

// SignInAs makes the authorization endpoint approve every valid request at
// once as the user sub, whose ID tokens carry claims besides the standard
// ones; sub "" makes it refuse them (error=access_denied).
func (is *Issuer) SignInAs(sub string, claims map[string]any) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.user, is.userClaims = sub, maps.Clone(claims)
}

// TamperIDTokens has the token endpoint pass the claims of each ID token it
// issues through f before signing them, as a misbehaving or hostile issuer
// (or one configured for another client) would; nil stops it.
func (is *Issuer) TamperIDTokens(f func(claims map[string]any)) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.tamper = f
}

// Issued is how many times the token endpoint exchanged a code.
func (is *Issuer) Issued() int {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.issued
}

// authorize is the authorization endpoint. A request it cannot trust to
// redirect (unknown client, redirect URI not registered) is answered 400
// here; others are redirected with a code or an error.
func (is *Issuer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	is.mu.Lock()
	defer is.mu.Unlock()
	c, ok := is.clients[q.Get("client_id")]
	redirect := q.Get("redirect_uri")
	if !ok || !slices.Contains(c.redirects, redirect) {
		http.Error(w, "unknown client or redirect_uri", http.StatusBadRequest)
		return
	}
	back := func(params url.Values) {
		params.Set("state", q.Get("state"))
		http.Redirect(w, r, redirect+"?"+params.Encode(), http.StatusFound)
	}
	switch {
	case q.Get("response_type") != "code":
		back(url.Values{"error": {"unsupported_response_type"}})
	case !slices.Contains(strings.Fields(q.Get("scope")), "openid"):
		back(url.Values{"error": {"invalid_scope"}, "error_description": {"openid is required"}})
	case q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43:
		back(url.Values{"error": {"invalid_request"}, "error_description": {"PKCE with S256 is required"}})
	case is.user == "":
		back(url.Values{"error": {"access_denied"}, "error_description": {"the user did not approve"}})
	default:
		code := randomString()
		is.codes[code] = grant{clientID: q.Get("client_id"), redirectURI: redirect, challenge: q.Get("code_challenge"),
			nonce: q.Get("nonce"), sub: is.user, claims: maps.Clone(is.userClaims), expires: time.Now().Add(codeLifetime)}
		back(url.Values{"code": {code}})
	}
}

// token is the token endpoint: it exchanges a code once, for the client it
// was issued to, with the redirect URI and the verifier of its challenge.
func (is *Issuer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		tokenError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	id, secret, basic := r.BasicAuth()
	if basic {
		// RFC 6749 2.3.1: form-encoded in the header.
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	c, ok := is.clients[id]
	if !ok || subtle.ConstantTimeCompare([]byte(c.secret), []byte(secret)) != 1 {
		tokenError(w, http.StatusUnauthorized, "invalid_client", "unknown client or wrong secret")
		return
	}
	if r.PostForm.Get("grant_type") != "authorization_code" {
		tokenError(w, http.StatusBadRequest, "unsupported_grant_type", "")
		return
	}
	code := r.PostForm.Get("code")
	g, ok := is.codes[code]
	// A code is good for one attempt, whatever its outcome.
	delete(is.codes, code)
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	switch {
	case !ok || time.Now().After(g.expires):
		tokenError(w, http.StatusBadRequest, "invalid_grant", "unknown, used or expired code")
		return
	case g.clientID != id:
		tokenError(w, http.StatusBadRequest, "invalid_grant", "the code was issued to another client")
		return
	case g.redirectURI != r.PostForm.Get("redirect_uri"):
		tokenError(w, http.StatusBadRequest, "invalid_grant", "redirect_uri does not match")
		return
	case r.PostForm.Get("code_verifier") == "" || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
		tokenError(w, http.StatusBadRequest, "invalid_grant", "code_verifier does not match the challenge")
		return
	}
	now := time.Now()
	claims := map[string]any{"iss": is.URL, "sub": g.sub, "aud": id, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	if g.nonce != "" {
		claims["nonce"] = g.nonce
	}
	maps.Copy(claims, g.claims)
	if is.tamper != nil {
		is.tamper(claims)
	}
	raw, err := jwt.Signed(is.signer).Claims(claims).Serialize()
	if err != nil {
		tokenError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	is.issued++
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": randomString(), "token_type": "Bearer",
		"expires_in": 3600, "id_token": raw})
}

func tokenError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
}

func randomString() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
