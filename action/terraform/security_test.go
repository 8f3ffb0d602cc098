package terraform_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/proc"
	"github.com/no8s/no8s-agent/action/proc/proctest"
	"github.com/no8s/no8s-agent/action/terraform"
	"github.com/no8s/no8s-agent/action/terraform/tofutest"
)

// agentEnv makes the test binary a stand-in for the agent: it builds an
// instance from the variable's value (the settings, as JSON), applies
// Database/killed and blocks in Apply until it is killed.
const agentEnv = "NO8S_TERRAFORM_TEST_AGENT"

func TestMain(m *testing.M) {
	if cfg, ok := os.LookupEnv(agentEnv); ok {
		os.Exit(runAgent(cfg))
	}
	if _, ok := os.LookupEnv(handleEnv); ok {
		os.Exit(printHandle())
	}
	os.Exit(m.Run())
}

func runAgent(cfg string) int {
	a, err := terraform.New(action.Settings{Instance: "tf", Config: json.RawMessage(cfg), Getenv: os.LookupEnv})
	if err != nil {
		fmt.Fprintln(os.Stderr, "New:", err)
		return 2
	}
	_, err = a.Apply(context.Background(), request("killed", 1, `{}`, action.NoopReporter{}))
	fmt.Fprintln(os.Stderr, "Apply returned:", err)
	return 3
}

