package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/source/git/gittest"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
	"github.com/no8s/no8s-agent/sync"
)

// TestLastCheckShown runs an agent polling a Git source every second that
// does not change: the API's source shows a last check that keeps up with
// the polls (recorded at most every sync.DefaultCheckEvery) while its last
// sync stays that of the one sync, and `get sources` and the dashboard's
// source page show the last check.
func TestLastCheckShown(t *testing.T) {
	repo := gittest.NewRepo(t)
	repo.Write(map[string]string{"types.yaml": cliJobType})
	repo.Commit("a type")
	dir := t.TempDir()
	path := filepath.Join(dir, "no8s.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf("sources:\n  - name: jobs\n    git: {url: %q, branch: main, interval: 1s}\n",
		repo.URL())), 0o644); err != nil {
		t.Fatal(err)
	}
	url := pgtest.URL(t)
	agent := startAgent(t, url, "--config", path)
	type apiSource struct {
		LastSyncTime  *time.Time `json:"last_sync_time"`
		LastCheckTime *time.Time `json:"last_check_time"`
	}
	read := func() (apiSource, string) {
		var s apiSource
		_, body := curl(t, "GET", agent.addr()+"/api/v1/sources/jobs", "", "")
		json.Unmarshal([]byte(body), &s)
		return s, body
	}
	var synced time.Time
	waitFor(t, 30*time.Second, agent, "the first sync", func() (bool, string) {
		s, body := read()
		if s.LastSyncTime != nil {
			synced = *s.LastSyncTime
		}
		return s.LastSyncTime != nil, body
	})
	waitFor(t, sync.DefaultCheckEvery+30*time.Second, agent, "a last check after the sync", func() (bool, string) {
		s, body := read()
		return s.LastCheckTime != nil && s.LastCheckTime.Sub(synced) >= sync.DefaultCheckEvery, body
	})
	s, body := read()
	if !s.LastSyncTime.Equal(synced) {
		t.Errorf("the last sync moved without a change: %s", body)
	}

	code, out, errOut := runCLI(t, "get", "sources", "--database", url)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !strings.Contains(lines[0], "LAST CHECK") {
		t.Fatalf("get sources: exit %d\n%s%s", code, out, errOut)
	}
	// The age shown is the last check's, seconds, not the sync's.
	col := strings.Index(lines[0], "LAST CHECK")
	cell := strings.Fields(lines[1][col:])[0]
	if d, err := time.ParseDuration(cell); err != nil || d > time.Since(synced)-sync.DefaultCheckEvery+2*time.Second {
		t.Errorf("LAST CHECK %q, want the last check's age (about %s), not the sync's (%s)", cell,
			time.Since(*s.LastCheckTime).Round(time.Second), time.Since(synced).Round(time.Second))
	}

	_, page := curl(t, "GET", agent.addr()+"/sources/jobs", "", "")
	if !strings.Contains(page, "<dt>Last check</dt>") || !strings.Contains(page, s.LastCheckTime.UTC().Format("2006-01-02 15:04:05 UTC")) {
		t.Errorf("the dashboard's source page does not show the last check %s", s.LastCheckTime)
	}
}
