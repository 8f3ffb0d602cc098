package e2e

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// envN names the variable that chooses the sizes, e.g. "10000" or
// "1000,10000"; `make bench-e2e N=...` sets it.
const envN = "NO8S_E2E_N"

// sizes are the numbers of resources to run, smallest first.
func sizes(tb testing.TB) []int {
	spec := os.Getenv(envN)
	if spec == "" {
		return []int{1_000, 10_000, 100_000}
	}
	var ns []int
	for f := range strings.SplitSeq(spec, ",") {
		n, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(f), "_", ""))
		if err != nil || n < 1000 {
			tb.Fatalf("%s=%q: want numbers of resources of at least 1000, separated by commas", envN, spec)
		}
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns
}

// envRuns names the variable that chooses how many times each workload
// runs at each N; without it, 3 times up to 10,000 resources and once
// above.
const envRuns = "NO8S_E2E_RUNS"

// runs is how many times each workload runs at n.
func runs(tb testing.TB, n int) int {
	spec := os.Getenv(envRuns)
	if spec == "" {
		if n <= 10_000 {
			return 3
		}
		return 1
	}
	k, err := strconv.Atoi(spec)
	if err != nil || k < 1 {
		tb.Fatalf("%s=%q: want a number of runs of at least 1", envRuns, spec)
	}
	return k
}

// workloads are the benchmark's workloads, in the order they run.
var workloads = []Shape{Nested, Flat, NestedHTTP, NestedBusy}

// envWorkloads names the variable that keeps only some workloads, by name
// and separated by commas, e.g. "flat"; without it, all of them run.
const envWorkloads = "NO8S_E2E_WORKLOADS"

// chosenWorkloads returns the workloads envWorkloads keeps.
func chosenWorkloads(tb testing.TB) []Shape {
	spec := os.Getenv(envWorkloads)
	if spec == "" {
		return workloads
	}
	var out []Shape
	for name := range strings.SplitSeq(spec, ",") {
		i := slices.IndexFunc(workloads, func(s Shape) bool { return s.Name == strings.TrimSpace(name) })
		if i < 0 {
			tb.Fatalf("%s=%q: no workload %q", envWorkloads, spec, name)
		}
		out = append(out, workloads[i])
	}
	return out
}

// tools are the binaries the scenario runs.
type tools struct {
	agent, kubeconform, hey string
}

// BenchmarkE2E runs the whole scenario for each N and workload, as many
// times as runs says, and prints one table per N and workload (also
// written to results-<N>-<workload>.txt) and, at the end, how the figures
// grow with N (results-growth-<workload>.txt).
func BenchmarkE2E(b *testing.B) {
	ns := sizes(b)
	bins := b.TempDir()
	t := tools{agent: filepath.Join(bins, "no8s-agent")}
	if err := BuildAgent(b.Context(), "../..", t.agent); err != nil {
		b.Fatal(err)
	}
	var err error
	if t.kubeconform, err = BuildKubeconform(b.Context(), bins); err != nil {
		b.Fatal(err)
	}
	if t.hey, err = BuildHey(b.Context(), bins); err != nil {
		b.Fatal(err)
	}
	sums := map[string][]*Summary{}
	shapes := chosenWorkloads(b)
	for _, n := range ns {
		for _, shape := range shapes {
			b.Run(fmt.Sprintf("N=%d/%s", n, shape.Name), func(b *testing.B) {
				sum := NewSummary(n, shape)
				sums[shape.Name] = append(sums[shape.Name], sum)
				defer func() {
					out := writeReport(b, fmt.Sprintf("results-%d-%s.txt", n, shape.Name), sum.Write)
					fmt.Print(out)
				}()
				for range b.N {
					for run := range runs(b, n) {
						r := NewReport(n, shape)
						sum.Runs = append(sum.Runs, r)
						runScenario(b, r, t, run+1)
					}
				}
			})
		}
	}
	for _, shape := range shapes {
		if len(sums[shape.Name]) > 1 {
			fmt.Print(writeReport(b, fmt.Sprintf("results-growth-%s.txt", shape.Name), func(w io.Writer) { WriteGrowth(w, sums[shape.Name]) }))
		}
	}
}

func writeReport(b *testing.B, name string, write func(io.Writer)) string {
	var s strings.Builder
	write(&s)
	if err := os.WriteFile(name, []byte(s.String()), 0o644); err != nil {
		b.Errorf("write %s: %v", name, err)
	}
	return s.String()
}

