package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action/githubactions/githubtest"
	"github.com/no8s/no8s-agent/notify/notifytest"
	"github.com/no8s/no8s-agent/source/git/gittest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// notifyScript fails for the job of size 13 and says so with the secret it
// was given, which no notification may carry.
const notifyScript = `#!/bin/sh
input=$(cat)
case "$input" in
*'"size":13'*) echo "size 13 is unlucky (token $LEAKY_TOKEN)" >&2; exit 1 ;;
esac
echo '{"done":true}'
`

func notifyJob(name string, size int) string {
	return fmt.Sprintf("apiVersion: no8s.io/v1\nkind: Job\nmetadata: {name: %s}\nspec: {size: %d}\n", name, size)
}

// TestNotifications runs an agent that tells a signed webhook and GitHub
// commit statuses what happens: a job failing five times in a row is told
// once, and once when it recovers; a broken commit once, naming the file
// and line; each applied commit gets pending, then failure naming the
// failed job, or success. No body carries a secret.
func TestNotifications(t *testing.T) {
	const leaky = "leaky-token-93c7f2e1"
	t.Setenv("LEAKY_TOKEN", leaky)
	for _, backend := range []string{"postgres", "sqlite"} {
		t.Run(backend, func(t *testing.T) { testNotifications(t, backend, leaky) })
	}
}

