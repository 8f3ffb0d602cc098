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
	bin := filepath.Join(b.TempDir(), "no8s-agent")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	repo := memRepo(b, n)
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

// memRepo makes a Git repository of 10 types and n resources, one file each.
func memRepo(b *testing.B, n int) string {
	b.Helper()
	r := gittest.NewRepo(b)
	files := make(map[string]string, n+loadTypes)
	for i := range loadTypes {
		files[fmt.Sprintf("types/kind%d.yaml", i)] = loadTypeDoc(i)
	}
	for i := range n {
		files[fmt.Sprintf("resources/kind%d/res-%06d.yaml", i%loadTypes, i)] = fmt.Sprintf(
			"apiVersion: bench.example.com/v1\nkind: Kind%d\nmetadata:\n  name: res-%06d\n  labels: {team: t%d}\nspec:\n  size: %d\n  region: eu\n  tags: {owner: bench}\n",
			i%loadTypes, i, i%7, 1+i)
	}
	r.Write(files)
	r.Commit("resources")
	return r.URL()
}

// agentMemory runs the agent until every resource is ready and idle, and
// reads its memory.
func agentMemory(b *testing.B, bin, repo string, n int) memFigures {
	b.Helper()
	dbURL := pgtest.URL(b)
	root := b.TempDir()
	addr := freeAddr(b)
	cfg := filepath.Join(root, "no8s.yaml")
	writeLoadFile(b, cfg, fmt.Sprintf(`database: %q
listen: %s
logLevel: warn
sources:
  - name: bench
    git: {url: %q, branch: main, interval: 10m}
reconcile:
  workers: 8
`, dbURL, addr, repo))
	agentLog := &lockedWriter{w: &bytes.Buffer{}}
	cmd := exec.Command(bin, "run", "--config", cfg, "--cache-dir", filepath.Join(root, "cache"), "--pprof")
	cmd.Stderr = agentLog
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		_ = cmd.Wait()
		done <- cmd.ProcessState.ExitCode()
	}()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case code := <-done:
			done <- code
		case <-time.After(30 * time.Second):
			b.Error("the agent did not stop within 30s of SIGTERM")
			_ = cmd.Process.Kill()
		}
	}()
	fail := func(format string, args ...any) {
		b.Helper()
		b.Fatalf("%s\nagent log:\n%s", fmt.Sprintf(format, args...), agentLog)
	}
	conn, err := pgx.Connect(b.Context(), dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	loadWait(b, time.Duration(n/10+120)*time.Second, done, fail, "every resource to be ready", func() (bool, string) {
		var ready int
		if err := conn.QueryRow(b.Context(),
			"SELECT count(*) FROM resources WHERE phase = 'ready' AND observed_generation = generation").Scan(&ready); err != nil {
			return false, err.Error()
		}
		return ready == n, fmt.Sprintf("%d ready", ready)
	})
	f := memFigures{ready: time.Since(start)}
	// Idle: nothing to wait for but the time the runtime takes to return
	// memory, which is what is measured.
	idle := time.NewTimer(memIdle)
	select {
	case <-idle.C:
	case code := <-done:
		done <- code
		fail("the agent exited %d while idle", code)
	}
	status := procStatus(b, cmd.Process.Pid)
	f.rss, f.hwm = status["VmRSS"], status["VmHWM"]
	base := "http://" + addr
	heap := httpGet(b, base+"/debug/pprof/heap?debug=1")
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
		writeLoadFile(b, filepath.Join(dir, "heap.pb.gz"), string(httpGet(b, base+"/debug/pprof/heap")))
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