// scenario is one run's state: the workload, the agent and the report.
type scenario struct {
	b   *testing.B
	ctx context.Context
	r   *Report
	w   *Workload
	a   *Agent
	n   int
	run int
	hey string
	// scaled returns base plus per for each resource: deadlines grow with N.
	scaled func(base, per time.Duration) time.Duration
}

func (s *scenario) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s N=%d %s run %d: %s\n", time.Now().UTC().Format("15:04:05"), s.n, s.r.Workload.Name, s.run, fmt.Sprintf(format, args...))
}

// fail records a figure that could not be measured, and fails the benchmark.
func (s *scenario) fail(figure string, err error) {
	s.b.Helper()
	s.r.Fail(figure, err)
	s.b.Errorf("%s: %v", figure, err)
}

// Targets of the figures (those of 10,000 resources; memory has its own
// for 100,000).
const (
	targetCold      = "<= 2 s"
	targetStored    = "<= 100 ms"
	targetReady     = "<= 75 ms"
	targetReadyHTTP = "<= 150 ms"
	targetGetP99    = 10 * time.Millisecond
	targetListP99   = 100 * time.Millisecond
	targetThrough   = ">= River (ratio >= 1)"
	targetValidate  = "ratio <= 0.5"
	targetNewcomer  = "starts at once (ratio ~1)"
)

// runScenario runs the scenario once (run of them) on r's workload at r's
// N. The benchmark's own workload has every figure; the flat one, with the
// agent at its defaults, leaves out validate (the same files) and the
// newcomer (its agent has no action but noop).
func runScenario(b *testing.B, r *Report, t tools, run int) {
	n := r.N
	agentBin := t.agent
	s := &scenario{b: b, ctx: b.Context(), r: r, n: n, run: run, hey: t.hey,
		scaled: func(base, per time.Duration) time.Duration { return base + time.Duration(n)*per }}
	root := b.TempDir()

	t0 := time.Now()
	w, err := Generate(s.ctx, filepath.Join(root, "repo"), n, r.Workload)
	if err != nil {
		b.Fatalf("generate the workload: %v", err)
	}
	s.w = w
	s.logf("generated and committed %d resources in %v", n, time.Since(t0).Round(time.Millisecond))
	if r.Workload.HTTP {
		defer w.Serve()()
	}
	if r.Workload.BusyCore {
		stop, err := busyCore(s.ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer stop()
	}
	if !r.Workload.Root {
		s.validate(t.kubeconform, agentBin, filepath.Join(root, "schemas"))
	}
	p := s.peers(root)

	// The agent, cold: an empty database and no clone.
	head, err := w.git(s.ctx, "rev-parse", "HEAD")
	if err != nil {
		b.Fatal(err)
	}
	dbURL := pgtest.URL(b)
	start := time.Now()
	a, err := StartAgent(agentBin, filepath.Join(root, "agent"), dbURL, w)
	if err != nil {
		b.Fatal(err)
	}
	s.a = a
	defer func() {
		if err := a.Stop(); err != nil {
			b.Errorf("stop the agent: %v\n%s", err, a.LogTail())
		}
	}()
	if !s.coldStart(start, head, p) {
		return
	}
	s.idleMemory()

	ids := s.ids()
	if ids == nil {
		return
	}
	byID := a.Base + fmt.Sprintf("/api/v1/resources/%d", ids[n/2])
	get, err := RunHey(s.ctx, s.hey, 200, byID, 5*time.Second)
	s.addReads("GET /resources/{id}, 200 clients, idle", get, err, targetGetP99, s.floor(byID, 200))
	list, err := RunHey(s.ctx, s.hey, 50, a.Base+listPage, 5*time.Second)
	s.addReads("GET /resources?limit=500, 50 clients, idle", list, err, targetListP99, s.floor(a.Base+listPage, 50))

	medianReady := s.oneFileCommits(ids)
	s.tenPercentCommits(byID, ids)
	if !r.Workload.Defaults {
		s.newcomer(medianReady)
	}

	if mem, err := a.Memory(); err == nil {
		r.Add("peak RSS over the whole run", Bytes, float64(mem.HWM), "", "VmHWM")
	}
	s.embedded(agentBin, root)
}

// busyCore starts a busy loop, a process of its own that takes one core,
// until stop.
func busyCore(ctx context.Context) (stop func(), err error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start a busy loop: %w", err)
	}
	return func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}, nil
}

