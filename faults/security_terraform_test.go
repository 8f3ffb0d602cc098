package faults_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action/proc"
	"github.com/no8s/no8s-agent/action/terraform/tofutest"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// recordingStack's one resource appends "created <tag>" to the events
// file when it is created and "destroyed <tag>" when it is destroyed. The
// modules of two tags declare the same resource: one run against the
// other's state replaces it, which the events show.
const recordingStack = `
resource "terraform_data" "stack" {
  input            = "%[1]s"
  triggers_replace = ["%[1]s"]
  provisioner "local-exec" {
    command = "echo created ${self.input} >> %[2]s"
  }
  provisioner "local-exec" {
    when    = destroy
    command = "echo destroyed ${self.input} >> %[2]s"
  }
}
`

// TestSecurityTerraformInstanceMove applies a resource with one terraform
// instance, then binds its manifest to another. The other instance's module
// must never run against the first one's state, which would destroy what
// the first one made as a plain update: the resource fails, saying where
// its state is and how to move it, and nothing is destroyed or created.
// Bound back to the first instance, it is ready again, unchanged.
func TestSecurityTerraformInstanceMove(t *testing.T) {
	t.Parallel()
	bin := tofutest.Binary(t)
	dbURL := pgtest.URL(t)
	work := t.TempDir()
	events := filepath.Join(work, "events")
	modA, modB := filepath.Join(work, "module-a"), filepath.Join(work, "module-b")
	writeFile(t, filepath.Join(modA, "main.tf"), fmt.Sprintf(recordingStack, "a", events))
	writeFile(t, filepath.Join(modB, "main.tf"), fmt.Sprintf(recordingStack, "b", events))
	repo := filepath.Join(work, "repo")
	writeFile(t, filepath.Join(repo, "types.yaml"), strings.Replace(stackType, "action: tf", "action: tfa", 1))
	stack := func(action string) {
		writeFile(t, filepath.Join(repo, "stack.yaml"), fmt.Sprintf("apiVersion: no8s.io/v1\nkind: Stack\nmetadata: {name: prod}\naction: %s\nspec: {size: 1}\n", action))
	}
	workDirs := filepath.Join(work, "tf")
	config := writeConfig(t, filepath.Join(work, "agent"), stacksConfig(dbURL, repo, fmt.Sprintf(`  tfa:
    plugin: terraform
    config: {binary: %q, module: %q, workingDir: %q, timeout: 2m}
  tfb:
    plugin: terraform
    config: {binary: %q, module: %q, workingDir: %q, timeout: 2m}
`, bin, modA, workDirs, bin, modB, workDirs)))
	readEvents := func() string {
		b, err := os.ReadFile(events)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return strings.Join(strings.Fields(string(b)), " ")
	}

	stack("tfa")
	a := startAgent(t, filepath.Join(work, "agent"), "run", "--config", config)
	base := a.URL()
	waitUntil(t, 90*time.Second, "the stack to be ready with tfa", func() (bool, string) {
		r, ok := listResources(t, base)["prod"]
		return ok && r.Status == "ready" && r.ObservedGeneration == r.Generation, fmt.Sprintf("%+v", r)
	})
	if got := readEvents(); got != "created a" {
		t.Fatalf("events after tfa's apply: %q", got)
	}
	// Where tfa keeps the state: under its name (an earlier version kept
	// it in <workingDir>/<kind>/<name>, which tfb then shared).
	stateA := filepath.Join(workDirs, "tfa", "Stack", "prod", "terraform.tfstate")
	if _, err := os.Stat(stateA); err != nil {
		t.Errorf("tfa's state is not in a folder of its own: %v", err)
		stateA = filepath.Join(workDirs, "Stack", "prod", "terraform.tfstate")
	}
	before := mustRead(t, stateA)

	// Moved to tfb: refused, with the way out.
	stack("tfb")
	var moved apiResource
	waitUntil(t, 90*time.Second, "tfb to act on the move", func() (bool, string) {
		r, ok := listResources(t, base)["prod"]
		moved = r
		done := ok && r.Generation > 1 && (r.Status == "failed" || r.Status == "ready")
		return done || readEvents() != "created a", fmt.Sprintf("%+v", r)
	})
	if got := readEvents(); got != "created a" {
		t.Fatalf("events after the move to tfb: %q: tfb ran its module against tfa's state", got)
	}
	if moved.Status != "failed" || !strings.Contains(moved.StatusMessage, `has state under terraform instance "tfa"`) {
		t.Errorf("the move to tfb is not refused: %+v", moved)
	}
	for _, want := range []string{"destroy it first", "mv " + filepath.Dir(stateA)} {
		if !strings.Contains(moved.StatusMessage, want) {
			t.Errorf("the refusal lacks %q: %s", want, moved.StatusMessage)
		}
	}
	if after := mustRead(t, stateA); after != before {
		t.Error("tfa's state changed after the move to tfb")
	}
	if _, err := os.Stat(filepath.Join(workDirs, "tfb", "Stack", "prod")); !os.IsNotExist(err) {
		t.Errorf("tfb made a work folder: %v", err)
	}

	// Bound back: ready, nothing changed.
	stack("tfa")
	waitUntil(t, 90*time.Second, "the stack to be ready with tfa again", func() (bool, string) {
		r, ok := listResources(t, base)["prod"]
		return ok && r.Status == "ready" && r.ObservedGeneration == r.Generation && r.Generation > moved.Generation, fmt.Sprintf("%+v", r)
	})
	if got := readEvents(); got != "created a" {
		t.Errorf("events after binding it back: %q", got)
	}
}

