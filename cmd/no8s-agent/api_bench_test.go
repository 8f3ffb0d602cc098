package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/source/git/gittest"
)

// apiReadWindow is how long each case of BenchmarkAPIReads reads.
const apiReadWindow = 5 * time.Second

// BenchmarkAPIReads runs the built agent holding 10,000 resources and
// measures GET /api/v1/resources/{id} with 200 clients and GET
// /api/v1/resources?limit=500 (following the next-page links) with 50
// clients, each for a few seconds, on the idle agent and while a sync of a
// commit changing every resource and its reconciles run. Clients send their
// next request as soon as one is answered, and wait as Retry-After says on
// a 503. It reports the answered reads' p50 and p99, answers per second and
// 503s per second.
func BenchmarkAPIReads(b *testing.B) {
	const n = memResources
	bin := buildAgent(b)
	repo := benchRepo(b, n)
	a, _ := startBenchAgent(b, bin, repo, n, os.Getenv("NO8S_BENCH_PROFILE_DIR") != "")
	ids := a.ids()
	gen := int64(1)
	for _, busy := range []bool{false, true} {
		for _, c := range []struct {
			name    string
			clients int
			read    func(rng *rand.Rand, next string) (url, following string)
		}{
			{"get", 200, func(rng *rand.Rand, _ string) (string, string) {
				return fmt.Sprintf("%s/api/v1/resources/%d", a.base, ids[rng.IntN(len(ids))]), ""
			}},
			{"list500", 50, func(_ *rand.Rand, next string) (string, string) {
				if next == "" {
					return a.base + "/api/v1/resources?limit=500", ""
				}
				return a.base + next, ""
			}},
		} {
			name := c.name + "/idle"
			if busy {
				name = c.name + "/syncing"
			}
			b.Run(name, func(b *testing.B) {
				var r *readRun
				for range b.N {
					if busy {
						gen++
						a.commitAll(repo, n, int(gen))
					}
					prof := a.profile(b, name)
					cpu0 := processCPU(b, a.cmd.Process.Pid)
					r = a.readFor(b, c.clients, c.read)
					r.cpu = processCPU(b, a.cmd.Process.Pid) - cpu0
					prof()
					if busy {
						a.waitReady(n, gen-1)
					}
				}
				b.ReportMetric(r.pct(0.50), "p50-ms")
				b.ReportMetric(r.pct(0.99), "p99-ms")
				b.ReportMetric(float64(len(r.latencies))/apiReadWindow.Seconds(), "reads/s")
				b.ReportMetric(float64(r.rejected)/apiReadWindow.Seconds(), "503/s")
				// The agent's CPU time per answer tells its cost apart from
				// the machine's load, which moves the latencies.
				b.ReportMetric(float64(r.cpu.Microseconds())/1000/float64(max(1, len(r.latencies))), "agent-cpu-ms/read")
			})
		}
	}
}

// readRun is what the clients of one case saw.
type readRun struct {
	mu        gosync.Mutex
	latencies []time.Duration // answered reads, sorted at the end
	rejected  int
	cpu       time.Duration // the agent's, while the clients read
}

func (r *readRun) pct(p float64) float64 {
	if len(r.latencies) == 0 {
		return 0
	}
	return float64(r.latencies[min(len(r.latencies)-1, int(p*float64(len(r.latencies))))].Microseconds()) / 1000
}

var nextLinkRE = regexp.MustCompile(`<([^>]+)>;\s*rel="next"`)

// readFor runs clients for apiReadWindow, each reading the URLs read gives
// it; next is the path of the previous answer's next-page link.
func (a *benchAgent) readFor(b *testing.B, clients int, read func(rng *rand.Rand, next string) (string, string)) *readRun {
	b.Helper()
	run := &readRun{}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}}
	defer client.CloseIdleConnections()
	stop := time.Now().Add(apiReadWindow)
	var wg gosync.WaitGroup
	for range clients {
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
			next := ""
			for time.Now().Before(stop) {
				url, _ := read(rng, next)
				start := time.Now()
				resp, err := client.Get(url)
				if err != nil {
					b.Errorf("GET %s: %v", url, err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				took := time.Since(start)
				switch resp.StatusCode {
				case http.StatusOK:
					lat = append(lat, took)
					next = ""
					if m := nextLinkRE.FindStringSubmatch(resp.Header.Get("Link")); m != nil {
						next = m[1]
					}
				case http.StatusServiceUnavailable:
					rejected++
					wait := time.Second
					if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
						wait = time.Duration(s) * time.Second
					}
					time.Sleep(min(wait, time.Until(stop)))
				default:
					b.Errorf("GET %s: %s", url, resp.Status)
					return
				}
			}
		})
	}
	wg.Wait()
	slices.Sort(run.latencies)
	return run
}

// profile takes a CPU profile of the agent while the case runs when
// NO8S_BENCH_PROFILE_DIR names a folder to save it in; the returned
// function waits for it.
func (a *benchAgent) profile(b *testing.B, name string) func() {
	dir := os.Getenv("NO8S_BENCH_PROFILE_DIR")
	if dir == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", a.base, int(apiReadWindow.Seconds())-1))
		if err != nil {
			b.Errorf("CPU profile: %v", err)
			return
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if err := os.MkdirAll(dir, 0o755); err == nil {
			err = os.WriteFile(filepath.Join(dir, "cpu-"+strings.ReplaceAll(name, "/", "-")+".pb.gz"), data, 0o644)
		}
	}()
	return func() { <-done }
}

// ids lists the resources' ids.
func (a *benchAgent) ids() []int64 {
	a.b.Helper()
	rows, err := a.conn.Query(a.b.Context(), "SELECT id FROM resources")
	if err != nil {
		a.b.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			a.b.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	return ids
}

// commitAll commits a new spec for every resource and asks the agent to
// sync it.
func (a *benchAgent) commitAll(repo *gittest.Repo, n, gen int) {
	a.b.Helper()
	files := make(map[string]string, n)
	for i := range n {
		files[benchFile(i)] = benchResource(i, gen*100_000+i)
	}
	repo.Write(files)
	repo.Commit(fmt.Sprintf("generation %d", gen))
	req, err := http.NewRequestWithContext(a.b.Context(), "POST", a.base+"/api/v1/sources/bench/sync", nil)
	if err != nil {
		a.b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+benchToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.b.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		a.b.Fatalf("POST sync: %s", resp.Status)
	}
}