// embedded measures the queue on the embedded store: River on SQLite, then
// a second agent, cold, on its embedded store, on the same repository; the
// first agent is idle meanwhile.
func (s *scenario) embedded(agentBin, root string) {
	const figure = "reconciles/s through noop, embedded store"
	river, err := RiverSQLite(s.ctx, filepath.Join(root, "river.db"), s.n, time.Millisecond, s.scaled(2*time.Minute, 10*time.Millisecond))
	if err != nil {
		s.fail(figure, fmt.Errorf("River on SQLite: %w", err))
		return
	}
	s.logf("River on SQLite, FetchCooldown 1ms: %d jobs in %v", s.n, river)
	head, err := s.w.git(s.ctx, "rev-parse", "HEAD")
	if err != nil {
		s.fail(figure, err)
		return
	}
	a, err := StartAgent(agentBin, filepath.Join(root, "agent-embedded"), "", s.w)
	if err != nil {
		s.fail(figure, err)
		return
	}
	defer func() {
		if err := a.Stop(); err != nil {
			s.b.Errorf("stop the embedded-store agent: %v\n%s", err, a.LogTail())
		}
	}()
	appliedAt, err := WaitFor(s.ctx, a, "embedded store: first sync applied", s.scaled(2*time.Minute, 5*time.Millisecond), 25*time.Millisecond, Applied(a, head))
	if err != nil {
		s.fail(figure, err)
		return
	}
	readyAt, err := WaitReconciled(s.ctx, a, "embedded store: all reconciled", int64(s.n), s.scaled(2*time.Minute, 10*time.Millisecond))
	if err != nil {
		s.fail(figure, err)
		return
	}
	rate := float64(s.n) / readyAt.Sub(appliedAt).Seconds()
	s.r.AddPeer(figure, PerSecond, rate, "River on SQLite, FetchCooldown 1ms", float64(s.n)/river.Seconds(), targetThrough,
		"first sync applied to last ready; River: start to last completed")
	s.logf("embedded store: all %d ready %v after the first sync (%.0f reconciles/s)", s.n, readyAt.Sub(appliedAt).Round(time.Millisecond), rate)
}

// peerTimes are the peers' figures, measured before the agent starts so
// that nothing else runs meanwhile.
type peerTimes struct {
	cloneNo, cloneYes time.Duration
	// river is River with FetchCooldown 1ms on N jobs; riverDefault River
	// with its defaults on nDefault jobs.
	river, riverDefault       time.Duration
	nDefault                  int
	riverErr, riverDefaultErr error
	// floor is the queue floor (see QueueFloor) on N resources.
	floor    time.Duration
	floorErr error
}

func (s *scenario) peers(root string) peerTimes {
	var p peerTimes
	var errNo, errYes error
	p.cloneNo, errNo = GitClone(s.ctx, s.w.URL(), root, false)
	p.cloneYes, errYes = GitClone(s.ctx, s.w.URL(), root, true)
	if err := firstErr(errNo, errYes); err != nil {
		s.b.Fatalf("git clone: %v", err)
	}
	s.logf("git clone --depth 1: %v without checkout, %v with", p.cloneNo, p.cloneYes)

	// River's default FetchCooldown (100 ms) caps a client at MaxWorkers
	// jobs per cooldown, about 80/s with 8 workers whatever the database
	// does; its minimum, 1 ms, lets the queue itself show. The default is
	// run on at most 1,000 jobs: its rate does not depend on their number.
	p.river, p.riverErr = River(s.ctx, pgtest.URL(s.b), s.n, time.Millisecond, s.scaled(2*time.Minute, 10*time.Millisecond))
	if p.riverErr != nil {
		s.logf("River: %v", p.riverErr)
	} else {
		s.logf("River, FetchCooldown 1ms: %d jobs in %v", s.n, p.river)
	}
	p.floor, p.floorErr = QueueFloor(s.ctx, pgtest.URL(s.b), s.n, s.scaled(2*time.Minute, 10*time.Millisecond))
	if p.floorErr != nil {
		s.logf("queue floor: %v", p.floorErr)
	} else {
		s.logf("queue floor: %d resources in %v", s.n, p.floor)
	}
	p.nDefault = min(s.n, 1000)
	p.riverDefault, p.riverDefaultErr = River(s.ctx, pgtest.URL(s.b), p.nDefault, 0, 2*time.Minute)
	if p.riverDefaultErr != nil {
		s.logf("River, default fetch settings: %v", p.riverDefaultErr)
	} else {
		s.logf("River, default fetch settings: %d jobs in %v", p.nDefault, p.riverDefault)
	}
	return p
}

