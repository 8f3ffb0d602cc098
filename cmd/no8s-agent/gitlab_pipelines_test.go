package main

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/gitlabapi/gitlabtest"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/source/git/gittest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// TestGitLabPipelineVariablesRefused runs an agent whose gitlab_pipelines
// action passes the request as pipeline variables to a project that
// refuses them, as new projects on gitlab.com do: the resource fails with
// the error that says to use inputs, and no pipeline is created.
func TestGitLabPipelineVariablesRefused(t *testing.T) {
	repo := gittest.NewRepo(t)
	repo.Write(map[string]string{"types.yaml": siteType, "sites/shop.yaml": site("shop", 2)})
	repo.Commit("first")
	glToken := "glpat-vars-" + rand.Text()
	gl := gitlabtest.New(t, gitlabtest.Options{Token: glToken})
	gl.AddProject("acme/deploy", gitlabtest.ProjectOptions{RefuseVariables: true})
	cfg := fmt.Sprintf(`sources:
  - name: sites
    git: {url: %q, branch: main, interval: 1h}
reconcile: {backoff: {initial: 1h}}
actions:
  web:
    plugin: gitlab_pipelines
    config: {baseURL: %q, project: acme/deploy, tokenEnv: %s, pass: variables, pollInterval: 100ms}
`, repo.URL(), gl.URL, setSecret(t, glToken))
	path := filepath.Join(t.TempDir(), "no8s.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Parallel()
	db := pgtest.URL(t)
	agent := startAgent(t, db, "--config", path)
	st := openTestStore(t, db)
	var shop *store.Resource
	waitFor(t, 30*time.Second, agent, "shop to fail", func() (bool, string) {
		rs, err := st.ListResources(t.Context(), store.ResourceFilter{Source: "sites"})
		if err != nil || len(rs) != 1 {
			return false, fmt.Sprint(len(rs), err)
		}
		shop = rs[0]
		return shop.Phase == manifest.PhaseFailed, string(shop.Phase) + ": " + shop.StatusMessage
	})
	for _, want := range []string{"pipeline variables are not allowed", "use inputs", "pass: inputs"} {
		if !strings.Contains(shop.StatusMessage, want) {
			t.Errorf("status message %q does not say %q", shop.StatusMessage, want)
		}
	}
	if n := len(gl.Pipelines()); n != 0 {
		t.Errorf("%d pipelines created, want none", n)
	}
	agent.stop()
	if strings.Contains(agent.log.String(), glToken) {
		t.Error("the token shows in the log")
	}
}
