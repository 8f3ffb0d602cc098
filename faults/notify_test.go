package faults_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/notify/notifytest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// notifyJobScript fails for the job of n 13.
const notifyJobScript = `#!/bin/sh
input=$(cat)
case "$input" in
*'"n":13'*) echo "13 is unlucky" >&2; exit 1 ;;
esac
echo '{"done":true}'
`

func notifyJob(name string, n int) string {
	return fmt.Sprintf("apiVersion: no8s.io/v1\nkind: Job\nmetadata: {name: %s}\nspec: {n: %d}\n", name, n)
}

// notifyConfig runs jobs from repo with the script and sends the resource
// events and applied revisions to the receiver.
func notifyConfig(t *testing.T, dir, dbURL, repo, script, hook, secretEnv string) string {
	return writeConfig(t, dir, fmt.Sprintf(`listen: 127.0.0.1:0
database: %q
sources:
  - {name: jobs, dir: %q, interval: 1s}
actions:
  work:
    plugin: exec
    config: {command: [%q], timeout: 1m}
reconcile: {backoff: {initial: 100ms, max: 200ms}}
notifications:
  providers:
    hook: {type: webhook, url: %q, secretEnv: %s}
  alerts:
    - providers: [hook]
      events: [ResourceFailed, ResourceRecovered, RevisionApplied]
`, dbURL, repo, script, hook, secretEnv))
}

// notifyWork makes the test's folder with the job script and a source
// folder holding the Job type, and returns the three. It writes the script
// before the test goes parallel (see the harness).
func notifyWork(t *testing.T) (work, script, repo string) {
	t.Helper()
	work = t.TempDir()
	script = filepath.Join(work, "job.sh")
	writeFile(t, script, notifyJobScript)
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	repo = filepath.Join(work, "repo")
	writeFile(t, filepath.Join(repo, "types.yaml"), jobType)
	return work, script, repo
}

// openNotices opens the store the agents share, to read its notices.
func openNotices(t *testing.T, dbURL string) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// waitNoticesDone waits until the store says every notice is done.
func waitNoticesDone(t *testing.T, st *postgres.Store) {
	t.Helper()
	waitUntil(t, 30*time.Second, "every notice done", func() (bool, string) {
		ns, err := st.ListNotices(t.Context(), "", 100)
		if err != nil {
			return false, err.Error()
		}
		for _, n := range ns {
			if n.DoneAt == nil {
				return false, fmt.Sprintf("notice %d %s: %+v", n.ID, n.Event, n.Results)
			}
		}
		return true, ""
	})
}

// checkDeliveredOnce fails unless every notice in the store was delivered
// to the hook, each in exactly one accepted request.
func checkDeliveredOnce(t *testing.T, st *postgres.Store, hook *notifytest.Receiver) {
	t.Helper()
	ns, err := st.ListNotices(t.Context(), "", 100)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, d := range hook.Accepted() {
		seen[d.ID]++
	}
	for _, n := range ns {
		if len(n.Pending) > 0 || n.DoneAt == nil {
			t.Errorf("notice %d %s not done: %+v", n.ID, n.Event, n)
			continue
		}
		if n.Event == store.EventRevisionApplied || slices.Contains([]string{store.EventResourceFailed, store.EventResourceRecovered}, n.Event) {
			if seen[n.ID] != 1 {
				t.Errorf("notice %d %s accepted %d times, want once", n.ID, n.Event, seen[n.ID])
			}
		}
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("delivery %d accepted %d times", id, c)
		}
	}
	if bad := hook.Bad(); len(bad) > 0 {
		t.Errorf("bad deliveries: %q", bad)
	}
}