// coldStart measures the agent started at start until the first sync of
// head is applied and until every resource is ready, and the reconciles
// per second in between. It reports false when the rest cannot go on.
func (s *scenario) coldStart(start time.Time, head string, p peerTimes) bool {
	r, a, n := s.r, s.a, s.n
	appliedAt, err := WaitFor(s.ctx, a, "cold start to the first sync applied", s.scaled(2*time.Minute, 5*time.Millisecond), 25*time.Millisecond, Applied(a, head))
	if err != nil {
		s.fail("cold start to first sync applied", err)
		return false
	}
	cold := appliedAt.Sub(start)
	r.AddPeer("cold start to first sync applied", Seconds, cold.Seconds(), "git clone --depth 1 --no-checkout", p.cloneNo.Seconds(), targetCold,
		fmt.Sprintf("git clone --depth 1 with checkout: %.2f s", p.cloneYes.Seconds()))
	if d, err := a.SyncDuration(s.ctx, head); err != nil {
		s.fail("the cold sync itself", err)
	} else {
		r.Add("the cold sync itself", Seconds, d.Seconds(), "", "duration_ms of its sync history row")
	}
	s.logf("first sync applied %v after start", cold.Round(time.Millisecond))
	if ProfileDir() != "" {
		// The reconciles that follow the first sync, profiled while the
		// wait below polls.
		profiled := make(chan error, 1)
		go func() {
			profiled <- a.ProfileCPU(s.ctx, 3*time.Second, fmt.Sprintf("cpu-reconcile-%d.pprof", n))
		}()
		defer func() {
			if err := <-profiled; err != nil {
				s.logf("CPU profile of the reconciles: %v", err)
			}
		}()
	}

	readyAt, err := WaitReconciled(s.ctx, a, "cold start to all reconciled", int64(n), s.scaled(2*time.Minute, 10*time.Millisecond))
	if err != nil {
		s.fail("cold start to all ready", err)
		return false
	}
	if c, err := a.Counts(s.ctx); err != nil || c.Ready != int64(n) {
		s.fail("cold start to all ready", fmt.Errorf("%d reconciled, but %d ready (%v)", n, c.Ready, err))
		return false
	}
	r.Add("cold start to all ready", Seconds, readyAt.Sub(start).Seconds(), "", "")
	rate := float64(n) / readyAt.Sub(appliedAt).Seconds()
	if p.riverErr != nil {
		s.fail("reconciles/s through noop", fmt.Errorf("the agent did %.0f/s, but River failed: %w", rate, p.riverErr))
	} else {
		r.AddPeer("reconciles/s through noop", PerSecond, rate, "River, FetchCooldown 1ms", float64(n)/p.river.Seconds(), targetThrough,
			"first sync applied to last ready; River: start to last completed")
	}
	switch {
	case p.floorErr != nil:
		s.fail("queue floor: the guarantees in SQL alone", p.floorErr)
	case p.riverErr == nil:
		r.AddPeer("queue floor: the guarantees in SQL alone", PerSecond, float64(n)/p.floor.Seconds(), "River, FetchCooldown 1ms", float64(n)/p.river.Seconds(), "",
			"no agent: leases, status at claim and completion, history per attempt, a notification per statement (floor.go)")
	}
	if p.riverDefaultErr != nil {
		s.fail("reconciles/s against River's defaults", p.riverDefaultErr)
	} else {
		r.AddPeer("reconciles/s against River's defaults", PerSecond, rate, "River, default fetch", float64(p.nDefault)/p.riverDefault.Seconds(), "",
			fmt.Sprintf("River on %d jobs, FetchCooldown 100ms", p.nDefault))
	}
	s.logf("all %d ready %v after start (%.0f reconciles/s)", n, readyAt.Sub(start).Round(time.Millisecond), rate)
	return true
}

