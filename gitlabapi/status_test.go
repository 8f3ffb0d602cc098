package gitlabapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/no8s/no8s-agent/gitlabapi"
	"github.com/no8s/no8s-agent/gitlabapi/gitlabtest"
)

func statusOpt(state gitlab.BuildStateValue, desc string) gitlab.SetCommitStatusOptions {
	return gitlab.SetCommitStatusOptions{State: state, Name: gitlab.Ptr("no8s/plan"), Description: gitlab.Ptr(desc)}
}

func history(srv *gitlabtest.Server, sha string) string {
	var b strings.Builder
	for _, st := range srv.Statuses("g/sub/p.x", sha) {
		fmt.Fprintf(&b, "%s %q x%d|", st.Status, st.Description, st.Updates)
	}
	return b.String()
}

// A status is moved, not doubled: running then success is one record, and
// posting what the status already says posts nothing.
func TestSetStatus(t *testing.T) {
	t.Parallel()
	srv, c := newServer(t)
	ctx := context.Background()
	sha := gitlabtest.SHA("g/sub/p.x", "feature")
	posts := func() int { return srv.Count(gitlabtest.Match{Method: "POST", PathSuffix: "/statuses/" + sha}, 0) }
	steps := []struct {
		state     gitlab.BuildStateValue
		desc      string
		wantPosts int
		want      string
	}{
		{gitlab.Running, "previewing", 1, `running "previewing" x1|`},
		{gitlab.Running, "previewing", 1, `running "previewing" x1|`},
		// running again with another description: GitLab refuses the
		// transition, which counts as done.
		{gitlab.Running, "previewing again", 2, `running "previewing" x1|`},
		{gitlab.Success, "no changes", 3, `success "no changes" x2|`},
		{gitlab.Success, "no changes", 3, `success "no changes" x2|`},
		{gitlab.Failed, "refused", 4, `success "no changes" x2|failed "refused" x1|`},
		// Running over a finished status is a step back GitLab would
		// record as a new status: not posted.
		{gitlab.Running, "previewing", 4, `success "no changes" x2|failed "refused" x1|`},
		{gitlab.Success, "fixed", 5, `success "no changes" x2|failed "refused" x1|success "fixed" x1|`},
	}
	for i, s := range steps {
		if err := gitlabapi.SetStatus(ctx, c, fast, "g/sub/p.x", sha, statusOpt(s.state, s.desc)); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if n := posts(); n != s.wantPosts {
			t.Fatalf("step %d: %d posts, want %d", i, n, s.wantPosts)
		}
		if got := history(srv, sha); got != s.want {
			t.Fatalf("step %d: statuses %s, want %s", i, got, s.want)
		}
	}
	if err := gitlabapi.SetStatus(ctx, c, fast, "g/sub/p.x", sha, gitlab.SetCommitStatusOptions{State: gitlab.Running}); err == nil {
		t.Fatal("a status without a name was posted")
	}
}

// A post that meets a server error may have been stored: the status is
// looked up again before another try, so that a success is not doubled.
func TestSetStatusAfterServerError(t *testing.T) {
	t.Parallel()
	srv, c := newServer(t)
	ctx := context.Background()
	sha := gitlabtest.SHA("g/sub/p.x", "feature")
	if err := gitlabapi.SetStatus(ctx, c, fast, "g/sub/p.x", sha, statusOpt(gitlab.Running, "previewing")); err != nil {
		t.Fatal(err)
	}
	// The success is stored, and the answer lost in a 502 from the front
	// end: play it by posting it, then failing the next post.
	if _, _, err := c.Commits.SetCommitStatus("g/sub/p.x", sha, gitlab.Ptr(statusOpt(gitlab.Success, "no changes"))); err != nil {
		t.Fatal(err)
	}
	srv.FailNext(gitlabtest.Match{Method: "POST", PathSuffix: "/statuses/" + sha}, 1, gitlabtest.BadGateway())
	if err := gitlabapi.SetStatus(ctx, c, fast, "g/sub/p.x", sha, statusOpt(gitlab.Failed, "refused")); err != nil {
		t.Fatal(err)
	}
	if got := history(srv, sha); got != `success "no changes" x2|failed "refused" x1|` {
		t.Fatalf("statuses %s", got)
	}
	// A success met by a 502 that was not stored is posted again.
	other := gitlabtest.SHA("g/sub/p.x", "other")
	srv.FailNext(gitlabtest.Match{Method: "POST", PathSuffix: "/statuses/" + other}, 2, gitlabtest.BadGateway())
	if err := gitlabapi.SetStatus(ctx, c, fast, "g/sub/p.x", other, statusOpt(gitlab.Success, "ok")); err != nil {
		t.Fatal(err)
	}
	if got := history(srv, other); got != `success "ok" x1|` {
		t.Fatalf("statuses %s", got)
	}
	if n := srv.Count(gitlabtest.Match{Method: "POST", PathSuffix: "/statuses/" + other}, http.StatusBadGateway); n != 2 {
		t.Fatalf("%d 502s", n)
	}
	// Server errors without end give up.
	r := fast
	r.ServerErrors = 2
	srv.FailNext(gitlabtest.Match{Method: "POST"}, 10, gitlabtest.BadGateway())
	err := gitlabapi.SetStatus(ctx, c, r, "g/sub/p.x", other, statusOpt(gitlab.Failed, "x"))
	if !gitlab.HasStatusCode(err, http.StatusBadGateway) {
		t.Fatalf("err = %v, want the 502", err)
	}
	if n := srv.Count(gitlabtest.Match{Method: "POST", PathSuffix: "/statuses/" + other}, http.StatusBadGateway); n != 2+3 {
		t.Fatalf("%d 502s, want 5", n)
	}
}

// A token that may not set statuses is a configuration error.
func TestSetStatusForbidden(t *testing.T) {
	t.Parallel()
	srv := gitlabtest.New(t, gitlabtest.Options{})
	srv.AddProject("g/p", gitlabtest.ProjectOptions{Tokens: map[string]gitlabtest.Role{"glpat-reporter": gitlabtest.Reporter}})
	c, err := gitlabapi.NewClient(srv.URL, "glpat-reporter")
	if err != nil {
		t.Fatal(err)
	}
	err = gitlabapi.SetStatus(context.Background(), c, fast, "g/p", gitlabtest.SHA("g/p", "x"), statusOpt(gitlab.Running, "x"))
	if !gitlabapi.IsConfig(err) || !strings.Contains(err.Error(), "Developer") {
		t.Fatalf("err = %v, want a configuration error asking for Developer", err)
	}
}

// GitHub's commit states in GitLab's words.
func TestCommitState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		state, desc string
		want        gitlab.BuildStateValue
		wantDesc    string
	}{
		{gitlabapi.StatePending, "previewing", gitlab.Running, "previewing"},
		{gitlabapi.StateSuccess, "2 ready", gitlab.Success, "2 ready"},
		{gitlabapi.StateFailure, "1 failed", gitlab.Failed, "1 failed"},
		{gitlabapi.StateError, "no answer", gitlab.Failed, "error: no answer"},
		{"odd", "x", gitlab.Failed, "odd: x"},
	}
	for _, tt := range tests {
		if got, desc := gitlabapi.CommitState(tt.state, tt.desc); got != tt.want || desc != tt.wantDesc {
			t.Errorf("CommitState(%q, %q) = %q, %q; want %q, %q", tt.state, tt.desc, got, desc, tt.want, tt.wantDesc)
		}
	}
}
