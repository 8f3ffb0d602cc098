package gitlabapi_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/no8s/no8s-agent/gitlabapi"
	"github.com/no8s/no8s-agent/gitlabapi/gitlabtest"
)

// fast is a Retrier whose backoff does not slow tests down.
var fast = gitlabapi.Retrier{Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}

func newServer(t *testing.T) (*gitlabtest.Server, *gitlab.Client) {
	t.Helper()
	srv := gitlabtest.New(t, gitlabtest.Options{})
	srv.AddProject("g/sub/p.x", gitlabtest.ProjectOptions{})
	c, err := gitlabapi.NewClient(srv.URL, gitlabtest.DefaultToken)
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

// createPipeline creates a pipeline on main through r.
func createPipeline(ctx context.Context, c *gitlab.Client, r gitlabapi.Retrier, opt *gitlab.CreatePipelineOptions) (*gitlab.Pipeline, error) {
	if opt == nil {
		opt = &gitlab.CreatePipelineOptions{Ref: gitlab.Ptr("main")}
	}
	var pl *gitlab.Pipeline
	err := r.Call(ctx, func() (*gitlab.Response, error) {
		var resp *gitlab.Response
		var err error
		pl, resp, err = c.Pipelines.CreatePipeline("g/sub/p.x", opt, gitlab.WithContext(ctx))
		return resp, err
	})
	return pl, err
}

// A 429 is waited out for its Retry-After, even for a call that is not
// retried on server errors: GitLab did nothing. One pipeline results.
func TestRateLimitIsWaitedOut(t *testing.T) {
	t.Parallel()
	srv, c := newServer(t)
	srv.FailNext(gitlabtest.Match{Method: "POST", PathSuffix: "/pipeline"}, 1, gitlabtest.TooManyRequests(time.Second))
	r := fast
	r.NoServerRetry = true
	start := time.Now()
	pl, err := createPipeline(context.Background(), c, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("retried after %v, before Retry-After's second", waited)
	}
	if got := srv.Pipelines(); len(got) != 1 || got[0].PipelineID != pl.ID {
		t.Fatalf("pipelines = %+v, want the one returned (%d)", got, pl.ID)
	}
	if n := srv.Count(gitlabtest.Match{Method: "POST", PathSuffix: "/pipeline"}, 0); n != 2 {
		t.Fatalf("%d POSTs, want 2", n)
	}
}

// Without Retry-After, a 429 waits until RateLimit-Reset.
func TestRateLimitWaitsForReset(t *testing.T) {
	t.Parallel()
	srv, c := newServer(t)
	reset := time.Now().Add(1500 * time.Millisecond).Truncate(time.Second).Add(time.Second)
	f := gitlabtest.TooManyRequests(0)
	delete(f.Headers, "Retry-After")
	f.Headers["RateLimit-Reset"] = strconv.FormatInt(reset.Unix(), 10)
	srv.FailNext(gitlabtest.Match{Method: "GET"}, 1, f)
	err := fast.Call(context.Background(), func() (*gitlab.Response, error) {
		_, resp, err := c.Projects.GetProject("g/sub/p.x", nil)
		return resp, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if now := time.Now(); now.Before(reset) {
		t.Fatalf("retried at %v, before the reset at %v", now, reset)
	}
}

// A 429 that names no wait backs off and retries.
func TestRateLimitWithoutHeadersBacksOff(t *testing.T) {
	t.Parallel()
	srv, c := newServer(t)
	start := time.Now()
	srv.FailNext(gitlabtest.Match{}, 3, gitlabtest.Fault{Status: http.StatusTooManyRequests, Body: "Retry later\n",
		Headers: map[string]string{"RateLimit-Reset": "", "RateLimit-ResetTime": ""}})
	err := fast.Call(context.Background(), func() (*gitlab.Response, error) {
		_, resp, err := c.Projects.GetProject("g/sub/p.x", nil)
		return resp, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Requests()); n != 4 {
		t.Fatalf("%d requests, want 4", n)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("took %v: the backoff is milliseconds", took)
	}
}

// A pipeline creation that meets a 502 may or may not have created one:
// with NoServerRetry the caller gets a TransientError and looks first.
func TestNoServerRetryReturnsTransientError(t *testing.T) {
	t.Parallel()
	srv, c := newServer(t)
	srv.FailNext(gitlabtest.Match{Method: "POST", PathSuffix: "/pipeline"}, 1, gitlabtest.BadGateway())
	r := fast
	r.NoServerRetry = true
	_, err := createPipeline(context.Background(), c, r, nil)
	var te *gitlabapi.TransientError
	if !errors.As(err, &te) || !gitlabapi.IsTransient(err) || gitlabapi.IsConfig(err) {
		t.Fatalf("err = %v, want a TransientError", err)
	}
	if !gitlab.HasStatusCode(err, http.StatusBadGateway) {
		t.Fatalf("err = %v, want the 502 inside", err)
	}
	if got := srv.Pipelines(); len(got) != 0 {
		t.Fatalf("pipelines created: %+v", got)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

// Idempotent calls retry server errors with backoff, up to a bound.
func TestServerErrorsAreRetried(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		failures int
		limit    int
		wantErr  bool
	}{
		{"recovers", 2, 0, false},
		{"gives up", 3, 2, true},
		{"no limit", 8, -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, c := newServer(t)
			srv.FailNext(gitlabtest.Match{Method: "GET"}, tt.failures, gitlabtest.BadGateway())
			r := fast
			r.ServerErrors = tt.limit
			err := r.Call(context.Background(), func() (*gitlab.Response, error) {
				_, resp, err := c.Projects.GetProject("g/sub/p.x", nil)
				return resp, err
			})
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "giving up after 3") || !gitlab.HasStatusCode(err, http.StatusBadGateway) {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n := len(srv.Requests()); n != tt.failures+1 {
				t.Fatalf("%d requests, want %d", n, tt.failures+1)
			}
		})
	}
}

// A network error (nobody listening) is retried like a server error, and
// is transient for a NoServerRetry call.
func TestNetworkErrors(t *testing.T) {
	t.Parallel()
	srv, c := newServer(t)
	srv.Close()
	r := fast
	r.ServerErrors = 2
	calls := 0
	err := r.Call(context.Background(), func() (*gitlab.Response, error) {
		calls++
		_, resp, err := c.Projects.GetProject("g/sub/p.x", nil)
		return resp, err
	})
	if err == nil || calls != 3 || !strings.Contains(err.Error(), "giving up") {
		t.Fatalf("err = %v after %d calls", err, calls)
	}
	r.NoServerRetry = true
	if _, err := createPipeline(context.Background(), c, r, nil); !gitlabapi.IsTransient(err) {
		t.Fatalf("err = %v, want a TransientError", err)
	}
}

// An error client-go finds before sending is not retried.
func TestClientErrorsAreNotRetried(t *testing.T) {
	t.Parallel()
	_, c := newServer(t)
	calls := 0
	err := fast.Call(context.Background(), func() (*gitlab.Response, error) {
		calls++
		_, resp, err := c.Projects.GetProject(1.5, nil)
		return resp, err
	})
	if !errors.Is(err, gitlab.ErrInvalidIDType) || calls != 1 {
		t.Fatalf("err = %v after %d calls", err, calls)
	}
}

// Configuration errors end the call at once and say what to fix.
func TestConfigErrorsCarryHints(t *testing.T) {
	t.Parallel()
	srv := gitlabtest.New(t, gitlabtest.Options{})
	srv.AddProject("g/p", gitlabtest.ProjectOptions{RefuseVariables: true, Refs: []string{},
		Tokens: map[string]gitlabtest.Role{"glpat-reporter": gitlabtest.Reporter}})
	srv.AddProject("g/other", gitlabtest.ProjectOptions{})
	client := func(token string) *gitlab.Client {
		c, err := gitlabapi.NewClient(srv.URL, token)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	create := func(token, project, ref string, vars bool) func() (*gitlab.Response, error) {
		return func() (*gitlab.Response, error) {
			opt := &gitlab.CreatePipelineOptions{Ref: gitlab.Ptr(ref)}
			if vars {
				opt.Variables = &[]*gitlab.PipelineVariableOptions{{Key: gitlab.Ptr("K"), Value: gitlab.Ptr("V")}}
			}
			_, resp, err := client(token).Pipelines.CreatePipeline(project, opt)
			return resp, err
		}
	}
	get := func(token, project string) func() (*gitlab.Response, error) {
		return func() (*gitlab.Response, error) {
			_, resp, err := client(token).Projects.GetProject(project, nil)
			return resp, err
		}
	}
	tests := []struct {
		name     string
		do       func() (*gitlab.Response, error)
		status   int
		hint     string
		notFound bool
	}{
		{"unknown token", get("glpat-wrong", "g/p"), http.StatusUnauthorized, "invalid, expired or revoked", false},
		{"reporter runs a pipeline", create("glpat-reporter", "g/p", "main", false), http.StatusForbidden, "at least the Developer role", false},
		{"project token elsewhere", get("glpat-reporter", "g/other"), http.StatusNotFound, "cannot see the project", true},
		{"no such project", get(gitlabtest.DefaultToken, "g/nope"), http.StatusNotFound, "project path or id is wrong", true},
		{"variables refused", create(gitlabtest.DefaultToken, "g/p", "main", true), http.StatusBadRequest, gitlabapi.HintVariablesForbidden, false},
		{"no such ref", create(gitlabtest.DefaultToken, "g/p", "nope", false), http.StatusBadRequest, "GitLab refused the request: Reference not found", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			err := fast.Call(context.Background(), func() (*gitlab.Response, error) {
				calls++
				return tt.do()
			})
			var ce *gitlabapi.ConfigError
			if !errors.As(err, &ce) || !gitlabapi.IsConfig(err) {
				t.Fatalf("err = %v, want a ConfigError", err)
			}
			if calls != 1 {
				t.Fatalf("%d calls, want 1", calls)
			}
			if ce.Status != tt.status || !strings.Contains(ce.Hint, tt.hint) || !strings.Contains(err.Error(), tt.hint) {
				t.Fatalf("status %d, hint %q; want %d, %q", ce.Status, ce.Hint, tt.status, tt.hint)
			}
			if got := errors.Is(err, gitlab.ErrNotFound); got != tt.notFound {
				t.Fatalf("errors.Is(err, ErrNotFound) = %v", got)
			}
		})
	}
}

// A 403 on a read asks for the Reporter role and a read scope, and
// GitLab's insufficient_scope answer asks for the api scope.
func TestForbiddenHints(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, body, hint string
	}{
		{"read", "GET", `{"message":"403 Forbidden"}`, "Reporter role"},
		{"write", "POST", `{"message":"403 Forbidden"}`, "Developer role"},
		{"scope", "POST", `{"error":"insufficient_scope","error_description":"The request requires higher privileges than provided by the access token.","scope":"api"}`, "api scope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, c := newServer(t)
			srv.FailNext(gitlabtest.Match{}, 1, gitlabtest.Fault{Status: http.StatusForbidden, Body: tt.body})
			err := fast.Call(context.Background(), func() (*gitlab.Response, error) {
				if tt.method == "GET" {
					_, resp, err := c.Projects.GetProject("g/sub/p.x", nil)
					return resp, err
				}
				_, resp, err := c.Pipelines.CreatePipeline("g/sub/p.x", &gitlab.CreatePipelineOptions{Ref: gitlab.Ptr("main")})
				return resp, err
			})
			var ce *gitlabapi.ConfigError
			if !errors.As(err, &ce) || ce.Status != http.StatusForbidden || !strings.Contains(ce.Hint, tt.hint) {
				t.Fatalf("err = %v, want a 403 hinting %q", err, tt.hint)
			}
		})
	}
}

// Message flattens GitLab's error bodies; client-go's own Message does not.
func TestMessage(t *testing.T) {
	t.Parallel()
	tests := []struct{ body, want string }{
		{`{"message":"403 Forbidden"}`, "403 Forbidden"},
		{`{"message":{"base":["Reference not found"]}}`, "Reference not found"},
		{`{"message":{"ref":["is invalid"],"base":["A","B"]}}`, "A; B; ref is invalid"},
		{`{"error":"ref is missing"}`, "ref is missing"},
		{`{"error":"insufficient_scope","error_description":"needs api"}`, "needs api"},
		{`<html>502</html>`, ""},
		{``, ""},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			t.Parallel()
			srv, c := newServer(t)
			srv.FailNext(gitlabtest.Match{}, 1, gitlabtest.Fault{Status: http.StatusBadRequest, Body: tt.body})
			_, _, err := c.Projects.GetProject("g/sub/p.x", nil)
			if got := gitlabapi.Message(err); got != tt.want {
				t.Fatalf("Message = %q, want %q", got, tt.want)
			}
		})
	}
	if got := gitlabapi.Message(errors.New("plain")); got != "" {
		t.Fatalf("Message of a plain error = %q", got)
	}
}

