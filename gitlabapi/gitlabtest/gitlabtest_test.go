package gitlabtest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/no8s/no8s-agent/gitlabapi"
	"github.com/no8s/no8s-agent/gitlabapi/gitlabtest"
)

// project is the path the tests use: a subgroup and a dot, which client-go
// escapes as g%2Fsub%2Fp%2Ex.
const project = "g/sub/p.x"

func client(t *testing.T, srv *gitlabtest.Server, token string) *gitlab.Client {
	t.Helper()
	c, err := gitlabapi.NewClient(srv.URL, token)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func setup(t *testing.T, opts gitlabtest.Options, popts gitlabtest.ProjectOptions) (*gitlabtest.Server, *gitlab.Client, int64) {
	t.Helper()
	srv := gitlabtest.New(t, opts)
	id := srv.AddProject(project, popts)
	return srv, client(t, srv, gitlabtest.DefaultToken), id
}

func statusOf(err error) int {
	if errors.Is(err, gitlab.ErrNotFound) {
		return http.StatusNotFound
	}
	var er *gitlab.ErrorResponse
	if errors.As(err, &er) {
		return er.Response.StatusCode
	}
	return 0
}

// rawGet reads an answer as it comes over the wire, for what client-go
// hides (the body of a 404).
func rawGet(t *testing.T, srv *gitlabtest.Server, path, token string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Private-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// Projects are found by escaped path (any case) and by id; the path is
// received escaped, as client-go sends it.
func TestProjectByPathAndID(t *testing.T) {
	t.Parallel()
	srv, c, id := setup(t, gitlabtest.Options{}, gitlabtest.ProjectOptions{DefaultBranch: "trunk"})
	for _, pid := range []any{project, "G/Sub/P.x", id, int(id)} {
		p, _, err := c.Projects.GetProject(pid, nil)
		if err != nil {
			t.Fatalf("GetProject(%v): %v", pid, err)
		}
		if p.ID != id || p.PathWithNamespace != project || p.DefaultBranch != "trunk" ||
			p.HTTPURLToRepo != srv.URL+"/"+project+".git" || p.WebURL != srv.URL+"/"+project || !strings.HasSuffix(p.SSHURLToRepo, ":"+project+".git") {
			t.Fatalf("project = %+v", p)
		}
	}
	if got := srv.Requests()[0].Path; got != "/api/v4/projects/g%2Fsub%2Fp%2Ex" {
		t.Fatalf("path received = %q", got)
	}
	status, _, body := rawGet(t, srv, "/api/v4/projects/g%2Fnope", gitlabtest.DefaultToken)
	if status != http.StatusNotFound || body != `{"message":"404 Project Not Found"}` {
		t.Fatalf("unknown project: %d %s", status, body)
	}
	status, _, body = rawGet(t, srv, "/projects/1", gitlabtest.DefaultToken)
	if status != http.StatusNotFound || !strings.Contains(body, "<html>") {
		t.Fatalf("outside /api/v4: %d %s", status, body)
	}
}

// Tokens: the server's token reads everything, a project token only its
// project (404 elsewhere, like a private project it cannot see), an
// unknown token or none gets 401.
func TestTokens(t *testing.T) {
	t.Parallel()
	srv := gitlabtest.New(t, gitlabtest.Options{Token: "glpat-main"})
	srv.AddProject("g/a", gitlabtest.ProjectOptions{Tokens: map[string]gitlabtest.Role{"glpat-a": gitlabtest.Reporter}})
	srv.AddProject("g/b", gitlabtest.ProjectOptions{})
	tests := []struct {
		token, project string
		status         int
		body           string
	}{
		{"glpat-main", "g%2Fa", http.StatusOK, ""},
		{"glpat-main", "g%2Fb", http.StatusOK, ""},
		{"glpat-a", "g%2Fa", http.StatusOK, ""},
		{"glpat-a", "g%2Fb", http.StatusNotFound, `{"message":"404 Project Not Found"}`},
		{"glpat-wrong", "g%2Fa", http.StatusUnauthorized, `{"message":"401 Unauthorized"}`},
		{"", "g%2Fa", http.StatusUnauthorized, `{"message":"401 Unauthorized"}`},
	}
	for _, tt := range tests {
		status, _, body := rawGet(t, srv, "/api/v4/projects/"+tt.project, tt.token)
		if status != tt.status || tt.body != "" && body != tt.body {
			t.Errorf("token %q, project %s: %d %s; want %d %s", tt.token, tt.project, status, body, tt.status, tt.body)
		}
	}
	// Bearer works like Private-Token.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v4/projects/g%2Fa", nil)
	req.Header.Set("Authorization", "Bearer glpat-a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("Bearer: %d", resp.StatusCode)
	}
}

// Every answer carries GitLab's RateLimit-* headers, with Remaining
// counting down.
func TestRateLimitHeaders(t *testing.T) {
	t.Parallel()
	srv, c, _ := setup(t, gitlabtest.Options{}, gitlabtest.ProjectOptions{})
	var remaining []int
	for range 3 {
		_, resp, err := c.Projects.GetProject(project, nil)
		if err != nil {
			t.Fatal(err)
		}
		h := resp.Header
		if h.Get("RateLimit-Limit") != strconv.Itoa(gitlabtest.RateLimit) || h.Get("RateLimit-Name") == "" ||
			h.Get("RateLimit-ResetTime") == "" {
			t.Fatalf("headers = %v", h)
		}
		reset, err := strconv.ParseInt(h.Get("RateLimit-Reset"), 10, 64)
		if err != nil || reset <= time.Now().Add(-time.Second).Unix() {
			t.Fatalf("RateLimit-Reset = %q", h.Get("RateLimit-Reset"))
		}
		n, _ := strconv.Atoi(h.Get("RateLimit-Remaining"))
		remaining = append(remaining, n)
	}
	// A minute boundary may fall between the calls and reset the count.
	if !(remaining[0] > remaining[1] || remaining[1] > remaining[2]) {
		t.Fatalf("RateLimit-Remaining = %v, want it counting down", remaining)
	}
	_, _, body := rawGet(t, srv, "/api/v4/projects/g%2Fsub%2Fp%2Ex/pipelines/1", gitlabtest.DefaultToken)
	if body != `{"message":"404 Not Found"}` {
		t.Fatalf("unknown pipeline: %s", body)
	}
}

// Faults replace the next n matching answers, before authentication, and
// change nothing.
func TestFaults(t *testing.T) {
	t.Parallel()
	srv, c, _ := setup(t, gitlabtest.Options{}, gitlabtest.ProjectOptions{})
	post := gitlabtest.Match{Method: "POST", PathSuffix: "/pipeline"}
	srv.FailNext(post, 2, gitlabtest.TooManyRequests(1500*time.Millisecond))
	srv.FailNext(gitlabtest.Match{}, 1, gitlabtest.Unauthorized())

	// The GET passes the POST rule and meets the catch-all.
	_, _, err := c.Projects.GetProject(project, nil)
	if statusOf(err) != http.StatusUnauthorized || gitlabapi.Message(err) != "401 Unauthorized" {
		t.Fatalf("GET: %v", err)
	}
	opt := &gitlab.CreatePipelineOptions{Ref: gitlab.Ptr("main")}
	for i := range 2 {
		_, resp, err := c.Pipelines.CreatePipeline(project, opt)
		if statusOf(err) != http.StatusTooManyRequests {
			t.Fatalf("POST %d: %v", i, err)
		}
		h := resp.Header
		if h.Get("Retry-After") != "2" || h.Get("RateLimit-Remaining") != "0" || h.Get("Content-Type") != "text/plain" {
			t.Fatalf("429 headers: %v", h)
		}
	}
	if _, _, err := c.Pipelines.CreatePipeline(project, opt); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Pipelines()); n != 1 {
		t.Fatalf("%d pipelines, want 1", n)
	}
	if got := srv.Count(post, http.StatusTooManyRequests); got != 2 {
		t.Fatalf("Count(429) = %d", got)
	}
	srv.FailNext(gitlabtest.Match{}, 1, gitlabtest.BadGateway())
	_, _, err = c.Projects.GetProject(project, nil)
	if statusOf(err) != http.StatusBadGateway {
		t.Fatalf("502: %v", err)
	}
}

// A slow answer comes after its delay; a hanging one ends when the
// client gives up.
func TestSlowAndHangingAnswers(t *testing.T) {
	t.Parallel()
	srv, c, _ := setup(t, gitlabtest.Options{}, gitlabtest.ProjectOptions{})
	srv.FailNext(gitlabtest.Match{}, 1, gitlabtest.Slow(200*time.Millisecond))
	start := time.Now()
	if _, _, err := c.Projects.GetProject(project, nil); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Fatalf("answered after %v", took)
	}

	srv.FailNext(gitlabtest.Match{}, 1, gitlabtest.Hang())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := c.Projects.GetProject(project, nil, gitlab.WithContext(ctx))
		done <- err
	}()
	wait, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if err := srv.WaitFor(wait, func() bool { return srv.InFlight() == 1 }); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	case <-wait.Done():
		t.Fatal("the hanging request did not end with its context")
	}
	if err := srv.WaitFor(wait, func() bool { return srv.InFlight() == 0 }); err != nil {
		t.Fatal("the server still holds the request")
	}
	reqs := srv.Requests()
	if last := reqs[len(reqs)-1]; last.Status != 0 {
		t.Fatalf("the hanging request was answered: %+v", last)
	}
}

// A test left with a hanging request still ends: the server lets go of it.
func TestHangingRequestAtTheEnd(t *testing.T) {
	t.Parallel()
	srv, c, _ := setup(t, gitlabtest.Options{}, gitlabtest.ProjectOptions{})
	srv.FailNext(gitlabtest.Match{}, 1, gitlabtest.Hang())
	go func() { _, _, _ = c.Projects.GetProject(project, nil) }()
	wait, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if err := srv.WaitFor(wait, func() bool { return srv.InFlight() == 1 }); err != nil {
		t.Fatal(err)
	}
}

// WaitFor returns the context's cause when the condition never holds.
func TestWaitForEndsWithContext(t *testing.T) {
	t.Parallel()
	srv := gitlabtest.New(t, gitlabtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := srv.WaitFor(ctx, func() bool { return false }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}
