package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sourceName is the agent's one Git source.
const sourceName = "bench"

// tokenEnv names the variable holding the agent's API write token.
const tokenEnv = "NO8S_E2E_WRITE_TOKEN"

// BuildAgent builds the agent from the module at root into out.
func BuildAgent(ctx context.Context, root, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/no8s-agent")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/no8s-agent in %s: %w\n%s", root, err, b)
	}
	return nil
}

// Agent is the agent running as a process, and a client of its API.
type Agent struct {
	Base  string // http://host:port
	dir   string
	token string
	cmd   *exec.Cmd
	log   string
	// exited is closed when the process has exited.
	exited chan struct{}
	http   *http.Client
}

// StartAgent writes a configuration (the workload's repository as Git
// source, polled once a day so that only triggers sync; noop actions; 8
// workers; PostgreSQL at dbURL, or the embedded store when dbURL is empty;
// the other settings as the workload's shape says) and starts the agent
// binary bin on it, with its state in dir.
func StartAgent(bin, dir, dbURL string, w *Workload) (*Agent, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	tok := make([]byte, 16)
	_, _ = rand.Read(tok)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	a := &Agent{Base: "http://" + addr, dir: dir, token: hex.EncodeToString(tok), log: filepath.Join(dir, "agent.log"),
		exited: make(chan struct{}),
		http:   &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	database := fmt.Sprintf("database: %q", dbURL)
	if dbURL == "" {
		database = "# no database: the embedded store in .no8s/state.db"
	}
	// The benchmark's own shape sets what it relies on; a shape with
	// Defaults leaves every setting it can at its default (log level,
	// pool, workers), and declares no action but the built-in noop.
	settings := fmt.Sprintf(`logLevel: warn
actions:
  %s:
    plugin: exec
    config: {command: [sleep, "120"], timeout: 10m}
reconcile:
  workers: 8
`, longAction)
	if w.Shape.Defaults {
		settings = ""
	}
	path := ""
	if p := w.SourcePath(); p != "" {
		path = fmt.Sprintf("\n      path: %s", p)
	}
	cfg := fmt.Sprintf(`%s
listen: %s
sources:
  - name: %s
    git:
      url: %q
      branch: main%s
      interval: 24h
      timeout: 30m
    prune: {enabled: true}
%sapi: {writeTokenEnv: %s}
`, database, addr, sourceName, w.URL(), path, settings, tokenEnv)
	cfgPath := filepath.Join(dir, "no8s.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	logf, err := os.Create(a.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	args := []string{"run", "--config", cfgPath, "--cache-dir", filepath.Join(dir, "cache")}
	if ProfileDir() != "" {
		args = append(args, "--pprof")
	}
	a.cmd = exec.Command(bin, args...)
	a.cmd.Dir = dir
	a.cmd.Env = append(os.Environ(), tokenEnv+"="+a.token)
	a.cmd.Stdout, a.cmd.Stderr = logf, logf
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := a.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the agent: %w", err)
	}
	go func() {
		_ = a.cmd.Wait()
		close(a.exited)
	}()
	return a, nil
}

// Exited is closed when the agent's process has exited.
func (a *Agent) Exited() <-chan struct{} { return a.exited }

// Stop asks the agent to stop (SIGTERM) and kills it when it has not
// stopped within a minute.
func (a *Agent) Stop() error {
	select {
	case <-a.exited:
		return fmt.Errorf("the agent had exited: %s", a.cmd.ProcessState)
	default:
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
		return nil
	case <-time.After(time.Minute):
		_ = a.cmd.Process.Kill()
		<-a.exited
		return errors.New("the agent did not stop within a minute of SIGTERM; killed it")
	}
}

// LogTail is the end of the agent's log, for failure messages.
func (a *Agent) LogTail() string {
	b, err := os.ReadFile(a.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}

// MemoryUse is the agent's memory as the kernel counts it: resident
// (VmRSS), its peak (VmHWM), and the resident split into anonymous memory
// (the heap, stacks) and file pages (mostly the binary's own code and data).
type MemoryUse struct {
	RSS, HWM, Anon, File int64
}

// Memory reads the agent's memory use from /proc.
func (a *Agent) Memory() (MemoryUse, error) {
	var m MemoryUse
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", a.cmd.Process.Pid))
	if err != nil {
		return m, err
	}
	defer f.Close()
	fields := map[string]*int64{"VmRSS": &m.RSS, "VmHWM": &m.HWM, "RssAnon": &m.Anon, "RssFile": &m.File}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		to := fields[key]
		if !ok || to == nil {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			return m, fmt.Errorf("%s: %w", key, err)
		}
		*to = kb << 10
	}
	return m, sc.Err()
}

// Source is what the benchmark reads of GET /api/v1/sources/{name}.
type Source struct {
	Phase               string `json:"phase"`
	Message             string `json:"message"`
	LastAppliedRevision string `json:"last_applied_revision"`
}

// SyncRecord is what the benchmark reads of a source's sync history.
type SyncRecord struct {
	Revision   string `json:"revision"`
	Success    bool   `json:"success"`
	DurationMS int64  `json:"duration_ms"`
}

// Resource is what the benchmark reads of a resource.
type Resource struct {
	ID                 int64  `json:"id"`
	Status             string `json:"status"`
	Generation         int64  `json:"generation"`
	ObservedGeneration int64  `json:"observed_generation"`
	// UpdatedAt is when the store last changed the resource: for one
	// reconciled at its generation, when its reconcile was recorded.
	UpdatedAt time.Time `json:"updated_at"`
}

// Reconciled reports whether r is ready at its generation gen.
func (r Resource) Reconciled(gen int64) bool {
	return r.Status == "ready" && r.Generation == gen && r.ObservedGeneration == gen
}

// errNotFound is a 404 from the API.
var errNotFound = errors.New("not found")

// get reads path into v; a 404 is errNotFound.
func (a *Agent) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.Base+path, nil)
	if err != nil {
		return err
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("GET %s: %w", path, errNotFound)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, bytes.TrimSpace(body))
	case v == nil:
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}

