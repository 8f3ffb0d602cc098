package preview_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/gitlabapi"
	"github.com/no8s/no8s-agent/gitlabapi/gitlabtest"
	"github.com/no8s/no8s-agent/preview"
	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/source/git"
)

const (
	glToken   = "glpat-previewT0ken"
	glProject = "acme/infra"
	glURL     = "https://gitlab.example.com/acme/infra.git"
)

// glFixture is fixture with its pull requests on a fake GitLab: merge
// requests whose heads are refs/merge-requests/<IID>/head of the
// repository.
type glFixture struct {
	*fixture
	gl   *gitlabtest.Server
	host *preview.GitLab
	mrs  map[int]bool
}

func newGitLabFixture(t *testing.T, maxDeletes int) *glFixture {
	t.Helper()
	f := &glFixture{fixture: newFixture(t, maxDeletes), mrs: map[int]bool{}}
	f.gl = gitlabtest.New(t, gitlabtest.Options{Token: glToken})
	f.gl.AddProject(glProject, gitlabtest.ProjectOptions{})
	f.host = f.newHost()
	cache := t.TempDir()
	f.src.Host = f.host
	f.src.DashboardURL = "https://no8s.example.com/"
	f.src.Fetch = func(ctx context.Context, n int) (*source.Snapshot, error) {
		s, err := git.New(git.Config{Name: "infra", URL: f.repo.URL(), CacheDir: cache, Ref: git.Ref{MergeRequest: n}})
		if err != nil {
			return nil, err
		}
		return s.Fetch(ctx)
	}
	f.p = preview.New(preview.Options{Store: f.st, Syncer: f.syncer, Actions: actions{}, Sources: []*preview.Source{f.src}})
	return f
}

// newHost is a GitLab host of the project, as a new agent has.
func (f *glFixture) newHost() *preview.GitLab {
	f.t.Helper()
	client, err := gitlabapi.NewClient(f.gl.URL, glToken)
	if err != nil {
		f.t.Fatal(err)
	}
	return &preview.GitLab{Client: client, Project: glProject,
		Retry: gitlabapi.Retrier{Backoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}}
}

// push makes merge request iid's head a commit on top of main with files
// changed, as GitLab's refs/merge-requests/<IID>/head, and opens the merge
// request the first time.
func (f *glFixture) push(iid int, files map[string]string) string {
	f.t.Helper()
	sha := f.repo.MergeRequest(iid, f.repo.Head(), files, fmt.Sprintf("change %d", iid))
	if f.mrs[iid] {
		f.gl.UpdateMergeRequest(glProject, int64(iid), func(mr *gitlabtest.MergeRequest) { mr.SHA = sha })
	} else {
		f.gl.AddMergeRequest(glProject, gitlabtest.MergeRequest{IID: int64(iid), SHA: sha, TargetBranch: "main"})
		f.mrs[iid] = true
	}
	return sha
}

// mine returns the merge request's notes the agent wrote, failing unless
// there is exactly one.
func (f *glFixture) mine(iid int) gitlabtest.Note {
	f.t.Helper()
	var out []gitlabtest.Note
	for _, n := range f.gl.Notes(glProject, int64(iid)) {
		if n.Author == gitlabtest.DefaultUser {
			out = append(out, n)
		}
	}
	if len(out) != 1 {
		f.t.Fatalf("%d notes of the agent on !%d, want exactly one: %+v", len(out), iid, f.gl.Notes(glProject, int64(iid)))
	}
	return out[0]
}

// statuses lists the no8s/plan statuses on sha as "state description xN".
func (f *glFixture) statuses(sha string) string {
	var out []string
	for _, s := range f.gl.Statuses(glProject, sha) {
		if s.Name != preview.StatusContext {
			f.t.Errorf("status %q on %s", s.Name, sha)
		}
		out = append(out, fmt.Sprintf("%s %q x%d", s.Status, s.Description, s.Updates))
	}
	return strings.Join(out, " | ")
}

