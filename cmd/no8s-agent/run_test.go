package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// copyTree copies the example repository to a temporary folder.
func copyTree(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return to
}

// runAgent starts `run` in the background and waits until its first sync
// is recorded (announced on the sources topic). stop ends the agent and
// waits for it; it also runs when the test ends.
func runAgent(t *testing.T, url string, args ...string) (log *lockedWriter, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	listenCtx, stop := context.WithTimeout(t.Context(), 30*time.Second)
	defer stop()
	conn, err := pgx.Connect(listenCtx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(listenCtx, "LISTEN "+store.TopicSources); err != nil {
		t.Fatal(err)
	}
	stderr := &lockedWriter{w: &bytes.Buffer{}}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"run", "--database", url, "--cache-dir", t.TempDir(), "--listen", "127.0.0.1:0"}, args...), &bytes.Buffer{}, stderr)
	}()
	var once gosync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case code := <-done:
				if code != 0 {
					t.Errorf("run exited %d", code)
				}
			case <-time.After(10 * time.Second):
				t.Error("run did not stop within 10s")
			}
		})
	}
	t.Cleanup(stop)
	select {
	case code := <-done:
		t.Fatalf("run exited %d before syncing", code)
	default:
	}
	if _, err := conn.WaitForNotification(listenCtx); err != nil {
		t.Fatalf("no sync recorded: %v", err)
	}
	return stderr, stop
}

