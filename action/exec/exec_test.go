package exec

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/manifest"
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>.
const prSetChildSubreaper = 36

// TestMain makes the test process the parent of the orphans of the scripts
// it kills, as the agent is when it runs as PID 1 in a container. Otherwise
// they would go to the system's init, which in some containers never reaps
// them, and a killed process would stay visible as a zombie.
//
// Started with agentEnv set, the test binary is a stand-in for the agent
// instead: see runAgent.
func TestMain(m *testing.M) {
	if cfg, ok := os.LookupEnv(agentEnv); ok {
		os.Exit(runAgent(cfg))
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		fmt.Fprintln(os.Stderr, "prctl(PR_SET_CHILD_SUBREAPER):", errno)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// agentEnv makes the test binary a stand-in for the agent: it builds an
// exec instance from the variable's value (the settings, as JSON), applies
// request() and blocks in Apply until it is killed.
const agentEnv = "NO8S_EXEC_TEST_AGENT"

func runAgent(cfg string) int {
	a, err := New(action.Settings{Instance: "deploy", Config: json.RawMessage(cfg), Getenv: os.LookupEnv})
	if err != nil {
		fmt.Fprintln(os.Stderr, "New:", err)
		return 2
	}
	_, err = a.Apply(context.Background(), request())
	fmt.Fprintln(os.Stderr, "Apply returned:", err)
	return 3
}

// Tests write their scripts before calling t.Parallel. Executing a file
// that was just written fails with ETXTBSY when another goroutine forked
// while the file was open for writing; parallel tests only start once every
// test's sequential part is done, so no fork overlaps a write.

// writeScript writes an executable shell script into dir and returns its path.
func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// newAction builds an exec instance named deploy from cfg.
func newAction(cfg map[string]any, getenv func(string) (string, bool)) (action.Action, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	if getenv == nil {
		getenv = func(string) (string, bool) { return "", false }
	}
	return New(action.Settings{Instance: "deploy", Config: raw, Getenv: getenv})
}

func mustAction(t *testing.T, cfg map[string]any, getenv func(string) (string, bool)) action.Action {
	t.Helper()
	a, err := newAction(cfg, getenv)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

// recorder is a Reporter that keeps what it is told.
type recorder struct {
	mu       sync.Mutex
	progress []string
}

func (r *recorder) SetCondition(manifest.Condition) {}

func (r *recorder) Progress(message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.progress = append(r.progress, message)
}

func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.progress)
}

func request() *action.Request {
	return &action.Request{
		Instance: "deploy",
		Trigger:  "create",
		// Past 2^53, where a JSON number read as a float loses digits.
		FencingToken: 9007199254740993,
		Resource: action.Resource{
			ID:         42,
			Kind:       "Database",
			APIVersion: "example.com/v1",
			Namespace:  "shop",
			Name:       "orders",
			Spec:       json.RawMessage(`{"size":3}`),
			Generation: 7,
			Outputs:    json.RawMessage(`{"old":true}`),
			Source:     "infra",
			Revision:   "main@sha1:abc",
		},
		Reporter: action.NoopReporter{},
	}
}

func TestApplyDestroy(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name   string
		script string
		op     action.Operation
		check  func(t *testing.T, res *action.Result, err error)
	}{
		{
			name:   "request on stdin",
			script: "cat\n",
			op:     action.OperationApply,
			check: func(t *testing.T, res *action.Result, err error) {
				if err != nil {
					t.Fatal(err)
				}
				var got action.Request
				if err := json.Unmarshal(res.Outputs, &got); err != nil {
					t.Fatalf("stdin was not the request's JSON: %v\n%s", err, res.Outputs)
				}
				if got.Operation != action.OperationApply || got.Instance != "deploy" || got.Trigger != "create" ||
					got.Resource.Name != "orders" || string(got.Resource.Spec) != `{"size":3}` ||
					string(got.Resource.Outputs) != `{"old":true}` || got.Resource.Generation != 7 {
					t.Fatalf("stdin = %s", res.Outputs)
				}
			},
		},
		{
			name:   "destroy says so on stdin",
			script: "cat\n",
			op:     action.OperationDestroy,
			check: func(t *testing.T, res *action.Result, err error) {
				if err != nil {
					t.Fatal(err)
				}
				var got action.Request
				if err := json.Unmarshal(res.Outputs, &got); err != nil || got.Operation != action.OperationDestroy {
					t.Fatalf("stdin = %s (%v), want operation destroy", res.Outputs, err)
				}
			},
		},
		{
			name:   "outputs from stdout",
			script: "echo 'creating' >&2\nprintf '  {\"url\": \"https://db\"}\\n\\n'\n",
			op:     action.OperationApply,
			check: func(t *testing.T, res *action.Result, err error) {
				if err != nil {
					t.Fatal(err)
				}
				if string(res.Outputs) != `{"url": "https://db"}` {
					t.Fatalf("Outputs = %q", res.Outputs)
				}
				if res.Message != "creating" {
					t.Fatalf("Message = %q, want the last stderr line", res.Message)
				}
			},
		},
		{
			name:   "empty stdout is no outputs",
			script: "echo done >&2\n",
			op:     action.OperationDestroy,
			check: func(t *testing.T, res *action.Result, err error) {
				if err != nil {
					t.Fatal(err)
				}
				if res.Outputs != nil {
					t.Fatalf("Outputs = %q, want none", res.Outputs)
				}
			},
		},
		{
			name:   "non-JSON stdout fails",
			script: "echo 'creating database'\n",
			op:     action.OperationApply,
			check: func(t *testing.T, res *action.Result, err error) {
				if err == nil || !strings.Contains(err.Error(), "not one JSON value") || !strings.Contains(err.Error(), "write logs to stderr") {
					t.Fatalf("error = %v, want one telling to write logs to stderr", err)
				}
			},
		},
		{
			name:   "two JSON values fail",
			script: "echo '{}'\necho '{}'\n",
			op:     action.OperationApply,
			check: func(t *testing.T, res *action.Result, err error) {
				if err == nil || !strings.Contains(err.Error(), "not one JSON value") {
					t.Fatalf("error = %v, want not one JSON value", err)
				}
			},
		},
		{
			name:   "stdout over 1 MiB fails",
			script: "printf '\"'\nhead -c 1048576 /dev/zero | tr '\\0' a\nprintf '\"'\n",
			op:     action.OperationApply,
			check: func(t *testing.T, res *action.Result, err error) {
				if err == nil || !strings.Contains(err.Error(), "stdout exceeds 1048576 bytes") {
					t.Fatalf("error = %v, want stdout exceeds", err)
				}
			},
		},
		{
			name:   "non-zero exit quotes stderr",
			script: "echo 'connecting' >&2\necho 'permission denied' >&2\nexit 3\n",
			op:     action.OperationApply,
			check: func(t *testing.T, res *action.Result, err error) {
				if err == nil || err.Error() != "exit status 3: connecting\npermission denied" {
					t.Fatalf("error = %q", err)
				}
			},
		},
		{
			name:   "non-zero exit without stderr",
			script: "exit 1\n",
			op:     action.OperationDestroy,
			check: func(t *testing.T, res *action.Result, err error) {
				if err == nil || err.Error() != "exit status 1" {
					t.Fatalf("error = %q", err)
				}
			},
		},
		{
			name: "stderr quoted up to 4 KiB from the end",
			script: `echo START >&2
i=0
while [ $i -lt 200 ]; do echo 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' >&2; i=$((i+1)); done
echo END >&2
exit 1
`,
			op: action.OperationApply,
			check: func(t *testing.T, res *action.Result, err error) {
				if err == nil {
					t.Fatal("succeeded")
				}
				msg := err.Error()
				if !strings.HasPrefix(msg, "exit status 1: ") || !strings.HasSuffix(msg, "END") || strings.Contains(msg, "START") {
					t.Fatalf("error = %.100q...%q, want the end of stderr only", msg, msg[max(0, len(msg)-50):])
				}
				if len(msg) > len("exit status 1: ")+4096 {
					t.Fatalf("error is %d bytes long", len(msg))
				}
			},
		},
		{
			name:   "terminated by a signal",
			script: "kill -TERM $$\n",
			op:     action.OperationApply,
			check: func(t *testing.T, res *action.Result, err error) {
				if err == nil || err.Error() != "signal: terminated" {
					t.Fatalf("error = %v, want signal: terminated", err)
				}
			},
		},
		{
			name:   "exit 255",
			script: "exit 255\n",
			op:     action.OperationApply,
			check: func(t *testing.T, res *action.Result, err error) {
				if err == nil || err.Error() != "exit status 255" {
					t.Fatalf("error = %v, want exit status 255", err)
				}
			},
		},
		{
			name:   "killed by a signal",
			script: "kill -9 $$\n",
			op:     action.OperationApply,
			check: func(t *testing.T, res *action.Result, err error) {
				if err == nil || err.Error() != "signal: killed" {
					t.Fatalf("error = %v, want signal: killed", err)
				}
			},
		},
	}
	paths := make([]string, len(tests))
	for i, tt := range tests {
		paths[i] = writeScript(t, dir, strconv.Itoa(i)+".sh", tt.script)
	}
	t.Parallel()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := mustAction(t, map[string]any{"command": []string{paths[i]}}, nil)
			var res *action.Result
			var err error
			if tt.op == action.OperationDestroy {
				res, err = a.Destroy(t.Context(), request())
			} else {
				res, err = a.Apply(t.Context(), request())
			}
			tt.check(t, res, err)
		})
	}
}

