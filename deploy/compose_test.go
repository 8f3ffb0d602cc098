package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/no8s/no8s-agent/config"
	"github.com/no8s/no8s-agent/internal/release/ociimage"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// compose is the part of a compose file the test reads.
type compose struct {
	Services map[string]service `yaml:"services"`
	Volumes  map[string]any     `yaml:"volumes"`
}

type service struct {
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

// mount is a volume of a service: a named volume or a folder or file of
// this folder (source starting with ./).
type mount struct{ source, target string }

func (s service) mounts(t *testing.T) []mount {
	t.Helper()
	var out []mount
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || len(parts) > 3 || (len(parts) == 3 && parts[2] != "ro" && parts[2] != "rw") {
			t.Fatalf("volume %q: want SOURCE:TARGET[:ro]", v)
		}
		out = append(out, mount{parts[0], parts[1]})
	}
	return out
}

// hostPath is the file or folder of this folder mounted at target, or "".
func hostPath(ms []mount, target string) string {
	for _, m := range ms {
		if m.target == target && strings.HasPrefix(m.source, "./") {
			return filepath.FromSlash(m.source)
		}
	}
	return ""
}

func TestCompose(t *testing.T) {
	data, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	agent, ok := c.Services["agent"]
	pg, ok2 := c.Services["postgres"]
	if !ok || !ok2 || len(c.Services) != 2 {
		t.Fatalf("services %v, want agent and postgres", slices.Sorted(maps.Keys(c.Services)))
	}

	// The images: the agent's as `make dist` tags it, PostgreSQL's pinned.
	if want := ociimage.Repository + ":${NO8S_VERSION:-" + ociimage.LatestTag + "}"; agent.Image != want {
		t.Errorf("agent image %q, want %q", agent.Image, want)
	}
	if !regexp.MustCompile(`^postgres:\d+\.\d+`).MatchString(pg.Image) {
		t.Errorf("postgres image %q: want the official image at a pinned minor version", pg.Image)
	}
	if !slices.Equal(agent.Command, ociimage.DefaultCommand) {
		t.Errorf("agent command %q, want the image's %q", agent.Command, ociimage.DefaultCommand)
	}
	if agent.DependsOn["postgres"].Condition != "service_healthy" {
		t.Errorf("agent depends_on %+v: want postgres healthy first", agent.DependsOn)
	}

	// Volumes: named ones declared, files and folders present, the state
	// folder on a volume.
	for name, s := range c.Services {
		for _, m := range s.mounts(t) {
			if strings.HasPrefix(m.source, "./") {
				if _, err := os.Stat(m.source); err != nil {
					t.Errorf("%s mounts %s: %v", name, m.source, err)
				}
				continue
			}
			if _, ok := c.Volumes[m.source]; !ok {
				t.Errorf("%s mounts volume %q, which volumes does not declare", name, m.source)
			}
		}
	}
	agentMounts := agent.mounts(t)
	if volumeAt(agentMounts, ociimage.StateDir) == "" {
		t.Errorf("agent: no named volume at %s", ociimage.StateDir)
	}
	if volumeAt(pg.mounts(t), "/var/lib/postgresql/data") == "" {
		t.Error("postgres: no named volume at /var/lib/postgresql/data")
	}

	// The agent's configuration, as its own parser reads it with the
	// service's environment.
	cfgFile := hostPath(agentMounts, ociimage.ConfigPath)
	if cfgFile == "" {
		t.Fatalf("agent: no file of this folder mounted at %s", ociimage.ConfigPath)
	}
	cfg, err := config.Load(cfgFile, func(k string) (string, bool) { v, ok := agent.Environment[k]; return v, ok })
	if err != nil {
		t.Fatalf("%s: %v", cfgFile, err)
	}
	host, port, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		t.Fatal(err)
	}
	if host != "0.0.0.0" && host != "" && host != "::" {
		t.Errorf("listen %s: unreachable through a published port from outside the container", cfg.Listen)
	}
	if port != strconv.Itoa(ociimage.Port) {
		t.Errorf("listen port %s, the image exposes %d", port, ociimage.Port)
	}
	if len(agent.Ports) != 1 || !strings.HasSuffix(agent.Ports[0], ":"+port) {
		t.Errorf("agent ports %q: want the listen port %s published", agent.Ports, port)
	}
	db, err := url.Parse(cfg.Database)
	if err != nil || db.Scheme != "postgres" {
		t.Fatalf("database %q: want a postgres:// URL", cfg.Database)
	}
	if _, ok := c.Services[db.Hostname()]; !ok || db.Hostname() != "postgres" || db.Port() != "5432" {
		t.Errorf("database host %s: want the postgres service on 5432", db.Host)
	}
	if _, set := db.User.Password(); set || db.User.Username() != pg.Environment["POSTGRES_USER"] ||
		strings.TrimPrefix(db.Path, "/") != pg.Environment["POSTGRES_DB"] || agent.Environment["PGPASSWORD"] != pg.Environment["POSTGRES_PASSWORD"] {
		t.Errorf("database %s with PGPASSWORD %q: want postgres's user, database and password (from the environment)", db.Redacted(), agent.Environment["PGPASSWORD"])
	}

	// Health checks: pg_isready, and the agent's binary (the image has
	// no shell) probing the listen port.
	if len(pg.Healthcheck.Test) < 2 || pg.Healthcheck.Test[0] != "CMD" || pg.Healthcheck.Test[1] != "pg_isready" {
		t.Errorf("postgres health check %q: want [CMD pg_isready ...]", pg.Healthcheck.Test)
	}
	probe := "http://127.0.0.1:" + port + "/healthz"
	if want := []string{"CMD", ociimage.BinaryPath, "healthcheck", "--url", probe}; !slices.Equal(agent.Healthcheck.Test, want) {
		t.Errorf("agent health check %q, want %q", agent.Healthcheck.Test, want)
	}

	// The sources are folders mounted from here; their types name action
	// instances that need no shell.
	var dirs []string
	for _, s := range cfg.Sources {
		dir := hostPath(agentMounts, s.Dir)
		if s.Git != nil || dir == "" {
			t.Fatalf("source %s: want a folder mounted from here", s.Name)
		}
		dirs = append(dirs, dir)
		for _, action := range typeActions(t, dir) {
			inst, ok := cfg.Actions[action]
			if !ok && action != "noop" {
				t.Errorf("%s: a type names action %q, which no8s.yaml does not declare", dir, action)
			}
			if ok && inst.Plugin != "noop" && inst.Plugin != "http" && inst.Plugin != "github_actions" {
				t.Errorf("action %s: plugin %s may need a shell or tools the image lacks", action, inst.Plugin)
			}
		}
	}

	bin := buildAgent(t)
	for _, dir := range dirs {
		out, err := exec.Command(bin, "validate", dir).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "valid:") {
			t.Fatalf("validate %s: %v\n%s", dir, err, out)
		}
		t.Logf("validate %s: %s", dir, strings.TrimSpace(string(out)))
	}

	runExample(t, bin, cfgFile, agentMounts)
	composeUp(t, probe)
}