func TestRunSyncsExampleAndDiffGet(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	repo := copyTree(t, "../../examples/repo")

	// Before any sync, diff shows every type version and resource as a
	// creation: exit 2.
	if code, _, errOut := runCLI(t, "migrate", "--database", url); code != 0 {
		t.Fatal(errOut)
	}
	code, out, errOut := runCLI(t, "diff", repo, "--source", "local", "--database", url)
	if code != 2 || strings.Count(out, "\ncreate ") != 8 {
		t.Fatalf("diff before sync: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"DatabaseCluster/production-pg    resources/databases.yaml:3   1", "ResourceType/DNSRecord v1alpha1", "4 created, 0 updated"} {
		if !strings.Contains(out, want) {
			t.Errorf("diff output lacks %q:\n%s", want, out)
		}
	}

	cfg := filepath.Join(t.TempDir(), "no8s.yaml")
	if err := os.WriteFile(cfg, []byte("sources:\n  - name: local\n    dir: "+repo+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	log, stop := runAgent(t, url, "--config", cfg)
	// The sync's notification can come before its log line is written.
	deadline := time.Now().Add(10 * time.Second)
	for tick := time.NewTicker(10 * time.Millisecond); !strings.Contains(log.String(), "msg=synced"); <-tick.C {
		if time.Now().After(deadline) {
			t.Fatalf("no sync logged:\n%s", log.String())
		}
	}
	// Stopped by its context (as by SIGTERM), the agent ends cleanly, having
	// logged one line per sync saying what it did.
	stop()
	if l := log.String(); !strings.Contains(l, "msg=synced source=local revision=sha256:") ||
		!strings.Contains(l, "created=4 updated=0 deleted=0 unchanged=0 duration=") || !strings.Contains(l, "agent stopped") {
		t.Errorf("log:\n%s", l)
	}

	// Synced: diff has nothing to say.
	if code, out, _ := runCLI(t, "diff", repo, "--source", "local", "--database", url); code != 0 {
		t.Errorf("diff after sync: exit %d\n%s", code, out)
	}
	// get resources -o json: the API's objects.
	code, out, errOut = runCLI(t, "get", "resources", "--database", url, "-o", "json")
	if code != 0 {
		t.Fatal(errOut)
	}
	var resources []api.Resource
	if err := json.Unmarshal([]byte(out), &resources); err != nil {
		t.Fatalf("get resources -o json: %v\n%s", err, out)
	}
	if len(resources) != 4 {
		t.Fatalf("%d resources", len(resources))
	}
	for _, r := range resources {
		// No action instances are configured here, so reconciling ends in
		// failed (ActionNotFound); the agent may have stopped before that.
		if r.Generation != 1 || r.Source.Name != "local" || r.ResourceTypeName != r.Kind ||
			(r.Status != "pending" && r.Status != "failed") {
			t.Errorf("resource %+v", r)
		}
	}
	code, out, _ = runCLI(t, "get", "resources", "--database", url, "--label", "env=production", "--kind", "DatabaseCluster")
	if code != 0 || !strings.Contains(out, "production-pg") || strings.Contains(out, "staging-pg") {
		t.Errorf("filtered table:\n%s", out)
	}
	code, out, _ = runCLI(t, "get", "sources", "--database", url, "-o", "yaml")
	if code != 0 || !strings.Contains(out, "phase: ready") || !strings.Contains(out, "name: local") {
		t.Errorf("get sources -o yaml:\n%s", out)
	}
	code, out, _ = runCLI(t, "get", "types", "--database", url)
	if code != 0 || strings.Count(out, "\n") != 5 {
		t.Errorf("get types (header and 4 type versions):\n%s", out)
	}
	code, out, _ = runCLI(t, "get", "history", "--database", url)
	if code != 0 || !strings.Contains(out, "local") || !strings.Contains(out, "ok") {
		t.Errorf("get history:\n%s", out)
	}

	// A change on disk: diff previews it as markdown, exit 2.
	path := filepath.Join(repo, "resources", "network.yaml")
	data, _ := os.ReadFile(path)
	if err := os.WriteFile(path, bytes.Replace(data, []byte("10.20.0.0/16"), []byte("10.30.0.0/16"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	changed := copyTree(t, repo)
	code, out, _ = runCLI(t, "diff", changed, "--source", "local", "--database", url, "-o", "markdown")
	if code != 2 || !strings.Contains(out, "| update | Network/prod-vpc | resources/network.yaml:1 | 2 |") {
		t.Errorf("markdown diff: exit %d\n%s", code, out)
	}
	// A broken manifest: diff refuses with the file and line, exit 1.
	if err := os.WriteFile(filepath.Join(changed, "resources", "bad.yaml"), []byte("apiVersion: infra.example.com/v1\nkind: Network\nmetadata: {name: x}\nspec: {cidr: 7}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI(t, "diff", changed, "--source", "local", "--database", url)
	if code != 1 || !strings.Contains(out, "resources/bad.yaml:4: spec.cidr: expected string, but got number") {
		t.Errorf("diff of a broken tree: exit %d\n%s", code, out)
	}
}

func TestRunRefusesBadConfiguration(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name    string
		config  string
		wantErr string
	}{
		{"unknown key", "database: postgres://x@/y\nsources:\n  - name: a\n    dir: .\n    prun: {}\n", "sources[0].prun"},
		{"bad duration", "database: postgres://x@/y\nsources:\n  - name: a\n    git: {url: 'https://example.com/r.git', interval: 1 minute}\n", "sources[0].git.interval"},
		{"missing environment variable", "database: postgres://x@/y\nsources:\n  - name: a\n    git: {url: 'https://example.com/r.git', auth: {tokenEnv: NO8S_TEST_UNSET_TOKEN}}\n", "NO8S_TEST_UNSET_TOKEN"},
		{"two sources with one name", "database: postgres://x@/y\nsources:\n  - {name: a, dir: .}\n  - {name: a, dir: ./other}\n", "sources[1].name"},
		{"no sources", "database: postgres://x@/y\n", "no sources"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(dir, tt.name+".yaml")
			if err := os.WriteFile(path, []byte(tt.config), 0o644); err != nil {
				t.Fatal(err)
			}
			code, _, errOut := runCLI(t, "run", "--config", path)
			if code != 1 || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("exit %d, stderr %q, want 1 and %q", code, errOut, tt.wantErr)
			}
		})
	}
}

func TestDiffAndGetErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"diff without source", []string{"diff", "../../examples/repo", "--database", "postgres://x@/y"}, "--source is required"},
		{"diff without database", []string{"diff", "../../examples/repo", "--source", "a"}, "no database"},
		{"get nothing", []string{"get", "--database", "postgres://x@/y"}, "say what to get"},
		{"get unknown", []string{"get", "widgets", "--database", "postgres://x@/y?host=/nonexistent"}, `unknown object "widgets"`},
		{"get unreachable database", []string{"get", "resources", "--database", "postgres://x@/y?host=/nonexistent"}, "postgres: connect to"},
		{"get bad output", []string{"get", "resources", "-o", "xml"}, "-o must be table, json or yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, _, errOut := runCLI(t, tt.args...)
			if code != 1 || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("exit %d, stderr %q, want 1 and %q", code, errOut, tt.wantErr)
			}
		})
	}
}
