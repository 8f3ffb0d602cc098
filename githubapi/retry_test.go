package githubapi_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/no8s/no8s-agent/githubapi"
)

// An answer that does not start within the transport's
// ResponseHeaderTimeout (or the client's Timeout) is a network error, not
// the caller's context ending, though net/http's error says it is
// context.DeadlineExceeded: a read is tried again, and a call that may
// have taken effect reports a *TransientError, so that its caller looks
// before it tries again.
func TestTransportTimeoutIsTransient(t *testing.T) {
	t.Parallel()
	var hang atomic.Int32
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hang.Add(-1) >= 0 {
			// Accepted, and never answered.
			select {
			case <-r.Context().Done():
			case <-done:
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id": 1, "name": "infra"}`))
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	fast := githubapi.Retrier{Backoff: time.Millisecond}
	for _, tt := range []struct {
		name string
		hc   *http.Client
	}{
		{"response header timeout", &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: 100 * time.Millisecond}}},
		{"client timeout", &http.Client{Timeout: 100 * time.Millisecond}},
	} {
		c := github.NewClient(tt.hc)
		base, err := c.BaseURL.Parse(srv.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		c.BaseURL = base
		get := func() (*github.Response, error) {
			_, resp, err := c.Repositories.Get(t.Context(), "no8s", "infra")
			return resp, err
		}
		hang.Store(1)
		if err := fast.Call(t.Context(), get); err != nil {
			t.Errorf("%s: a read = %v, want it tried again", tt.name, err)
		}
		once := fast
		once.NoServerRetry = true
		hang.Store(1)
		if err := once.Call(t.Context(), get); !isTransient(err) {
			t.Errorf("%s: a call that may have taken effect = %v (%T), want a TransientError", tt.name, err, err)
		}
		// The caller's own context ending is no network error.
		hang.Store(1)
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		err = once.Call(ctx, func() (*github.Response, error) {
			_, resp, err := c.Repositories.Get(ctx, "no8s", "infra")
			return resp, err
		})
		cancel()
		if err == nil || isTransient(err) {
			t.Errorf("%s: a call whose context ended = %v, want the context's end", tt.name, err)
		}
	}
}

func isTransient(err error) bool {
	var te *githubapi.TransientError
	return errors.As(err, &te)
}