// postedStates lists the states posted on sha, in order.
func (f *glFixture) postedStates(sha string) string {
	var out []string
	for _, r := range f.gl.Requests() {
		if r.Method == "POST" && strings.HasSuffix(r.Path, "/statuses/"+sha) {
			for _, st := range []string{"running", "success", "failed"} {
				if strings.Contains(r.Body, `"state":"`+st+`"`) {
					out = append(out, st)
				}
			}
		}
	}
	return strings.Join(out, " ")
}

// noToken checks that the token shows in no note or status.
func (f *glFixture) noToken(iids []int, shas ...string) {
	f.t.Helper()
	for _, iid := range iids {
		for _, n := range f.gl.Notes(glProject, int64(iid)) {
			if strings.Contains(n.Body, glToken) {
				f.t.Errorf("note %d shows the token", n.ID)
			}
		}
	}
	for _, sha := range shas {
		if strings.Contains(f.statuses(sha), glToken) {
			f.t.Errorf("a status on %s shows the token", sha)
		}
	}
}

// TestGitLabMergeRequest previews a merge request, then a push to it: the
// no8s/plan status on each head goes running, then success; the one note
// is edited in place, never doubled; a marked note another user wrote is
// left alone; a refused change fails its status.
func TestGitLabMergeRequest(t *testing.T) {
	t.Parallel()
	f := newGitLabFixture(t, 1)
	before := f.dump()
	sha := f.push(1, map[string]string{"dbs/a.yaml": db("a", 150), "dbs/d.yaml": db("d", 50)})
	// A note that starts with the marker, by someone else: GitLab would
	// refuse to let the agent edit it.
	marker := "<!-- no8s-preview source=infra -->"
	copied := f.gl.AddNote(glProject, 1, "mallory", marker+"\nNothing to see.", false)
	f.gl.AddNote(glProject, 1, "", "added 1 commit", true)
	if err := f.p.Preview(t.Context(), f.src, preview.Pull{Number: 1, HeadSHA: sha, BaseRef: "main"}); err != nil {
		t.Fatalf("Preview: %v", err)
	}
	if got := f.postedStates(sha); got != "running success" {
		t.Errorf("states posted on the head: %s, want running success", got)
	}
	if got, want := f.statuses(sha), `success "1 created, 1 updated, 0 deleted, 0 forgotten, 2 unchanged" x2`; got != want {
		t.Errorf("statuses = %s, want %s", got, want)
	}
	n := f.mine(1)
	for _, want := range []string{marker, "Merge request !1 at `" + sha[:12] + "`, against `main`.", "| create | Database/d | dbs/d.yaml:1 | 1 |",
		"`storage_gb: 100 → 150`", "~ disk of d to 50 GB"} {
		if !strings.Contains(n.Body, want) {
			t.Errorf("note lacks %q:\n%s", want, n.Body)
		}
	}

	// A second push: the same note, edited; a status on the new head.
	f.gl.AddNote(glProject, 1, "reviewer", "looks good", false)
	sha2 := f.push(1, map[string]string{"dbs/a.yaml": db("a", 175)})
	if err := f.p.Preview(t.Context(), f.src, preview.Pull{Number: 1, HeadSHA: sha2, BaseRef: "main"}); err != nil {
		t.Fatalf("Preview: %v", err)
	}
	n2 := f.mine(1)
	if n2.ID != n.ID || n2.Updates != 1 || !strings.Contains(n2.Body, "`storage_gb: 100 → 175`") || strings.Contains(n2.Body, "Database/d") {
		t.Errorf("after the second push: %+v, want note %d edited once", n2, n.ID)
	}
	if got := f.statuses(sha2); !strings.HasPrefix(got, `success "0 created, 1 updated`) {
		t.Errorf("statuses on the second head = %s", got)
	}
	// The same head again changes nothing on GitLab.
	posts := len(f.gl.Requests())
	if err := f.p.Preview(t.Context(), f.src, preview.Pull{Number: 1, HeadSHA: sha2, BaseRef: "main"}); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.gl.Requests()[posts:] {
		if r.Method != "GET" {
			t.Errorf("previewing an unchanged head sent %s %s", r.Method, r.Path)
		}
	}
	for _, other := range f.gl.Notes(glProject, 1) {
		if other.ID == copied && (other.Updates != 0 || other.Body != marker+"\nNothing to see.") {
			t.Errorf("the other user's marked note was edited: %+v", other)
		}
	}
	if got := len(f.gl.Notes(glProject, 1)); got != 4 {
		t.Errorf("%d notes, want the copied one, the system one, the review and the preview", got)
	}

	// A change the sync refuses.
	bad := f.push(2, map[string]string{"dbs/b.yaml": "", "dbs/c.yaml": ""})
	if err := f.p.Preview(t.Context(), f.src, preview.Pull{Number: 2, HeadSHA: bad, BaseRef: "main"}); err != nil {
		t.Fatal(err)
	}
	if got := f.statuses(bad); !strings.HasPrefix(got, `failed "PruneLimitExceeded`) || !strings.HasSuffix(got, "x2") {
		t.Errorf("statuses of the refused change = %s", got)
	}
	if n := f.mine(2); !strings.Contains(n.Body, "PruneLimitExceeded") || !strings.Contains(n.Body, "| delete | Database/b |") {
		t.Errorf("note of the refused change:\n%s", n.Body)
	}
	f.noToken([]int{1, 2}, sha, sha2, bad)
	if after := f.dump(); after != before {
		t.Errorf("a preview changed the store:\nbefore %s\nafter  %s", before, after)
	}
}