// ProfileDir is the folder NO8S_E2E_PROFILE_DIR names, where the agent's
// CPU profiles are saved; empty when none is named.
func ProfileDir() string { return os.Getenv("NO8S_E2E_PROFILE_DIR") }

// ProfileCPU saves a CPU profile of the agent over d to file, in
// ProfileDir. The agent runs with --pprof only when ProfileDir is set.
func (a *Agent) ProfileCPU(ctx context.Context, d time.Duration, file string) error {
	return a.saveProfile(ctx, fmt.Sprintf("/debug/pprof/profile?seconds=%d", max(1, int(d.Seconds()))), file)
}

// ProfileHeap saves a profile of the agent's live heap, after a
// collection, to file in ProfileDir.
func (a *Agent) ProfileHeap(ctx context.Context, file string) error {
	return a.saveProfile(ctx, "/debug/pprof/heap?gc=1", file)
}

// saveProfile saves what the agent's profile at path answers to file, in
// ProfileDir.
func (a *Agent) saveProfile(ctx context.Context, path, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.Base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := a.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	out, err := os.Create(filepath.Join(ProfileDir(), file))
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Source reads the benchmark's source.
func (a *Agent) Source(ctx context.Context) (Source, error) {
	var s Source
	err := a.get(ctx, "/api/v1/sources/"+sourceName, &s)
	return s, err
}

// SyncDuration is how long the agent's own sync of the commit took, from
// the source's history.
func (a *Agent) SyncDuration(ctx context.Context, commit string) (time.Duration, error) {
	var recs []SyncRecord
	if err := a.get(ctx, "/api/v1/sources/"+sourceName+"/history?limit=20", &recs); err != nil {
		return 0, err
	}
	for _, r := range recs {
		if r.Success && strings.HasSuffix(r.Revision, commit) {
			return time.Duration(r.DurationMS) * time.Millisecond, nil
		}
	}
	return 0, fmt.Errorf("no successful sync of %s in the source's history", commit)
}

// Resource reads resource id.
func (a *Agent) Resource(ctx context.Context, id int64) (Resource, error) {
	var r Resource
	err := a.get(ctx, fmt.Sprintf("/api/v1/resources/%d", id), &r)
	return r, err
}

// ResourceByName reads a resource by kind and name (version v1).
func (a *Agent) ResourceByName(ctx context.Context, kind, name string) (Resource, error) {
	var r Resource
	err := a.get(ctx, "/api/v1/resources/by-name/"+kind+"/v1/"+name, &r)
	return r, err
}

// IDs pages through every resource and returns their ids by kind and name
// ("Kind/name").
func (a *Agent) IDs(ctx context.Context) (map[string]int64, error) {
	ids := map[string]int64{}
	next := ListPages(1000)
	var prev *http.Response
	for {
		path := next(nil, prev)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.Base+path, nil)
		if err != nil {
			return nil, err
		}
		resp, err := a.http.Do(req)
		if err != nil {
			return nil, err
		}
		var page []struct {
			ID   int64  `json:"id"`
			Kind string `json:"kind"`
			Name string `json:"name"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		if err != nil {
			return nil, fmt.Errorf("GET %s: %w", path, err)
		}
		for _, r := range page {
			ids[r.Kind+"/"+r.Name] = r.ID
		}
		if len(page) == 0 || next(nil, resp) == next(nil, nil) {
			return ids, nil
		}
		prev = resp
	}
}

// TriggerSync asks for a sync of the source now.
func (a *Agent) TriggerSync(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.Base+"/api/v1/sources/"+sourceName+"/sync", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := a.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("POST sync: %s: %s", resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// Counts are the figures the benchmark reads from /metrics.
type Counts struct {
	// Reconciled is the number of successful reconciles so far.
	Reconciled int64
	// Ready is the number of resources in status ready.
	Ready int64
	// Running is the number of resources a worker holds.
	Running int64
}

// Counts reads /metrics.
func (a *Agent) Counts(ctx context.Context) (Counts, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.Base+"/metrics", nil)
	if err != nil {
		return Counts{}, err
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return Counts{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Counts{}, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	var c Counts
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		name := line[:sp]
		val, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(name, "no8s_reconciles_total{") && strings.Contains(name, `result="success"`):
			c.Reconciled += int64(val)
		case name == `no8s_resources{status="ready"}`:
			c.Ready = int64(val)
		case name == "no8s_reconciles_in_progress":
			c.Running = int64(val)
		}
	}
	return c, sc.Err()
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Answer is what the agent answers a GET of url, as hey sends it (no
// token): the body and its content type. Anything but 200 is an error.
func (a *Agent) Answer(ctx context.Context, url string) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, resp.Header.Get("Content-Type"), nil
}
