package api

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	gosync "sync"
	"time"

	"github.com/no8s/no8s-agent/oidc"
)

// DefaultSessionTTL is how long a dashboard session lasts unless
// Login.SessionTTL says otherwise.
const DefaultSessionTTL = 8 * time.Hour

// MinSessionKey is the least length of Login.SessionKey.
const MinSessionKey = 32

// Login signs people in to the dashboard with OpenID Connect (the
// authorization code flow with PKCE) at GET /auth/login, GET /auth/callback
// and POST /auth/logout. A sign-in ends in a session cookie that is a
// credential like a token: the claim the identity provider signed names
// the entry of Tokens without a value whose grants apply, as for ID tokens
// sent as bearer tokens, looked up at every request.
type Login struct {
	// Provider is the identity provider.
	Provider LoginProvider
	// SessionKey seals the cookies, at least MinSessionKey bytes. Agents
	// behind one address need the same key; nil makes a random one, which
	// signs everyone out when the agent restarts.
	SessionKey []byte
	// SessionTTL is how long a session lasts; zero means DefaultSessionTTL.
	SessionTTL time.Duration
	// Secure marks the cookies Secure (and __Host-) even on requests that
	// did not come over TLS: set it when people reach the agent over HTTPS
	// through a proxy that ends TLS (the redirect URL is https).
	Secure bool
	// Page writes the pages of the sign-in: the dashboard's answer to a
	// request without a credential, and a sign-in that failed. Nil writes
	// JSON errors.
	Page func(http.ResponseWriter, *http.Request, SignInPage)
}

// SignInPage is a page asking people to sign in, or telling why signing in
// failed.
type SignInPage struct {
	Status  int
	Message string
	// SignInURL starts signing in with the identity provider; TokenURL
	// has the browser ask for a token, sent as the password of basic auth.
	SignInURL, TokenURL string
}

// LoginProvider is an identity provider's authorization code flow (see
// oidc.Login). Errors wrap oidc.ErrInvalid or oidc.ErrUnavailable.
type LoginProvider interface {
	AuthURL(ctx context.Context, state, nonce, verifier string) (string, error)
	Exchange(ctx context.Context, code, verifier, nonce string) (oidc.Identity, error)
	// Issuer is the identity provider's issuer identifier, which an
	// authorization response may carry as iss (RFC 9207).
	Issuer() string
}

// Routes of the sign-in.
const (
	loginPath    = "/auth/login"
	callbackPath = "/auth/callback"
	logoutPath   = "/auth/logout"
	tokenPath    = "/auth/token"
)

// maxUsedStates bounds the states remembered as used; each is a sign-in
// the identity provider completed.
const maxUsedStates = 10000

// loginState is the server's side of the sign-in.
type loginState struct {
	opts            Login
	sessions, flows sealer

	// mu guards used: the states of completed sign-ins, remembered until
	// their flow cookie expires, so that a callback is not replayed.
	mu   gosync.Mutex
	used map[string]time.Time
}

func newLoginState(opts Login, log *slog.Logger) *loginState {
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	key := opts.SessionKey
	if len(key) == 0 {
		key = make([]byte, MinSessionKey)
		_, _ = rand.Read(key)
		log.Warn("dashboard sessions are sealed with a key made at start: they end when the agent restarts, " +
			"and agents behind one address do not share them; set dashboard.sessionKeyEnv to keep them")
	}
	return &loginState{opts: opts, sessions: newSealer(key, "session"), flows: newSealer(key, "login flow"),
		used: map[string]time.Time{}}
}