// TestNotificationsThroughDownReceiverAndCrash keeps the receiver down
// while an agent tries to deliver, kills that agent, starts another and
// brings the receiver back: every event is delivered, each exactly once.
func TestNotificationsThroughDownReceiverAndCrash(t *testing.T) {
	work, script, repo := notifyWork(t)
	t.Parallel()
	dbURL := pgtest.URL(t)
	writeFile(t, filepath.Join(repo, "bad.yaml"), notifyJob("bad", 13))
	writeFile(t, filepath.Join(repo, "good.yaml"), notifyJob("good", 1))
	const secret = "hook-secret-0b7e52"
	hook := notifytest.NewReceiver(t, secret)
	hook.SetDown(true)
	config := notifyConfig(t, work, dbURL, repo, script, hook.URL, secretEnv(t, secret))

	a := startAgent(t, work, "run", "--config", config)
	waitUntil(t, 60*time.Second, "deliveries refused by the receiver that is down", func() (bool, string) {
		return hook.Refused() >= 3, fmt.Sprintf("%d refused", hook.Refused())
	})
	a.Kill9()
	b := startAgent(t, work, "run", "--config", config)
	b.URL()
	hook.SetDown(false)
	// A notice the killed agent had claimed, when the kill came in the
	// middle of a delivery, waits for its lease (two minutes) to expire.
	waitUntil(t, 200*time.Second, "the failure and the applied revision delivered", func() (bool, string) {
		return hook.Count(store.EventResourceFailed, "bad") == 1 && hook.Count(store.EventRevisionApplied, "") == 1,
			fmt.Sprintf("%+v", hook.Accepted())
	})
	writeFile(t, filepath.Join(repo, "bad.yaml"), notifyJob("bad", 2))
	waitUntil(t, 60*time.Second, "the recovery delivered", func() (bool, string) {
		return hook.Count(store.EventResourceRecovered, "bad") == 1, fmt.Sprintf("%+v", hook.Accepted())
	})
	st := openNotices(t, dbURL)
	waitNoticesDone(t, st)
	checkDeliveredOnce(t, st, hook)
}

// TestNotificationsTwoAgents runs two agents on one database: each event
// is delivered once, by one of them, in one attempt.
func TestNotificationsTwoAgents(t *testing.T) {
	work, script, repo := notifyWork(t)
	t.Parallel()
	dbURL := pgtest.URL(t)
	for i := range 5 {
		writeFile(t, filepath.Join(repo, fmt.Sprintf("bad-%d.yaml", i)), notifyJob(fmt.Sprintf("bad-%d", i), 13))
	}
	const secret = "hook-secret-71c0d3"
	hook := notifytest.NewReceiver(t, secret)
	config := notifyConfig(t, work, dbURL, repo, script, hook.URL, secretEnv(t, secret))
	startAgent(t, work, "run", "--config", config)
	startAgent(t, work, "run", "--config", config)
	waitUntil(t, 90*time.Second, "five failures delivered", func() (bool, string) {
		return hook.Count(store.EventResourceFailed, "") >= 5, fmt.Sprintf("%+v", hook.Accepted())
	})
	for i := range 5 {
		writeFile(t, filepath.Join(repo, fmt.Sprintf("bad-%d.yaml", i)), notifyJob(fmt.Sprintf("bad-%d", i), 2))
	}
	waitUntil(t, 90*time.Second, "five recoveries delivered", func() (bool, string) {
		return hook.Count(store.EventResourceRecovered, "") >= 5, fmt.Sprintf("%+v", hook.Accepted())
	})
	st := openNotices(t, dbURL)
	waitNoticesDone(t, st)
	checkDeliveredOnce(t, st, hook)
	ns, err := st.ListNotices(t.Context(), "", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		if r := n.Results["hook"]; r.Attempts != 1 || r.Result != store.DeliveryDelivered {
			t.Errorf("notice %d %s: %+v, want delivered in one attempt", n.ID, n.Event, r)
		}
	}
	if got := hook.Count(store.EventResourceFailed, ""); got != 5 {
		t.Errorf("%d failures delivered, want 5", got)
	}
}