// bigPlanner plans with an output longer than a GitLab note may be.
type bigPlanner struct{ planner }

func (bigPlanner) Plan(context.Context, *action.Request) (*action.Plan, error) {
	return &action.Plan{Changes: true, Summary: "much to change", Output: strings.Repeat("~ a line of the plan\n", 60_000)}, nil
}

type bigActions struct{}

func (bigActions) Get(name string) (action.Instance, bool) {
	return action.Instance{Name: name, Plugin: "test", Action: bigPlanner{}}, name == "provision"
}

// A preview longer than a note is cut to GitLab's limit and points to the
// dashboard.
func TestGitLabPreviewTooLong(t *testing.T) {
	t.Parallel()
	f := newGitLabFixture(t, 5)
	f.p = preview.New(preview.Options{Store: f.st, Syncer: f.syncer, Actions: bigActions{}, Sources: []*preview.Source{f.src}})
	sha := f.push(3, map[string]string{"dbs/a.yaml": db("a", 150)})
	if err := f.p.Preview(t.Context(), f.src, preview.Pull{Number: 3, HeadSHA: sha, BaseRef: "main"}); err != nil {
		t.Fatalf("Preview: %v", err)
	}
	n := f.mine(3)
	if len(n.Body) > gitlabtest.MaxNoteLength || len(n.Body) < gitlabtest.MaxNoteLength-1000 {
		t.Errorf("note of %d bytes, want just under %d", len(n.Body), gitlabtest.MaxNoteLength)
	}
	if !strings.HasSuffix(n.Body, "shows all of it, and so does the [dashboard](https://no8s.example.com/sources/infra).*") {
		t.Errorf("the note ends %q", n.Body[len(n.Body)-200:])
	}
	if got := f.statuses(sha); !strings.HasPrefix(got, "success") {
		t.Errorf("statuses = %s", got)
	}
}

