package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s-agent/source/git/gittest"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// memResources is how many resources BenchmarkAgentMemory holds, one file
// each; NO8S_BENCH_RESOURCES overrides it (e.g. 100000).
const memResources = 10_000

// memIdle is how long the agent is left idle, once every resource is
// ready, before its memory is read: long enough for the runtime to hand
// back what the sync and the reconciles freed, if it is going to.
const memIdle = 10 * time.Second

// benchToken is the write token of the agents the benchmarks start.
const benchToken = "bench-write-token"

// BenchmarkAgentMemory runs the built agent on PostgreSQL with a Git
// source of 10 types and 10,000 resources, one file each, reconciled by
// noop with 8 workers, waits until every resource is ready, leaves it idle
// and reports its resident memory (VmRSS), its peak (VmHWM) and the Go
// heap's figures. With NO8S_BENCH_PROFILE_DIR set it saves the idle
// agent's heap profile and runtime figures there.
func BenchmarkAgentMemory(b *testing.B) {
	n := memResources
	if v := os.Getenv("NO8S_BENCH_RESOURCES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("NO8S_BENCH_RESOURCES=%q: not a positive integer", v)
		}
	}
	bin := buildAgent(b)
	repo := benchRepo(b, n)
	var m memFigures
	for range b.N {
		m = agentMemory(b, bin, repo, n)
	}
	b.ReportMetric(m.ready.Seconds(), "s-ready")
	b.ReportMetric(m.rss, "MB-rss-idle")
	b.ReportMetric(m.hwm, "MB-rss-peak")
	b.ReportMetric(m.heapInuse, "MB-heap-inuse")
	b.ReportMetric(m.heapIdle-m.heapReleased, "MB-heap-kept")
	b.ReportMetric(m.sys, "MB-sys")
}

// memFigures are the idle agent's memory figures, in MB.
type memFigures struct {
	ready                                       time.Duration
	rss, hwm, heapInuse, heapIdle, heapReleased float64
	sys                                         float64
}

// buildAgent builds the agent, or returns the binary NO8S_BENCH_AGENT
// names, so that another version can be measured the same way.
func buildAgent(b *testing.B) string {
	b.Helper()
	if bin := os.Getenv("NO8S_BENCH_AGENT"); bin != "" {
		return bin
	}
	bin := filepath.Join(b.TempDir(), "no8s-agent")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// benchRepo makes a Git repository of 10 types and n resources, one file each.
func benchRepo(b *testing.B, n int) *gittest.Repo {
	b.Helper()
	r := gittest.NewRepo(b)
	files := make(map[string]string, n+loadTypes)
	for i := range loadTypes {
		files[fmt.Sprintf("types/kind%d.yaml", i)] = loadTypeDoc(i)
	}
	for i := range n {
		files[benchFile(i)] = benchResource(i, 1+i)
	}
	r.Write(files)
	r.Commit("resources")
	return r
}

func benchFile(i int) string { return fmt.Sprintf("resources/kind%d/res-%06d.yaml", i%loadTypes, i) }

func benchResource(i, size int) string {
	return fmt.Sprintf("apiVersion: bench.example.com/v1\nkind: Kind%d\nmetadata:\n  name: res-%06d\n  labels: {team: t%d}\nspec:\n  size: %d\n  region: eu\n  tags: {owner: bench}\n",
		i%loadTypes, i, i%7, size)
}

// benchAgent is the built agent running as a process.
type benchAgent struct {
	b    *testing.B
	cmd  *exec.Cmd
	base string
	conn *pgx.Conn
	done chan int
	log  *lockedWriter
}

// startBenchAgent runs the built agent on a fresh database with the Git
// repository as source "bench" and 8 workers, with profiling when asked,
// and waits until all n resources are ready. It is stopped when the
// benchmark ends.
func startBenchAgent(b *testing.B, bin string, repo *gittest.Repo, n int, profiling bool) (*benchAgent, time.Duration) {
	b.Helper()
	dbURL := pgtest.URL(b)
	root := b.TempDir()
	addr := freeAddr(b)
	cfg := filepath.Join(root, "no8s.yaml")
	writeLoadFile(b, cfg, fmt.Sprintf(`database: %q
listen: %s
logLevel: warn
api: {writeTokenEnv: NO8S_BENCH_TOKEN}
sources:
  - name: bench
    git: {url: %q, branch: main, interval: 10m}
reconcile:
  workers: 8
`, dbURL, addr, repo.URL()))
	a := &benchAgent{b: b, base: "http://" + addr, done: make(chan int, 1), log: &lockedWriter{w: &bytes.Buffer{}}}
	args := []string{"run", "--config", cfg, "--cache-dir", filepath.Join(root, "cache")}
	if profiling {
		args = append(args, "--pprof")
	}
	a.cmd = exec.Command(bin, args...)
	a.cmd.Env = append(os.Environ(), "NO8S_BENCH_TOKEN="+benchToken)
	a.cmd.Stderr = a.log
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := a.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() {
		_ = a.cmd.Wait()
		a.done <- a.cmd.ProcessState.ExitCode()
	}()
	b.Cleanup(func() {
		_ = a.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case code := <-a.done:
			a.done <- code
		case <-time.After(30 * time.Second):
			b.Error("the agent did not stop within 30s of SIGTERM")
			_ = a.cmd.Process.Kill()
		}
	})
	conn, err := pgx.Connect(b.Context(), dbURL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(context.Background()) })
	a.conn = conn
	a.waitReady(n, 0)
	return a, time.Since(start)
}