// idleMemory reads the agent's memory after 5 s of idle.
func (s *scenario) idleMemory() {
	target := "<= 64 MB"
	if s.n > 10_000 {
		target = "<= 300 MB"
	}
	// The resident size of an idle agent moves for a while: the agent
	// hands memory back once idle, and the pages of its program that its
	// idle work runs come back within seconds. What counts is what a user
	// who looks at an idle agent sees, whenever they look: the highest of
	// the samples.
	var mem MemoryUse
	const samples, every = 6, 5 * time.Second
	for i := range samples {
		s.sleep(every)
		m, err := s.a.Memory()
		if err != nil {
			s.fail("idle RSS holding all", err)
			return
		}
		s.logf("idle RSS after %v: %s (anonymous %s, file %s)", time.Duration(i+1)*every, Bytes.format(float64(m.RSS)),
			Bytes.format(float64(m.Anon)), Bytes.format(float64(m.File)))
		if m.RSS > mem.RSS {
			mem = m
		}
	}
	s.r.Add("idle RSS holding all", Bytes, float64(mem.RSS), target, fmt.Sprintf("the highest of %d samples %v apart once all are ready; VmHWM (peak so far) %s; anonymous %s, file pages %s",
		samples, every, Bytes.format(float64(mem.HWM)), Bytes.format(float64(mem.Anon)), Bytes.format(float64(mem.File))))
	s.r.Add("idle RSS: anonymous", Bytes, float64(mem.Anon), "", "RssAnon: heap, stacks")
	s.r.Add("idle RSS: file pages", Bytes, float64(mem.File), "", "RssFile: the binary's code and data the kernel maps")
	s.logf("idle RSS %s (anonymous %s, file %s), peak %s", Bytes.format(float64(mem.RSS)), Bytes.format(float64(mem.Anon)),
		Bytes.format(float64(mem.File)), Bytes.format(float64(mem.HWM)))
	if ProfileDir() != "" {
		if err := s.a.ProfileHeap(s.ctx, fmt.Sprintf("heap-idle-%d-%s-%d.pprof", s.n, s.w.Shape.Name, s.run)); err != nil {
			s.logf("heap profile: %v", err)
		}
	}
}

// sleep waits d, or until the benchmark is cancelled.
func (s *scenario) sleep(d time.Duration) {
	select {
	case <-s.ctx.Done():
	case <-time.After(d):
	}
}

// validate times the agent's validate and kubeconform on the manifests,
// best of 3 each; the agent's must find every manifest valid.
func (s *scenario) validate(kubeconform, agentBin, schemas string) {
	if err := WriteKubeconformSchemas(schemas); err != nil {
		s.b.Fatal(err)
	}
	folder := s.w.Manifests()
	// Turn about, so that neither gets the moments right after the
	// repository was written (while the system still flushes it) alone.
	var mine, peer Timing
	for i := range 3 {
		m, err := Validate(s.ctx, agentBin, folder)
		if err != nil {
			s.b.Fatalf("the generated workload must validate: %v", err)
		}
		p, err := Kubeconform(s.ctx, kubeconform, schemas, folder, s.n)
		if err != nil {
			s.fail("validate of the files", err)
			return
		}
		mine, peer = best(mine, m, i == 0), best(peer, p, i == 0)
	}
	s.r.AddPeer("validate of the files (best of 3)", Seconds, mine.Wall.Seconds(), "kubeconform "+KubeconformVersion, peer.Wall.Seconds(), targetValidate, "")
	s.r.AddPeer("validate of the files: CPU time (best of 3)", Seconds, mine.CPU.Seconds(), "kubeconform "+KubeconformVersion, peer.CPU.Seconds(), "",
		"user + system, of all threads")
	s.logf("validate %v (CPU %v), kubeconform %v (CPU %v)", mine.Wall, mine.CPU, peer.Wall, peer.CPU)
}

// ids returns the resources' ids, by index, from the API.
func (s *scenario) ids() []int64 {
	byName, err := s.a.IDs(s.ctx)
	if err != nil {
		s.fail("look up the resources' ids", err)
		return nil
	}
	ids := make([]int64, s.n)
	for i := range ids {
		id, ok := byName[ResourceKind(i)+"/"+ResourceName(i)]
		if !ok {
			s.fail("look up the resources' ids", fmt.Errorf("%s/%s is not in the list of %d resources", ResourceKind(i), ResourceName(i), len(byName)))
			return nil
		}
		ids[i] = id
	}
	return ids
}

// listPage is the first page of resources that the list readers read:
// hey sends one URL.
const listPage = "/api/v1/resources?limit=500"

