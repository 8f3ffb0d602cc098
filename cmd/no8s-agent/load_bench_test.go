package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	gosync "sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// The load benchmark's folder: 10 types and 10,000 resources in 100 files,
// every type reconciled by the built-in noop action.
const (
	loadTypes       = 10
	loadResources   = 10_000
	loadPerFile     = 100
	loadReaders     = 200
	loadSubscribers = 500
)

// BenchmarkSyncUnderReadLoad runs the built agent on PostgreSQL with a
// watched folder, moves 10,000 resources into the folder and measures the
// time until every one is reconciled, twice: with nobody reading, and with
// 200 API clients reading resources as fast as they are answered (honouring
// Retry-After) and 500 event-stream subscribers. It reports both times,
// their ratio, the agent's CPU time in each, and the readers' latency; it
// fails when the ratio is over 2.
func BenchmarkSyncUnderReadLoad(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "no8s-agent")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	var quiet, loaded *loadRun
	for range b.N {
		quiet = syncUnderLoad(b, bin, false)
		loaded = syncUnderLoad(b, bin, true)
	}
	ratio := loaded.took.Seconds() / quiet.took.Seconds()
	b.ReportMetric(quiet.took.Seconds(), "s-ready-quiet")
	b.ReportMetric(loaded.took.Seconds(), "s-ready-loaded")
	b.ReportMetric(ratio, "ratio")
	b.ReportMetric(quiet.cpu.Seconds(), "cpu-s-quiet")
	b.ReportMetric(loaded.cpu.Seconds(), "cpu-s-loaded")
	b.ReportMetric(loaded.pct(0.50), "read-p50-ms")
	b.ReportMetric(loaded.pct(0.99), "read-p99-ms")
	b.ReportMetric(float64(len(loaded.latencies))/loaded.took.Seconds(), "reads/s")
	b.ReportMetric(float64(loaded.rejected)/loaded.took.Seconds(), "503/s")
	b.ReportMetric(float64(loaded.events.Load())/loaded.took.Seconds()/loadSubscribers, "events/s/stream")
	b.ReportMetric(float64(loaded.resyncs.Load()), "resyncs")
	if ratio > 2 {
		b.Errorf("with readers every resource was ready after %v, %.1fx the %v without: over 2x", loaded.took, ratio, quiet.took)
	}
	if n := loaded.dropped.Load(); n > 0 {
		b.Errorf("%d event streams ended before the readers stopped", n)
	}
}

// loadRun is one timed sync, with what the readers saw meanwhile.
type loadRun struct {
	took, cpu time.Duration

	mu        gosync.Mutex
	latencies []time.Duration // of answered reads (200 or 404), sorted at the end
	rejected  int             // reads answered 503

	events, resyncs, dropped atomic.Int64 // over all the event streams
}

func (r *loadRun) pct(p float64) float64 {
	if len(r.latencies) == 0 {
		return 0
	}
	return float64(r.latencies[min(len(r.latencies)-1, int(p*float64(len(r.latencies))))].Microseconds()) / 1000
}