// readEnv parses the output of env(1).
func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		env[k] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return env
}

// shellEnv are variables that sh itself may export to the commands it runs.
var shellEnv = []string{"PWD", "OLDPWD", "SHLVL", "_"}

func TestEnvironment(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "env.sh", "env > \"$OUT/env\"\ncat > \"$OUT/stdin\"\n")
	t.Parallel()

	bigSpec := json.RawMessage(`{"blob":"` + strings.Repeat("a", 40<<10) + `"}`)
	tests := []struct {
		name string
		spec json.RawMessage
		op   action.Operation
	}{
		{name: "small spec", spec: json.RawMessage(`{"size":3}`), op: action.OperationApply},
		{name: "spec over 32 KiB", spec: bigSpec, op: action.OperationDestroy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := t.TempDir()
			agentEnv := map[string]string{
				"PATH":        os.Getenv("PATH"),
				"HOME":        "/home/agent",
				"CLOUD_TOKEN": "s3cret",
				"AGENT_TOKEN": "not-for-scripts",
			}
			getenv := func(name string) (string, bool) { v, ok := agentEnv[name]; return v, ok }
			a := mustAction(t, map[string]any{
				"command": []string{script},
				"env":     map[string]string{"OUT": out, "REGION": "eu west"},
				"passEnv": []string{"CLOUD_TOKEN"},
			}, getenv)
			req := request()
			req.Resource.Spec = tt.spec
			req.Resource.PluginConfig = json.RawMessage(`{"tier":"gold"}`)
			var err error
			if tt.op == action.OperationDestroy {
				_, err = a.Destroy(t.Context(), req)
			} else {
				_, err = a.Apply(t.Context(), req)
			}
			if err != nil {
				t.Fatal(err)
			}
			env := readEnv(t, filepath.Join(out, "env"))
			want := map[string]string{
				"PATH":                        os.Getenv("PATH"),
				"HOME":                        "/home/agent",
				"OUT":                         out,
				"REGION":                      "eu west",
				"CLOUD_TOKEN":                 "s3cret",
				"NO8S_OPERATION":              string(tt.op),
				"NO8S_ACTION":                 "deploy",
				"NO8S_TRIGGER":                "create",
				"NO8S_FENCING_TOKEN":          "9007199254740993",
				"NO8S_RESOURCE_ID":            "42",
				"NO8S_RESOURCE_KIND":          "Database",
				"NO8S_RESOURCE_NAMESPACE":     "shop",
				"NO8S_RESOURCE_NAME":          "orders",
				"NO8S_RESOURCE_API_VERSION":   "example.com/v1",
				"NO8S_RESOURCE_GENERATION":    "7",
				"NO8S_RESOURCE_SOURCE":        "infra",
				"NO8S_RESOURCE_REVISION":      "main@sha1:abc",
				"NO8S_RESOURCE_PLUGIN_CONFIG": `{"tier":"gold"}`,
			}
			if len(tt.spec) > 32<<10 {
				want["NO8S_RESOURCE_SPEC_OMITTED"] = "1"
			} else {
				want["NO8S_RESOURCE_SPEC"] = string(tt.spec)
			}
			for k, v := range want {
				if got, ok := env[k]; !ok || got != v {
					t.Errorf("%s = %.60q (set: %v), want %.60q", k, got, ok, v)
				}
			}
			for k := range env {
				if _, ok := want[k]; !ok && !slices.Contains(shellEnv, k) {
					t.Errorf("the command got %s, which nobody passed it", k)
				}
			}
			stdin, err := os.ReadFile(filepath.Join(out, "stdin"))
			if err != nil {
				t.Fatal(err)
			}
			var got action.Request
			if err := json.Unmarshal(stdin, &got); err != nil {
				t.Fatal(err)
			}
			if string(got.Resource.Spec) != string(tt.spec) {
				t.Errorf("stdin spec is %d bytes, want the full %d", len(got.Resource.Spec), len(tt.spec))
			}
			if string(got.Resource.PluginConfig) != `{"tier":"gold"}` {
				t.Errorf("stdin pluginConfig = %s", got.Resource.PluginConfig)
			}
			if got.FencingToken != 9007199254740993 {
				t.Errorf("stdin fencingToken = %d, want 9007199254740993", got.FencingToken)
			}
		})
	}
}