// recordingModule's one resource appends "created <tag>" to a file when it
// is created and "destroyed <tag>" when it is destroyed. Modules of
// different tags declare the same resource, so that one run against the
// other's state replaces it.
const recordingModule = `
resource "terraform_data" "res" {
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

// newInstance builds the terraform instance name on its own copy of module,
// with work as its workingDir.
func newInstance(t *testing.T, name, module, work string, extra map[string]any) (action.Action, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(module), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{"binary": tofutest.Binary(t), "module": dir, "workingDir": work, "timeout": "2m"}
	for k, v := range extra {
		cfg[k] = v
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"PATH": os.Getenv("PATH"), "HOME": dir, "TF_VAR_password": secretValue}
	return terraform.New(action.Settings{Instance: name, Config: raw,
		Getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func mustInstance(t *testing.T, name, module, work string, extra map[string]any) action.Action {
	t.Helper()
	a, err := newInstance(t, name, module, work, extra)
	if err != nil {
		t.Fatalf("New %s: %v", name, err)
	}
	return a
}

func readEvents(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

// A resource that an instance applied and that is then bound to another
// instance is refused by the new one, for every operation, before it runs
// anything: its module would otherwise run against the old instance's state
// and destroy what that one made as a plain update.
func TestInstanceChangeRefused(t *testing.T) {
	t.Parallel()
	work := filepath.Join(t.TempDir(), "work")
	events := filepath.Join(t.TempDir(), "events")
	a := mustInstance(t, "tf-a", fmt.Sprintf(recordingModule, "a", events), work, nil)
	b := mustInstance(t, "tf-b", fmt.Sprintf(recordingModule, "b", events), work, nil)
	ctx := t.Context()
	if _, err := a.Apply(ctx, request("moved", 1, `{}`, &recorder{})); err != nil {
		t.Fatalf("apply by tf-a: %v", err)
	}
	if got := readEvents(t, events); got != "created a" {
		t.Fatalf("events after tf-a's apply: %q", got)
	}

	wantRefusal := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s by tf-b: no error", what)
			return
		}
		for _, w := range []string{`Database/moved has state under terraform instance "tf-a"`, "destroy it", "mv "} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s by tf-b: error lacks %q:\n%v", what, w, err)
			}
		}
	}
	rep := &recorder{}
	_, err := b.Apply(ctx, request("moved", 2, `{}`, rep))
	wantRefusal("apply", err)
	plan, err := b.(action.Planner).Plan(ctx, request("moved", 2, `{}`, rep))
	wantRefusal("drift check", err)
	preview := request("moved", 2, `{}`, rep)
	preview.FencingToken = 0
	plan, err = b.(action.Planner).Plan(ctx, preview)
	wantRefusal("preview", err)
	_ = plan
	_, err = b.Destroy(ctx, request("moved", 2, `{}`, rep))
	wantRefusal("destroy", err)
	if got := readEvents(t, events); got != "created a" {
		t.Errorf("events after tf-b's attempts: %q: the state of tf-a was acted on", got)
	}
	if strings.Contains(rep.all(), "init") || strings.Contains(rep.all(), "plan") {
		t.Errorf("tf-b ran the binary: %s", rep.all())
	}

	// tf-a still owns it: nothing to change.
	res, err := a.Apply(ctx, request("moved", 3, `{}`, &recorder{}))
	if err != nil || res.Created+res.Updated+res.Deleted != 0 {
		t.Fatalf("apply by tf-a again: %+v %v", res, err)
	}
	// And destroys it when told to.
	if _, err := a.Destroy(ctx, request("moved", 3, `{}`, &recorder{})); err != nil {
		t.Fatal(err)
	}
	if got := readEvents(t, events); got != "created a destroyed a" {
		t.Errorf("events after tf-a's destroy: %q", got)
	}
	// Gone from tf-a: tf-b may make it anew.
	if _, err := b.Apply(ctx, request("moved", 4, `{}`, &recorder{})); err != nil {
		t.Fatalf("apply by tf-b once tf-a destroyed it: %v", err)
	}
	if got := readEvents(t, events); got != "created a destroyed a created b" {
		t.Errorf("events: %q", got)
	}
}

// Each instance keeps a resource's state under a key of its own: the work
// folder is <workingDir>/<instance>/<kind>/<name>, and a backend's key holds
// the instance, the kind and the name.
func TestStateKeyedByInstanceAndIdentity(t *testing.T) {
	t.Parallel()
	work := filepath.Join(t.TempDir(), "work")
	events := filepath.Join(t.TempDir(), "events")
	a := mustInstance(t, "tf-a", fmt.Sprintf(recordingModule, "a", events), work, nil)
	if _, err := a.Apply(t.Context(), request("keyed", 1, `{}`, &recorder{})); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(work, "tf-a", "Database", "keyed", "terraform.tfstate")); err != nil {
		t.Errorf("no state in the instance's work folder: %v", err)
	}
	if _, err := os.Stat(filepath.Join(work, "Database")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a work folder without the instance: %v", err)
	}

	srv := tofutest.NewStateServer(t)
	remote := mustInstance(t, "tf-r", fmt.Sprintf(recordingModule, "r", events), filepath.Join(t.TempDir(), "work"), map[string]any{"backend": srv.Backend()})
	if _, err := remote.Apply(t.Context(), request("keyed", 1, `{}`, &recorder{})); err != nil {
		t.Fatal(err)
	}
	if !srv.HasState("tf-r", "Database", "keyed") {
		t.Errorf("no state at the instance's key in the backend: %v", srv.Keys())
	}

	// A backend template whose key does not tell instances or resources
	// apart is refused when the agent starts.
	for _, tmpl := range []string{
		`backend "http" { address = "` + srv.URL + `/state/{{ .Kind }}-{{ .Name }}" }`,
		`backend "http" { address = "` + srv.URL + `/state/{{ .Instance }}-{{ .Name }}" }`,
		`backend "http" { address = "` + srv.URL + `/state/{{ .Instance }}" }`,
	} {
		_, err := newInstance(t, "tf-x", fmt.Sprintf(recordingModule, "x", events), work, map[string]any{"backend": tmpl})
		if err == nil || !strings.Contains(err.Error(), "backend: ") || !strings.Contains(err.Error(), "{{ .Key }}") {
			t.Errorf("backend %s: error %v, want one that asks for {{ .Key }}", tmpl, err)
		}
	}
}

// A work folder of the earlier layout (<workingDir>/<kind>/<name>) is
// moved under the instance that runs the resource on its first use, state
// and all, when it was made with that instance's module; otherwise it is
// refused, and left as it is.
func TestLegacyWorkFolder(t *testing.T) {
	t.Parallel()
	work := filepath.Join(t.TempDir(), "work")
	events := filepath.Join(t.TempDir(), "events")
	tf := mustInstance(t, "tf", fmt.Sprintf(recordingModule, "a", events), work, nil)
	other := mustInstance(t, "other", fmt.Sprintf(recordingModule, "o", events), work, nil)
	ctx := t.Context()

	// toLegacy moves the resource's folder where an earlier version kept it.
	toLegacy := func(instance, name string) string {
		t.Helper()
		legacy := filepath.Join(work, "Database", name)
		current := filepath.Join(work, instance, "Database", name)
		if _, err := os.Stat(current); err == nil {
			if err := os.MkdirAll(filepath.Dir(legacy), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(current, legacy); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := os.Stat(filepath.Join(legacy, "terraform.tfstate")); err != nil {
			t.Fatalf("no state in the earlier layout's folder: %v", err)
		}
		return legacy
	}

	if _, err := tf.Apply(ctx, request("old", 1, `{}`, &recorder{})); err != nil {
		t.Fatal(err)
	}
	legacy := toLegacy("tf", "old")
	res, err := tf.Apply(ctx, request("old", 2, `{}`, &recorder{}))
	if err != nil {
		t.Fatalf("apply over the earlier layout: %v", err)
	}
	if res.Created+res.Updated+res.Deleted != 0 {
		t.Errorf("the apply over the earlier layout changed something: %+v", res)
	}
	if _, err := os.Stat(legacy); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the earlier layout's folder stays: %v", err)
	}
	if _, err := os.Stat(filepath.Join(work, "tf", "Database", "old", "terraform.tfstate")); err != nil {
		t.Errorf("the state did not move under the instance: %v", err)
	}

	// Made by another instance's module: refused, and left alone.
	if _, err := other.Apply(ctx, request("foreign", 1, `{}`, &recorder{})); err != nil {
		t.Fatal(err)
	}
	legacy = toLegacy("other", "foreign")
	before, err := os.ReadFile(filepath.Join(legacy, "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	rep := &recorder{}
	_, err = tf.Apply(ctx, request("foreign", 2, `{}`, rep))
	if err == nil || !strings.Contains(err.Error(), "Database/foreign has state in "+legacy) || !strings.Contains(err.Error(), "mv ") {
		t.Errorf("apply of a folder another module made: %v", err)
	}
	after, err := os.ReadFile(filepath.Join(legacy, "terraform.tfstate"))
	if err != nil || string(after) != string(before) {
		t.Errorf("the refused folder's state changed (%v)", err)
	}
	if got := readEvents(t, events); got != "created a created o" {
		t.Errorf("events: %q", got)
	}
	if strings.Contains(rep.all(), "init") {
		t.Errorf("the binary ran: %s", rep.all())
	}
}

// The spec cannot set the variables that the agent sets (no8s_*) or that
// the operator passes from the environment (credentials): such a field is
// refused, naming it, before the binary runs.
func TestSpecCannotOverrideOperatorVariables(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		extra map[string]any
		spec  string
		want  string
	}{
		{"agent variable", nil, `{"size": 1, "no8s_name": "evil"}`, "spec.no8s_name: reserved"},
		{"any no8s_ name", nil, `{"size": 1, "no8s_later": 1}`, "spec.no8s_later: reserved"},
		{"passEnv credential", nil, `{"size": 1, "password": "from-the-spec"}`, "spec.password: reserved"},
		{"env setting", map[string]any{"env": map[string]string{"TF_VAR_region": "eu"}}, `{"size": 1, "region": "us"}`, "spec.region: reserved"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, dbModule, tc.extra)
			ops := map[string]func(*action.Request) error{
				"apply": func(r *action.Request) error { _, err := f.act.Apply(t.Context(), r); return err },
				"plan":  func(r *action.Request) error { _, err := f.act.(action.Planner).Plan(t.Context(), r); return err },
				"destroy": func(r *action.Request) error {
					_, err := f.act.Destroy(t.Context(), r)
					return err
				},
			}
			for op, run := range ops {
				rep := &recorder{}
				err := run(request("vars", 1, tc.spec, rep))
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: error %v, want %q", op, err, tc.want)
				}
				if strings.Contains(rep.all(), "init") || strings.Contains(rep.all(), "plan") {
					t.Errorf("%s: the binary ran: %s", op, rep.all())
				}
			}
			if _, err := os.Stat(filepath.Join(f.work, "tf", "Database", "vars")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a work folder was made: %v", err)
			}
		})
	}
}

// The settings may not give no8s_* variables, nor a variable that the
// environment passes as well.
func TestVarsSettingCollisions(t *testing.T) {
	t.Parallel()
	work := filepath.Join(t.TempDir(), "work")
	for _, tc := range []struct {
		vars map[string]any
		want string
	}{
		{map[string]any{"no8s_name": "x"}, "vars: no8s_name: reserved"},
		{map[string]any{"password": "x"}, "vars: password: also passed as TF_VAR_password"},
	} {
		_, err := newInstance(t, "tf", dbModule, work, map[string]any{"vars": tc.vars, "passEnv": []string{"TF_VAR_password"}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("vars %v: error %v, want %q", tc.vars, err, tc.want)
		}
	}
}

// groupMembers lists the processes of group pgid that have not ended
// (zombies are over, whoever reaps them).
func groupMembers(t *testing.T, pgid int) []int {
	t.Helper()
	pids, err := proc.GroupMembers(pgid)
	if err != nil {
		t.Error(err) // not Fatal: called from the action's goroutines too
	}
	return pids
}

// startPiped starts cmd with pipes to its standard input and output.
func startPiped(t *testing.T, cmd *exec.Cmd) (io.WriteCloser, io.ReadCloser) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return stdin, stdout
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("%s: not after %v: %s", what, timeout, state)
		case <-tick.C:
		}
	}
}

// A takeover waits until the previous attempt's whole process group is
// gone, not only the process it started: a provisioner that outlived the
// binary would otherwise run next to the new apply.
func TestTakeoverWaitsForTheProcessGroup(t *testing.T) {
	t.Parallel()
	f := newFixture(t, dbModule, nil)
	// The previous run: its leader is gone, one of its processes is not.
	leader := exec.Command("sh", "-c", "sleep 300 & echo $!; read _")
	leader.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, stdout := startPiped(t, leader)
	pgid := leader.Process.Pid
	t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
	line := make([]byte, 32)
	n, err := stdout.Read(line)
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(line[:n])))
	if err != nil {
		t.Fatalf("child pid %q: %v", line[:n], err)
	}
	start := processStart(t, pgid)
	stdin.Close()
	_ = leader.Wait()
	if len(groupMembers(t, pgid)) == 0 {
		t.Fatal("the previous run's group is gone already: the scenario needs it alive")
	}

	var early, waited atomic.Bool
	rep := &recorder{onLine: func(m string) {
		switch {
		case strings.HasPrefix(m, "waiting for the previous run"):
			waited.Store(true)
			_ = syscall.Kill(child, syscall.SIGKILL)
		case m == "init" || m == "plan":
			if len(groupMembers(t, pgid)) > 0 {
				early.Store(true)
			}
		}
	}}
	host, _ := os.Hostname()
	req := request("takeover", 1, `{"size": 1}`, rep)
	req.PriorHandle = &action.Handle{Value: fmt.Sprintf(`{"host":%q,"pid":%d,"start":%q}`, host, pgid, start),
		Operation: action.OperationApply, Generation: 1}
	if _, err := f.act.Apply(t.Context(), req); err != nil {
		t.Fatalf("apply: %v", err)
	}
	if !waited.Load() {
		t.Error("the apply did not wait for the previous run's group")
	}
	if early.Load() {
		t.Error("the apply ran the binary while the previous run's group was alive")
	}
}

// When the agent is killed with SIGKILL during an apply, the processes a
// provisioner started die with it, promptly: they would otherwise run on
// next to the apply of the agent that takes the resource over.
func TestAgentKilledStopsProvisioners(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidfile, marker := filepath.Join(dir, "pid"), filepath.Join(dir, "ended")
	module := filepath.Join(dir, "module")
	if err := os.MkdirAll(module, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(module, "main.tf"), []byte(fmt.Sprintf(`
