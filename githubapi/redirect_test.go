package githubapi_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-github/v60/github"

	"github.com/no8s/no8s-agent/githubapi"
)

// A redirect to another host would carry the token, and for a 307 or 308
// the body, to whoever the answer names: the client stops at it, and the
// other host hears nothing. A redirect on the API's own host is followed.
func TestRedirectsStayOnTheAPIHost(t *testing.T) {
	t.Parallel()
	const token = "ghp_redirect-test-token-0123456789"
	tests := []struct {
		name      string
		status    int
		otherHost bool
		wantErr   bool
	}{
		{"307 to another host", http.StatusTemporaryRedirect, true, true},
		{"308 to another host", http.StatusPermanentRedirect, true, true},
		{"302 to another host", http.StatusFound, true, true},
		{"307 on the same host", http.StatusTemporaryRedirect, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var elsewhere atomic.Int32
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				elsewhere.Add(1)
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte(`{"state":"success"}`))
			}))
			defer other.Close()
			var api *httptest.Server
			api = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer "+token {
					http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
					return
				}
				if strings.HasPrefix(r.URL.Path, "/moved/") {
					w.WriteHeader(http.StatusCreated)
					_, _ = w.Write([]byte(`{"state":"success"}`))
					return
				}
				target := api.URL + "/moved" + r.URL.Path
				if tt.otherHost {
					target = other.URL + r.URL.Path
				}
				http.Redirect(w, r, target, tt.status)
			}))
			defer api.Close()

			client, err := githubapi.NewClient(api.URL+"/", token)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = client.Repositories.CreateStatus(context.Background(), "o", "r", "0123456789abcdef0123456789abcdef01234567",
				&github.RepoStatus{State: github.String("success")})
			if tt.wantErr {
				if !errors.Is(err, githubapi.ErrRedirectRefused) {
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
