package main

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/gitlabapi/gitlabtest"
	"github.com/no8s/no8s-agent/source/git/gittest"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// serveAs serves repo over HTTP at /<group>/<name>/.git, the way GitLab
// names projects, and returns the server and the repository's URL.
func serveAs(t *testing.T, repo *gittest.Repo, group, name, user, pass string) (*gittest.Server, string) {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, group), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(repo.Dir, filepath.Join(root, group, name)); err != nil {
		t.Fatal(err)
	}
	gs := gittest.NewServer(t, root, user, pass)
	return gs, gs.URL + "/" + group + "/" + name + "/.git"
}

// gitlabMergePayload is a Merge Request Hook payload in GitLab's documented
// shape, for merge request iid of the project served at base/path.
func gitlabMergePayload(base, path, action string, iid int, head, oldrev string) string {
	host := strings.TrimPrefix(base, "http://")
	oldrevField := ""
	if oldrev != "" {
		oldrevField = fmt.Sprintf(`"oldrev": %q,`, oldrev)
	}
	project := fmt.Sprintf(`{"id": 15, "name": "infra", "web_url": "%[1]s/%[2]s", "git_ssh_url": "git@%[3]s:%[2]s.git",
    "git_http_url": "%[1]s/%[2]s.git", "namespace": "acme", "path_with_namespace": %[2]q, "default_branch": "main",
    "homepage": "%[1]s/%[2]s", "url": "git@%[3]s:%[2]s.git", "ssh_url": "git@%[3]s:%[2]s.git", "http_url": "%[1]s/%[2]s.git"}`,
		base, path, host)
	return fmt.Sprintf(`{"object_kind": "merge_request", "event_type": "merge_request",
  "user": {"id": 1, "name": "Jane", "username": "jane", "avatar_url": "", "email": "[REDACTED]"},
  "project": %[1]s,
  "repository": {"name": "infra", "url": "git@%[2]s:%[3]s.git", "description": "", "homepage": "%[4]s/%[3]s"},
  "object_attributes": {"id": 99, "iid": %[5]d, "title": "Grow the shop", "state": "opened", "action": %[6]q,
    "source_branch": "grow", "target_branch": "main", "source_project_id": 15, "target_project_id": 15,
    "author_id": 1, "created_at": "2026-03-14 14:09:00 UTC", "updated_at": "2026-03-14 14:10:00 UTC",
    "merge_status": "unchecked", "detailed_merge_status": "checking", "draft": false, %[7]s
    "source": %[1]s, "target": %[1]s,
    "last_commit": {"id": %[8]q, "message": "Grow the shop\n", "title": "Grow the shop",
      "timestamp": "2026-03-14T15:09:00+01:00", "url": "%[4]s/%[3]s/-/commit/%[8]s",
      "author": {"name": "Jane", "email": "jane@example.com"}},
    "url": "%[4]s/%[3]s/-/merge_requests/%[5]d"},
  "labels": [], "changes": {}}`, project, host, path, base, iid, action, oldrevField, head)
}

