package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestSessionExpiry: a session is refused once its sealed expiry passes,
// once the agent's session lifetime (shortened since) has passed since it
// was issued, when issued in the future, or of another version; a flow
// cookie is no session.
func TestSessionExpiry(t *testing.T) {
	t.Parallel()
	key := []byte(strings.Repeat("s", MinSessionKey))
	s := New(Options{Tokens: []Token{{Name: "alice", Grants: []Grant{{Verbs: Verbs}}}},
		Login: &Login{SessionKey: key, SessionTTL: time.Hour}})
	now := time.Now()
	at := func(d time.Duration) int64 { return now.Add(d).Unix() }
	check := func(what, cookie string, status int, contains string) {
		t.Helper()
		r := httptest.NewRequest("GET", "/api/v1/resources", nil)
		r.AddCookie(&http.Cookie{Name: sessionCookie, Value: cookie})
		tok, err := s.sessionToken(r)
		switch {
		case status == 0 && (err != nil || tok == nil || tok.Name != "oidc:alice" || !tok.session):
			t.Errorf("%s: %v %v", what, tok, err)
		case status != 0 && (err == nil || err.Status != status || !strings.Contains(err.Message, contains)):
			t.Errorf("%s: %v %v; want %d with %q", what, tok, err, status, contains)
		}
	}
	seal := func(sess session) string { return s.login.sessions.seal(sess) }
	check("a session", seal(session{Version: 1, Name: "alice", Issued: at(0), Expires: at(time.Hour)}), 0, "")
	check("past its expiry", seal(session{Version: 1, Name: "alice", Issued: at(-2 * time.Hour), Expires: at(-time.Second)}), 401, "expired")
	check("past the agent's lifetime", seal(session{Version: 1, Name: "alice", Issued: at(-2 * time.Hour), Expires: at(6 * time.Hour)}), 401, "expired")
	check("issued in the future", seal(session{Version: 1, Name: "alice", Issued: at(time.Hour), Expires: at(2 * time.Hour)}), 401, "not valid")
	check("another version", seal(session{Version: 2, Name: "alice", Issued: at(0), Expires: at(time.Hour)}), 401, "not valid")
	check("no name", seal(session{Version: 1, Issued: at(0), Expires: at(time.Hour)}), 401, "not valid")
	// The same contents sealed for the sign-in flow do not open as a session.
	check("a flow cookie", s.login.flows.seal(session{Version: 1, Name: "alice", Issued: at(0), Expires: at(time.Hour)}), 401, "not valid")
}