// An agent killed mid-preview leaves no8s/plan running; the next agent's
// preview moves that status to its outcome, without a second one.
func TestGitLabStatusLeftRunning(t *testing.T) {
	t.Parallel()
	f := newGitLabFixture(t, 5)
	f.src.Interval = time.Hour
	sha := f.push(4, map[string]string{"dbs/a.yaml": db("a", 150)})
	fetch := f.src.Fetch
	stuck := *f.src
	stuck.Fetch = func(ctx context.Context, _ int) (*source.Snapshot, error) {
		<-ctx.Done() // killed while cloning
		return nil, ctx.Err()
	}
	killed := preview.New(preview.Options{Store: f.st, Syncer: f.syncer, Actions: actions{}, Sources: []*preview.Source{&stuck}})
	ctx, kill := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); killed.Run(ctx) }()
	waitFor(t, "the running status", func() bool { return strings.HasPrefix(f.statuses(sha), "running") }, func() string { return f.statuses(sha) })
	kill()
	<-done
	if got := f.statuses(sha); got != `running "previewing" x1` {
		t.Fatalf("statuses after the kill = %s", got)
	}

	// The next agent: a new host and Previewer, finding the merge request
	// by listing the open ones.
	next := *f.src
	next.Host, next.Fetch = f.newHost(), fetch
	f.src = &next
	f.p = preview.New(preview.Options{Store: f.st, Syncer: f.syncer, Actions: actions{}, Sources: []*preview.Source{&next}})
	f.run()
	waitFor(t, "the outcome", func() bool { return strings.HasPrefix(f.statuses(sha), "success") }, func() string { return f.statuses(sha) })
	if got := f.statuses(sha); got != `success "0 created, 1 updated, 0 deleted, 0 forgotten, 2 unchanged" x2` {
		t.Errorf("statuses = %s, want the running one moved to success", got)
	}
	if got := f.postedStates(sha); got != "running success" {
		t.Errorf("states posted: %s, want running once, then success", got)
	}
	f.mine(4)
}

// mergeEvent is a Merge Request Hook of project (group/name) on
// gitlab.example.com.
func mergeEvent(project, action, state, target string, iid int, head, oldrev string) *gitlab.MergeEvent {
	return &gitlab.MergeEvent{ObjectKind: "merge_request",
		Project: gitlab.MergeEventProject{GitHTTPURL: "https://gitlab.example.com/" + project + ".git",
			GitSSHURL: "git@gitlab.example.com:" + project + ".git", PathWithNamespace: project},
		ObjectAttributes: gitlab.MergeEventObjectAttributes{IID: int64(iid), Action: action, State: state, TargetBranch: target,
			SourceBranch: fmt.Sprintf("feature-%d", iid), OldRev: oldrev, LastCommit: gitlab.EventMergeRequestLastCommit{ID: head}}}
}

