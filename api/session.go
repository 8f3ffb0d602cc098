package api

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// Cookies of the dashboard's sign-in. Over TLS (or with Login.Secure) they
// carry the __Host- prefix, which browsers accept only from this very
// origin, Secure, with Path=/ and no Domain: a neighbouring subdomain
// cannot plant one.
const (
	sessionCookie = "no8s_session"
	flowCookie    = "no8s_login"
	hostPrefix    = "__Host-"
)

// cookieVersion is the version of both cookies' contents; another version
// is not valid.
const cookieVersion = 1

// sealer seals values into cookies with AES-256-GCM: they can be neither
// read nor altered without the key, so that a cookie is opaque to the
// browser and whatever reads it, and one made with another key (another
// agent's, an old one) does not open.
type sealer struct {
	aead cipher.AEAD
	// purpose is the additional data: a value sealed for one cookie does
	// not open as the other's.
	purpose []byte
}

// newSealer derives the key of one purpose from key, so that the session
// and the sign-in flow never share one.
func newSealer(key []byte, purpose string) sealer {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("no8s-agent dashboard cookie: " + purpose))
	block, err := aes.NewCipher(mac.Sum(nil))
	if err != nil {
		panic(err) // a SHA-256 sum is always a valid AES-256 key
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return sealer{aead: aead, purpose: []byte(purpose)}
}

// seal returns v as JSON, sealed, in base64url.
func (s sealer) seal(v any) string {
	plain, err := json.Marshal(v)
	if err != nil {
		panic(err) // the cookies' contents are plain structs
	}
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic(err) // crypto/rand does not fail
	}
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, s.purpose))
}

// errCookie is a cookie that does not open: altered, made with another key
// or for the other purpose, or not one of ours.
var errCookie = errors.New("the cookie is not valid")

// maxCookieLen caps what is opened: the cookies are well under it.
const maxCookieLen = 4096

// open reads a sealed value into v.
func (s sealer) open(raw string, v any) error {
	if len(raw) > maxCookieLen {
		return errCookie
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil || len(b) < s.aead.NonceSize()+s.aead.Overhead() {
		return errCookie
	}
	plain, err := s.aead.Open(nil, b[:s.aead.NonceSize()], b[s.aead.NonceSize():], s.purpose)
	if err != nil {
		return errCookie
	}
	if err := json.Unmarshal(plain, v); err != nil {
		return errCookie
	}
	return nil
}

// session is what the session cookie holds: who signed in, and when. It
// holds no grants: they are looked up by name at every request, so that
// removing the entry or changing its grants takes effect at once. Nor does
// it hold the ID token, or anything the identity provider could take.
type session struct {
	Version int `json:"v"`
	// Name is the claim's value: the api.tokens entry whose grants apply.
	Name    string `json:"n"`
	Subject string `json:"s,omitempty"`
	Email   string `json:"e,omitempty"`
	Issued  int64  `json:"i"`
	Expires int64  `json:"x"`
}

// loginFlow is what the flow cookie holds while the browser is at the
// identity provider: what the callback must see again, and where to go
// once signed in.
type loginFlow struct {
	Version  int    `json:"v"`
	State    string `json:"st"`
	Nonce    string `json:"n"`
	Verifier string `json:"pv"`
	Next     string `json:"nx"`
	Expires  int64  `json:"x"`
}

// flowLifetime is how long a sign-in may take at the identity provider.
const flowLifetime = 10 * time.Minute

// clockSkew is how far in the future a session's issue time may be:
// agents behind one address share the key, not a clock.
const clockSkew = time.Minute

// secure reports whether the login's cookies are Secure (and __Host-).
func (l *loginState) secure(r *http.Request) bool { return l.opts.Secure || r.TLS != nil }

// cookieName is name with the __Host- prefix when the cookies are Secure.
func (l *loginState) cookieName(r *http.Request, name string) string {
	if l.secure(r) {
		return hostPrefix + name
	}
	return name
}

// setCookie sets (maxAge > 0) or clears (maxAge < 0) one of the login's
// cookies: HttpOnly, so that no script reads it; SameSite=Lax, so that
// other sites' requests carry it only on top-level navigations (which the
// identity provider's redirect back is), never on their POSTs; Path=/.
func (l *loginState) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge time.Duration) {
	c := &http.Cookie{Name: l.cookieName(r, name), Value: value, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: l.secure(r)}
	if maxAge > 0 {
		c.MaxAge = int(maxAge / time.Second)
		c.Expires = time.Now().Add(maxAge)
	} else {
		c.MaxAge = -1
	}
	http.SetCookie(w, c)
}

// cookie returns the value of one of the login's cookies, "" when absent.
func (l *loginState) cookie(r *http.Request, name string) string {
	c, err := r.Cookie(l.cookieName(r, name))
	if err != nil {
		return ""
	}
	return c.Value
}