// TestAgentPreviewsMergeRequests runs an agent with GitLab previews for a
// Git source served over HTTP: an open merge request found by listing gets
// the no8s/plan status and one note; a Merge Request Hook announcing a
// push previews it at once (the listing is hourly), editing the same note;
// another opening a second merge request previews that one.
func TestAgentPreviewsMergeRequests(t *testing.T) {
	repo := gittest.NewRepo(t)
	repo.Write(map[string]string{"types.yaml": siteType, "sites/shop.yaml": site("shop", 2)})
	main := repo.Commit("first")
	head := repo.MergeRequest(1, main, map[string]string{"sites/shop.yaml": site("shop", 5), "sites/blog.yaml": site("blog", 1)}, "grow")
	gs, remote := serveAs(t, repo, "acme", "infra", "oauth2", "git-pass-3f1c")
	glToken, hookToken := "glpat-agent-"+rand.Text(), "glht-"+rand.Text()
	gl := gitlabtest.New(t, gitlabtest.Options{Token: glToken})
	gl.AddProject("acme/infra", gitlabtest.ProjectOptions{})
	gl.AddMergeRequest("acme/infra", gitlabtest.MergeRequest{IID: 1, SHA: head, SourceBranch: "grow"})
	cfg := fmt.Sprintf(`sources:
  - name: sites
    git: {url: %q, branch: main, interval: 1h, auth: {usernameEnv: %s, passwordEnv: %s}}
    pullRequests: {enabled: true, provider: gitlab, tokenEnv: %s, apiURL: %q, interval: 1h}
webhooks: {gitlabTokenEnv: %s}
actions: {web: {plugin: noop}}
`, remote, setSecret(t, "oauth2"), setSecret(t, "git-pass-3f1c"), setSecret(t, glToken), gl.URL, setSecret(t, hookToken))
	path := filepath.Join(t.TempDir(), "no8s.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Parallel()
	agent := startAgent(t, pgtest.URL(t), "--config", path)
	statuses := func(sha string) string {
		var out []string
		for _, s := range gl.Statuses("acme/infra", sha) {
			out = append(out, fmt.Sprintf("%s %s %q", s.Name, s.Status, s.Description))
		}
		return strings.Join(out, " | ")
	}
	notes := func(iid int64) []gitlabtest.Note { return gl.Notes("acme/infra", iid) }
	waitFor(t, 30*time.Second, agent, "the preview's status", func() (bool, string) {
		return strings.HasPrefix(statuses(head), "no8s/plan success"), statuses(head)
	})
	if got := statuses(head); got != `no8s/plan success "1 created, 1 updated, 0 deleted, 0 forgotten, 0 unchanged"` {
		t.Errorf("statuses = %s", got)
	}
	ns := notes(1)
	if len(ns) != 1 || ns[0].Author != gitlabtest.DefaultUser || !strings.Contains(ns[0].Body, "| create | Site/blog |") ||
		!strings.Contains(ns[0].Body, "`replicas: 2 → 5`") || !strings.Contains(ns[0].Body, "Merge request !1 at") {
		t.Fatalf("notes = %+v", ns)
	}

	// A push, announced by the hook.
	head2 := repo.MergeRequest(1, main, map[string]string{"sites/shop.yaml": site("shop", 7)}, "grow more")
	gl.UpdateMergeRequest("acme/infra", 1, func(mr *gitlabtest.MergeRequest) { mr.SHA = head2 })
	base := agent.addr()
	payload := gitlabMergePayload(gs.URL, "acme/infra", "update", 1, head2, head)
	if code, resp := (gitlabDelivery{event: "Merge Request Hook", body: payload, token: hookToken}).send(t, base); code != http.StatusOK ||
		!strings.Contains(resp, `"handled":true`) {
		t.Fatalf("merge request hook: %d %s", code, resp)
	}
	waitFor(t, 30*time.Second, agent, "the pushed head's status", func() (bool, string) {
		return strings.HasPrefix(statuses(head2), "no8s/plan success"), statuses(head2)
	})
	if ns := notes(1); len(ns) != 1 || ns[0].Updates != 1 || !strings.Contains(ns[0].Body, "`replicas: 2 → 7`") ||
		strings.Contains(ns[0].Body, "Site/blog") {
		t.Errorf("notes after the push = %+v", ns)
	}

	// A second merge request, opened.
	head3 := repo.MergeRequest(2, main, map[string]string{"sites/shop.yaml": site("shop", 3)}, "shrink")
	gl.AddMergeRequest("acme/infra", gitlabtest.MergeRequest{IID: 2, SHA: head3, SourceBranch: "shrink"})
	payload = gitlabMergePayload(gs.URL, "acme/infra", "open", 2, head3, "")
	if code, resp := (gitlabDelivery{event: "Merge Request Hook", body: payload, token: hookToken}).send(t, base); code != http.StatusOK {
		t.Fatalf("merge request hook: %d %s", code, resp)
	}
	waitFor(t, 30*time.Second, agent, "the second merge request's status", func() (bool, string) {
		return strings.HasPrefix(statuses(head3), "no8s/plan success"), statuses(head3)
	})
	if ns := notes(2); len(ns) != 1 || !strings.Contains(ns[0].Body, "`replicas: 2 → 3`") {
		t.Errorf("notes of !2 = %+v", ns)
	}
	_, text := curl(t, "GET", base+"/metrics", "", "")
	if want := `no8s_webhook_deliveries_total{event="gitlab_merge_request",result="handled"} 2`; !strings.Contains(text, want+"\n") {
		t.Errorf("/metrics lacks %s", want)
	}
	agent.stop()
	for _, n := range append(notes(1), notes(2)...) {
		if strings.Contains(n.Body, glToken) || strings.Contains(n.Body, "git-pass-3f1c") {
			t.Errorf("note %d shows a secret", n.ID)
		}
	}
	if log := agent.log.String(); strings.Contains(log, glToken) || strings.Contains(log, hookToken) {
		t.Error("a token shows in the log")
	}
}

// TestGitLabNotifications runs an agent with a gitlab notification
// provider that names no project and no sources: the Git source, on the
// provider's host, gets no8s/<source> on each applied commit, running and
// then success, on the project its URL names.
func TestGitLabNotifications(t *testing.T) {
	repo := gittest.NewRepo(t)
	repo.Write(map[string]string{"types.yaml": siteType, "sites/shop.yaml": site("shop", 2)})
	first := repo.Commit("first")
	_, remote := serveAs(t, repo, "acme", "sites", "oauth2", "git-pass-8d2e")
	glToken := "glpat-notify-" + rand.Text()
	gl := gitlabtest.New(t, gitlabtest.Options{Token: glToken})
	gl.AddProject("acme/sites", gitlabtest.ProjectOptions{})
	cfg := fmt.Sprintf(`sources:
  - name: sites
    git: {url: %q, branch: main, interval: 1s, auth: {usernameEnv: %s, passwordEnv: %s}}
actions: {web: {plugin: noop}}
notifications:
  providers:
    commits: {type: gitlab, tokenEnv: %s, apiURL: %q, dashboardURL: "https://no8s.example.com"}
`, remote, setSecret(t, "oauth2"), setSecret(t, "git-pass-8d2e"), setSecret(t, glToken), gl.URL)
	path := filepath.Join(t.TempDir(), "no8s.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Parallel()
	agent := startAgent(t, pgtest.URL(t), "--config", path)
	statuses := func(sha string) string {
		var out []string
		for _, s := range gl.Statuses("acme/sites", sha) {
			out = append(out, fmt.Sprintf("%s %s %q %s", s.Name, s.Status, s.Description, s.TargetURL))
		}
		return strings.Join(out, " | ")
	}
	posted := func(sha string) string {
		var out []string
		for _, r := range gl.Requests() {
			if r.Method == "POST" && strings.HasSuffix(r.Path, "/statuses/"+sha) {
				_, state, _ := strings.Cut(r.Body, `"state":"`)
				state, _, _ = strings.Cut(state, `"`)
				out = append(out, state)
			}
		}
		return strings.Join(out, " ")
	}
	want := func(desc string) string {
		return fmt.Sprintf("no8s/sites success %q https://no8s.example.com/sources/sites", desc)
	}
	waitFor(t, 30*time.Second, agent, "the first commit's success", func() (bool, string) {
		return statuses(first) == want("1 ready"), statuses(first)
	})
	// Running only when the resources were still reconciling at the first
	// look; never twice, never after the outcome.
	if got := posted(first); got != "running success" && got != "success" {
		t.Errorf("states posted on the first commit: %q, want running then success", got)
	}
	repo.Write(map[string]string{"sites/blog.yaml": site("blog", 1)})
	second := repo.Commit("a blog")
	waitFor(t, 30*time.Second, agent, "the second commit's success", func() (bool, string) {
		return statuses(second) == want("2 ready"), statuses(second)
	})
	agent.stop()
	if strings.Contains(agent.log.String(), glToken) {
		t.Error("the token shows in the log")
	}
}