// TestGitLabMergeRequestEvents runs the Previewer: a merge request found
// by listing is previewed; a Merge Request Hook with new commits previews
// the push at once, editing the note; hooks for other projects, other
// target branches and updates without new commits preview nothing.
func TestGitLabMergeRequestEvents(t *testing.T) {
	t.Parallel()
	f := newGitLabFixture(t, 5)
	f.src.Interval = time.Hour // only the listing at start
	f.src.Target.URL = glURL   // as the webhook names it; fetches use the local repository
	sha := f.push(5, map[string]string{"dbs/a.yaml": db("a", 120)})
	f.run()
	waitFor(t, "the listed merge request's status", func() bool { return strings.HasPrefix(f.statuses(sha), "success") },
		func() string { return f.statuses(sha) })
	first := f.mine(5)

	sha2 := f.push(5, map[string]string{"dbs/a.yaml": db("a", 130)})
	if err := f.p.OnMergeRequest(t.Context(), mergeEvent(glProject, "update", "opened", "main", 5, sha2, sha)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pushed head's status", func() bool { return strings.HasPrefix(f.statuses(sha2), "success") },
		func() string { return f.statuses(sha2) })
	if n := f.mine(5); n.ID != first.ID || n.Updates != 1 || !strings.Contains(n.Body, "100 → 130") {
		t.Errorf("note after the hook: %+v", n)
	}

	// Ignored: no new commits, another project, another target branch.
	// Previews go in number order, so once !6's is done, any of !5 queued
	// before it would be too.
	sha3 := f.push(5, map[string]string{"dbs/a.yaml": db("a", 140)})
	for _, ev := range []*gitlab.MergeEvent{
		mergeEvent(glProject, "update", "opened", "main", 5, sha3, ""),
		mergeEvent("acme/other", "update", "opened", "main", 5, sha3, sha2),
		mergeEvent(glProject, "open", "opened", "release", 5, sha3, ""),
		mergeEvent(glProject, "approved", "opened", "main", 5, sha3, ""),
	} {
		if err := f.p.OnMergeRequest(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
	}
	sha6 := f.push(6, map[string]string{"dbs/b.yaml": db("b", 260)})
	if err := f.p.OnMergeRequest(t.Context(), mergeEvent(glProject, "open", "opened", "main", 6, sha6, "")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the opened merge request's status", func() bool { return strings.HasPrefix(f.statuses(sha6), "success") },
		func() string { return f.statuses(sha6) })
	if got := f.statuses(sha3); got != "" {
		t.Errorf("ignored hooks previewed %s: %s", sha3, got)
	}
	if n := f.mine(5); n.Updates != 1 {
		t.Errorf("ignored hooks edited the note: %+v", n)
	}
	f.noToken([]int{5, 6}, sha, sha2, sha6)
}

// TestGitLabFailuresAreRetried injects server errors and rate limits into
// the calls a preview makes; it succeeds all the same, with one note and
// one status.
func TestGitLabFailuresAreRetried(t *testing.T) {
	t.Parallel()
	f := newGitLabFixture(t, 5)
	sha := f.push(7, map[string]string{"dbs/c.yaml": db("c", 400)})
	f.gl.FailNext(gitlabtest.Match{Method: "GET", PathSuffix: "/user"}, 1, gitlabtest.BadGateway())
	f.gl.FailNext(gitlabtest.Match{Method: "GET", PathSuffix: "/statuses"}, 1, gitlabtest.BadGateway())
	f.gl.FailNext(gitlabtest.Match{Method: "POST", PathSuffix: "/statuses/" + sha}, 2, gitlabtest.BadGateway())
	f.gl.FailNext(gitlabtest.Match{Method: "GET", PathSuffix: "/notes"}, 1, gitlabtest.TooManyRequests(0))
	f.gl.FailNext(gitlabtest.Match{Method: "POST", PathSuffix: "/notes"}, 1, gitlabtest.BadGateway())
	if err := f.p.Preview(t.Context(), f.src, preview.Pull{Number: 7, HeadSHA: sha}); err != nil {
		t.Fatalf("Preview: %v", err)
	}
	if got := f.statuses(sha); !strings.HasPrefix(got, "success") || strings.Contains(got, "|") {
		t.Errorf("statuses = %s, want one, success", got)
	}
	f.mine(7)
	if n := f.gl.Count(gitlabtest.Match{Method: "POST", PathSuffix: "/notes"}, 0); n != 2 {
		t.Errorf("%d note posts, want the failed one and one more", n)
	}
}

// A merge request that moved on between its hook and the fetch of its head
// is previewed at the head fetched: the outcome goes on the commit whose
// manifests were planned, never on the hook's commit, which was not.
func TestGitLabHeadMovedBeforeFetch(t *testing.T) {
	t.Parallel()
	f := newGitLabFixture(t, 1)
	hooked := f.push(8, map[string]string{"dbs/b.yaml": "", "dbs/c.yaml": ""}) // over the prune limit
	fetched := f.push(8, map[string]string{"dbs/a.yaml": db("a", 150)})
	if err := f.p.Preview(t.Context(), f.src, preview.Pull{Number: 8, HeadSHA: hooked, BaseRef: "main"}); err != nil {
		t.Fatalf("Preview: %v", err)
	}
	if got := f.statuses(fetched); !strings.HasPrefix(got, `success "0 created, 1 updated`) {
		t.Errorf("statuses on the commit fetched = %s, want its success", got)
	}
	if got := f.postedStates(hooked); strings.Contains(got, "success") || strings.Contains(got, "failed") && !strings.Contains(f.statuses(hooked), "superseded") {
		t.Errorf("states posted on the hook's commit, which was not previewed: %s (%s)", got, f.statuses(hooked))
	}
	if got := f.statuses(hooked); strings.HasPrefix(got, "running") {
		t.Errorf("the hook's commit is left %s", got)
	}
	if n := f.mine(8); !strings.Contains(n.Body, "at `"+fetched[:12]+"`") {
		t.Errorf("the note names another commit than the one planned:\n%s", n.Body)
	}
}

// A merge request flooded with notes before its first preview keeps one
// note of the agent's: the agent's note, beyond the pages of notes a
// preview searches, is edited on the next push, not written again.
func TestGitLabFloodOfNotes(t *testing.T) {
	t.Parallel()
	f := newGitLabFixture(t, 5)
	sha := f.push(9, map[string]string{"dbs/a.yaml": db("a", 150)})
	for i := range 3_100 {
		f.gl.AddNote(glProject, 9, "mallory", fmt.Sprintf("note %d", i), false)
	}
	if err := f.p.Preview(t.Context(), f.src, preview.Pull{Number: 9, HeadSHA: sha, BaseRef: "main"}); err != nil {
		t.Fatalf("Preview: %v", err)
	}
	first := f.mine(9)
	sha2 := f.push(9, map[string]string{"dbs/a.yaml": db("a", 160)})
	if err := f.p.Preview(t.Context(), f.src, preview.Pull{Number: 9, HeadSHA: sha2, BaseRef: "main"}); err != nil {
		t.Fatalf("Preview: %v", err)
	}
	if n := f.mine(9); n.ID != first.ID || !strings.Contains(n.Body, "100 → 160") {
		t.Errorf("after the second push: %+v, want note %d edited", n, first.ID)
	}
	// A maintainer deletes the note: the next push writes another.
	f.gl.DeleteNote(glProject, 9, first.ID)
	sha3 := f.push(9, map[string]string{"dbs/a.yaml": db("a", 170)})
	if err := f.p.Preview(t.Context(), f.src, preview.Pull{Number: 9, HeadSHA: sha3, BaseRef: "main"}); err != nil {
		t.Fatalf("Preview after the note was deleted: %v", err)
	}
	if n := f.mine(9); n.ID == first.ID || !strings.Contains(n.Body, "100 → 170") {
		t.Errorf("after the note was deleted: %+v, want a new one", n)
	}
}

// Whatever the body a Comment is given, no line of the note starts with
// a slash: GitLab would run it as a quick action with the agent's token.
func TestGitLabCommentRunsNoQuickActions(t *testing.T) {
	t.Parallel()
	f := newGitLabFixture(t, 5)
	f.push(10, map[string]string{"dbs/a.yaml": db("a", 150)})
	marker := "<!-- no8s-preview source=infra -->"
	for _, body := range []string{
		marker + "\n/approve\nok",
		marker + "\n````\n```\n/merge\n````\n",
		marker + "\nx\r/close\r\n/label ~a\r\n",
	} {
		if err := f.host.Comment(t.Context(), 10, marker, body); err != nil {
			t.Fatal(err)
		}
		n := f.mine(10)
		if got := f.gl.QuickActions(glProject, 10); len(got) > 0 || commandLine.MatchString(n.Body) {
			t.Errorf("%q ran %q, leaving %q", body, got, n.Body)
		}
		if !strings.Contains(n.Body, " /") {
			t.Errorf("the note lost the text: %q", n.Body)
		}
	}
}