// TestAgentEnvironmentNotInherited uses the real process environment, which
// is what the agent's tokens live in; it cannot run in parallel.
func TestAgentEnvironmentNotInherited(t *testing.T) {
	t.Setenv("NO8S_SECRET_TEST", "hunter2")
	script := writeScript(t, t.TempDir(), "env.sh", "env > \"$OUT/env\"\n")
	for _, pass := range []bool{false, true} {
		t.Run(fmt.Sprintf("passEnv=%v", pass), func(t *testing.T) {
			out := t.TempDir()
			cfg := map[string]any{"command": []string{script}, "env": map[string]string{"OUT": out}}
			if pass {
				cfg["passEnv"] = []string{"NO8S_SECRET_TEST"}
			}
			a, err := New(action.Settings{Instance: "deploy", Config: mustJSON(t, cfg)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.Apply(t.Context(), request()); err != nil {
				t.Fatal(err)
			}
			got, ok := readEnv(t, filepath.Join(out, "env"))["NO8S_SECRET_TEST"]
			switch {
			case pass && got != "hunter2":
				t.Fatalf("NO8S_SECRET_TEST = %q, %v with passEnv; want hunter2", got, ok)
			case !pass && ok:
				t.Fatal("the command saw NO8S_SECRET_TEST without passEnv")
			}
		})
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestNewSettingsErrors(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "ok.sh", "exit 0\n")
	notExec := filepath.Join(dir, "plain.sh")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Parallel()
	getenv := func(name string) (string, bool) {
		if name == "SET" {
			return "x", true
		}
		return "", false
	}
	tests := []struct {
		name    string
		config  string
		wantErr []string
	}{
		{name: "unknown setting", config: `{"command":["` + script + `"],"comand":["x"]}`, wantErr: []string{`unknown setting "comand"`}},
		{name: "no settings", config: ``, wantErr: []string{"command: required"}},
		{name: "empty command", config: `{"command":[]}`, wantErr: []string{"command: required"}},
		{name: "empty program", config: `{"command":[""]}`, wantErr: []string{"command: the program"}},
		{name: "command a string", config: `{"command":"./x.sh"}`, wantErr: []string{"command: must be a list"}},
		{name: "program not in PATH", config: `{"command":["no8s-no-such-program"]}`, wantErr: []string{"command:", "not found"}},
		{name: "program missing", config: `{"command":["./missing.sh"],"dir":"` + dir + `"}`, wantErr: []string{"command:", "no such file"}},
		{name: "program not executable", config: `{"command":["` + notExec + `"]}`, wantErr: []string{"command:", "not executable"}},
		{name: "dir missing", config: `{"command":["` + script + `"],"dir":"` + dir + `/nope"}`, wantErr: []string{"dir:", "no such file"}},
		{name: "dir a file", config: `{"command":["` + script + `"],"dir":"` + script + `"}`, wantErr: []string{"dir:", "not a directory"}},
		{name: "bad timeout", config: `{"command":["` + script + `"],"timeout":"5 minutes"}`, wantErr: []string{"timeout:", "not a duration"}},
		{name: "zero timeout", config: `{"command":["` + script + `"],"timeout":"0s"}`, wantErr: []string{"timeout: must be positive"}},
		{name: "negative timeout", config: `{"command":["` + script + `"],"timeout":"-1m"}`, wantErr: []string{"timeout: must be positive"}},
		{name: "timeout a number", config: `{"command":["` + script + `"],"timeout":300}`, wantErr: []string{"timeout: must be a string"}},
		{name: "env bad name", config: `{"command":["` + script + `"],"env":{"A-B":"1"}}`, wantErr: []string{`env: "A-B" is not a valid variable name`}},
		{name: "env reserved", config: `{"command":["` + script + `"],"env":{"NO8S_ACTION":"x"}}`, wantErr: []string{"env: NO8S_ACTION is set by the agent"}},
		{name: "env and passEnv", config: `{"command":["` + script + `"],"env":{"SET":"x"},"passEnv":["SET"]}`, wantErr: []string{"env: SET is also in passEnv"}},
		{name: "passEnv unset", config: `{"command":["` + script + `"],"passEnv":["SET","MISSING"]}`, wantErr: []string{"passEnv: MISSING is not set"}},
		{name: "passEnv reserved", config: `{"command":["` + script + `"],"passEnv":["NO8S_OPERATION"]}`, wantErr: []string{"passEnv: NO8S_OPERATION is set by the agent"}},
		{name: "passEnv twice", config: `{"command":["` + script + `"],"passEnv":["SET","SET"]}`, wantErr: []string{"passEnv: SET is listed twice"}},
		{name: "plan not a bool", config: `{"command":["` + script + `"],"plan":"yes"}`, wantErr: []string{"plan: must be true or false"}},
		{name: "not an object", config: `["` + script + `"]`, wantErr: []string{"settings must be an object"}},
		{
			name:    "every problem at once",
			config:  `{"timeout":"soon","passEnv":["MISSING"]}`,
			wantErr: []string{"command: required", "timeout:", "passEnv: MISSING"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, err := New(action.Settings{Instance: "deploy", Config: json.RawMessage(tt.config), Getenv: getenv})
			if err == nil {
				t.Fatalf("New succeeded: %T", a)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestNewOptions(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, dir, "out.sh", "echo '{\"ok\":true}'\n")
	t.Parallel()

	t.Run("defaults", func(t *testing.T) {
		t.Parallel()
		a := mustAction(t, map[string]any{"command": []string{script}}, nil)
		if _, ok := a.(action.Planner); ok {
			t.Error("without plan: true the action is a Planner")
		}
		if got := a.(action.Timeouter).Timeout(); got != 5*time.Minute {
			t.Errorf("Timeout() = %s, want 5m", got)
		}
	})
	t.Run("plan and timeout", func(t *testing.T) {
		t.Parallel()
		a := mustAction(t, map[string]any{"command": []string{script}, "plan": true, "timeout": "90s"}, nil)
		if _, ok := a.(action.Planner); !ok {
			t.Error("with plan: true the action is not a Planner")
		}
		if got := a.(action.Timeouter).Timeout(); got != 90*time.Second {
			t.Errorf("Timeout() = %s, want 1m30s", got)
		}
	})
	t.Run("plan false", func(t *testing.T) {
		t.Parallel()
		a := mustAction(t, map[string]any{"command": []string{script}, "plan": false}, nil)
		if _, ok := a.(action.Planner); ok {
			t.Error("with plan: false the action is a Planner")
		}
	})
	t.Run("relative program and dir", func(t *testing.T) {
		t.Parallel()
		a := mustAction(t, map[string]any{"command": []string{"./out.sh"}, "dir": dir}, nil)
		res, err := a.Apply(t.Context(), request())
		if err != nil || string(res.Outputs) != `{"ok":true}` {
			t.Fatalf("Apply = %+v, %v", res, err)
		}
	})
	t.Run("program from PATH with arguments", func(t *testing.T) {
		t.Parallel()
		a := mustAction(t, map[string]any{"command": []string{"sh", "-c", `echo "{\"dir\":\"$(pwd)\"}"`}, "dir": dir}, nil)
		res, err := a.Apply(t.Context(), request())
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(map[string]string{"dir": dir})
		if string(res.Outputs) != string(want) {
			t.Fatalf("Outputs = %s, want %s", res.Outputs, want)
		}
	})
}

func TestPlan(t *testing.T) {
	script := writeScript(t, t.TempDir(), "plan.sh", `[ "$NO8S_OPERATION" = plan ] || { echo "operation $NO8S_OPERATION" >&2; exit 9; }
printf '%s' "$PLAN_OUT"
echo 'planning' >&2
exit "$PLAN_EXIT"
`)
	t.Parallel()
	tests := []struct {
		name    string
		exit    int
		out     string
		want    action.Plan
		wantErr string
	}{
		{name: "no changes", exit: 0, want: action.Plan{Summary: "no changes"}},
		{name: "no changes with output", exit: 0, out: "\n  Everything is up to date.\n", want: action.Plan{Summary: "Everything is up to date.", Output: "\n  Everything is up to date.\n"}},
		{name: "changes", exit: 2, want: action.Plan{Changes: true, Summary: "changes"}},
		{name: "changes with output", exit: 2, out: "~ size: 3 -> 4\n+ replica b\n", want: action.Plan{Changes: true, Summary: "~ size: 3 -> 4", Output: "~ size: 3 -> 4\n+ replica b\n"}},
		{name: "exit 1", exit: 1, wantErr: "plan: exit status 1: planning"},
		{name: "exit 3", exit: 3, out: "half a plan", wantErr: "plan: exit status 3: planning"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := mustAction(t, map[string]any{
				"command": []string{script},
				"plan":    true,
				"env":     map[string]string{"PLAN_EXIT": strconv.Itoa(tt.exit), "PLAN_OUT": tt.out},
			}, nil)
			plan, err := a.(action.Planner).Plan(t.Context(), request())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Plan error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *plan != tt.want {
				t.Fatalf("Plan = %+v, want %+v", *plan, tt.want)
			}
		})
	}
}

func TestProgress(t *testing.T) {
	script := writeScript(t, t.TempDir(), "progress.sh", "echo 'creating bucket' >&2\necho >&2\necho '  setting policy  ' >&2\nprintf 'no newline' >&2\n")
	t.Parallel()

	t.Run("reported", func(t *testing.T) {
		t.Parallel()
		rec := &recorder{}
		req := request()
		req.Reporter = rec
		a := mustAction(t, map[string]any{"command": []string{script}}, nil)
		res, err := a.Apply(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := rec.lines(), []string{"creating bucket", "setting policy"}; !slices.Equal(got, want) {
			t.Fatalf("progress = %q, want %q", got, want)
		}
		if res.Message != "setting policy" {
			t.Fatalf("Message = %q, want the last complete line", res.Message)
		}
	})
	t.Run("nil reporter", func(t *testing.T) {
		t.Parallel()
		req := request()
		req.Reporter = nil
		a := mustAction(t, map[string]any{"command": []string{script}}, nil)
		if _, err := a.Apply(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	})
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	ticker := time.NewTicker(10 * time.Millisecond)
	defer ticker.Stop()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-ticker.C:
		case <-deadline.C:
			t.Fatalf("after %s: %s", within, what)
		}
	}
}

func TestKillsProcessGroup(t *testing.T) {
	dir := t.TempDir()
	// The child is the point: killing only the shell would leave it running.
	plain := writeScript(t, dir, "hang.sh", "sleep 300 &\necho $! > \"$PIDFILE\"\nwait\n")
	// Both ignore SIGTERM (the child inherits the ignored signal), so only
	// SIGKILL after the grace stops them.
	stubborn := writeScript(t, dir, "stubborn.sh", "trap '' TERM\nsleep 300 &\necho $! > \"$PIDFILE\"\nwait\n")
	// A script that cleans up on SIGTERM shows that SIGTERM comes first.
	graceful := writeScript(t, dir, "graceful.sh", "trap 'echo cleaning up >&2; exit 0' TERM\nsleep 300 &\necho $! > \"$PIDFILE\"\nwait\n")
	t.Parallel()

	tests := []struct {
		name       string
		script     string
		timeout    string
		cancel     bool // cancel the context once the child runs
		wantErr    func(error) bool
		minElapsed time.Duration
	}{
		{
			name: "timeout", script: plain, timeout: "1s",
			wantErr: func(err error) bool { return strings.HasPrefix(err.Error(), "timed out after 1s") },
		},
		{
			name: "cancel", script: plain, timeout: "5m", cancel: true,
			wantErr: func(err error) bool { return errors.Is(err, context.Canceled) },
		},
		{
			name: "SIGTERM ignored", script: stubborn, timeout: "1s",
			wantErr:    func(err error) bool { return strings.HasPrefix(err.Error(), "timed out after 1s") },
			minElapsed: time.Second + grace,
		},
		{
			name: "SIGTERM handled", script: graceful, timeout: "5m", cancel: true,
			wantErr: func(err error) bool {
				return errors.Is(err, context.Canceled) && strings.HasSuffix(err.Error(), ": cleaning up")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pidfile := filepath.Join(t.TempDir(), "pid")
			a := mustAction(t, map[string]any{
				"command": []string{tt.script},
				"timeout": tt.timeout,
				"env":     map[string]string{"PIDFILE": pidfile},
			}, nil)
			readPid := func() int {
				b, err := os.ReadFile(pidfile)
				if err != nil || !strings.HasSuffix(string(b), "\n") {
					return 0
				}
				pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				return pid
			}

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			type outcome struct {
				err     error
				elapsed time.Duration
			}
			done := make(chan outcome, 1)
			start := time.Now()
			go func() {
				_, err := a.Apply(ctx, request())
				done <- outcome{err, time.Since(start)}
			}()
			waitFor(t, 10*time.Second, "the script never wrote its child's pid", func() bool { return readPid() != 0 })
			if tt.cancel {
				cancel()
			}
			var got outcome
			select {
			case got = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Apply did not return after its timeout or cancellation")
			}
			if got.err == nil || !tt.wantErr(got.err) {
				t.Fatalf("Apply error = %v", got.err)
			}
			if got.elapsed < tt.minElapsed {
				t.Errorf("Apply returned after %s, before the %s grace for SIGTERM had passed", got.elapsed, grace)
			}
			pid := readPid()
			waitFor(t, 10*time.Second, fmt.Sprintf("the script's child %d still exists", pid), func() bool {
				return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
			})
		})
	}
}

// TestStartFails removes the program after New checked it: the error says
// that the command did not start, not how it exited.
func TestStartFails(t *testing.T) {
	script := writeScript(t, t.TempDir(), "gone.sh", "exit 0\n")
	t.Parallel()
	a := mustAction(t, map[string]any{"command": []string{script}}, nil)
	if err := os.Remove(script); err != nil {
		t.Fatal(err)
	}
	_, err := a.Apply(t.Context(), request())
	if err == nil || !strings.HasPrefix(err.Error(), "start "+script+": ") || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("Apply error = %v, want start %s: ... no such file", err, script)
	}
}
