package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
)

// binary builds the agent once per test into a temporary folder.
func binary(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "no8s-agent")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goBin, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// process is the agent binary running in a folder.
type process struct {
	t    *testing.T
	cmd  *exec.Cmd
	log  *lockedWriter
	done chan error
}

func startBinary(t *testing.T, bin, dir string, args ...string) *process {
	t.Helper()
	p := &process{t: t, log: &lockedWriter{w: &bytes.Buffer{}}, done: make(chan error, 1)}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", p.log)
		}
	})
	return p
}

// addr waits for the agent to serve and returns its base URL.
func (p *process) addr() string {
	p.t.Helper()
	deadline := time.After(60 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if m := servingRE.FindStringSubmatch(p.log.String()); m != nil {
			return "http://" + m[1]
		}
		select {
		case err := <-p.done:
			p.done <- err
			p.t.Fatalf("the agent exited before serving: %v", err)
		case <-deadline:
			p.t.Fatal("the agent did not serve within 60s")
		case <-tick.C:
		}
	}
}

// stop sends SIGTERM, as a service manager does, and waits for the exit.
func (p *process) stop() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			p.t.Fatalf("the agent exited with %v after SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		p.t.Fatal("the agent did not exit within 30s of SIGTERM")
	}
}

// resources reads every resource through the API.
func resources(t *testing.T, base string) map[string]api.Resource {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/resources")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list []api.Resource
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	out := map[string]api.Resource{}
	for _, r := range list {
		out[r.Name] = r
	}
	return out
}

// attempts counts each resource's reconcile attempts through the API.
func attempts(t *testing.T, base string, rs map[string]api.Resource) map[string]int {
	t.Helper()
	out := map[string]int{}
	for name, r := range rs {
		resp, err := http.Get(fmt.Sprintf("%s/api/v1/resources/%d/history", base, r.ID))
		if err != nil {
			t.Fatal(err)
		}
		var h []api.ReconcileRecord
		err = json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[name] = len(h)
	}
	return out
}

// waitResources polls the API until ok holds for the resources.
func waitResources(t *testing.T, p *process, base, what string, ok func(map[string]api.Resource) bool) map[string]api.Resource {
	t.Helper()
	deadline := time.After(60 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		rs := resources(t, base)
		if ok(rs) {
			return rs
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("waiting for %s: the agent exited: %v", what, err)
		case <-deadline:
			t.Fatalf("waiting for %s: not after 60s: %+v", what, rs)
		case <-tick.C:
		}
	}
}

func allReady(rs map[string]api.Resource) bool {
	if len(rs) != 4 {
		return false
	}
	for _, r := range rs {
		if r.Status != manifest.PhaseReady || r.ObservedGeneration != r.Generation {
			return false
		}
	}
	return true
}

// TestNewcomerPath runs the README's first command with the built binary on
// a copy of the example, with nothing but the files: the embedded store is
// created, every example resource becomes ready through the API and the
// tour's get, the tour's manifest edit is reconciled at generation 2, a second agent on the same file is
// refused, and after SIGTERM and a restart nothing that did not change is
// reconciled again.
func TestNewcomerPath(t *testing.T) {
	root := copyExample(t)
	t.Parallel()
	bin := binary(t)
	// The README's command, with the port left to the system so that tests
	// can run side by side.
	args := append(readmeAgentArgs(t, "run"), "--listen", "127.0.0.1:0")
	start := time.Now()
	first := startBinary(t, bin, root, args...)
	base := first.addr()
	waitResources(t, first, base, "every example resource ready", allReady)
	t.Logf("start to all 4 example resources ready: %s", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(first.log.String(), `msg="using store" store=embedded path=.no8s/state.db`) {
		t.Errorf("the agent does not say where its embedded store is")
	}
	if _, err := os.Stat(filepath.Join(root, ".no8s", "state.db")); err != nil {
		t.Fatalf("embedded store: %v", err)
	}
	// The tour's get reads the same store while the agent runs.
	checkReadmeGet(t, bin, root)

	second := startBinary(t, bin, root, args...)
	select {
	case err := <-second.done:
		second.done <- err
		if err == nil || !strings.Contains(second.log.String(), "state.db") || !strings.Contains(second.log.String(), "stop that agent first") {
			t.Errorf("a second agent on the same file: %v\n%s", err, second.log)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a second agent on the same file was not refused")
	}

	tourFile, tourFrom, tourTo := readmeEdit(t)
	dbFile := filepath.Join(root, filepath.FromSlash(tourFile))
	edit := func(from, to string) {
		t.Helper()
		data, err := os.ReadFile(dbFile)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(data, []byte(from)) {
			t.Fatalf("%s lacks %q", dbFile, from)
		}
		if err := os.WriteFile(dbFile, bytes.Replace(data, []byte(from), []byte(to), 1), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit(tourFrom, tourTo)
	rs := waitResources(t, first, base, "production-pg reconciled at generation 2", func(rs map[string]api.Resource) bool {
		r := rs["production-pg"]
		return allReady(rs) && r.Generation == 2 && r.ObservedGeneration == 2
	})
	if !strings.Contains(string(rs["production-pg"].Spec), `"storage_gb":`+strings.TrimPrefix(tourTo, "storage_gb: ")) {
		t.Errorf("spec = %s", rs["production-pg"].Spec)
	}
	before := attempts(t, base, rs)
	first.stop()

	// Restarted, the agent reconciles what changed and nothing else: once
	// staging-pg's edit is reconciled, the others have the attempts they had.
	third := startBinary(t, bin, root, args...)
	base = third.addr()
	edit("storage_gb: 50\n", "storage_gb: 60\n")
	rs = waitResources(t, third, base, "staging-pg reconciled at generation 2", func(rs map[string]api.Resource) bool {
		r := rs["staging-pg"]
		return allReady(rs) && r.Generation == 2 && r.ObservedGeneration == 2
	})
	after := attempts(t, base, rs)
	for name, n := range before {
		want := n
		if name == "staging-pg" {
			want = n + 1
		}
		if after[name] != want {
			t.Errorf("%s: %d attempts after the restart, want %d", name, after[name], want)
		}
	}
	third.stop()
}