// TestSecurityTerraformKilledMidApply kills the agent with SIGKILL while a
// local-exec provisioner runs a long sleep. The provisioner's processes
// must die promptly with the agent, before they can finish (the sleep ends
// by writing a marker), and the apply of the agent that takes the resource
// over must never run at the same time as them.
func TestSecurityTerraformKilledMidApply(t *testing.T) {
	t.Parallel()
	bin := tofutest.Binary(t)
	dbURL := pgtest.URL(t)
	work := t.TempDir()
	gate, runs, lock := filepath.Join(work, "gate"), filepath.Join(work, "runs.log"), filepath.Join(work, "runs.lock")
	module := filepath.Join(work, "module")
	// Each run logs its shell's pid when it starts and ends, and holds a
	// file lock while it runs (an OVERLAP when another holds it); while the
	// gate exists it sleeps for long, then writes its marker.
	writeFile(t, filepath.Join(module, "main.tf"), fmt.Sprintf(`
variable "size" { type = number }
variable "no8s_generation" { type = number }
resource "terraform_data" "stack" {
  input            = { size = var.size }
  triggers_replace = [var.size, var.no8s_generation]
  provisioner "local-exec" {
    command = "exec 9>>%[2]s; if ! flock -n 9; then echo OVERLAP $$ >> %[1]s; flock 9; fi; echo start $$ >> %[1]s; if [ -e %[3]s ]; then sleep 300; fi; echo end $$ >> %[1]s; touch %[4]s/marker-$$"
  }
}
`, runs, lock, gate, work))
	repo := filepath.Join(work, "repo")
	writeFile(t, filepath.Join(repo, "types.yaml"), stackType)
	writeFile(t, filepath.Join(repo, "stack.yaml"), "apiVersion: no8s.io/v1\nkind: Stack\nmetadata: {name: prod}\nspec: {size: 1}\n")
	config := func(name string) string {
		return writeConfig(t, filepath.Join(work, name), stacksConfig(dbURL, repo, fmt.Sprintf(`  tf:
    plugin: terraform
    config: {binary: %q, module: %q, workingDir: %q, timeout: 2m}
`, bin, module, filepath.Join(work, "tf"))))
	}
	startRE := regexp.MustCompile(`(?m)^start (\d+)$`)

	writeFile(t, gate, "")
	a := startAgent(t, filepath.Join(work, "a"), "run", "--config", config("a"))
	a.URL()
	var first int
	waitUntil(t, 90*time.Second, "the provisioner to start", func() (bool, string) {
		b, _ := os.ReadFile(runs)
		m := startRE.FindSubmatch(b)
		if m == nil {
			return false, string(b)
		}
		first, _ = strconv.Atoi(string(m[1]))
		return true, string(b)
	})
	pgid, err := syscall.Getpgid(first)
	if err != nil {
		t.Fatalf("the provisioner's shell %d: %v", first, err)
	}
	t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
	if len(groupProcesses(t, pgid)) < 2 {
		t.Fatalf("the provisioner's group %d holds %v: the scenario needs its shell and sleep", pgid, groupProcesses(t, pgid))
	}

	// The next agent's run must not wait on the gate: only the sleep of
	// the killed agent's run, if it survived, would hold the lock.
	if err := os.Remove(gate); err != nil {
		t.Fatal(err)
	}
	a.Kill9()
	killedAt := time.Now()
	b := startAgent(t, filepath.Join(work, "b"), "run", "--config", config("b"))
	waitUntil(t, 15*time.Second, "the provisioner's processes to die with the agent", func() (bool, string) {
		left := groupProcesses(t, pgid)
		return len(left) == 0, fmt.Sprintf("group %d still holds %v", pgid, left)
	})
	t.Logf("the provisioner's group was gone %v after the agent died", time.Since(killedAt).Round(time.Millisecond))

	base := b.URL()
	waitUntil(t, 90*time.Second, "the takeover's apply", func() (bool, string) {
		r, ok := listResources(t, base)["prod"]
		return ok && r.Status == "ready" && r.ObservedGeneration == 1, fmt.Sprintf("%+v", r)
	})
	log := mustRead(t, runs)
	if strings.Contains(log, "OVERLAP") {
		t.Errorf("the takeover's apply ran next to the killed agent's provisioner:\n%s", log)
	}
	if strings.Contains(log, fmt.Sprintf("end %d\n", first)) {
		t.Errorf("the killed agent's provisioner ran to its end:\n%s", log)
	}
	if _, err := os.Stat(filepath.Join(work, fmt.Sprintf("marker-%d", first))); !os.IsNotExist(err) {
		t.Errorf("the killed agent's provisioner wrote its marker: %v", err)
	}
	if strings.Count(log, "end ") != 1 {
		t.Errorf("want exactly the takeover's run to end:\n%s", log)
	}
}

// groupProcesses lists the processes of group pgid that have not ended
// (a zombie has: only its reaping is left).
func groupProcesses(t *testing.T, pgid int) []int {
	t.Helper()
	pids, err := proc.GroupMembers(pgid)
	if err != nil {
		t.Fatal(err)
	}
	return pids
}
