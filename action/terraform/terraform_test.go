package terraform_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/terraform"
	"github.com/no8s/no8s-agent/action/terraform/tofutest"
	"github.com/no8s/no8s-agent/manifest"
)

// secretValue reaches the module only through passEnv; it must appear in
// nothing the plugin returns, reports or logs.
const secretValue = "s3cr3t-Pa55-word-77"

// dbModule needs no provider download: terraform_data is built in.
const dbModule = `
variable "size" { type = number }
variable "region" {
  type    = string
  default = "eu"
}
variable "password" {
  type      = string
  sensitive = true
}
variable "no8s_name" { type = string }

resource "terraform_data" "db" {
  input = { size = var.size, region = var.region, name = var.no8s_name }
}

resource "terraform_data" "credentials" {
  input = var.password
}

output "id" { value = terraform_data.db.id }
output "size" { value = terraform_data.db.output.size }
output "password" {
  value     = "user:${var.password}"
  sensitive = true
}
`

// recorder is a Reporter that keeps everything and records handles.
type recorder struct {
	mu       sync.Mutex
	progress []string
	handles  []string
	onLine   func(string)
}

func (r *recorder) SetCondition(manifest.Condition) {}

func (r *recorder) Progress(m string) {
	r.mu.Lock()
	r.progress = append(r.progress, m)
	f := r.onLine
	r.mu.Unlock()
	if f != nil {
		f(m)
	}
}

func (r *recorder) RecordHandle(_ context.Context, h string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handles = append(r.handles, h)
	return nil
}

func (r *recorder) all() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.progress, "\n") + strings.Join(r.handles, "\n")
}

