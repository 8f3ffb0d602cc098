package faults_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// apiLease and apiAgent are what the scenario reads of leases and agents.
type apiLease struct {
	Holder    string     `json:"holder"`
	Since     *time.Time `json:"since"`
	ExpiresAt time.Time  `json:"expires_at"`
}

type apiAgent struct {
	ID    string `json:"id"`
	Alive bool   `json:"alive"`
}

// TestDeadHolderShown kills the agent that holds a resource's lease: the
// other agent's API goes on showing the lease, its holder and its expiry,
// and lists the killed agent as no longer alive once it missed its
// heartbeats, while the lease has not expired yet.
func TestDeadHolderShown(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(t)
	work := t.TempDir()
	repo := filepath.Join(work, "repo")
	writeFile(t, filepath.Join(repo, "types.yaml"), jobType)
	writeFile(t, filepath.Join(repo, "job.yaml"), "apiVersion: no8s.io/v1\nkind: Job\nmetadata: {name: slow}\nspec: {n: 1}\n")
	config := func(name string) string {
		return writeConfig(t, filepath.Join(work, name), fmt.Sprintf(`listen: 127.0.0.1:0
database: %q
sources:
  - name: jobs
    dir: %q
    interval: 1m
actions:
  work:
    plugin: exec
    config: {command: [sleep, "300"], timeout: 10m}
reconcile: {workers: 1, leaseDuration: 2m}
`, dbURL, repo))
	}
	a := startAgent(t, filepath.Join(work, "a"), "run", "--config", config("a"))
	baseA := a.URL()
	var holder string
	waitUntil(t, 60*time.Second, "agent a to hold the job", func() (bool, string) {
		var r struct {
			Status string    `json:"status"`
			Lease  *apiLease `json:"lease"`
		}
		var list []map[string]any
		if apiGet(t, baseA+"/api/v1/resources", &list) != 200 || len(list) != 1 {
			return false, "no resource yet"
		}
		if apiGet(t, fmt.Sprintf("%s/api/v1/resources/%v", baseA, list[0]["id"]), &r) != 200 || r.Lease == nil {
			return false, fmt.Sprintf("%+v", r)
		}
		holder = r.Lease.Holder
		return r.Status == "reconciling", r.Status
	})
	b := startAgent(t, filepath.Join(work, "b"), "run", "--config", config("b"))
	baseB := b.URL()
	a.Kill9()
	killed := time.Now()

	waitUntil(t, 60*time.Second, "agent a listed as gone", func() (bool, string) {
		var agents []apiAgent
		if apiGet(t, baseB+"/api/v1/agents", &agents) != 200 {
			return false, "no agents"
		}
		for _, ag := range agents {
			if ag.ID == holder {
				return !ag.Alive, fmt.Sprintf("%+v", agents)
			}
		}
		return false, fmt.Sprintf("%s not listed: %+v", holder, agents)
	})
	t.Logf("agent a listed as gone %v after the kill", time.Since(killed).Round(time.Second))
	var list []struct {
		Status string    `json:"status"`
		Lease  *apiLease `json:"lease"`
	}
	if apiGet(t, baseB+"/api/v1/resources", &list) != 200 || len(list) != 1 {
		t.Fatalf("resources on b: %+v", list)
	}
	r := list[0]
	if r.Status != "reconciling" || r.Lease == nil || r.Lease.Holder != holder || !r.Lease.ExpiresAt.After(time.Now()) ||
		r.Lease.Since == nil || !r.Lease.Since.Before(killed) {
		t.Errorf("the job on agent b: %+v (lease %+v), want held by the dead %s until a time to come", r, r.Lease, holder)
	}
	// describe, run as a user would against agent b, says the same.
	out, err := exec.CommandContext(t.Context(), agentBinary(t), "describe", "resource", "Job/slow", "--server", baseB).CombinedOutput()
	if err != nil {
		t.Fatalf("describe: %v\n%s", err, out)
	}
	for _, want := range []string{"Lease holder:", holder + " (not heart-beating)", "Lease since:", "Lease expires:"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("describe of the job held by the killed agent lacks %q:\n%s", want, out)
		}
	}
}
