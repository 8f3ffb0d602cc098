package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// TestDescribeWithKindToken describes resources with a token that may read
// one kind only: describe shows them, and says which dependencies and
// dependents of other kinds it cannot show rather than calling them
// missing; the verbs that find a resource by name find them too.
func TestDescribeWithKindToken(t *testing.T) {
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	const files = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Job}
spec:
  versions:
    - name: v1
      schema: {type: object}
---
apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Site}
spec:
  versions:
    - name: v1
      schema: {type: object}
---
apiVersion: no8s.io/v1
kind: Site
metadata: {name: s1}
dependsOn: [{kind: Job, name: good}]
spec: {}
---
apiVersion: no8s.io/v1
kind: Job
metadata: {name: good}
spec: {}
---
apiVersion: no8s.io/v1
kind: Job
metadata: {name: bad}
dependsOn: [{kind: Job, name: good}, {kind: Site, name: s1}]
spec: {}
`
	if err := os.WriteFile(filepath.Join(repo, "all.yaml"), []byte(files), 0o644); err != nil {
		t.Fatal(err)
	}
	tokenEnv := setSecret(t, "jobs-reader-token")
	cfgPath := filepath.Join(dir, "no8s.yaml")
	cfg := fmt.Sprintf(`sources:
  - {name: local, dir: %q}
api:
  tokens:
    - {name: jobs, tokenEnv: %s, allow: [{verbs: [get, list, reconcile], kinds: [Job]}]}
`, repo, tokenEnv)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Parallel()
	url := pgtest.URL(t)
	st := openTestStore(t, url)
	agent := startAgent(t, url, "--config", cfgPath)
	base := agent.addr()
	waitFor(t, 60*time.Second, agent, "the three resources", func() (bool, string) {
		rs := listResources(t, st)
		return len(rs) == 3, describe(rs)
	})
	srv := []string{"--server", base, "--token-env", tokenEnv}
	// The API answers from its copy of the store, a moment behind it.
	waitFor(t, 30*time.Second, agent, "the jobs through the API", func() (bool, string) {
		code, out, errOut := runCLI(t, append([]string{"describe", "resource", "Job/bad"}, srv...)...)
		return code == 0 && strings.Contains(out, "Job/good ("), out + errOut
	})
	for _, tt := range []struct {
		ref  string
		want []string
	}{
		{"Job/bad", []string{"Name:", "bad", "Depends on:\n  Job/good (", "Site/s1 (not shown: the token may not list Site)"}},
		{"Job/good", []string{"Required by:\n  Job/bad (", "(resources of other kinds not shown: the token may not list them)"}},
	} {
		code, out, errOut := runCLI(t, append([]string{"describe", "resource", tt.ref}, srv...)...)
		for _, want := range tt.want {
			if code != 0 || !strings.Contains(out, want) {
				t.Errorf("describe %s lacks %q (exit %d)\nstdout:\n%s\nstderr:\n%s", tt.ref, want, code, out, errOut)
			}
		}
	}
	code, out, errOut := runCLI(t, append([]string{"reconcile", "resource", "Job/good"}, srv...)...)
	if code != 0 || !strings.Contains(out, "Job/good: reconcile requested") {
		t.Errorf("reconcile with a kind-scoped token: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}
