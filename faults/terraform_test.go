package faults_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action/terraform/tofutest"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// stackType is the resource type of the terraform scenario.
const stackType = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Stack}
spec:
  action: tf
  versions:
    - name: v1
      schema:
        type: object
        properties:
          size: {type: integer}
`

// slowModule logs the start and end of each create of its one resource and
// waits, while the gate file exists, in between: an apply that holds the
// state lock for as long as the test wants. Each create holds a file lock
// while it runs, and logs an OVERLAP when another holds it.
const slowModule = `
variable "size" { type = number }
variable "no8s_generation" { type = number }
resource "terraform_data" "stack" {
  input            = { size = var.size }
  triggers_replace = [var.size, var.no8s_generation]
  provisioner "local-exec" {
    command = "exec 9>>%[1]s.lock; if ! flock -n 9; then echo OVERLAP $$ >> %[1]s; flock 9; fi; echo start $$ >> %[1]s; while [ -e %[2]s ]; do sleep 0.1; done; echo end $$ >> %[1]s"
  }
}
output "size" { value = terraform_data.stack.output.size }
`

// tofuProcesses returns the pids of the tofu processes running in dir.
func tofuProcesses(t *testing.T, bin, dir string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if exe == bin && cwd == dir && processAlive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// TestTerraformAgentKilledMidApply kills an agent while OpenTofu applies a
// resource's module, twice. The first time only the agent dies: OpenTofu
// must be interrupted, stop, and release the state lock by itself. The
// second time OpenTofu dies too, as in a machine crash, and leaves the lock
// held in its backend: the next agent must see that the run which held it
// is gone, force-unlock it (logging the lock id) and apply. Each time the
// resource ends ready, and no two applies ever run at once.
func TestTerraformAgentKilledMidApply(t *testing.T) {
	t.Parallel()
	bin := tofutest.Binary(t)
	state := tofutest.NewStateServer(t)
	dbURL := pgtest.URL(t)
	work := t.TempDir()
	gate, runs := filepath.Join(work, "gate"), filepath.Join(work, "runs.log")
	module := filepath.Join(work, "module")
	writeFile(t, filepath.Join(module, "main.tf"), fmt.Sprintf(slowModule, runs, gate))
	repo := filepath.Join(work, "repo")
	writeFile(t, filepath.Join(repo, "types.yaml"), stackType)
	stack := func(size int) {
		writeFile(t, filepath.Join(repo, "stack.yaml"), fmt.Sprintf("apiVersion: no8s.io/v1\nkind: Stack\nmetadata: {name: prod}\nspec: {size: %d}\n", size))
	}
	workDirs := filepath.Join(work, "tf")
	stackDir := filepath.Join(workDirs, "tf", "Stack", "prod")
	config := func(name string) string {
		return writeConfig(t, filepath.Join(work, name), stacksConfig(dbURL, repo, fmt.Sprintf(`  tf:
    plugin: terraform
    config:
      binary: %q
      module: %q
      workingDir: %q
      backend: |
%s
      timeout: 2m
`, bin, module, workDirs, indent(state.Backend(), "        "))))
	}
	readRuns := func() []string {
		b, _ := os.ReadFile(runs)
		return strings.Fields(strings.ReplaceAll(string(b), "\n", " | "))
	}
	waitStarted := func(n int) {
		waitUntil(t, 60*time.Second, fmt.Sprintf("apply %d to start", n), func() (bool, string) {
			b, _ := os.ReadFile(runs)
			return strings.Count(string(b), "start") >= n, string(b)
		})
	}
	waitReady := func(a *agent, gen int64) {
		base := a.URL()
		waitUntil(t, 90*time.Second, fmt.Sprintf("the stack to be ready at generation %d", gen), func() (bool, string) {
			r, ok := listResources(t, base)["prod"]
			return ok && r.Status == "ready" && r.ObservedGeneration == gen && r.Generation == gen,
				fmt.Sprintf("%+v", r)
		})
	}

	// 1. Only the agent dies.
	stack(1)
	writeFile(t, gate, "")
	a := startAgent(t, filepath.Join(work, "a"), "run", "--config", config("a"))
	a.URL()
	waitStarted(1)
	running := tofuProcesses(t, bin, stackDir)
	if len(running) == 0 {
		t.Fatal("no tofu process runs the apply")
	}
	a.Kill9()
	waitUntil(t, 40*time.Second, "OpenTofu to stop after the agent died", func() (bool, string) {
		left := tofuProcesses(t, bin, stackDir)
		return len(left) == 0, fmt.Sprintf("still running: %v", left)
	})
	if state.Held("tf", "Stack", "prod") {
		t.Error("OpenTofu left the state locked when the agent died")
	}
	if err := os.Remove(gate); err != nil {
		t.Fatal(err)
	}
	b := startAgent(t, filepath.Join(work, "b"), "run", "--config", config("b"))
	waitReady(b, 1)
	if state.Held("tf", "Stack", "prod") {
		t.Error("the state is locked after the takeover's apply")
	}

	// 2. OpenTofu dies with the agent and leaves its lock.
	stack(2)
	writeFile(t, gate, "")
	waitStarted(3)
	running = tofuProcesses(t, bin, stackDir)
	if len(running) == 0 {
		t.Fatal("no tofu process runs the second apply")
	}
	for _, pid := range running {
		// Its group: OpenTofu, its supervisor and the provisioner it runs,
		// as a crash would.
		pgid, err := syscall.Getpgid(pid)
		if err != nil {
			t.Fatal(err)
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	b.Kill9()
	if !state.Held("tf", "Stack", "prod") {
		t.Fatal("the killed OpenTofu left no lock: the scenario needs one")
	}
	if err := os.Remove(gate); err != nil {
		t.Fatal(err)
	}
	c := startAgent(t, filepath.Join(work, "c"), "run", "--config", config("c"))
	waitReady(c, 2)
	if state.Held("tf", "Stack", "prod") {
		t.Error("the state is locked after the takeover's apply")
	}
	if !strings.Contains(c.Log(), "force-unlocking") || !strings.Contains(c.Log(), "lock=") {
		t.Errorf("the forced unlock is not logged:\n%s", c.Log())
	}

	// Never two applies at once.
	if log := mustRead(t, runs); strings.Contains(log, "OVERLAP") {
		t.Errorf("two applies ran at once:\n%s", log)
	}
	t.Logf("runs: %v", readRuns())
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// stacksConfig is an agent configuration with the folder source "stacks"
// at repo and the action instances given (YAML, indented under "actions:",
// ending in a newline).
func stacksConfig(dbURL, repo, actions string) string {
	return fmt.Sprintf(`listen: 127.0.0.1:0
database: %q
sources:
  - name: stacks
    dir: %q
    interval: 1m
actions:
%sreconcile: {workers: 2, leaseDuration: 3s, backoff: {initial: 1s, max: 2s}}
`, dbURL, repo, actions)
}