// addReads records a read load: served/s (2xx), refused (503, 429) and
// failed (other statuses, no answer), and p50 and p99 of every answer. A
// load with any refusal, or with a p99 over target, misses its target.
func (s *scenario) addReads(name string, l *Reads, err error, target time.Duration, floor *Reads) {
	if err != nil {
		s.fail(name, err)
		return
	}
	floorRate, floorP50, floorP99 := math.NaN(), math.NaN(), math.NaN()
	if floor != nil {
		floorRate, floorP50, floorP99 = floor.ServedRate(), float64(floor.P50.Microseconds())/1000, float64(floor.P99.Microseconds())/1000
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	var missed string
	switch {
	case l.Refused > 0:
		missed = fmt.Sprintf("%d refused", l.Refused)
	case l.P99 > target:
		missed = "over target"
	}
	s.r.AddPeer(name+": served", PerSecond, l.ServedRate(), floorName, floorRate, "", "2xx answers; hey "+HeyVersion+", clients that never back off")
	s.r.Figures = append(s.r.Figures,
		Figure{Name: name + ": refused", Unit: Count, Agent: float64(l.Refused), Peer: math.NaN(), Target: "0", Note: "503 and 429 answers",
			Missed: map[bool]string{true: "refusals"}[l.Refused > 0]},
		Figure{Name: name + ": failed", Unit: Count, Agent: float64(l.Failed), Peer: math.NaN(), Target: "0", Note: "other statuses and requests with no answer",
			Missed: map[bool]string{true: "failures"}[l.Failed > 0]})
	s.r.AddPeer(name+": p50", Millis, ms(l.P50), floorName, floorP50, "", "of all answers, refusals included")
	s.r.Figures = append(s.r.Figures, Figure{Name: name + ": p99", Unit: Millis, Agent: ms(l.P99), PeerName: floorName, Peer: floorP99,
		Target: fmt.Sprintf("p99 <= %v, 0 refused", target), Note: "of all answers, refusals included", Missed: missed})
	s.logf("%s: %s", name, l)
	if floor != nil {
		s.logf("%s, the floor (%s): %s", name, floorName, floor)
	}
}

// floorName names the peer of the read loads.
const floorName = "net/http, same bytes"

// floor reads what the agent answers at url once, then runs the same load
// against a plain net/http server answering those bytes: what any Go HTTP
// server serves on this machine under this load. Nil when it cannot be
// measured (said in the log).
func (s *scenario) floor(url string, clients int) *Reads {
	body, contentType, err := s.a.Answer(s.ctx, url)
	if err != nil {
		s.logf("the floor of %s: %v", url, err)
		return nil
	}
	peer := ServeStatic(body, contentType)
	defer peer.Close()
	reads, err := RunHey(s.ctx, s.hey, clients, peer.URL(), 5*time.Second)
	if err != nil {
		s.logf("the floor of %s: %v", url, err)
		return nil
	}
	if reads.Refused+reads.Failed > 0 {
		s.logf("the floor of %s: %s", url, reads)
		return nil
	}
	return reads
}

// oneFileCommits commits a change to one resource's spec five times (a
// different resource each time), triggers a sync and times until it is
// stored at generation 2 and until it is ready at it. It returns the
// median time to ready.
func (s *scenario) oneFileCommits(ids []int64) time.Duration {
	const rounds = 5
	var stored, ready, syncs []time.Duration
	for round := range rounds {
		// Resources 0, 101, 202, ...: different kinds, and none of those the
		// 10% commits change.
		i := round * 101
		if err := s.w.Touch([]int{i}); err != nil {
			s.b.Fatal(err)
		}
		commit, err := s.w.Commit(s.ctx, "Change "+ResourceName(i))
		if err != nil {
			s.b.Fatal(err)
		}
		t, err := TimeCommit(s.ctx, s.a, ids[i], 2, s.scaled(time.Minute, time.Millisecond))
		if err != nil {
			s.fail("one-file commit", err)
			return 0
		}
		d, err := s.a.SyncDuration(s.ctx, commit)
		if err != nil {
			s.fail("one-file commit", err)
			return 0
		}
		stored, ready, syncs = append(stored, t.Stored), append(ready, t.Reconciled), append(syncs, d)
		s.logf("one-file commit %d: generation 2 stored after %v, ready after %v, the sync itself %v", round+1, t.Stored, t.Reconciled, d)
		s.sleep(500 * time.Millisecond)
	}
	ms := func(ds []time.Duration) float64 { return float64(median(ds).Microseconds()) / 1000 }
	spread := func(ds []time.Duration) string {
		return fmt.Sprintf("median of %d, %v to %v", len(ds), slices.Min(ds).Round(100*time.Microsecond), slices.Max(ds).Round(100*time.Microsecond))
	}
	s.r.Add("one-file commit: trigger to generation 2", Millis, ms(stored), targetStored, spread(stored))
	s.r.Add("one-file commit: the sync itself", Millis, ms(syncs), "", spread(syncs))
	target := targetReady
	if s.r.Workload.HTTP {
		target = targetReadyHTTP
	}
	s.r.Add("one-file commit: trigger to reconciled", Millis, ms(ready), target, spread(ready))
	return median(ready)
}

func median(ds []time.Duration) time.Duration {
	c := slices.Clone(ds)
	slices.Sort(c)
	return c[len(c)/2]
}

// tenPercentCommits commits changes to 10% of the files three times: once
// alone, once under 200 readers by id, once under 50 list readers, and
// reports the reads' latency and how long the commit took to reconcile in
// each, against the quiet one.
func (s *scenario) tenPercentCommits(byID string, ids []int64) {
	// Batch c changes the resources whose tens digit is c: spread over
	// every kind.
	batch := func(c int) []int {
		var idx []int
		for i := range s.n {
			if (i/10)%10 == c {
				idx = append(idx, i)
			}
		}
		return idx
	}
	quiet, err := s.timeTenPercent(batch(1), ids, nil)
	if err != nil {
		s.fail("10% commit, no readers: trigger to all reconciled", err)
		return
	}
	s.r.Add("10% commit, no readers: trigger to all reconciled", Seconds, quiet.Seconds(), "", fmt.Sprintf("%d resources; the store's timestamps", len(batch(1))))

	for _, load := range []struct {
		name    string
		clients int
		url     string
		target  time.Duration
		batch   int
	}{
		{"GET /resources/{id}, 200 clients, during a 10% commit", 200, byID, targetGetP99, 2},
		{"GET /resources?limit=500, 50 clients, during a 10% commit", 50, s.a.Base + listPage, targetListP99, 3},
	} {
		var lat *Reads
		var loadErr error
		profiled := make(chan error, 1)
		if ProfileDir() != "" {
			// The agent while it serves the readers and the commit: 3 s,
			// as long as the readers run at least.
			go func() {
				profiled <- s.a.ProfileCPU(s.ctx, 3*time.Second, fmt.Sprintf("cpu-readers-%d-%d.pprof", load.clients, s.n))
			}()
		} else {
			profiled <- nil
		}
		took, err := s.timeTenPercent(batch(load.batch), ids, func(during func() error) error {
			var derr error
			lat, loadErr, derr = s.readDuring(load.clients, load.url, 3*time.Second, during)
			return derr
		})
		if perr := <-profiled; perr != nil {
			s.logf("CPU profile under %d readers: %v", load.clients, perr)
		}
		s.addReads(load.name, lat, loadErr, load.target, nil)
		if err != nil {
			s.fail(fmt.Sprintf("10%% commit under %d readers: trigger to all reconciled", load.clients), err)
			continue
		}
		s.r.AddPeer(fmt.Sprintf("10%% commit under %d readers: trigger to all reconciled", load.clients), Seconds, took.Seconds(),
			"no readers", quiet.Seconds(), "<= 1.2x", "the store's timestamps")
	}
}

// readDuring runs hey with clients clients against url from now until
// during returns, at least least long, and returns hey's figures or its
// error, and during's error.
func (s *scenario) readDuring(clients int, url string, least time.Duration, during func() error) (*Reads, error, error) {
	h, err := StartHey(s.ctx, s.hey, clients, url, 0)
	if err != nil {
		return nil, err, nil
	}
	floor := time.NewTimer(least)
	defer floor.Stop()
	derr := during()
	if derr == nil {
		select {
		case <-floor.C:
		case <-s.ctx.Done():
		}
	}
	reads, err := h.Stop()
	return reads, err, derr
}

// timeTenPercent changes the resources idx in one commit, triggers a sync
// and waits until it is applied and every changed resource reconciled,
// inside around (which runs readers meanwhile) when not nil. The time is
// the store's: from the trigger to the last reconcile recorded, read once
// the readers are gone, so that reads of the agent's progress, paced
// behind the readers' as any read, do not count.
func (s *scenario) timeTenPercent(idx []int, ids []int64, around func(func() error) error) (time.Duration, error) {
	before, err := s.a.Counts(s.ctx)
	if err != nil {
		return 0, err
	}
	if err := s.w.Touch(idx); err != nil {
		return 0, err
	}
	commit, err := s.w.Commit(s.ctx, fmt.Sprintf("Change %d resources", len(idx)))
	if err != nil {
		return 0, err
	}
	var start, seen time.Time
	during := func() error {
		start = time.Now()
		if err := s.a.TriggerSync(s.ctx); err != nil {
			return err
		}
		timeout := s.scaled(time.Minute, 10*time.Millisecond)
		if _, err := WaitFor(s.ctx, s.a, "the 10% commit applied", timeout, 20*time.Millisecond, Applied(s.a, commit)); err != nil {
			return err
		}
		seen, err = WaitReconciled(s.ctx, s.a, "the 10% commit reconciled", before.Reconciled+int64(len(idx)), timeout)
		return err
	}
	if around == nil {
		err = during()
	} else {
		err = around(during)
	}
	if err != nil {
		return 0, err
	}
	var last time.Time
	for _, i := range idx {
		r, err := s.a.Resource(s.ctx, ids[i])
		if err != nil {
			return 0, err
		}
		if !r.Reconciled(int64(s.w.Generation(i))) {
			return 0, fmt.Errorf("resource %d not reconciled at generation %d: %+v", ids[i], s.w.Generation(i), r)
		}
		if r.UpdatedAt.After(last) {
			last = r.UpdatedAt
		}
	}
	took := last.Sub(start)
	s.logf("%d resources changed in one commit: all reconciled %v after the trigger by the store's clock, seen %v after it",
		len(idx), took.Round(time.Millisecond), seen.Sub(start).Round(time.Millisecond))
	return took, nil
}

// newcomer has five resources run an action that takes two minutes, then
// commits one new noop resource and times from the trigger until it is
// ready, against the idle one-file commit's time to ready.
func (s *scenario) newcomer(idle time.Duration) {
	const figure = "new resource while 5 of 8 workers are busy: trigger to ready"
	names, err := s.w.AddLongTasks(5)
	if err != nil {
		s.b.Fatal(err)
	}
	if _, err := s.w.Commit(s.ctx, "Declare five long tasks"); err != nil {
		s.b.Fatal(err)
	}
	if err := s.a.TriggerSync(s.ctx); err != nil {
		s.fail(figure, err)
		return
	}
	if _, err := WaitFor(s.ctx, s.a, "5 long actions running", 2*time.Minute, 20*time.Millisecond, func(ctx context.Context) (bool, string) {
		running := 0
		for _, name := range names {
			if res, err := s.a.ResourceByName(ctx, longKind, name); err == nil && res.Status == "reconciling" {
				running++
			}
		}
		return running == len(names), fmt.Sprintf("%d of %d reconciling", running, len(names))
	}); err != nil {
		s.fail(figure, err)
		return
	}
	s.logf("5 long actions running")
	name := "network-newcomer"
	if err := s.w.AddNetwork(name); err != nil {
		s.b.Fatal(err)
	}
	if _, err := s.w.Commit(s.ctx, "Declare "+name); err != nil {
		s.b.Fatal(err)
	}
	start := time.Now()
	if err := s.a.TriggerSync(s.ctx); err != nil {
		s.fail(figure, err)
		return
	}
	// The long actions end after two minutes: a wait as long as that
	// means the newcomer waited for them.
	at, err := WaitFor(s.ctx, s.a, "the new resource ready", 4*time.Minute, pollInterval, func(ctx context.Context) (bool, string) {
		res, err := s.a.ResourceByName(ctx, "Network", name)
		if err != nil {
			return false, err.Error()
		}
		return res.Reconciled(1), fmt.Sprintf("%+v", res)
	})
	if err != nil {
		s.fail(figure, err)
		return
	}
	took := at.Sub(start)
	peer := math.NaN() // when the one-file commits failed
	if idle > 0 {
		peer = float64(idle.Microseconds()) / 1000
	}
	s.r.AddPeer(figure, Millis, float64(took.Microseconds())/1000, "one-file commit, idle", peer, targetNewcomer, "")
	s.logf("%s: %v", figure, took)
}
