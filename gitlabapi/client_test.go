package gitlabapi_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/no8s/no8s-agent/gitlabapi"
	"github.com/no8s/no8s-agent/gitlabapi/gitlabtest"
)

func TestParseBaseURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want, wantErr string
	}{
		{"", "https://gitlab.com", ""},
		{"https://gitlab.com/", "https://gitlab.com", ""},
		{"https://gitlab.example.com/api/v4/", "https://gitlab.example.com", ""},
		{"https://example.com/gitlab", "https://example.com/gitlab", ""},
		{"https://example.com/gitlab/api/v4", "https://example.com/gitlab", ""},
		{"http://localhost:8080", "http://localhost:8080", ""},
		{"http://127.0.0.1:1234/", "http://127.0.0.1:1234", ""},
		{"http://[::1]:1234", "http://[::1]:1234", ""},
		{"http://gitlab.example.com", "", "use https"},
		{"https://user:pw@gitlab.example.com", "", "credentials"},
		{"gitlab.example.com", "", "want https://HOST"},
		{"ftp://gitlab.example.com", "", "want https://HOST"},
		{"https://gitlab.example.com/?x=1", "", "query"},
		{"https://", "", "want https://HOST"},
		{"https://gitlab.example.com/%zz", "", "invalid URL escape"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			u, err := gitlabapi.ParseBaseURL(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseBaseURL(%q) = %v, %v; want an error containing %q", tt.in, u, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "pw@") {
					t.Fatalf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil || u.String() != tt.want {
				t.Fatalf("ParseBaseURL(%q) = %v, %v; want %s", tt.in, u, err, tt.want)
			}
		})
	}
}

func TestNewClientNeedsAToken(t *testing.T) {
	t.Parallel()
	if _, err := gitlabapi.NewClient("", " "); err == nil {
		t.Fatal("a client without a token")
	}
}

// The client talks to the instance's /api/v4/, with the token in the
// Private-Token header; the trigger client sends no credential at all.
func TestClientsAuthenticate(t *testing.T) {
	t.Parallel()
	srv := gitlabtest.New(t, gitlabtest.Options{})
	srv.AddProject("g/p", gitlabtest.ProjectOptions{TriggerTokens: []string{"glptt-trigger"}})
	ctx := context.Background()

	c, err := gitlabapi.NewClient(srv.URL, gitlabtest.DefaultToken)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.BaseURL().String(); got != srv.URL+"/api/v4/" {
		t.Fatalf("BaseURL = %s", got)
	}
	if _, _, err := c.Projects.GetProject("g/p", nil, gitlab.WithContext(ctx)); err != nil {
		t.Fatal(err)
	}
	tc, err := gitlabapi.NewTriggerClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tc.PipelineTriggers.RunPipelineTrigger("g/p", &gitlab.RunPipelineTriggerOptions{
		Ref: gitlab.Ptr("main"), Token: gitlab.Ptr("glptt-trigger")}, gitlab.WithContext(ctx)); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	if reqs[0].PrivateToken != gitlabtest.DefaultToken {
		t.Errorf("Private-Token = %q", reqs[0].PrivateToken)
	}
	if reqs[1].PrivateToken != "" || reqs[1].Authorization != "" {
		t.Errorf("the trigger call carried credentials: %+v", reqs[1])
	}
	if reqs[1].Status != http.StatusCreated {
		t.Errorf("trigger answered %d", reqs[1].Status)
	}
}

// A redirect to another host would carry the Private-Token header (Go's
// client strips only Authorization and cookies) and a 307/308's body to
// whoever the answer names: the client stops at it.
func TestRedirectsStayOnTheAPIHost(t *testing.T) {
	t.Parallel()
	const token = "glpat-redirect-test"
	tests := []struct {
		name      string
		status    int
		otherHost bool
		wantErr   bool
	}{
		{"307 to another host", http.StatusTemporaryRedirect, true, true},
		{"302 to another host", http.StatusFound, true, true},
		{"307 on the same host", http.StatusTemporaryRedirect, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var elsewhere atomic.Int32
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				elsewhere.Add(1)
				_, _ = w.Write([]byte(`{"id":1}`))
			}))
			defer other.Close()
			var api *httptest.Server
			api = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Private-Token") != token {
					http.Error(w, `{"message":"401 Unauthorized"}`, http.StatusUnauthorized)
					return
				}
				if strings.HasPrefix(r.URL.Path, "/moved/") {
					_, _ = w.Write([]byte(`{"id":1}`))
					return
				}
				target := api.URL + "/moved" + r.URL.Path
				if tt.otherHost {
					target = other.URL + r.URL.Path
				}
				http.Redirect(w, r, target, tt.status)
			}))
			defer api.Close()

			c, err := gitlabapi.NewClient(api.URL, token)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = c.Projects.GetProject("g/p", nil)
			if tt.wantErr {
				if !errors.Is(err, gitlabapi.ErrRedirectRefused) {
					t.Fatalf("err = %v, want a refused redirect", err)
				}
				if n := elsewhere.Load(); n != 0 {
					t.Fatalf("the other host got %d requests", n)
				}
				return
			}
			if err != nil {
				t.Fatalf("a redirect on the API's host: %v", err)
			}
		})
	}
}
