package faults_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// jobType is the resource type of the crash scenario: jobs run by the
// action instance "work".
const jobType = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Job}
spec:
  action: work
  versions:
    - name: v1
      schema:
        type: object
        properties:
          n: {type: integer}
`

// lockedRun is an apply that may never run twice at once for a resource:
// it holds an exclusive lock on the resource's lock file for its whole run,
// as a deployment tool holds its state lock, and appends what it does to
// the resource's log: "start|end SHELL CHILD GENERATION AGENT TOKEN". When
// the lock is taken it records an OVERLAP, then waits for it. The lock's
// descriptor is closed for the sleeping child, so the lock is held exactly
// as long as the script itself runs.
const lockedRun = `#!/bin/sh
set -u
log="$LOCKS/$NO8S_RESOURCE_NAME.log"
who="$NO8S_RESOURCE_GENERATION $AGENT ${NO8S_FENCING_TOKEN:-0}"
exec 9>>"$LOCKS/$NO8S_RESOURCE_NAME.lock"
if ! flock -n 9; then
	echo "OVERLAP $$ - $who" >>"$log"
	flock 9
fi
sleep $((8 + NO8S_RESOURCE_ID % 4)) 9>&- &
child=$!
echo "start $$ $child $who" >>"$log"
wait "$child"
echo "end $$ $child $who" >>"$log"
echo '{}'
`

// jobRun is one line of a resource's log.
type jobRun struct {
	event         string // start, end or OVERLAP
	shell, child  int
	generation    int64
	agent         string
	fencingToken  int64
	resource, raw string
}

// readJobRuns parses the logs the runs of lockedRun left in dir, by resource.
func readJobRuns(t *testing.T, dir string) map[string][]jobRun {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]jobRun{}
	for _, path := range logs {
		name := strings.TrimSuffix(filepath.Base(path), ".log")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		// The last element is empty, or a line still being written.
		for _, line := range lines[:len(lines)-1] {
			f := strings.Fields(line)
			if len(f) != 6 {
				t.Fatalf("%s: malformed line %q", path, line)
			}
			r := jobRun{event: f[0], agent: f[4], resource: name, raw: line}
			r.shell, _ = strconv.Atoi(f[1])
			r.child, _ = strconv.Atoi(f[2])
			r.generation, _ = strconv.ParseInt(f[3], 10, 64)
			r.fencingToken, _ = strconv.ParseInt(f[5], 10, 64)
			out[name] = append(out[name], r)
		}
	}
	return out
}

// jobsInFlight returns the runs of agent that started last for their
// resource and have not ended. (A run cancelled because its lease could not
// be renewed never ends; the next one replaces it.)
func jobsInFlight(runs map[string][]jobRun, agent string) []jobRun {
	var out []jobRun
	for _, rs := range runs {
		var last *jobRun
		for i, r := range rs {
			switch {
			case r.event == "start":
				last = &rs[i]
			case r.event == "end" && last != nil && r.shell == last.shell:
				last = nil
			}
		}
		if last != nil && last.agent == agent {
			out = append(out, *last)
		}
	}
	return out
}

// processAlive reports whether pid is a running process: not gone, not a zombie
// (this process is not a subreaper, and the orphans of a killed agent may
// go to an init that is slow to reap them).
func processAlive(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestAgentKilledMidRun runs 100 resources on two agents sharing one
// PostgreSQL database and kills one of them with SIGKILL while about half of
// the applies run in it. Its action processes must die with it, so that
// when the other agent takes their resources over after the leases expire,
// no resource ever has two applies running at once; and every resource must
// end ready at its generation, each takeover with a higher fencing token.
func TestAgentKilledMidRun(t *testing.T) {
	t.Parallel()
	const n = 100
	dbURL := pgtest.URL(t)
	work := t.TempDir()
	locks := filepath.Join(work, "locks")
	if err := os.MkdirAll(locks, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(work, "run.sh")
	writeFile(t, script, lockedRun)
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(work, "repo")
	writeFile(t, filepath.Join(repo, "types.yaml"), jobType)
	var jobs strings.Builder
	for i := range n {
		fmt.Fprintf(&jobs, "---\napiVersion: no8s.io/v1\nkind: Job\nmetadata: {name: job%03d}\nspec: {n: %d}\n", i, i)
	}
	writeFile(t, filepath.Join(repo, "jobs.yaml"), jobs.String())

	// More workers than half the resources, so that each agent runs about
	// half and the survivor has workers free for the takeover; a lease much
	// shorter than an apply, so that the takeover comes while the killed
	// agent's applies would still be running. Each agent sizes its pool
	// for its workers, so that 60 leases are renewed on a busy machine.
	config := func(name string) string {
		dir := filepath.Join(work, name)
		return writeConfig(t, dir, fmt.Sprintf(`listen: 127.0.0.1:0