// volumeAt is the named volume mounted at target, or "".
func volumeAt(ms []mount, target string) string {
	for _, m := range ms {
		if m.target == target && !strings.HasPrefix(m.source, ".") && !strings.HasPrefix(m.source, "/") {
			return m.source
		}
	}
	return ""
}

// typeActions are the actions the resource types under dir name.
func typeActions(t *testing.T, dir string) []string {
	t.Helper()
	var actions []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var doc struct {
				Kind string `yaml:"kind"`
				Spec struct {
					Action string `yaml:"action"`
				} `yaml:"spec"`
			}
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				return nil
			} else if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if doc.Kind == "ResourceType" {
				actions = append(actions, doc.Spec.Action)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(actions) == 0 {
		t.Fatalf("%s declares no resource type", dir)
	}
	return actions
}

// buildAgent builds the agent binary.
func buildAgent(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "no8s-agent")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "../cmd/no8s-agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runExample runs the agent on the configuration as compose gives it, with
// the container's paths mapped to this folder and a real PostgreSQL in
// place of the service: the health check's command answers, and every
// resource of the example becomes ready through its noop action.
func runExample(t *testing.T, bin, cfgFile string, mounts []mount) {
	t.Helper()
	data, err := os.ReadFile(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, m := range mounts {
		if strings.HasPrefix(m.source, "./") && m.target != ociimage.ConfigPath {
			abs, err := filepath.Abs(m.source)
			if err != nil {
				t.Fatal(err)
			}
			text = strings.ReplaceAll(text, m.target, abs)
		}
	}
	work := t.TempDir()
	local := filepath.Join(work, "no8s.yaml")
	if err := os.WriteFile(local, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--config", local, "--database", pgtest.URL(t), "--listen", addr)
	cmd.Dir = work
	logs := &lines{seen: make(chan struct{}, 1)}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
		if t.Failed() {
			t.Logf("agent log:\n%s", logs)
		}
	}()

	// Serving: the agent says so in its log.
	for !strings.Contains(logs.String(), `msg="serving HTTP"`) {
		select {
		case <-logs.seen:
		case err := <-exited:
			exited <- err
			t.Fatalf("the agent exited: %v", err)
		case <-ctx.Done():
			t.Fatal("the agent did not serve within 2 minutes")
		}
	}
	health := []string{"healthcheck", "--url", "http://" + addr + "/healthz"}
	if out, err := exec.Command(bin, health...).CombinedOutput(); err != nil {
		t.Fatalf("no8s-agent %s: %v\n%s", strings.Join(health, " "), err, out)
	}

	// Every resource ready: the agent logs each reconcile; the API says
	// when all are done.
	want := 3
	for {
		ready, failed, status := readyResources(t, "http://"+addr)
		if ready == want {
			return
		}
		if failed {
			t.Fatalf("a resource failed: %s", status)
		}
		select {
		case <-logs.seen:
		case <-time.After(500 * time.Millisecond):
			// A resource may turn ready without a log line: ask again.
		case err := <-exited:
			exited <- err
			t.Fatalf("the agent exited: %v", err)
		case <-ctx.Done():
			t.Fatalf("resources not all ready within 2 minutes: %s", status)
		}
	}
}

// readyResources counts the resources the API shows ready, and says
// whether one failed.
func readyResources(t *testing.T, base string) (ready int, failed bool, status string) {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/resources")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false, resp.Status
	}
	var list []struct {
		Kind   string `json:"kind"`
		Name   string `json:"name"`
		Status string `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	for _, r := range list {
		switch r.Status {
		case "ready":
			ready++
		case "failed":
			failed = true
		}
		status += fmt.Sprintf("%s/%s %s; ", r.Kind, r.Name, r.Status)
	}
	return ready, failed, status
}

// composeUp starts compose.yaml when Docker has a daemon and the agent's
// image is loaded, and reaches /healthz; this machine may have only the
// client.
func composeUp(t *testing.T, probe string) {
	t.Helper()
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Logf("docker: no daemon answers (%v: %s); docker compose up was not run", err, strings.TrimSpace(string(out)))
		return
	}
	ref := ociimage.Repository + ":" + ociimage.LatestTag
	if err := exec.Command("docker", "image", "inspect", ref).Run(); err != nil {
		t.Logf("docker: %s is not loaded (make dist, then docker load); docker compose up was not run", ref)
		return
	}
	project := "no8s-test-" + strconv.Itoa(os.Getpid())
	up := exec.Command("docker", "compose", "-p", project, "up", "-d", "--wait", "--wait-timeout", "120")
	if out, err := up.CombinedOutput(); err != nil {
		t.Fatalf("docker compose up: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "compose", "-p", project, "down", "-v").Run() })
	resp, err := http.Get(probe)
	if err != nil {
		t.Fatalf("GET %s: %v", probe, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", probe, resp.Status)
	}
	t.Logf("docker compose: up, %s answered %s", probe, resp.Status)
}

// lines is a log that signals each write.
type lines struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	seen chan struct{}
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case l.seen <- struct{}{}:
	default:
	}
	return l.buf.Write(p)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