// randomString is n random bytes in base64url.
func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// safeNext is where a sign-in may send the browser afterwards: a path on
// this agent, or "/". Anything a browser could read as another host is
// refused: //host and /\host (browsers take a backslash for a slash),
// control characters (browsers drop tabs and newlines, making "/\t/host"
// //host), schemes, and the sign-in's own routes.
func safeNext(next string) string {
	if next == "" || len(next) > 2048 || next[0] != '/' || strings.ContainsAny(next, `\`) ||
		strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/auth/") {
		return "/"
	}
	for _, c := range next {
		if c < 0x20 || c == 0x7f {
			return "/"
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || !strings.HasPrefix(u.Path, "/") ||
		strings.HasPrefix(u.Path, "//") {
		return "/"
	}
	return next
}

// page writes a sign-in page, or a JSON error without Page.
func (s *Server) page(w http.ResponseWriter, r *http.Request, p SignInPage) {
	w.Header().Set("Cache-Control", "no-store")
	if s.login.opts.Page == nil {
		msg := p.Message
		if p.SignInURL != "" {
			msg += " (sign in at " + p.SignInURL + ")"
		}
		s.writeError(w, r, errorf(p.Status, "%s", msg), nil)
		return
	}
	if p.Status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		// Not Basic: that would have the browser ask for a token before
		// showing the page. TokenURL asks for one.
		w.Header().Set("WWW-Authenticate", `Bearer realm="no8s"`)
	}
	s.login.opts.Page(w, r, p)
}

// signInPage answers a dashboard page requested without a valid
// credential: sign in, with the identity provider or a token.
func (s *Server) signInPage(w http.ResponseWriter, r *http.Request, err *Error) {
	next := url.QueryEscape(safeNext(r.URL.RequestURI()))
	s.page(w, r, SignInPage{Status: err.Status, Message: err.Message,
		SignInURL: loginPath + "?next=" + next, TokenURL: tokenPath + "?next=" + next})
}

// startLogin sends the browser to the identity provider, with a state, a
// nonce and a PKCE challenge that the flow cookie keeps for the callback.
func (s *Server) startLogin(w http.ResponseWriter, r *http.Request) {
	flow := loginFlow{Version: cookieVersion, State: randomString(32), Nonce: randomString(32), Verifier: randomString(32),
		Next: safeNext(r.URL.Query().Get("next")), Expires: time.Now().Add(flowLifetime).Unix()}
	u, err := s.login.opts.Provider.AuthURL(r.Context(), flow.State, flow.Nonce, flow.Verifier)
	if err != nil {
		s.log.Warn("cannot start a sign-in", "error", err)
		w.Header().Set("Retry-After", retryAfter)
		s.page(w, r, SignInPage{Status: http.StatusServiceUnavailable, Message: "The identity provider cannot be reached; try again in a moment.",
			SignInURL: loginPath + "?next=" + url.QueryEscape(flow.Next)})
		return
	}
	s.login.setCookie(w, r, flowCookie, s.login.flows.seal(flow), flowLifetime)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, u, http.StatusSeeOther)
}

// finishLogin is where the identity provider sends the browser back. The
// flow cookie must be there, with the state the request carries: a
// callback this browser did not start (login CSRF, a code someone else
// got) is refused, and so is one completed already. The code is exchanged
// with the PKCE verifier, and the ID token checked for this sign-in's
// nonce; the session names the entry of api.tokens the claim names.
func (s *Server) finishLogin(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Referrer-Policy", "no-referrer")
	l := s.login
	again := SignInPage{SignInURL: loginPath}
	raw := l.cookie(r, flowCookie)
	// The flow cookie serves one callback, whatever its outcome.
	l.setCookie(w, r, flowCookie, "", -1)
	var flow loginFlow
	now := time.Now()
	if raw == "" || l.flows.open(raw, &flow) != nil || flow.Version != cookieVersion || now.Unix() > flow.Expires {
		again.Status, again.Message = http.StatusBadRequest,
			"No sign-in was started in this browser, or it took longer than 10 minutes: sign in again."
		s.page(w, r, again)
		return
	}
	again.SignInURL += "?next=" + url.QueryEscape(flow.Next)
	q := r.URL.Query()
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(flow.State)) != 1 {
		again.Status, again.Message = http.StatusBadRequest, "This answer of the identity provider is not for the sign-in this browser started: sign in again."
		s.page(w, r, again)
		return
	}
	if iss, ok := q["iss"]; ok && (len(iss) != 1 || iss[0] != l.opts.Provider.Issuer()) {
		// RFC 9207: the answer comes from another identity provider (a
		// mix-up); its code is not sent to ours.
		again.Status, again.Message = http.StatusBadRequest, "This answer comes from another identity provider than the agent's: sign in again."
		s.page(w, r, again)
		return
	}
	if l.completed(flow.State, now) {
		again.Status, again.Message = http.StatusBadRequest, "This sign-in was completed already: sign in again."
		s.page(w, r, again)
		return
	}
	if e := q.Get("error"); e != "" || q.Get("code") == "" {
		again.Status, again.Message = http.StatusUnauthorized, "The identity provider did not sign you in ("+safeOAuthCode(e)+")."
		s.page(w, r, again)
		return
	}
	id, err := l.opts.Provider.Exchange(r.Context(), q.Get("code"), flow.Verifier, flow.Nonce)
	switch {
	case errors.Is(err, oidc.ErrUnavailable):
		s.log.Warn("cannot complete a sign-in", "error", err)
		w.Header().Set("Retry-After", retryAfter)
		again.Status, again.Message = http.StatusServiceUnavailable, "The identity provider cannot be reached; sign in again in a moment."
		s.page(w, r, again)
		return
	case err != nil:
		s.log.Info("sign-in refused", "error", err)
		again.Status, again.Message = http.StatusUnauthorized, "Signing in failed: "+err.Error()
		s.page(w, r, again)
		return
	}
	l.markUsed(flow.State, time.Unix(flow.Expires, 0))
	if s.idTokenEntry(id.Name) == nil {
		s.log.Warn("sign-in with no grants", "token", IDTokenPrefix+id.Name, "subject", id.Subject, "email", id.Email)
		again.Status, again.Message = http.StatusForbidden, "You signed in as "+id.Name+
			", which no entry of api.tokens for ID tokens (one without tokenEnv) is named: you may do nothing here."
		again.SignInURL = ""
		s.page(w, r, again)
		return
	}
	sess := session{Version: cookieVersion, Name: id.Name, Subject: id.Subject, Email: id.Email, Issued: now.Unix(),
		Expires: now.Add(l.opts.SessionTTL).Unix()}
	l.setCookie(w, r, sessionCookie, l.sessions.seal(sess), l.opts.SessionTTL)
	s.log.Info("signed in to the dashboard", "token", IDTokenPrefix+id.Name, "subject", id.Subject, "email", id.Email,
		"expires", time.Unix(sess.Expires, 0).UTC())
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, flow.Next, http.StatusSeeOther)
}

// used reports whether a sign-in with state was completed already.
func (l *loginState) completed(state string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	exp, ok := l.used[state]
	return ok && now.Before(exp.Add(time.Second))
}

// markUsed remembers a completed sign-in's state until its flow cookie
// expires; past that, the cookie itself is refused.
func (l *loginState) markUsed(state string, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if len(l.used) >= maxUsedStates {
		for st, exp := range l.used {
			if now.After(exp) {
				delete(l.used, st)
			}
		}
	}
	if len(l.used) < maxUsedStates {
		l.used[state] = until
	}
}

// safeOAuthCode is an identity provider's error code as a page may show it.
func safeOAuthCode(code string) string {
	if code == "" {
		return "no code was sent"
	}
	if len(code) > 64 {
		return "error"
	}
	for _, c := range code {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return "error"
		}
	}
	return code
}

// logout ends the browser's session: from the agent's own pages only, so
// that another site cannot sign people out.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if err := sameOrigin(r); err != nil {
		s.writeError(w, r, err, nil)
		return
	}
	if t, err := s.sessionToken(r); t != nil && err == nil {
		s.log.Info("signed out of the dashboard", "token", t.Name, "subject", t.subject, "email", t.email)
	}
	s.login.setCookie(w, r, sessionCookie, "", -1)
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// tokenLogin is reached with a token as the password of basic auth (its
// route asks the browser for one): it goes on to the page asked for.
func (s *Server) tokenLogin(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
}

// sameOrigin refuses a request a browser was made to send from another
// site: Sec-Fetch-Site says so, or, from older browsers, the Origin.
func sameOrigin(r *http.Request) *Error {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "same-origin":
		return nil
	case "":
	default:
		return errorf(http.StatusForbidden, "cross-site request refused (Sec-Fetch-Site: %q)", site)
	}
	origin := r.Header.Get("Origin")
	if u, err := url.Parse(origin); origin == "" || err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
		return errorf(http.StatusForbidden, "cross-site request refused: Origin %q is not this agent (%s)", origin, r.Host)
	}
	return nil
}

// idTokenEntry is the entry of Tokens for ID tokens named name, or nil.
func (s *Server) idTokenEntry(name string) *Token {
	for i := range s.opts.Tokens {
		if e := &s.opts.Tokens[i]; e.Value == "" && e.Name == name {
			return e
		}
	}
	return nil
}

// sessionToken returns the token of the request's session cookie: nil
// without one. A cookie that does not open, or has expired, is 401; one
// whose name no entry for ID tokens has any more is 403.
func (s *Server) sessionToken(r *http.Request) (*Token, *Error) {
	if s.login == nil {
		return nil, nil
	}
	raw := s.login.cookie(r, sessionCookie)
	if raw == "" {
		return nil, nil
	}
	var sess session
	now := time.Now()
	if s.login.sessions.open(raw, &sess) != nil || sess.Version != cookieVersion || sess.Name == "" ||
		sess.Issued > now.Add(clockSkew).Unix() {
		return nil, errorf(http.StatusUnauthorized, "the dashboard session is not valid: sign in again")
	}
	// The expiry it was given, and the one the agent gives sessions now,
	// whichever comes first.
	if exp := min(sess.Expires, sess.Issued+int64(s.login.opts.SessionTTL/time.Second)); now.Unix() >= exp {
		return nil, errorf(http.StatusUnauthorized, "the dashboard session expired at %s: sign in again",
			time.Unix(exp, 0).UTC().Format(time.RFC3339))
	}
	e := s.idTokenEntry(sess.Name)
	if e == nil {
		return nil, errorf(http.StatusForbidden, "the dashboard session names %q, which no entry of api.tokens for ID tokens (one without tokenEnv) is named any more: it may do nothing",
			sess.Name)
	}
	t := *e
	t.Name, t.idToken, t.session, t.subject, t.email = IDTokenPrefix+sess.Name, true, true, sess.Subject, sess.Email
	return &t, nil
}

// Caller returns the name the audit trail gives the request's credential,
// "" when it needed none, and whether it is a dashboard session, which
// POST /auth/logout ends.
func Caller(ctx context.Context) (name string, session bool) {
	t := requestToken(ctx)
	if t == nil {
		return "", false
	}
	return t.Name, t.session
}

// dashboardStylesheet is the dashboard's stylesheet, which the sign-in
// pages load before anyone signed in.
const dashboardStylesheet = "/static/dashboard.css"