// syncUnderLoad starts the agent on a fresh database, optionally starts the
// readers, moves the resources into the watched folder and measures until
// all of them are ready.
func syncUnderLoad(b *testing.B, bin string, withLoad bool) *loadRun {
	b.Helper()
	dbURL := pgtest.URL(b)
	root := b.TempDir()
	tree, staging := filepath.Join(root, "tree"), filepath.Join(root, "staging")
	for i := range loadTypes {
		writeLoadFile(b, filepath.Join(tree, "types", fmt.Sprintf("kind%d.yaml", i)), loadTypeDoc(i))
	}
	for f := range loadResources / loadPerFile {
		writeLoadFile(b, filepath.Join(staging, "resources", fmt.Sprintf("r%03d.yaml", f)), loadFile(f))
	}
	addr := freeAddr(b)
	cfg := filepath.Join(root, "no8s.yaml")
	writeLoadFile(b, cfg, fmt.Sprintf(`database: %q
listen: %s
logLevel: warn
sources:
  - name: bench
    dir: %q
    interval: 10m
reconcile:
  workers: 8
`, dbURL, addr, tree))

	agentLog := &lockedWriter{w: &bytes.Buffer{}}
	cmd := exec.Command(bin, "run", "--config", cfg, "--cache-dir", filepath.Join(root, "cache"))
	cmd.Stderr = agentLog
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
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
	// The types are synced first, so that the timed sync is the resources'.
	loadWait(b, 60*time.Second, done, fail, "the types to be synced", func() (bool, string) {
		var n int
		if err := conn.QueryRow(b.Context(), "SELECT count(*) FROM resource_types").Scan(&n); err != nil {
			return false, err.Error()
		}
		return n == loadTypes, fmt.Sprintf("%d types", n)
	})

	run := &loadRun{}
	loadCtx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	var wg gosync.WaitGroup
	if withLoad {
		startReaders(b, loadCtx, &wg, run, "http://"+addr, done, fail)
	}

	cpu0 := processCPU(b, cmd.Process.Pid)
	start := time.Now()
	if err := os.Rename(filepath.Join(staging, "resources"), filepath.Join(tree, "resources")); err != nil {
		b.Fatal(err)
	}
	phase := map[bool]string{false: "without readers", true: "with readers"}[withLoad]
	lastLog := start
	loadWait(b, 110*time.Second, done, fail, "every resource to be ready "+phase, func() (bool, string) {
		var n int
		if err := conn.QueryRow(b.Context(),
			"SELECT count(*) FROM resources WHERE phase = 'ready' AND observed_generation = generation").Scan(&n); err != nil {
			return false, err.Error()
		}
		state := fmt.Sprintf("%d ready", n)
		if time.Since(lastLog) >= 5*time.Second {
			// What the agent's database connections are doing, and how
			// much CPU the agent takes, tell what holds the reconciles up.
			lastLog = time.Now()
			b.Logf("%s, %v: %s; agent CPU %v; connections: %s", phase, time.Since(start).Round(time.Second), state,
				processCPU(b, cmd.Process.Pid)-cpu0, activity(b, conn))
		}
		return n == loadResources, state
	})
	run.took = time.Since(start)
	run.cpu = processCPU(b, cmd.Process.Pid) - cpu0
	stopLoad()
	wg.Wait()
	slices.Sort(run.latencies)
	return run
}

// activity counts the database's sessions by state and wait event.
func activity(b *testing.B, conn *pgx.Conn) string {
	rows, err := conn.Query(b.Context(), `SELECT state || coalesce(' ' || wait_event, ''), count(*)
		FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() GROUP BY 1 ORDER BY 1`)
	if err != nil {
		return err.Error()
	}
	var parts []string
	for rows.Next() {
		var what string
		var n int
		if err := rows.Scan(&what, &n); err != nil {
			return err.Error()
		}
		parts = append(parts, fmt.Sprintf("%d %s", n, what))
	}
	rows.Close()
	return strings.Join(parts, ", ")
}

