package gitlabtest_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/no8s/no8s-agent/gitlabapi"
	"github.com/no8s/no8s-agent/gitlabapi/gitlabtest"
)

// Merge requests list newest first, filtered by state and branches.
func TestListMergeRequests(t *testing.T) {
	t.Parallel()
	srv, c, id := setup(t, gitlabtest.Options{}, gitlabtest.ProjectOptions{})
	a := srv.AddMergeRequest(project, gitlabtest.MergeRequest{SourceBranch: "feat-a"})
	b := srv.AddMergeRequest(project, gitlabtest.MergeRequest{SourceBranch: "feat-b", TargetBranch: "release"})
	srv.AddMergeRequest(project, gitlabtest.MergeRequest{SourceBranch: "old", State: "merged"})
	if a.IID != 1 || b.IID != 2 || a.SHA != gitlabtest.SHA(project, "feat-a") || a.TargetBranch != "main" || a.State != "opened" {
		t.Fatalf("added %+v %+v", a, b)
	}
	list := func(opt *gitlab.ListProjectMergeRequestsOptions) string {
		t.Helper()
		mrs, _, err := c.MergeRequests.ListProjectMergeRequests(project, opt)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, mr := range mrs {
			out = append(out, fmt.Sprintf("!%d", mr.IID))
		}
		return strings.Join(out, " ")
	}
	tests := []struct {
		name string
		opt  *gitlab.ListProjectMergeRequestsOptions
		want string
	}{
		{"all", nil, "!3 !2 !1"},
		{"opened", &gitlab.ListProjectMergeRequestsOptions{State: gitlab.Ptr("opened")}, "!2 !1"},
		{"opened into main", &gitlab.ListProjectMergeRequestsOptions{State: gitlab.Ptr("opened"), TargetBranch: gitlab.Ptr("main")}, "!1"},
		{"merged", &gitlab.ListProjectMergeRequestsOptions{State: gitlab.Ptr("merged")}, "!3"},
		{"by source", &gitlab.ListProjectMergeRequestsOptions{SourceBranch: gitlab.Ptr("feat-b")}, "!2"},
		{"page 2 of 2", &gitlab.ListProjectMergeRequestsOptions{ListOptions: gitlab.ListOptions{Page: 2, PerPage: 2}}, "!1"},
	}
	for _, tt := range tests {
		if got := list(tt.opt); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
	mrs, _, err := c.MergeRequests.ListProjectMergeRequests(project, &gitlab.ListProjectMergeRequestsOptions{SourceBranch: gitlab.Ptr("feat-a")})
	if err != nil || len(mrs) != 1 {
		t.Fatal(mrs, err)
	}
	mr := mrs[0]
	if mr.SHA != a.SHA || mr.SourceBranch != "feat-a" || mr.TargetBranch != "main" || mr.ProjectID != id ||
		mr.WebURL != srv.URL+"/"+project+"/-/merge_requests/1" {
		t.Fatalf("mr = %+v", mr)
	}
	one, _, err := c.MergeRequests.GetMergeRequest(project, 2, nil)
	if err != nil || one.SourceBranch != "feat-b" {
		t.Fatalf("GetMergeRequest: %+v %v", one, err)
	}
}

// Notes: created as the token's user, listed in order with pagination,
// updated by their author only; too long a body is GitLab's 400.
func TestMergeRequestNotes(t *testing.T) {
	t.Parallel()
	srv := gitlabtest.New(t, gitlabtest.Options{})
	id := srv.AddProject(project, gitlabtest.ProjectOptions{Tokens: map[string]gitlabtest.Role{"glpat-rep": gitlabtest.Reporter}})
	c := client(t, srv, gitlabtest.DefaultToken)
	srv.AddMergeRequest(project, gitlabtest.MergeRequest{})
	reviewer := srv.AddNote(project, 1, "alice", "looks good", false)
	srv.AddNote(project, 1, "no8s-bot", "added 1 commit", true)
	for i := range 4 {
		n, resp, err := c.Notes.CreateMergeRequestNote(project, 1, &gitlab.CreateMergeRequestNoteOptions{Body: gitlab.Ptr(fmt.Sprintf("note %d", i))})
		if err != nil || resp.StatusCode != http.StatusCreated || n.Author.Username != gitlabtest.DefaultUser ||
			n.NoteableIID != 1 || n.NoteableType != "MergeRequest" || n.ProjectID != id || n.System {
			t.Fatalf("create: %+v %v", n, err)
		}
	}
	var bodies []string
	var mine *gitlab.Note
	opt := &gitlab.ListMergeRequestNotesOptions{ListOptions: gitlab.ListOptions{PerPage: 4}, Sort: gitlab.Ptr("asc")}
	for pages := 1; ; pages++ {
		notes, resp, err := c.Notes.ListMergeRequestNotes(project, 1, opt)
		if err != nil {
			t.Fatal(err)
		}
		if resp.TotalItems != 6 || pages > 2 {
			t.Fatalf("page %d: X-Total %d", pages, resp.TotalItems)
		}
		for _, n := range notes {
			bodies = append(bodies, n.Body)
			if n.Body == "note 2" {
				mine = n
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opt.Page = resp.NextPage
	}
	if got := strings.Join(bodies, "|"); got != "looks good|added 1 commit|note 0|note 1|note 2|note 3" {
		t.Fatalf("notes asc: %s", got)
	}
	desc, _, err := c.Notes.ListMergeRequestNotes(project, 1, nil)
	if err != nil || len(desc) != 6 || desc[0].Body != "note 3" || !desc[4].System || desc[5].Body != "looks good" {
		t.Fatalf("notes by default (desc): %v %v", desc, err)
	}

	upd, _, err := c.Notes.UpdateMergeRequestNote(project, 1, mine.ID, &gitlab.UpdateMergeRequestNoteOptions{Body: gitlab.Ptr("note 2, edited")})
	if err != nil || upd.Body != "note 2, edited" || upd.ID != mine.ID {
		t.Fatalf("update: %+v %v", upd, err)
	}
	got := srv.Notes(project, 1)
	if got[4].Body != "note 2, edited" || got[4].Updates != 1 || got[0].Author != "alice" || !got[1].System {
		t.Fatalf("Notes = %+v", got)
	}

	refusals := []struct {
		name   string
		token  string
		noteID int64
		body   string
		status int
		msg    string
	}{
		{"another's note", gitlabtest.DefaultToken, reviewer, "x", http.StatusForbidden, "403 Forbidden"},
		{"a reporter edits the bot's note", "glpat-rep", mine.ID, "x", http.StatusForbidden, "403 Forbidden"},
		{"too long", gitlabtest.DefaultToken, mine.ID, strings.Repeat("é", gitlabtest.MaxNoteLength+1), http.StatusBadRequest,
			`Note {:note=>["is too long (maximum is 1000000 characters)"]}`},
		{"empty", gitlabtest.DefaultToken, mine.ID, "", http.StatusBadRequest, "body is missing"},
		{"no such note", gitlabtest.DefaultToken, 1, "x", http.StatusNotFound, ""},
	}
	for _, tt := range refusals {
		_, _, err := client(t, srv, tt.token).Notes.UpdateMergeRequestNote(project, 1, tt.noteID, &gitlab.UpdateMergeRequestNoteOptions{Body: gitlab.Ptr(tt.body)})
		if statusOf(err) != tt.status || gitlabapi.Message(err) != tt.msg {
			t.Errorf("%s: %v (%q)", tt.name, err, gitlabapi.Message(err))
		}
	}
	// Exactly the limit is fine; a Reporter may comment.
	if _, _, err := c.Notes.CreateMergeRequestNote(project, 1, &gitlab.CreateMergeRequestNoteOptions{Body: gitlab.Ptr(strings.Repeat("é", gitlabtest.MaxNoteLength))}); err != nil {
		t.Fatalf("a note of the maximum length: %v", err)
	}
	if n, _, err := client(t, srv, "glpat-rep").Notes.CreateMergeRequestNote(project, 1, &gitlab.CreateMergeRequestNoteOptions{Body: gitlab.Ptr("hi")}); err != nil || !strings.HasPrefix(n.Author.Username, "project_") {
		t.Fatalf("reporter comments: %+v %v", n, err)
	}
	if _, _, err := c.Notes.ListMergeRequestNotes(project, 9, nil); statusOf(err) != http.StatusNotFound {
		t.Fatalf("notes of no merge request: %v", err)
	}
}

// GET /user names the token's user: the agent tells its own notes from
// others' by it. A project token's user is the project's bot.
func TestCurrentUser(t *testing.T) {
	t.Parallel()
	srv, c, _ := setup(t, gitlabtest.Options{}, gitlabtest.ProjectOptions{Tokens: map[string]gitlabtest.Role{"glpat-project": gitlabtest.Developer}})
	u, _, err := c.Users.CurrentUser()
	if err != nil || u.Username != gitlabtest.DefaultUser {
		t.Fatalf("user = %+v, %v", u, err)
	}
	pu, _, err := client(t, srv, "glpat-project").Users.CurrentUser()
	if err != nil || !strings.HasPrefix(pu.Username, "project_") || !strings.Contains(pu.Username, "_bot_") {
		t.Fatalf("project token's user = %+v, %v", pu, err)
	}
	if _, _, err := client(t, srv, "glpat-unknown").Users.CurrentUser(); statusOf(err) != http.StatusUnauthorized {
		t.Fatalf("unknown token: %v", err)
	}
}

// UpdateMergeRequest plays a push to a merge request and its closing.
func TestUpdateMergeRequest(t *testing.T) {
	t.Parallel()
	srv, c, _ := setup(t, gitlabtest.Options{}, gitlabtest.ProjectOptions{})
	mr := srv.AddMergeRequest(project, gitlabtest.MergeRequest{SourceBranch: "feat"})
	pushed := srv.UpdateMergeRequest(project, mr.IID, func(m *gitlabtest.MergeRequest) { m.SHA = "0123456789abcdef0123456789abcdef01234567"; m.IID = 99 })
	if pushed.IID != mr.IID || pushed.ID != mr.ID || pushed.SHA != "0123456789abcdef0123456789abcdef01234567" {
		t.Fatalf("pushed = %+v", pushed)
	}
	got, _, err := c.MergeRequests.GetMergeRequest(project, mr.IID, nil)
	if err != nil || got.SHA != pushed.SHA {
		t.Fatalf("merge request = %+v, %v", got, err)
	}
	srv.UpdateMergeRequest(project, mr.IID, func(m *gitlabtest.MergeRequest) { m.State = "closed" })
	open, _, err := c.MergeRequests.ListProjectMergeRequests(project, &gitlab.ListProjectMergeRequestsOptions{State: gitlab.Ptr("opened")})
	if err != nil || len(open) != 0 {
		t.Fatalf("open = %v, %v", open, err)
	}
}
