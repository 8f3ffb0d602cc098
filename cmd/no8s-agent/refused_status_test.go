package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action/githubactions/githubtest"
	"github.com/no8s/no8s-agent/source/git/commitsig/sigtest"
	"github.com/no8s/no8s-agent/source/git/gittest"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// TestRefusedCommitStatuses runs an agent whose Git source has a
// signature policy and a prune limit, with a GitHub commit-status
// provider, and pushes one commit of each kind the source refuses: an
// invalid manifest, an unsigned commit, a resource another source owns,
// more deletions than the prune limit. Each refused commit gets one
// failure status on GitHub naming the reason, however many polls judge it
// again, and the agent applies nothing of it; the good commit before them
// gets its success.
func TestRefusedCommitStatuses(t *testing.T) {
	keys := sigtest.New(t)
	ops := keys.SSH("ops")
	dir := t.TempDir()
	signers := filepath.Join(dir, "allowed_signers")
	keys.WriteAllowedSigners(signers, ops)
	script := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ncat >/dev/null\necho '{}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Another source owns Job/taken.
	other := filepath.Join(dir, "other")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "taken.yaml"), []byte(notifyJob("taken", 1)), 0o644); err != nil {
		t.Fatal(err)
	}

	repo := gittest.NewRepo(t)
	signed := func(files map[string]string, msg string) string {
		repo.Write(files)
		return repo.CommitSigned(msg, keys.Env(), sigtest.SignWithSSH(ops)...)
	}
	good := signed(map[string]string{"types.yaml": cliJobType, "jobs/a.yaml": notifyJob("a", 1),
		"jobs/b.yaml": notifyJob("b", 1), "jobs/c.yaml": notifyJob("c", 1)}, "three jobs")

	const ghToken = "gh-token-0a8c3f7d"
	gh := githubtest.New(t, githubtest.Options{Token: ghToken, Owner: "acme", Repo: "jobs"})
	cfg := fmt.Sprintf(`sources:
  - name: jobs
    git:
      url: %q
      branch: main
      interval: 1s
      verify: {mode: head, sshAllowedSignersFile: %q}
    prune: {enabled: true, maxDeletes: 1}
  - name: other
    dir: %q
actions:
  jobs:
    plugin: exec
    config: {command: [%q], timeout: 1m}
notifications:
  providers:
    commits: {type: github, tokenEnv: %s, apiURL: %q, repository: acme/jobs}
`, repo.URL(), signers, other, script, setSecret(t, ghToken), gh.BaseURL())
	path := filepath.Join(dir, "no8s.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	url := pgtest.URL(t)
	st := openTestStore(t, url)
	agent := startAgent(t, url, "--config", path)

	statuses := func(sha string) string {
		var b strings.Builder
		for _, s := range gh.Statuses(sha) {
			fmt.Fprintf(&b, "%s %s %q|", s.Context, s.State, s.Description)
		}
		return b.String()
	}
	waitFor(t, 60*time.Second, agent, "the good commit's success", func() (bool, string) {
		return strings.Contains(statuses(good), "success"), statuses(good)
	})

	// polled waits until the source has been judged again after the
	// refusal of commit: its sync history does not grow, so the agent's
	// polls are counted from its fetch metric.
	fetches := func() int {
		_, text := curl(t, "GET", agent.addr()+"/metrics", "", "")
		n := 0
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, `no8s_sync_runs_total{`) && strings.Contains(line, `source="jobs"`) {
				var v float64
				fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
				n += int(v)
			}
		}
		return n
	}
	for _, c := range []struct {
		name   string
		commit func() string
		reason string
	}{
		{"invalid", func() string {
			return signed(map[string]string{"jobs/a.yaml": "apiVersion: no8s.io/v1\nkind: Job\nmetadata: {name: a}\nspec:\n  size: large\n"}, "not a number")
		}, "ValidationFailed: 1 invalid manifest(s); first: jobs/a.yaml:5"},
		{"unsigned", func() string {
			repo.Write(map[string]string{"jobs/a.yaml": notifyJob("a", 2)})
			return repo.Commit("unsigned")
		}, "SignatureRejected: refused by the source's signature policy: commit "},
		{"conflicting", func() string {
			return signed(map[string]string{"jobs/a.yaml": notifyJob("a", 1), "jobs/taken.yaml": notifyJob("taken", 2)}, "take a job")
		}, "OwnershipConflict: "},
		{"over the prune limit", func() string {
			repo.Git("rm", "-q", "jobs/taken.yaml", "jobs/b.yaml", "jobs/c.yaml")
			return signed(nil, "drop two jobs")
		}, "PruneLimitExceeded: "},
	} {
		sha := c.commit()
		waitFor(t, 60*time.Second, agent, "a status on the "+c.name+" commit", func() (bool, string) {
			return len(gh.Statuses(sha)) > 0, statuses(sha)
		})
		before := fetches()
		waitFor(t, 30*time.Second, agent, "three more polls", func() (bool, string) {
			n := fetches()
			return n >= before+3, fmt.Sprintf("%d syncs, %d before", n, before)
		})
		ss := gh.Statuses(sha)
		if len(ss) != 1 || ss[0].State != "failure" || ss[0].Context != "no8s/jobs" || !strings.HasPrefix(ss[0].Description, c.reason) {
			t.Errorf("%s commit: statuses %s; want one failure starting %q", c.name, statuses(sha), c.reason)
		}
		src, err := st.GetSource(t.Context(), "jobs")
		if err != nil || !strings.HasSuffix(string(src.LastAppliedRevision), good) {
			t.Fatalf("%s commit: the source applied %v (%v)", c.name, src, err)
		}
	}
}
