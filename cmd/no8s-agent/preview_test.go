package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action/githubactions/githubtest"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source/git/gittest"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// TestAgentPreviewsPullRequests runs an agent with previews on for a Git
// source served over HTTP: an open pull request is found by the agent's
// listing and gets a no8s/plan status and one comment, and the store holds
// only main's state.
func TestAgentPreviewsPullRequests(t *testing.T) {
	repo := gittest.NewRepo(t)
	repo.Write(map[string]string{"types.yaml": siteType, "sites/shop.yaml": site("shop", 2)})
	repo.Commit("first")
	head := repo.PullRequest(7, repo.Head(), map[string]string{"sites/shop.yaml": site("shop", 5), "sites/blog.yaml": site("blog", 1)}, "grow")
	// Serve it as acme/infra, the way GitHub names repositories.
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "acme"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(repo.Dir, filepath.Join(root, "acme", "infra")); err != nil {
		t.Fatal(err)
	}
	gs := gittest.NewServer(t, root, "bot", "git-pass")
	const ghToken = "ghp_previewAgentT0ken"
	fake := githubtest.New(t, githubtest.Options{Token: ghToken, Owner: "acme", Repo: "infra"})
	fake.SetPull(githubtest.Pull{Number: 7, HeadSHA: head, BaseRef: "main"})
	cfg := fmt.Sprintf(`sources:
  - name: sites
    git: {url: %q, branch: main, interval: 1h, auth: {usernameEnv: %s, passwordEnv: %s}}
    pullRequests: {enabled: true, tokenEnv: %s, apiURL: %q, interval: 1h}
actions: {web: {plugin: noop}}
`, gs.URL+"/acme/infra/.git", setSecret(t, "bot"), setSecret(t, "git-pass"), setSecret(t, ghToken), fake.BaseURL())
	path := filepath.Join(t.TempDir(), "no8s.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Parallel()
	url := pgtest.URL(t)
	st := openTestStore(t, url)
	agent := startAgent(t, url, "--config", path)
	waitFor(t, 30*time.Second, agent, "the preview's status", func() (bool, string) {
		ss := fake.Statuses(head)
		if len(ss) == 0 {
			return false, "no status"
		}
		last := ss[len(ss)-1]
		return last.State == "success", fmt.Sprintf("%+v", last)
	})
	cs := fake.Comments(7)
	if len(cs) != 1 || !strings.Contains(cs[0].Body, "| create | Site/blog |") || !strings.Contains(cs[0].Body, "`replicas: 2 → 5`") {
		t.Errorf("comments = %+v", cs)
	}
	if last := fake.Statuses(head); last[len(last)-1].Description != "1 created, 1 updated, 0 deleted, 0 forgotten, 0 unchanged" {
		t.Errorf("status = %+v", last[len(last)-1])
	}
	// The store holds main's state only.
	if _, err := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Site", Namespace: "default", Name: "blog"}); err == nil {
		t.Error("the preview created Site/blog in the store")
	}
	if shop, err := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Site", Namespace: "default", Name: "shop"}); err != nil || shop.Generation != 1 || !strings.Contains(string(shop.Spec), `"replicas":2`) {
		t.Errorf("shop = %+v %v", shop, err)
	}
	if strings.Contains(agent.log.String(), ghToken) {
		t.Error("the token shows in the log")
	}
}
