package gitlabapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/no8s/no8s-agent/gitlabapi"
)

// A base URL with a token in it is refused, and no error quotes the
// token, whatever else is wrong with the URL.
func TestParseBaseURLErrorsHideCredentials(t *testing.T) {
	t.Parallel()
	const secret = "glpat-hostile-secret"
	for _, raw := range []string{
		"https://oauth2:" + secret + "@gitlab.example.com",
		"https://" + secret + "@gitlab.example.com",
		"http://oauth2:" + secret + "@gitlab.example.com",
		"ftp://oauth2:" + secret + "@gitlab.example.com",
		"oauth2:" + secret + "@gitlab.example.com",
		"gitlab.example.com:" + secret + "@x",
		"https://oauth2:" + secret + "@gitlab.example.com/%zz",
		"https://oauth2:" + secret + "@gitlab.example.com:bad",
		"https://oauth2:" + secret + "@gitlab.example.com/?x=1",
		"https://oauth2:" + secret + "@/path",
		"javascript://oauth2:" + secret + "@x/%0aalert(1)",
	} {
		u, err := gitlabapi.ParseBaseURL(raw)
		if err == nil {
			t.Errorf("ParseBaseURL(%q) = %v, want an error", raw, u)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("ParseBaseURL(%q): the error shows the token: %v", raw, err)
		}
	}
}

// Base URLs that try to pass for a loopback host, or for https, are
// refused; true loopback spellings are accepted over http.
func TestParseBaseURLHostileHosts(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"javascript:alert(1)",
		"http://localhost.evil.example",
		"http://127.0.0.1.nip.io",
		"http://0.0.0.0:8080",
		"http://[::]:8080",
		"http://10.0.0.1",
		"http://localhost@evil.example",
		"http://evil.example#@localhost",
		"http://evil.example?@localhost",
		"http://evil.example\\@localhost",
		"//gitlab.example.com",
		"https:gitlab.example.com",
		"https://gitlab.example.com\n.evil.example",
	} {
		if u, err := gitlabapi.ParseBaseURL(raw); err == nil {
			t.Errorf("ParseBaseURL(%q) = %v, want an error", raw, u)
		}
	}
	for _, raw := range []string{"http://LOCALHOST:8080", "http://127.0.0.2", "http://[::1]", "http://[::ffff:127.0.0.1]:8080"} {
		if _, err := gitlabapi.ParseBaseURL(raw); err != nil {
			t.Errorf("ParseBaseURL(%q): %v", raw, err)
		}
	}
}

// Errors about malformed remotes do not quote the token in them either.
func TestParseRemoteMalformedErrorsHideCredentials(t *testing.T) {
	t.Parallel()
	const secret = "glpat-hostile-secret"
	for _, remote := range []string{
		"https//oauth2:" + secret + "@gitlab.com/g/p.git",
		"/srv/oauth2:" + secret + "@gitlab.com/g/p",
		":" + secret + "@gitlab.com/g/p",
		"oauth2:" + secret + "@gitlab.com/g/p p",
		"ftp://oauth2:" + secret + "@gitlab.com/g/p",
		"https://oauth2:" + secret + "@gitlab.com/g/p?x",
		"https://oauth2:" + secret + "@bad_host/g/p",
		"https://oauth2:" + secret + "@gitlab.com/%zz/p",
		secret + "@bad_host:g/p",
	} {
		_, err := gitlabapi.ParseRemote(remote)
		if err == nil {
			t.Errorf("ParseRemote(%q) accepted", remote)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("ParseRemote(%q): the error shows the token: %v", remote, err)
		}
	}
}

// Redirects the API answers with are followed only to its own scheme,
// host and port, and not forever.
func TestRedirectsHostile(t *testing.T) {
	t.Parallel()
	const token = "glpat-redirect-hostile"
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		_, _ = w.Write([]byte(`{"id":1}`))
	}))
	defer other.Close()
	otherPort := other.Listener.Addr().String()
	otherPort = otherPort[strings.LastIndexByte(otherPort, ':'):]

	tests := []struct {
		name    string
		target  func(api string) string
		wantErr string // "" when followed
	}{
		{"same host, https", func(api string) string { return strings.Replace(api, "http://", "https://", 1) + "/moved" }, "redirect refused"},
		{"same host, another port", func(string) string { return "http://127.0.0.1" + otherPort + "/moved" }, "redirect refused"},
		{"localhost for 127.0.0.1", func(api string) string { return strings.Replace(api, "127.0.0.1", "localhost", 1) + "/moved" }, "redirect refused"},
		{"protocol-relative to another host", func(string) string { return "//127.0.0.2" + otherPort + "/moved" }, "redirect refused"},
		{"user info on the same host", func(api string) string { return strings.Replace(api, "http://", "http://u:p@", 1) + "/moved" }, ""},
		{"loop on the same host", func(api string) string { return api + "/loop" }, "stopped after 10 redirects"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var requests atomic.Int32
			var api *httptest.Server
			api = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				if r.Header.Get("Private-Token") != token {
					http.Error(w, `{"message":"401 Unauthorized"}`, http.StatusUnauthorized)
					return
				}
				if strings.HasPrefix(r.URL.Path, "/moved") {
					_, _ = w.Write([]byte(`{"id":1}`))
					return
				}
				w.Header().Set("Location", tt.target(api.URL))
				w.WriteHeader(http.StatusTemporaryRedirect)
			}))
			defer api.Close()
			c, err := gitlabapi.NewClient(api.URL, token)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = c.Projects.GetProject("g/p", nil)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("not followed: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), token) {
				t.Errorf("the error shows the token: %v", err)
			}
			if tt.wantErr == "stopped after 10 redirects" && requests.Load() != 10 {
				t.Errorf("%d requests, want 10", requests.Load())
			}
		})
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("another server got %d requests", n)
	}
}