database: %q
sources:
  - name: jobs
    dir: %q
    interval: 1m
actions:
  work:
    plugin: exec
    config:
      command: [%q]
      timeout: 1m
      env: {LOCKS: %q, AGENT: %s}
reconcile: {workers: 60, leaseDuration: 5s, backoff: {initial: 1s, max: 2s}}
`, dbURL, repo, script, locks, name))
	}
	a := startAgent(t, filepath.Join(work, "a"), "run", "--config", config("a"))
	b := startAgent(t, filepath.Join(work, "b"), "run", "--config", config("b"))
	a.URL()
	base := b.URL()
	started := time.Now()

	waitUntil(t, 60*time.Second, "about half of the applies to run in agent a", func() (bool, string) {
		runs := readJobRuns(t, locks)
		ina, inb := len(jobsInFlight(runs, "a")), len(jobsInFlight(runs, "b"))
		return ina >= 35 && inb >= 35, fmt.Sprintf("%d applies running in a, %d in b", ina, inb)
	})
	a.Kill9()
	killed := time.Now()
	orphans := jobsInFlight(readJobRuns(t, locks), "a")
	t.Logf("killed agent a %s after both served, with %d applies running", killed.Sub(started).Round(time.Millisecond), len(orphans))

	// Its applies die with it: the script and its child. Survivors are
	// reported, not fatal, so that the overlaps they cause are reported too.
	survivors := func() []string {
		var out []string
		for _, r := range orphans {
			for _, pid := range []int{r.shell, r.child} {
				if processAlive(pid) {
					out = append(out, fmt.Sprintf("%s: %d of %q", r.resource, pid, r.raw))
				}
			}
		}
		return out
	}
	tick := time.NewTicker(50 * time.Millisecond)
	for deadline := time.Now().Add(5 * time.Second); len(survivors()) > 0 && time.Now().Before(deadline); {
		<-tick.C
	}
	tick.Stop()
	if s := survivors(); len(s) > 0 {
		t.Errorf("%d processes of the killed agent's applies still run %s after the kill, such as %s",
			len(s), time.Since(killed).Round(time.Millisecond), s[0])
	} else {
		t.Logf("the killed agent's applies were gone %s after the kill", time.Since(killed).Round(time.Millisecond))
	}

	waitUntil(t, 90*time.Second, "every resource to be ready at its generation", func() (bool, string) {
		if b.Exited() {
			t.Fatal("agent b exited")
		}
		rs := listResources(t, base)
		if len(rs) != n {
			return false, fmt.Sprintf("%d resources, want %d", len(rs), n)
		}
		notReady := 0
		var example string
		for name, r := range rs {
			if r.Status != "ready" || r.ObservedGeneration != r.Generation || r.Generation != 1 {
				notReady++
				example = fmt.Sprintf("%s: %s generation %d observed %d (%s)", name, r.Status, r.Generation, r.ObservedGeneration, r.StatusMessage)
			}
		}
		return notReady == 0, fmt.Sprintf("%d not ready, such as %s", notReady, example)
	})
	t.Logf("every resource ready %s after the kill", time.Since(killed).Round(time.Millisecond))

	runs := readJobRuns(t, locks)
	if len(runs) != n {
		t.Errorf("%d resources ran, want %d", len(runs), n)
	}
	killedRun := map[string]jobRun{}
	for _, r := range orphans {
		killedRun[r.resource] = r
	}
	overlapped := 0
	for name, rs := range runs {
		var last jobRun
		for _, r := range rs {
			switch r.event {
			case "OVERLAP":
				overlapped++
				t.Errorf("%s: two applies at once: %q while another held the lock", name, r.raw)
			case "start":
				if r.generation != 1 {
					t.Errorf("%s: %q applies generation %d, want 1", name, r.raw, r.generation)
				}
				// Every claim has a higher token than the one before it.
				if r.fencingToken <= last.fencingToken {
					t.Errorf("%s: %q started with fencing token %d after a run with %d", name, r.raw, r.fencingToken, last.fencingToken)
				}
				last = r
			case "end":
				if k, ok := killedRun[name]; ok && r.shell == k.shell {
					t.Errorf("%s: the apply the kill interrupted ran to its end: %q", name, r.raw)
				}
			}
		}
		if k, ok := killedRun[name]; ok && (last.agent != "b" || last.shell == k.shell) {
			t.Errorf("%s: the last apply is %q, want agent b's takeover of %q", name, last.raw, k.raw)
		}
	}
	if overlapped > 0 {
		t.Errorf("%d applies started while another apply of their resource still ran", overlapped)
	}
}