// fixture is an instance on its own module and work folders.
type fixture struct {
	t      *testing.T
	act    action.Action
	module string
	work   string
	logs   *bytes.Buffer
	logMu  *sync.Mutex
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func newFixture(t *testing.T, module string, extra map[string]any) *fixture {
	t.Helper()
	dir := t.TempDir()
	mod := filepath.Join(dir, "module")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mod, "main.tf"), []byte(module), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, module: mod, work: filepath.Join(dir, "work"), logs: &bytes.Buffer{}, logMu: &sync.Mutex{}}
	cfg := map[string]any{"binary": tofutest.Binary(t), "module": mod, "workingDir": f.work,
		"passEnv": []string{"TF_VAR_password"}, "timeout": "2m"}
	for k, v := range extra {
		cfg[k] = v
	}
	raw, _ := json.Marshal(cfg)
	env := map[string]string{"PATH": os.Getenv("PATH"), "HOME": dir, "TF_VAR_password": secretValue}
	act, err := terraform.New(action.Settings{Instance: "tf", Config: raw,
		Getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Logger: slog.New(slog.NewTextHandler(lockedWriter{f.logMu, f.logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.act = act
	return f
}

func (f *fixture) dir(name string) string { return filepath.Join(f.work, "tf", "Database", name) }

func request(name string, gen int64, spec string, rep action.Reporter) *action.Request {
	return &action.Request{Instance: "tf", Trigger: "create", FencingToken: gen, Reporter: rep,
		Resource: action.Resource{ID: 1, Kind: "Database", APIVersion: "infra.example.com/v1", Name: name,
			Spec: json.RawMessage(spec), Generation: gen, Source: "infra"}}
}

// tofu runs the binary in dir, as an operator would.
func tofu(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(tofutest.Binary(t), args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TF_IN_AUTOMATION=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tofu %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (f *fixture) assertNoSecret(what string, texts ...string) {
	f.t.Helper()
	f.logMu.Lock()
	logs := f.logs.String()
	f.logMu.Unlock()
	for _, s := range append(texts, logs) {
		if strings.Contains(s, secretValue) {
			f.t.Fatalf("%s: the passEnv secret leaked: %q", what, s)
		}
	}
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t, dbModule, nil)
	ctx := t.Context()
	planner := f.act.(action.Planner)

	// Create.
	rep := &recorder{}
	res, err := f.act.Apply(ctx, request("prod", 1, `{"size": 10}`, rep))
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if res.Created != 2 || res.Updated != 0 || res.Deleted != 0 {
		t.Errorf("counts %+v, want 2 created", res)
	}
	var outs map[string]any
	if err := json.Unmarshal(res.Outputs, &outs); err != nil {
		t.Fatal(err)
	}
	if outs["size"] != float64(10) || outs["id"] == "" || outs["password"] != "(sensitive)" {
		t.Errorf("outputs %s", res.Outputs)
	}
	for _, phase := range []string{"init", "plan", "apply: terraform_data.db: Creating..."} {
		if !strings.Contains(rep.all(), phase) {
			t.Errorf("progress lacks %q:\n%s", phase, rep.all())
		}
	}
	if len(rep.handles) == 0 || !strings.Contains(rep.handles[0], `"pid":`) {
		t.Errorf("handles %v", rep.handles)
	}
	f.assertNoSecret("apply", string(res.Outputs), res.Message, rep.all())
	id := outs["id"]

	// An unchanged spec: a drift check finds nothing to do.
	plan, err := planner.Plan(ctx, request("prod", 1, `{"size": 10}`, &recorder{}))
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	if plan.Changes || plan.Summary != "no changes" {
		t.Errorf("plan of the applied spec: %+v", plan)
	}

	// A new generation: the plan shows the change, the apply makes it.
	plan, err = planner.Plan(ctx, request("prod", 2, `{"size": 20}`, &recorder{}))
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	if !plan.Changes || plan.Summary != "0 to add, 1 to change, 0 to destroy" || !strings.Contains(plan.Output, "~ input") {
		t.Errorf("plan of a new size: %q\n%s", plan.Summary, plan.Output)
	}
	f.assertNoSecret("plan", plan.Output, plan.Summary)
	res, err = f.act.Apply(ctx, request("prod", 2, `{"size": 20}`, &recorder{}))
	if err != nil {
		t.Fatalf("apply generation 2: %v", err)
	}
	_ = json.Unmarshal(res.Outputs, &outs)
	if res.Updated != 1 || res.Created != 0 || outs["size"] != float64(20) || outs["id"] != id {
		t.Errorf("generation 2: %+v, outputs %s", res, res.Outputs)
	}

	// Drift: the state loses the database outside the agent.
	tofu(t, f.dir("prod"), "state", "rm", "terraform_data.db")
	plan, err = planner.Plan(ctx, request("prod", 2, `{"size": 20}`, &recorder{}))
	if err != nil {
		t.Fatalf("plan after drift: %v", err)
	}
	if !plan.Changes || plan.Summary != "1 to add, 0 to change, 0 to destroy" {
		t.Errorf("plan after drift: %+v", plan)
	}
	if res, err = f.act.Apply(ctx, request("prod", 2, `{"size": 20}`, &recorder{})); err != nil || res.Created != 1 {
		t.Fatalf("re-apply after drift: %+v %v", res, err)
	}
	if plan, err = planner.Plan(ctx, request("prod", 2, `{"size": 20}`, &recorder{})); err != nil || plan.Changes {
		t.Fatalf("plan after the re-apply: %+v %v", plan, err)
	}

	// Delete: destroy, then the folder and its state are gone.
	res, err = f.act.Destroy(ctx, request("prod", 2, `{"size": 20}`, &recorder{}))
	if err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if res.Deleted != 2 {
		t.Errorf("destroy counts %+v", res)
	}
	if _, err := os.Stat(f.dir("prod")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("work folder after destroy: %v", err)
	}
	f.assertNoSecret("destroy", res.Message)
}

// A preview's plan (no lease: fencing token 0) runs in a copy: the work
// folder is left exactly as it was.
func TestPreviewPlanLeavesTheFolder(t *testing.T) {
	t.Parallel()
	f := newFixture(t, dbModule, nil)
	ctx := t.Context()
	if _, err := f.act.Apply(ctx, request("prev", 1, `{"size": 1}`, &recorder{})); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, f.dir("prev"))
	req := request("prev", 2, `{"size": 2}`, action.NoopReporter{})
	req.FencingToken = 0
	plan, err := f.act.(action.Planner).Plan(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Summary != "0 to change" && plan.Summary != "0 to add, 1 to change, 0 to destroy" {
		t.Errorf("preview plan %q", plan.Summary)
	}
	if after := snapshot(t, f.dir("prev")); after != before {
		t.Errorf("the preview changed the work folder:\nbefore %s\nafter  %s", before, after)
	}
	// A resource that does not exist yet plans its creation.
	req = request("fresh", 1, `{"size": 2}`, action.NoopReporter{})
	req.FencingToken = 0
	if plan, err = f.act.(action.Planner).Plan(ctx, req); err != nil || plan.Summary != "2 to add, 0 to change, 0 to destroy" {
		t.Errorf("preview of a new resource: %+v %v", plan, err)
	}
	if _, err := os.Stat(f.dir("fresh")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a preview made a work folder: %v", err)
	}
}

// snapshot lists a folder's regular files with their sizes and times.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s:%d:%d ", strings.TrimPrefix(p, dir), info.Size(), info.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A destroy that fails keeps the folder and its state, and succeeds once
// the cause is gone.
func TestFailingDestroyKeepsState(t *testing.T) {
	t.Parallel()
	block := filepath.Join(t.TempDir(), "block")
	module := fmt.Sprintf(`
resource "terraform_data" "guarded" {
  input = "x"
  provisioner "local-exec" {
    when    = destroy
    command = "test ! -e %s"
  }
}
`, block)
	f := newFixture(t, module, map[string]any{"passEnv": []string{}})
	ctx := t.Context()
	if _, err := f.act.Apply(ctx, request("g", 1, `{}`, &recorder{})); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(block, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := f.act.Destroy(ctx, request("g", 1, `{}`, &recorder{}))
	if err == nil || !strings.Contains(err.Error(), `terraform instance "tf", Database/g: destroy:`) {
		t.Fatalf("destroy while blocked: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.dir("g"), "terraform.tfstate")); err != nil {
		t.Fatalf("the state went with a failed destroy: %v", err)
	}
	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	if res, err := f.act.Destroy(ctx, request("g", 1, `{}`, &recorder{})); err != nil || res.Deleted != 1 {
		t.Fatalf("destroy after unblocking: %+v %v", res, err)
	}
}

func TestErrorsNameTheFix(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		module string
		spec   string
		want   []string
	}{
		{"invalid module", "resource \"terraform_data\" \"x\" {\n  bogus = 1\n}\n", `{}`,
			[]string{`terraform instance "tf", Database/bad:`, "Unsupported argument", "fix the module"}},
		{"missing variable", "variable \"size\" { type = number }\nresource \"terraform_data\" \"x\" { input = var.size }\n", `{}`,
			[]string{`terraform instance "tf", Database/bad:`, `No value for required variable`, "set it in the resource's spec"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tc.module, map[string]any{"passEnv": []string{}})
			_, err := f.act.Apply(t.Context(), request("bad", 1, tc.spec, &recorder{}))
			if err == nil {
				t.Fatal("apply succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestSettingsErrors(t *testing.T) {
	t.Parallel()
	mod := t.TempDir()
	tests := []struct {
		name string
		cfg  string
		want string
	}{
		{"binary not there", `{"binary": "/nonexistent/tofu", "module": "` + mod + `"}`, "binary: stat /nonexistent/tofu: no such file or directory: install OpenTofu"},
		{"no binary on PATH", `{"module": "` + mod + `"}`, "binary: tofu not found in PATH"},
		{"module missing", `{"binary": "` + tofutestBinary(t) + `"}`, "module: required"},
		{"module folder missing", `{"binary": "` + tofutestBinary(t) + `", "module": "./no-such-module"}`, "module: no folder"},
		{"bad backend template", `{"binary": "` + tofutestBinary(t) + `", "module": "` + mod + `", "backend": "backend \"local\" { path = \"{{ .Nope }}\" }"}`, "backend:"},
		{"bad timeout", `{"binary": "` + tofutestBinary(t) + `", "module": "` + mod + `", "timeout": "soon"}`, `timeout: "soon" is not a duration`},
		{"passEnv unset", `{"binary": "` + tofutestBinary(t) + `", "module": "` + mod + `", "passEnv": ["AWS_SECRET_ACCESS_KEY"]}`, "passEnv: AWS_SECRET_ACCESS_KEY is not set"},
		{"unknown setting", `{"binary": "` + tofutestBinary(t) + `", "module": "` + mod + `", "modul": "x"}`, "modul"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := terraform.New(action.Settings{Instance: "tf", Config: json.RawMessage(tc.cfg),
				Getenv: func(k string) (string, bool) {
					if k == "PATH" {
						return t.TempDir(), true
					}
					return "", false
				}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func tofutestBinary(t *testing.T) string { return tofutest.Binary(t) }

// Cancelling an apply interrupts the binary, which stops by itself, saves
// its state and leaves no lock; the next apply completes.
func TestCancelInterrupts(t *testing.T) {
	t.Parallel()
	gate := filepath.Join(t.TempDir(), "slow")
	module := fmt.Sprintf(`
resource "terraform_data" "slow" {
  input = "x"
  provisioner "local-exec" {
    command = "if [ -e %s ]; then sleep 60; fi"
  }
}
`, gate)
	f := newFixture(t, module, map[string]any{"passEnv": []string{}})
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	rep := &recorder{onLine: func(m string) {
		if strings.Contains(m, "terraform_data.slow: Provisioning") || strings.Contains(m, "terraform_data.slow: Creating...") {
			cancel()
		}
	}}
	start := time.Now()
	_, err := f.act.Apply(ctx, request("s", 1, `{}`, rep))
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("cancelled apply: %v", err)
	}
	if errors.Is(err, action.ErrStillRunning) {
		t.Errorf("the binary did not stop by itself: %v", err)
	}
	if took := time.Since(start); took > 50*time.Second {
		t.Errorf("the interrupted apply took %v: the sleep ran out", took)
	}
	if _, err := os.Stat(filepath.Join(f.dir("s"), ".terraform.tfstate.lock.info")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a lock was left behind: %v", err)
	}
	if err := os.Remove(gate); err != nil {
		t.Fatal(err)
	}
	if _, err := f.act.Apply(t.Context(), request("s", 1, `{}`, &recorder{})); err != nil {
		t.Fatalf("apply after the interrupt: %v", err)
	}
}

// The example module applies offline with the example's specs, and its
// sensitive output is masked.
func TestExampleModule(t *testing.T) {
	t.Parallel()
	main, err := os.ReadFile(filepath.Join("..", "..", "examples", "terraform", "module", "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, string(main), map[string]any{"passEnv": []string{}})
	res, err := f.act.Apply(t.Context(), request("assets", 1, `{"region":"eu-west","versioning":true,"retention_days":30}`, &recorder{}))
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	var outs map[string]string
	if err := json.Unmarshal(res.Outputs, &outs); err != nil {
		t.Fatal(err)
	}
	if outs["url"] != "https://eu-west.storage.example.com/assets" || outs["signed_prefix"] != "(sensitive)" || outs["bucket_id"] == "" {
		t.Errorf("outputs %s", res.Outputs)
	}
}

// A module source string is downloaded once (here a Git repository over
// file://, as go-getter reads it) and used like a folder.
func TestModuleFromSource(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	if err := os.WriteFile(filepath.Join(repo, "main.tf"), []byte("variable \"size\" { type = number }\noutput \"double\" { value = var.size * 2 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "module"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	f := newFixture(t, "", map[string]any{"module": "git::file://" + repo, "passEnv": []string{}})
	res, err := f.act.Apply(t.Context(), request("src", 1, `{"size": 21}`, &recorder{}))
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if string(res.Outputs) != `{"double":42}` {
		t.Errorf("outputs %s", res.Outputs)
	}
}

// A module whose files change is copied again, without the files it lost,
// and initialised again.
func TestModuleChange(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "variable \"size\" { type = number }\noutput \"a\" { value = var.size }\n", map[string]any{"passEnv": []string{}})
	extra := filepath.Join(f.module, "extra.tf")
	if err := os.WriteFile(extra, []byte("output \"b\" { value = \"b\" }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	res, err := f.act.Apply(ctx, request("m", 1, `{"size": 1}`, &recorder{}))
	if err != nil || string(res.Outputs) != `{"a":1,"b":"b"}` {
		t.Fatalf("first apply: %s %v", res.Outputs, err)
	}
	if err := os.Remove(extra); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.module, "main.tf"), []byte("variable \"size\" { type = number }\noutput \"a\" { value = var.size }\noutput \"c\" { value = \"c\" }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := &recorder{}
	res, err = f.act.Apply(ctx, request("m", 2, `{"size": 1}`, rep))
	if err != nil || string(res.Outputs) != `{"a":1,"c":"c"}` {
		t.Fatalf("apply after the module changed: %s %v", res.Outputs, err)
	}
	if !strings.Contains(rep.all(), "init") {
		t.Errorf("no init after the module changed: %s", rep.all())
	}
	if _, err := os.Stat(filepath.Join(f.dir("m"), "extra.tf")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file the module lost stays in the work folder: %v", err)
	}
}