func (a *benchAgent) fail(format string, args ...any) {
	a.b.Helper()
	a.b.Fatalf("%s\nagent log:\n%s", fmt.Sprintf(format, args...), a.log)
}

// waitReady waits until n resources are ready at generation above minGen.
func (a *benchAgent) waitReady(n int, minGen int64) {
	a.b.Helper()
	loadWait(a.b, time.Duration(n/10+120)*time.Second, a.done, a.fail, "every resource to be ready", func() (bool, string) {
		var ready int
		if err := a.conn.QueryRow(a.b.Context(),
			"SELECT count(*) FROM resources WHERE phase = 'ready' AND observed_generation = generation AND generation > $1", minGen).Scan(&ready); err != nil {
			return false, err.Error()
		}
		return ready == n, fmt.Sprintf("%d ready", ready)
	})
}

// agentMemory runs the agent until every resource is ready and idle, and
// reads its memory.
func agentMemory(b *testing.B, bin string, repo *gittest.Repo, n int) memFigures {
	b.Helper()
	a, ready := startBenchAgent(b, bin, repo, n, true)
	f := memFigures{ready: ready}
	// Idle: nothing to wait for but the time the runtime takes to return
	// memory, which is what is measured.
	idle := time.NewTimer(memIdle)
	select {
	case <-idle.C:
	case code := <-a.done:
		a.done <- code
		a.fail("the agent exited %d while idle", code)
	}
	status := procStatus(b, a.cmd.Process.Pid)
	f.rss, f.hwm = status["VmRSS"], status["VmHWM"]
	heap := httpGet(b, a.base+"/debug/pprof/heap?debug=1")
	for _, line := range strings.Split(string(heap), "\n") {
		var name string
		var v float64
		if _, err := fmt.Sscanf(line, "# %s = %g", &name, &v); err != nil {
			continue
		}
		switch name {
		case "HeapInuse":
			f.heapInuse = v / (1 << 20)
		case "HeapIdle":
			f.heapIdle = v / (1 << 20)
		case "HeapReleased":
			f.heapReleased = v / (1 << 20)
		case "Sys":
			f.sys = v / (1 << 20)
		}
	}
	if dir := os.Getenv("NO8S_BENCH_PROFILE_DIR"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		writeLoadFile(b, filepath.Join(dir, "heap.pb.gz"), string(httpGet(b, a.base+"/debug/pprof/heap")))
		writeLoadFile(b, filepath.Join(dir, "heap.txt"), string(heap))
		writeLoadFile(b, filepath.Join(dir, "status.txt"), fmt.Sprintf("%+v\n", f))
	}
	return f
}

// procStatus reads the memory lines of /proc/pid/status, in MB.
func procStatus(b *testing.B, pid int) map[string]float64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || !strings.HasPrefix(name, "Vm") {
			continue
		}
		var kb float64
		if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%g kB", &kb); err == nil {
			out[name] = kb / 1024
		}
	}
	return out
}

// httpGet returns the body of a GET that must answer 200.
func httpGet(b *testing.B, url string) []byte {
	b.Helper()
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d %v %.200s", url, resp.StatusCode, err, data)
	}
	return data
}