func testNotifications(t *testing.T, backend, leaky string) {
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(script, []byte(notifyScript), 0o755); err != nil {
		t.Fatal(err)
	}
	repo := gittest.NewRepo(t)
	repo.Write(map[string]string{"types.yaml": cliJobType, "jobs/good.yaml": notifyJob("good", 1), "jobs/bad.yaml": notifyJob("bad", 13)})
	first := repo.Commit("two jobs, one unlucky")
	const hookSecret, ghToken = "hook-secret-6d2a91", "gh-token-5be044c1"
	hook := notifytest.NewReceiver(t, hookSecret)
	gh := githubtest.New(t, githubtest.Options{Token: ghToken, Owner: "acme", Repo: "jobs"})
	cfg := fmt.Sprintf(`sources:
  - name: jobs
    git: {url: %q, branch: main, interval: 1s}
actions:
  jobs:
    plugin: exec
    config: {command: [%q], timeout: 1m, passEnv: [LEAKY_TOKEN]}
reconcile: {backoff: {initial: 100ms, max: 200ms}}
notifications:
  providers:
    ops-hook: {type: webhook, url: %q, secretEnv: %s}
    commits: {type: github, tokenEnv: %s, apiURL: %q, repository: acme/jobs, dashboardURL: "https://no8s.example.com"}
  alerts:
    - providers: [ops-hook]
`, repo.URL(), script, hook.URL, setSecret(t, hookSecret), setSecret(t, ghToken), gh.BaseURL())
	path := filepath.Join(dir, "no8s.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	url := "sqlite://" + filepath.Join(dir, "state.db")
	if backend == "postgres" {
		url = pgtest.URL(t)
	}
	agent := startAgent(t, url, "--config", path)
	base := agent.addr()

	attempts := func(name string) int {
		var r struct {
			ID int64 `json:"id"`
		}
		if code, body := curl(t, "GET", base+"/api/v1/resources/by-name/Job/v1/"+name, "", ""); code != 200 || json.Unmarshal([]byte(body), &r) != nil {
			return 0
		}
		var recs []json.RawMessage
		if code, body := curl(t, "GET", fmt.Sprintf("%s/api/v1/resources/%d/history?limit=100", base, r.ID), "", ""); code != 200 ||
			json.Unmarshal([]byte(body), &recs) != nil {
			return 0
		}
		return len(recs)
	}
	waitFor(t, 60*time.Second, agent, "bad to fail five times", func() (bool, string) {
		n := attempts("bad")
		return n >= 5, fmt.Sprintf("%d attempts", n)
	})
	waitFor(t, 30*time.Second, agent, "ResourceFailed delivered", func() (bool, string) {
		return hook.Count(store.EventResourceFailed, "bad") > 0, fmt.Sprintf("%+v", hook.Accepted())
	})
	// The commit's status: pending, then failure naming the failed job.
	statuses := func(sha string) string {
		var b strings.Builder
		for _, s := range gh.Statuses(sha) {
			fmt.Fprintf(&b, "%s %s %q %s|", s.Context, s.State, s.Description, s.TargetURL)
		}
		return b.String()
	}
	waitFor(t, 30*time.Second, agent, "the first commit's failure status", func() (bool, string) {
		return strings.Contains(statuses(first), "failure"), statuses(first)
	})
	ss := gh.Statuses(first)
	if len(ss) < 2 || ss[0].State != "pending" || ss[len(ss)-1].State != "failure" ||
		!strings.Contains(ss[len(ss)-1].Description, "1 ready, 1 failed: Job/bad") ||
		ss[len(ss)-1].Context != "no8s/jobs" || ss[len(ss)-1].TargetURL != "https://no8s.example.com/sources/jobs" {
		t.Errorf("statuses of the first commit: %s", statuses(first))
	}

	// Fixed: one recovery, and success on the fix.
	repo.Write(map[string]string{"jobs/bad.yaml": notifyJob("bad", 2)})
	fix := repo.Commit("a luckier size")
	waitFor(t, 60*time.Second, agent, "ResourceRecovered delivered", func() (bool, string) {
		return hook.Count(store.EventResourceRecovered, "bad") > 0, fmt.Sprintf("%+v", hook.Accepted())
	})
	waitFor(t, 30*time.Second, agent, "the fix's success status", func() (bool, string) {
		return strings.Contains(statuses(fix), "success"), statuses(fix)
	})
	if got := gh.Statuses(fix); got[len(got)-1].Description != "2 ready" {
		t.Errorf("statuses of the fix: %s", statuses(fix))
	}

	// A broken commit: one SourceFailed, naming the file and the line.
	repo.Write(map[string]string{"jobs/good.yaml": "apiVersion: no8s.io/v1\nkind: Job\nmetadata: {name: good}\nspec:\n  size: large\n"})
	repo.Commit("a size that is not a number")
	waitFor(t, 30*time.Second, agent, "SourceFailed delivered", func() (bool, string) {
		return hook.Count(store.EventSourceFailed, "") > 0, fmt.Sprintf("%+v", hook.Accepted())
	})
	for _, d := range hook.Accepted() {
		if d.Event.Event == store.EventSourceFailed && !strings.Contains(d.Event.Message, "jobs/good.yaml:5: spec.size") {
			t.Errorf("SourceFailed does not name the file and line: %q", d.Event.Message)
		}
	}

	// Once each, whatever the retries; signed; no secret anywhere.
	for event, want := range map[string]int{store.EventResourceFailed: 1, store.EventResourceRecovered: 1, store.EventSourceFailed: 1,
		store.EventRevisionApplied: 0} {
		if got := hook.Count(event, ""); got != want {
			t.Errorf("%s delivered %d times, want %d", event, got, want)
		}
	}
	if bad := hook.Bad(); len(bad) > 0 {
		t.Errorf("bad deliveries: %q", bad)
	}
	for _, d := range hook.Accepted() {
		for _, secret := range []string{leaky, hookSecret, ghToken} {
			if strings.Contains(d.Body, secret) {
				t.Errorf("a notification carries a secret: %s", d.Body)
			}
		}
	}
	for _, sha := range []string{first, fix} {
		if s := statuses(sha); strings.Contains(s, leaky) {
			t.Errorf("a commit status carries a secret: %s", s)
		}
	}
	failed := hook.Accepted()[0]
	if failed.Event.Event != store.EventResourceFailed || failed.Event.Resource == nil || failed.Event.Resource.Kind != "Job" ||
		failed.Event.Severity != "error" || !strings.Contains(failed.Event.Message, "size 13 is unlucky (token ***)") ||
		!strings.HasSuffix(failed.Event.Revision, first) {
		t.Errorf("the first delivery: %+v", failed.Event)
	}
	for _, d := range hook.Accepted() {
		t.Logf("delivered %d %s %v: %q", d.ID, d.Event.Event, d.Event.Resource, d.Event.Message)
	}
	t.Logf("statuses: %s %s", statuses(first), statuses(fix))
	// The deliveries are counted. The hook has the last notice before the
	// agent has read the answer and counted it, so the count is awaited.
	for _, want := range []string{`no8s_notifications_total{provider="ops-hook",result="delivered"} 3`,
		`no8s_notifications_total{provider="commits",result="delivered"}`} {
		waitFor(t, 10*time.Second, agent, "/metrics to show "+want, func() (bool, string) {
			_, metricsText := curl(t, "GET", base+"/metrics", "", "")
			var counted []string
			for _, line := range strings.Split(metricsText, "\n") {
				if strings.HasPrefix(line, "no8s_notifications_total") {
					counted = append(counted, line)
				}
			}
			return strings.Contains(metricsText, want), strings.Join(counted, "; ")
		})
	}
}