// Cancelling the context ends a call whose answer hangs, at once.
func TestHangingCallEndsWithContext(t *testing.T) {
	t.Parallel()
	srv, c := newServer(t)
	srv.FailNext(gitlabtest.Match{Method: "GET"}, 1, gitlabtest.Hang())
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("stopped by the test")
	done := make(chan error, 1)
	go func() {
		done <- fast.Call(ctx, func() (*gitlab.Response, error) {
			_, resp, err := c.Projects.GetProject("g/sub/p.x", nil, gitlab.WithContext(ctx))
			return resp, err
		})
	}()
	// Wait for the request to reach the server before cancelling.
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := srv.WaitFor(wctx, func() bool { return srv.InFlight() == 1 }); err != nil {
		t.Fatalf("the request never reached the server: %v", err)
	}
	cancel(stop)
	select {
	case err := <-done:
		if !errors.Is(err, stop) {
			t.Fatalf("err = %v, want the context's cause", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not end with its context")
	}
}

// Cancelling the context ends a wait for a rate limit at once.
func TestRateLimitWaitEndsWithContext(t *testing.T) {
	t.Parallel()
	srv, c := newServer(t)
	srv.FailNext(gitlabtest.Match{}, 1, gitlabtest.TooManyRequests(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := fast.Call(ctx, func() (*gitlab.Response, error) {
		_, resp, err := c.Projects.GetProject("g/sub/p.x", nil, gitlab.WithContext(ctx))
		return resp, err
	})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("err = %v after %v", err, time.Since(start))
	}
}

// A commit status posted again in its state is GitLab's 400, which
// IsUnchangedStatus tells from other refusals.
func TestIsUnchangedStatus(t *testing.T) {
	t.Parallel()
	_, c := newServer(t)
	sha := gitlabtest.SHA("g/sub/p.x", "main")
	post := func(state gitlab.BuildStateValue) error {
		return fast.Call(context.Background(), func() (*gitlab.Response, error) {
			_, resp, err := c.Commits.SetCommitStatus("g/sub/p.x", sha, &gitlab.SetCommitStatusOptions{State: state, Name: gitlab.Ptr("no8s/plan")})
			return resp, err
		})
	}
	if err := post(gitlab.Running); err != nil {
		t.Fatal(err)
	}
	err := post(gitlab.Running)
	if !gitlabapi.IsUnchangedStatus(err) || !gitlabapi.IsConfig(err) {
		t.Fatalf("err = %v, want an unchanged status", err)
	}
	if gitlabapi.IsUnchangedStatus(errors.New("Cannot transition status via :run from :running")) {
		t.Fatal("a plain error counted as GitLab's answer")
	}
}

// An answer that does not start within the transport's
// ResponseHeaderTimeout (or the client's Timeout) is a network error, not
// the caller's context ending: a read is tried again, and a call that may
// have taken effect reports a *TransientError, so that its caller looks
// before it tries again.
func TestTransportTimeoutIsTransient(t *testing.T) {
	t.Parallel()
	srv := gitlabtest.New(t, gitlabtest.Options{})
	srv.AddProject("g/sub/p.x", gitlabtest.ProjectOptions{})
	for _, tt := range []struct {
		name string
		hc   *http.Client
	}{
		{"response header timeout", &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: 100 * time.Millisecond}}},
		{"client timeout", &http.Client{Timeout: 100 * time.Millisecond}},
	} {
		c, err := gitlab.NewClient(gitlabtest.DefaultToken, gitlab.WithBaseURL(srv.URL), gitlab.WithHTTPClient(tt.hc), gitlab.WithoutRetries())
		if err != nil {
			t.Fatal(err)
		}
		get := func() (*gitlab.Response, error) {
			_, resp, err := c.Projects.GetProject("g/sub/p.x", nil, gitlab.WithContext(t.Context()))
			return resp, err
		}
		srv.FailNext(gitlabtest.Match{Method: "GET"}, 1, gitlabtest.Hang())
		if err := fast.Call(t.Context(), get); err != nil {
			t.Errorf("%s: a read = %v, want it tried again", tt.name, err)
		}
		once := fast
		once.NoServerRetry = true
		srv.FailNext(gitlabtest.Match{Method: "GET"}, 1, gitlabtest.Hang())
		if err := once.Call(t.Context(), get); !gitlabapi.IsTransient(err) {
			t.Errorf("%s: a call that may have taken effect = %v, want a TransientError", tt.name, err)
		}
	}
}