resource "terraform_data" "slow" {
  input = "x"
  provisioner "local-exec" {
    command = "echo $$ > %[1]s.tmp; mv %[1]s.tmp %[1]s; sleep 120; echo ended >> %[2]s"
  }
}
`, pidfile, marker)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := json.Marshal(map[string]any{"binary": tofutest.Binary(t), "module": module, "workingDir": filepath.Join(dir, "work")})
	if err != nil {
		t.Fatal(err)
	}
	var agentErr strings.Builder
	agent := proctest.StartAgent(t, &agentErr, agentEnv+"="+string(cfg))
	var shell int
	waitFor(t, 60*time.Second, "the provisioner to start", func() (bool, string) {
		b, err := os.ReadFile(pidfile)
		if err != nil {
			return false, agentErr.String()
		}
		shell, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil, string(b)
	})
	pgid, err := syscall.Getpgid(shell)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
	if err := agent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	agent.Wait()
	waitFor(t, 15*time.Second, "the provisioner's processes to die with the agent", func() (bool, string) {
		left := groupMembers(t, pgid)
		return len(left) == 0, fmt.Sprintf("group %d still has %v", pgid, left)
	})
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the provisioner ran to its end: %v", err)
	}
	if strings.Contains(agentErr.String(), "Apply returned") {
		t.Fatalf("Apply returned before the agent was killed: %s", agentErr.String())
	}
}

// A work folder of the earlier layout whose state is in a backend, under a
// key without the instance, moves under its instance on first use, and its
// state to the instance's key: nothing is planned anew.
func TestLegacyWorkFolderMovesRemoteState(t *testing.T) {
	t.Parallel()
	srv := tofutest.NewStateServer(t)
	work := filepath.Join(t.TempDir(), "work")
	events := filepath.Join(t.TempDir(), "events")
	tf := mustInstance(t, "tf", fmt.Sprintf(recordingModule, "a", events), work, map[string]any{"backend": srv.Backend()})
	ctx := t.Context()
	if _, err := tf.Apply(ctx, request("mig", 1, `{}`, &recorder{})); err != nil {
		t.Fatal(err)
	}

	// Make it what an earlier version left: the folder at
	// <workingDir>/<kind>/<name>, initialised with a key of kind and name,
	// where the backend holds the state, and no instance on record.
	current, legacy := filepath.Join(work, "tf", "Database", "mig"), filepath.Join(work, "Database", "mig")
	if err := os.MkdirAll(filepath.Dir(legacy), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(current, legacy); err != nil {
		t.Fatal(err)
	}
	httpDo := func(method, path string, body io.Reader) []byte {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d %v", method, path, resp.StatusCode, err)
		}
		return b
	}
	state := httpDo(http.MethodGet, "/state/tf/Database/mig", nil)
	httpDo(http.MethodPost, "/state/Database-mig", bytes.NewReader(state))
	httpDo(http.MethodDelete, "/state/tf/Database/mig", nil)
	oldBackend := strings.ReplaceAll(srv.Backend(), "{{ .Key }}", "Database-mig")
	if err := os.WriteFile(filepath.Join(legacy, "no8s_backend.tf"), []byte("terraform {\n"+oldBackend+"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tofu(t, legacy, "init", "-input=false", "-no-color", "-reconfigure")
	var st map[string]any
	raw, err := os.ReadFile(filepath.Join(legacy, ".no8s-module.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	delete(st, "instance")
	st["backendHash"] = "of the earlier key"
	raw, _ = json.Marshal(st)
	if err := os.WriteFile(filepath.Join(legacy, ".no8s-module.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if srv.HasState("tf", "Database", "mig") {
		t.Fatal("the state is still at the instance's key: the scenario needs it elsewhere")
	}

	res, err := tf.Apply(ctx, request("mig", 2, `{}`, &recorder{}))
	if err != nil {
		t.Fatalf("apply over the earlier layout: %v", err)
	}
	if res.Created+res.Updated+res.Deleted != 0 {
		t.Errorf("the apply over the earlier layout changed something: %+v", res)
	}
	if !srv.HasState("tf", "Database", "mig") {
		t.Errorf("the state did not move to the instance's key: %v", srv.Keys())
	}
	if _, err := os.Stat(filepath.Join(current, ".terraform")); err != nil {
		t.Errorf("the folder did not move under the instance: %v", err)
	}
	if got := readEvents(t, events); got != "created a" {
		t.Errorf("events: %q", got)
	}
}
