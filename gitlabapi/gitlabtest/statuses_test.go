package gitlabtest_test

import (
	"net/http"
	"strings"
	"testing"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/no8s/no8s-agent/gitlabapi"
	"github.com/no8s/no8s-agent/gitlabapi/gitlabtest"
)

// Commit statuses follow GitLab's state machine: a pending or running
// status of the same name and ref moves on; the same state again is a 400;
// after a terminal state a new status is created.
func TestCommitStatusStateMachine(t *testing.T) {
	t.Parallel()
	type post struct {
		state   gitlab.BuildStateValue
		name    string
		ref     string
		wantErr string // GitLab's message, or "" for 201
	}
	tests := []struct {
		name        string
		posts       []post
		wantRecords []string // status of each record, oldest first
	}{
		{"pending running success", []post{{state: gitlab.Pending}, {state: gitlab.Running}, {state: gitlab.Success}}, []string{"success"}},
		{"running twice", []post{{state: gitlab.Running}, {state: gitlab.Running, wantErr: "Cannot transition status via :run from :running"}}, []string{"running"}},
		{"pending twice", []post{{state: gitlab.Pending}, {state: gitlab.Pending, wantErr: "Cannot transition status via :enqueue from :pending"}}, []string{"pending"}},
		{"running then pending", []post{{state: gitlab.Running}, {state: gitlab.Pending, wantErr: "Cannot transition status via :enqueue from :running"}}, []string{"running"}},
		{"success then running", []post{{state: gitlab.Success}, {state: gitlab.Running}}, []string{"success", "running"}},
		{"success twice", []post{{state: gitlab.Success}, {state: gitlab.Success}}, []string{"success", "success"}},
		{"failed then pending", []post{{state: gitlab.Failed}, {state: gitlab.Pending}, {state: gitlab.Canceled}}, []string{"failed", "canceled"}},
		{"names apart", []post{{state: gitlab.Running, name: "a"}, {state: gitlab.Running, name: "b"}}, []string{"running", "running"}},
		{"refs apart", []post{{state: gitlab.Running, ref: "main"}, {state: gitlab.Running, ref: "feature"}}, []string{"running", "running"}},
		{"skipped", []post{{state: gitlab.Pending}, {state: gitlab.Skipped}}, []string{"skipped"}},
		{"invalid state", []post{{state: gitlab.Manual, wantErr: "state does not have a valid value"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, c, _ := setup(t, gitlabtest.Options{}, gitlabtest.ProjectOptions{})
			sha := gitlabtest.SHA(project, "feature")
			for i, p := range tt.posts {
				opt := &gitlab.SetCommitStatusOptions{State: p.state, Name: gitlab.Ptr(p.name),
					TargetURL: gitlab.Ptr("https://no8s.example/runs/1"), Description: gitlab.Ptr("plan")}
				if p.name == "" {
					opt.Name = gitlab.Ptr("no8s/plan")
				}
				if p.ref != "" {
					opt.Ref = gitlab.Ptr(p.ref)
				}
				st, resp, err := c.Commits.SetCommitStatus(project, sha, opt)
				if p.wantErr != "" {
					if statusOf(err) != http.StatusBadRequest || gitlabapi.Message(err) != p.wantErr {
						t.Fatalf("post %d: %v, want 400 %q", i, err, p.wantErr)
					}
					continue
				}
				if err != nil || resp.StatusCode != http.StatusCreated || st.Status != string(p.state) || st.SHA != sha ||
					st.TargetURL != "https://no8s.example/runs/1" || st.Author.Username != gitlabtest.DefaultUser {
					t.Fatalf("post %d: %+v %v", i, st, err)
				}
			}
			var got []string
			for _, r := range srv.Statuses(project, sha) {
				got = append(got, r.Status)
			}
			if strings.Join(got, ",") != strings.Join(tt.wantRecords, ",") {
				t.Fatalf("records %v, want %v", got, tt.wantRecords)
			}
		})
	}
}

// Listing statuses filters by name and ref, shows the latest per name and
// ref unless all=true, and paginates.
func TestListCommitStatuses(t *testing.T) {
	t.Parallel()
	srv, c, _ := setup(t, gitlabtest.Options{}, gitlabtest.ProjectOptions{})
	sha := gitlabtest.SHA(project, "main")
	set := func(name string, state gitlab.BuildStateValue, ref string) {
		t.Helper()
		if _, _, err := c.Commits.SetCommitStatus(project, sha, &gitlab.SetCommitStatusOptions{State: state, Name: gitlab.Ptr(name), Ref: gitlab.Ptr(ref)}); err != nil {
			t.Fatal(err)
		}
	}
	set("no8s/plan", gitlab.Success, "main")
	set("no8s/plan", gitlab.Failed, "main") // a new record: the first is not the latest
	set("no8s/apply", gitlab.Running, "main")
	set("no8s/plan", gitlab.Success, "feature")
	list := func(opt *gitlab.GetCommitStatusesOptions) []string {
		t.Helper()
		got, _, err := c.Commits.GetCommitStatuses(project, sha, opt)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range got {
			out = append(out, s.Name+"@"+s.Ref+"="+s.Status)
		}
		return out
	}
	tests := []struct {
		name string
		opt  *gitlab.GetCommitStatusesOptions
		want string
	}{
		{"latest", nil, "no8s/plan@main=failed no8s/apply@main=running no8s/plan@feature=success"},
		{"all", &gitlab.GetCommitStatusesOptions{All: gitlab.Ptr(true)}, "no8s/plan@main=success no8s/plan@main=failed no8s/apply@main=running no8s/plan@feature=success"},
		{"by name", &gitlab.GetCommitStatusesOptions{Name: gitlab.Ptr("no8s/plan")}, "no8s/plan@main=failed no8s/plan@feature=success"},
		{"by name and ref", &gitlab.GetCommitStatusesOptions{Name: gitlab.Ptr("no8s/plan"), Ref: gitlab.Ptr("feature")}, "no8s/plan@feature=success"},
		{"page 2", &gitlab.GetCommitStatusesOptions{ListOptions: gitlab.ListOptions{Page: 2, PerPage: 2}}, "no8s/plan@feature=success"},
	}
	for _, tt := range tests {
		if got := strings.Join(list(tt.opt), " "); got != tt.want {
			t.Errorf("%s: %s\nwant %s", tt.name, got, tt.want)
		}
	}
	if got := list(&gitlab.GetCommitStatusesOptions{}); len(got) != 3 {
		t.Fatalf("%v", got)
	}
	if got := srv.Statuses(project, sha); len(got) != 4 || got[0].Updates != 1 || got[1].Author != gitlabtest.DefaultUser {
		t.Fatalf("Statuses = %+v", got)
	}
}

// Setting a status needs the Developer role.
func TestCommitStatusNeedsDeveloper(t *testing.T) {
	t.Parallel()
	srv := gitlabtest.New(t, gitlabtest.Options{})
	srv.AddProject(project, gitlabtest.ProjectOptions{Tokens: map[string]gitlabtest.Role{"glpat-rep": gitlabtest.Reporter, "glpat-dev": gitlabtest.Developer}})
	sha := gitlabtest.SHA(project, "main")
	opt := &gitlab.SetCommitStatusOptions{State: gitlab.Running, Name: gitlab.Ptr("no8s/plan")}
	if _, _, err := client(t, srv, "glpat-rep").Commits.SetCommitStatus(project, sha, opt); statusOf(err) != http.StatusForbidden {
		t.Fatalf("reporter: %v", err)
	}
	st, _, err := client(t, srv, "glpat-dev").Commits.SetCommitStatus(project, sha, opt)
	if err != nil || !strings.HasPrefix(st.Author.Username, "project_") {
		t.Fatalf("developer: %+v %v", st, err)
	}
	if _, _, err := client(t, srv, "glpat-rep").Commits.GetCommitStatuses(project, sha, nil); err != nil {
		t.Fatalf("reporter reads: %v", err)
	}
}