// processCPU is the user and system CPU time the process pid has used.
func processCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Logf("no CPU time: %v", err)
		return 0
	}
	// Fields after the command's closing parenthesis; utime and stime are
	// the 14th and 15th of the whole line, in clock ticks (100 a second).
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	utime, _ := strconv.Atoi(f[11])
	stime, _ := strconv.Atoi(f[12])
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// startReaders opens the event streams, returning once all are
// subscribed, and starts the API readers; all stop when ctx is done.
func startReaders(b *testing.B, ctx context.Context, wg *gosync.WaitGroup, run *loadRun, base string, done chan int, fail func(string, ...any)) {
	b.Helper()
	streams := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1}}
	var subscribed atomic.Int64
	for range loadSubscribers {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, "GET", base+"/api/v1/events", nil)
			if err != nil {
				return
			}
			resp, err := streams.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			// Counting in whole reads keeps the subscribers cheap: an event
			// name split between two reads is missed, which a rate can bear.
			buf := make([]byte, 32<<10)
			if n, err := io.ReadAtLeast(resp.Body, buf, len(": subscribed")); err != nil || !bytes.Contains(buf[:n], []byte(": subscribed")) {
				return
			}
			subscribed.Add(1)
			for {
				n, err := resp.Body.Read(buf)
				run.events.Add(int64(bytes.Count(buf[:n], []byte("\nevent: "))))
				run.resyncs.Add(int64(bytes.Count(buf[:n], []byte("event: "+api.EventResync))))
				if err != nil {
					break
				}
			}
			if ctx.Err() == nil {
				run.dropped.Add(1)
			}
		})
	}
	loadWait(b, 60*time.Second, done, fail, "the subscribers to be subscribed", func() (bool, string) {
		n := subscribed.Load()
		return n == loadSubscribers, fmt.Sprintf("%d subscribed", n)
	})

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: loadReaders, MaxConnsPerHost: loadReaders}}
	for range loadReaders {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
			var lat []time.Duration
			rejected := 0
			defer func() {
				run.mu.Lock()
				run.latencies = append(run.latencies, lat...)
				run.rejected += rejected
				run.mu.Unlock()
			}()
			for ctx.Err() == nil {
				// Half list a page, half read one resource.
				url := fmt.Sprintf("%s/api/v1/resources/%d", base, 1+rng.IntN(loadResources))
				if rng.IntN(2) == 0 {
					url = fmt.Sprintf("%s/api/v1/resources?limit=50&after=%d", base, rng.IntN(loadResources))
				}
				req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
				if err != nil {
					return
				}
				start := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					return // stopped
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if ctx.Err() != nil {
					return
				}
				switch resp.StatusCode {
				case http.StatusServiceUnavailable:
					rejected++
					wait := time.Second
					if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
						wait = time.Duration(s) * time.Second
					}
					select {
					case <-ctx.Done():
					case <-time.After(wait):
					}
				case http.StatusOK, http.StatusNotFound:
					lat = append(lat, time.Since(start))
				default:
					b.Errorf("GET %s: %s", url, resp.Status)
					return
				}
			}
		})
	}
}

// loadWait polls check every 50 ms until it is done, failing after timeout
// or when the agent exits.
func loadWait(b *testing.B, timeout time.Duration, done chan int, fail func(string, ...any), what string, check func() (bool, string)) {
	b.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, state := check()
		if ok {
			return
		}
		select {
		case code := <-done:
			done <- code
			fail("waiting for %s: run exited %d; last state: %s", what, code, state)
		case <-deadline.C:
			fail("waiting for %s: not done after %v; last state: %s", what, timeout, state)
		case <-tick.C:
		}
	}
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func writeLoadFile(b *testing.B, path, content string) {
	b.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		b.Fatal(err)
	}
}

func loadTypeDoc(i int) string {
	return fmt.Sprintf(`apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Kind%d}
spec:
  group: bench.example.com
  action: noop
  versions:
    - name: v1
      schema:
        type: object
        required: [size, region]
        properties:
          size: {type: integer, minimum: 1}
          region: {type: string, enum: [eu, us, ap]}
          tags: {type: object, additionalProperties: {type: string}}
`, i)
}

func loadFile(f int) string {
	var b strings.Builder
	for i := f * loadPerFile; i < (f+1)*loadPerFile; i++ {
		fmt.Fprintf(&b, "---\napiVersion: bench.example.com/v1\nkind: Kind%d\nmetadata:\n  name: res-%05d\n  labels: {team: t%d}\nspec:\n  size: %d\n  region: eu\n  tags: {owner: bench}\n",
			i%loadTypes, i, i%7, 1+i)
	}
	return b.String()
}
