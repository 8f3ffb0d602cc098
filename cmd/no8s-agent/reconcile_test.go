package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	gosync "sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/config"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// Tests write the files they execute (scripts, copies of the example's)
// before calling t.Parallel, as the exec plugin's tests do: executing a file
// fails with ETXTBSY while another goroutine's fork holds it open for
// writing, and parallel tests only start once every sequential part is done.

// agentRun is `run` started in the background by startAgent.
type agentRun struct {
	t      *testing.T
	log    *lockedWriter
	cancel context.CancelFunc
	done   chan int
	once   gosync.Once
	code   int
	took   time.Duration
}

// startAgent starts `run` with a fresh cache folder and returns at once,
// without waiting for anything. The agent is stopped when the test ends, and
// its log is printed if the test failed.
func startAgent(t *testing.T, url string, args ...string) *agentRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a := &agentRun{t: t, log: &lockedWriter{w: &bytes.Buffer{}}, cancel: cancel, done: make(chan int, 1)}
	go func() {
		a.done <- run(ctx, append([]string{"run", "--database", url, "--cache-dir", t.TempDir(), "--listen", "127.0.0.1:0"}, args...),
			&bytes.Buffer{}, a.log)
	}()
	t.Cleanup(func() {
		a.stop()
		if t.Failed() {
			t.Logf("agent log:\n%s", a.log)
		}
	})
	return a
}

// stop cancels the agent's context, as main does on SIGINT and SIGTERM, and
// waits for run to return. It returns run's exit code and how long run took
// to return after the cancellation.
func (a *agentRun) stop() (code int, took time.Duration) {
	a.once.Do(func() {
		start := time.Now()
		a.cancel()
		select {
		case a.code = <-a.done:
			a.took = time.Since(start)
		case <-time.After(30 * time.Second):
			a.code, a.took = -1, time.Since(start)
			a.t.Error("run did not return within 30s of its cancellation")
		}
	})
	return a.code, a.took
}

// exited reports run's exit code if it already returned.
func (a *agentRun) exited() (int, bool) {
	select {
	case code := <-a.done:
		a.done <- code
		return code, true
	default:
		return 0, false
	}
}

// openTestStore opens the store the agent under test uses, to watch it.
func openTestStore(t *testing.T, url string) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st
}

// waitFor polls check until it reports done or timeout passes; then the test
// fails with what check last said. agent, when not nil, must not have exited
// meanwhile.
func waitFor(t *testing.T, timeout time.Duration, agent *agentRun, what string, check func() (done bool, state string)) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		done, state := check()
		if done {
			return
		}
		if agent != nil {
			if code, ok := agent.exited(); ok {
				t.Fatalf("waiting for %s: run exited %d; last state: %s", what, code, state)
			}
		}
		select {
		case <-deadline.C:
			t.Fatalf("waiting for %s: not done after %v; last state: %s", what, timeout, state)
		case <-tick.C:
		}
	}
}

// describe summarizes resources for failure messages.
func describe(rs []*store.Resource) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "\n  %s/%s: %s gen %d observed %d lease %q: %s", r.Kind, r.Name, r.Phase, r.Generation,
			r.ObservedGeneration, r.LeaseOwner, r.StatusMessage)
	}
	if b.Len() == 0 {
		return "no resources"
	}
	return b.String()
}

// listResources lists every resource, failing the test on error.
func listResources(t *testing.T, st store.Store) []*store.Resource {
	t.Helper()
	rs, err := st.ListResources(t.Context(), store.ResourceFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// reconciled reports whether r is ready at its current generation, as the
// controller leaves a success: observed generation caught up, outputs stored,
// Ready true.
func reconciled(r *store.Resource) bool {
	ready := manifest.FindCondition(r.Conditions, manifest.ConditionReady)
	return r.Phase == manifest.PhaseReady && r.ObservedGeneration == r.Generation && len(r.Outputs) > 0 &&
		ready != nil && ready.Status == manifest.ConditionTrue && r.LeaseOwner == ""
}

// copyExample copies the example (repository, scripts and configuration) to
// a temporary folder that stands for the repository root, and returns it.
// Call it before t.Parallel.
func copyExample(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// Copy from the repository root so that paths keep their examples/ prefix.
	base := filepath.Join(wd, "..", "..")
	for _, p := range []string{"examples/repo", "examples/scripts", "examples/no8s.yaml"} {
		src := filepath.Join(base, p)
		info, err := os.Stat(src)
		if err != nil {
			t.Fatal(err)
		}
		if info.IsDir() {
			err = filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(base, path)
				if d.IsDir() {
					return os.MkdirAll(filepath.Join(root, rel), 0o755)
				}
				return copyFile(path, filepath.Join(root, rel))
			})
		} else {
			err = copyFile(src, filepath.Join(root, p))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// copyFile copies one file, keeping its permissions.
func copyFile(from, to string) error {
	info, err := os.Stat(from)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, data, info.Mode().Perm())
}

// exampleConfig writes the copy's examples/no8s.yaml as the agent would
// read it when run from root, as its header says: the source folder made
// absolute, and each exec instance's dir set to root (where the agent's
// working directory would be). The tests run in cmd/no8s-agent and cannot
// change the process's working directory.
func exampleConfig(t *testing.T, root string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "examples", "no8s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	sources, _ := doc["sources"].([]any)
	if len(sources) != 1 {
		t.Fatalf("example config: want one source, got %v", doc["sources"])
	}
	src := sources[0].(map[string]any)
	dir, _ := src["dir"].(string)
	if dir == "" || filepath.IsAbs(dir) {
		t.Fatalf("example config: want a relative source dir, got %v", src["dir"])
	}
	src["dir"] = filepath.Join(root, dir)
	actions, _ := doc["actions"].(map[string]any)
	for _, name := range []string{"provision-db", "provision-network", "publish-dns"} {
		a, _ := actions[name].(map[string]any)
		settings, _ := a["config"].(map[string]any)
		if a["plugin"] != "exec" || settings == nil || settings["dir"] != nil {
			t.Fatalf("example config: actions.%s: want an exec instance without dir, got %v", name, actions[name])
		}
		settings["dir"] = root
	}
	if len(actions) != 3 {
		t.Fatalf("example config: want 3 actions, got %v", actions)
	}
	out, err := json.Marshal(doc) // JSON is YAML
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "no8s.yaml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRunReconcilesExample runs the example as its configuration's header
// says, on a copy: the agent syncs examples/repo and reconciles its four
// resources offline through the scripts in examples/scripts, dependencies
// first, and the scripts' world holds what they applied.
func TestRunReconcilesExample(t *testing.T) {
	root := copyExample(t)
	cfgPath := exampleConfig(t, root)
	t.Parallel()
	url := pgtest.URL(t)
	st := openTestStore(t, url)

	start := time.Now()
	agent := startAgent(t, url, "--config", cfgPath)
	var rs []*store.Resource
	waitFor(t, 60*time.Second, agent, "the 4 example resources to be ready", func() (bool, string) {
		rs = listResources(t, st)
		n := 0
		for _, r := range rs {
			if reconciled(r) {
				n++
			}
		}
		return len(rs) == 4 && n == 4, describe(rs)
	})
	t.Logf("example: from start to all 4 resources ready in %v", time.Since(start).Round(time.Millisecond))

	byName := map[string]*store.Resource{}
	for _, r := range rs {
		byName[r.Name] = r
		if r.Generation != 1 || r.RetryCount != 0 {
			t.Errorf("%s/%s: generation %d, retries %d", r.Kind, r.Name, r.Generation, r.RetryCount)
		}
		for _, c := range []struct {
			typ    string
			status manifest.ConditionStatus
		}{
			{manifest.ConditionReady, manifest.ConditionTrue},
			{manifest.ConditionReconciling, manifest.ConditionFalse},
			{manifest.ConditionDegraded, manifest.ConditionFalse},
		} {
			got := manifest.FindCondition(r.Conditions, c.typ)
			if got == nil || got.Status != c.status || got.Reason != "Succeeded" || got.ObservedGeneration != 1 {
				t.Errorf("%s/%s: condition %s = %+v, want %s Succeeded", r.Kind, r.Name, c.typ, got, c.status)
			}
		}
		// The world holds the spec each script applied, as the agent passed it.
		world, err := os.ReadFile(filepath.Join(root, ".no8s", "example-world", r.Kind, r.Name+".json"))
		if err != nil {
			t.Errorf("%s/%s: %v", r.Kind, r.Name, err)
		} else if got := strings.TrimSpace(string(world)); got != string(r.Spec) {
			t.Errorf("%s/%s: world holds %s, want the stored spec %s", r.Kind, r.Name, got, r.Spec)
		}
	}

	// Outputs are what the scripts printed, made from the spec.
	wantOutputs := map[string]map[string]any{
		"production-pg": {"endpoint": "production-pg.db.internal.example.com:5432", "engine": "postgres", "version": "16.2", "generation": 1.0},
		"staging-pg":    {"endpoint": "staging-pg.db.internal.example.com:5432", "engine": "postgres", "version": "16.2", "generation": 1.0},
		"prod-vpc":      {"networkId": fmt.Sprintf("net-%06d", byName["prod-vpc"].ID), "cidr": "10.20.0.0/16", "region": "eu-west-1"},
		"db-production": {"fqdn": "db-production.example.com", "type": "CNAME", "ttl": 300.0},
	}
	for name, want := range wantOutputs {
		r := byName[name]
		var got map[string]any
		if err := json.Unmarshal(r.Outputs, &got); err != nil {
			t.Errorf("%s: outputs %s: %v", name, r.Outputs, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: outputs %v, want %v", name, got, want)
		}
	}

	// One attempt each, and a dependent's started only after its dependency's
	// ended: prod-vpc before production-pg before db-production.
	attempt := map[string]*store.ReconcileRecord{}
	for name, r := range byName {
		recs, err := st.ListReconcileRecords(t.Context(), r.ID, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 1 || !recs[0].Success || recs[0].Trigger != store.TriggerCreate || recs[0].Phase != "completed" ||
			recs[0].Generation != 1 || !strings.HasPrefix(string(recs[0].SourceRevision), "sha256:") {
			t.Errorf("%s: history %s", name, describeRecords(recs))
			continue
		}
		attempt[name] = recs[0]
	}
	for _, dep := range [][2]string{{"prod-vpc", "production-pg"}, {"production-pg", "db-production"}} {
		first, then := attempt[dep[0]], attempt[dep[1]]
		if first != nil && then != nil && then.StartedAt.Before(first.FinishedAt) {
			t.Errorf("%s started at %v, before %s, which it depends on, ended at %v", dep[1], then.StartedAt, dep[0], first.FinishedAt)
		}
	}
	if n := countFiles(t, filepath.Join(root, ".no8s", "example-world")); n != 4 {
		t.Errorf("the world holds %d files, want 4", n)
	}

	if code, took := agent.stop(); code != 0 {
		t.Errorf("run exited %d after %v", code, took)
	}

	// The instances can plan: the world matches the spec, until it does not.
	cfg, err := loadConfig(cfgPath, config.Flags{})
	if err != nil {
		t.Fatal(err)
	}
	instances, err := actionInstances(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	db := byName["production-pg"]
	inst, ok := instances.Get("provision-db")
	planner, isPlanner := inst.Action.(action.Planner)
	if !ok || !isPlanner {
		t.Fatalf("provision-db: %+v, want an exec instance that plans", inst)
	}
	plan := func(spec string) *action.Plan {
		t.Helper()
		p, err := planner.Plan(t.Context(), &action.Request{
			Instance: "provision-db", Trigger: string(store.TriggerDrift), Reporter: action.NoopReporter{},
			Resource: action.Resource{ID: db.ID, Kind: db.Kind, APIVersion: db.APIVersion(), Name: db.Name,
				Spec: json.RawMessage(spec), Generation: db.Generation, Source: "local"},
		})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := plan(string(db.Spec)); p.Changes || p.Summary != "no changes" {
		t.Errorf("plan of the applied spec: %+v", p)
	}
	changed := strings.Replace(string(db.Spec), `"storage_gb":500`, `"storage_gb":600`, 1)
	if p := plan(changed); !p.Changes || p.Summary != "DatabaseCluster/production-pg differs; apply updates it" ||
		!strings.Contains(p.Output, "+ "+changed) {
		t.Errorf("plan of a changed spec: %+v", p)
	}
	if err := os.Remove(filepath.Join(root, ".no8s", "example-world", "DatabaseCluster", "production-pg.json")); err != nil {
		t.Fatal(err)
	}
	if p := plan(string(db.Spec)); !p.Changes || p.Summary != "DatabaseCluster/production-pg does not exist; apply creates it" {
		t.Errorf("plan after the world lost it: %+v", p)
	}
}

// TestRunExampleDriftChecks turns drift checks on for the example's
// DatabaseCluster type: a cluster that disappears from the world is
// provisioned again by the next check, while a network, whose type has no
// drift interval, stays gone even though its action could plan.
func TestRunExampleDriftChecks(t *testing.T) {
	root := copyExample(t)
	typePath := filepath.Join(root, "examples", "repo", "types", "database-cluster.yaml")
	data, err := os.ReadFile(typePath)
	if err != nil {
		t.Fatal(err)
	}
	withDrift := bytes.Replace(data, []byte("  action: provision-db\n"), []byte("  action: provision-db\n  driftInterval: 300ms\n"), 1)
	if bytes.Equal(withDrift, data) {
		t.Fatal("the DatabaseCluster type no longer names provision-db")
	}
	if err := os.WriteFile(typePath, withDrift, 0o644); err != nil {
		t.Fatal(err)
	}
	cfgPath := exampleConfig(t, root)
	t.Parallel()
	url := pgtest.URL(t)
	st := openTestStore(t, url)
	agent := startAgent(t, url, "--config", cfgPath)

	world := filepath.Join(root, ".no8s", "example-world")
	dbFile := filepath.Join(world, "DatabaseCluster", "production-pg.json")
	netFile := filepath.Join(world, "Network", "prod-vpc.json")
	var db, network *store.Resource
	waitFor(t, 60*time.Second, agent, "the example to be ready", func() (bool, string) {
		rs := listResources(t, st)
		n := 0
		for _, r := range rs {
			// A database may be in one of its drift checks, which run
			// back to back: applied once is what counts here.
			ready := manifest.FindCondition(r.Conditions, manifest.ConditionReady)
			if r.ObservedGeneration == r.Generation && len(r.Outputs) > 0 && ready != nil && ready.Status == manifest.ConditionTrue {
				n++
			}
			switch r.Name {
			case "production-pg":
				db = r
			case "prod-vpc":
				network = r
			}
		}
		return len(rs) == 4 && n == 4, describe(rs)
	})
	applied, err := os.ReadFile(dbFile)
	if err != nil {
		t.Fatal(err)
	}
	history := func(r *store.Resource) []*store.ReconcileRecord {
		t.Helper()
		recs, err := st.ListReconcileRecords(t.Context(), r.ID, 100)
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	// Checks that find nothing change nothing.
	waitFor(t, 30*time.Second, agent, "a drift check that finds no drift", func() (bool, string) {
		recs := history(db)
		return len(recs) > 0 && recs[0].Trigger == store.TriggerDrift && recs[0].Success &&
			recs[0].PlanOutput == "no changes\n", describeRecords(recs)
	})

	// The world loses both; only the cluster's type checks for drift.
	for _, f := range []string{dbFile, netFile} {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	before := len(history(db))
	waitFor(t, 30*time.Second, agent, "the cluster to be provisioned again", func() (bool, string) {
		_, err := os.Stat(dbFile)
		return err == nil, fmt.Sprint(err)
	})
	var repaired *store.ReconcileRecord
	waitFor(t, 30*time.Second, agent, "the repair to be recorded, then a clean check", func() (bool, string) {
		recs := history(db)
		repaired = nil
		for i := len(recs) - before - 1; i >= 0; i-- {
			if recs[i].Trigger == store.TriggerDrift && strings.HasPrefix(recs[i].PlanOutput, "DatabaseCluster/production-pg does not exist") {
				repaired = recs[i]
				// A later check found nothing to do.
				return i > 0 && recs[0].PlanOutput == "no changes\n", describeRecords(recs)
			}
		}
		return false, describeRecords(recs)
	})
	if !repaired.Success || repaired.Phase != "completed" || repaired.Generation != 1 || len(repaired.Outputs) == 0 {
		t.Errorf("the repair: %+v", repaired)
	}
	if got, err := os.ReadFile(dbFile); err != nil || !bytes.Equal(got, applied) {
		t.Errorf("the world holds %q (%v) after the repair, want %q", got, err, applied)
	}
	if _, err := os.Stat(netFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the network came back (%v), though its type checks no drift", err)
	}
	if recs := history(network); len(recs) != 1 {
		t.Errorf("the network was reconciled again: %s", describeRecords(recs))
	}
	r, err := st.GetResource(t.Context(), db.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.ObservedGeneration != 1 || r.RetryCount != 0 || (r.Phase != manifest.PhaseReady && r.Phase != manifest.PhaseReconciling) {
		t.Errorf("the cluster after drift checks: %s", describe([]*store.Resource{r}))
	}
}

// describeRecords summarizes history records, newest first, for failure
// messages.
func describeRecords(recs []*store.ReconcileRecord) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "\n  %s gen %d %s success=%v error=%q plan=%q", r.Trigger, r.Generation, r.Phase, r.Success, r.Error, r.PlanOutput)
	}
	if b.Len() == 0 {
		return "no history"
	}
	return b.String()
}

// countFiles counts the regular files under dir.
func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// jobType and job are a resource type whose action is "slow", and one
// resource of it.
const (
	jobType = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Job}
spec:
  action: slow
  versions:
    - name: v1
      schema: {type: object, properties: {size: {type: integer}}}
`
	job = `apiVersion: no8s.io/v1
kind: Job
metadata: {name: nightly}
spec: {size: 1}
`
)

// gone reports whether process pid has ended: it does not exist, or it is a
// zombie that only waits for its parent (init, for an orphan) to reap it.
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// TestRunStopsDuringLongAction stops the agent, as SIGINT or SIGTERM do,
// while an exec action blocks: run returns within the lease duration, the
// command and its children are gone, and the resource is handed back,
// due again, which the next start proves by reconciling it.
func TestRunStopsDuringLongAction(t *testing.T) {
	dir := t.TempDir()
	repo, marks := filepath.Join(dir, "repo"), filepath.Join(dir, "marks")
	for _, d := range []string{repo, marks} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range map[string]string{"types.yaml": jobType, "job.yaml": job} {
		if err := os.WriteFile(filepath.Join(repo, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The first run blocks in a child, as a long deployment would; the next
	// one succeeds at once.
	script := filepath.Join(dir, "slow.sh")
	if err := os.WriteFile(script, []byte(`#!/bin/sh
if [ -e "$MARKS/started" ]; then
	echo '{"done":true}'
	exit 0
fi
echo $$ >"$MARKS/shell.pid"
sleep 300 &
echo $! >"$MARKS/sleep.pid"
: >"$MARKS/started"
wait
`), 0o755); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "no8s.yaml")
	cfg := fmt.Sprintf(`sources:
  - {name: local, dir: %q}
actions:
  slow:
    plugin: exec
    config: {command: [%q], timeout: 10m, env: {MARKS: %q}}
reconcile: {leaseDuration: 5s}
`, repo, script, marks)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	const lease = 5 * time.Second
	t.Parallel()
	url := pgtest.URL(t)
	st := openTestStore(t, url)

	agent := startAgent(t, url, "--config", cfgPath)
	waitFor(t, 30*time.Second, agent, "the action to start", func() (bool, string) {
		_, err := os.Stat(filepath.Join(marks, "started"))
		return err == nil, describe(listResources(t, st))
	})
	r, err := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Job", Namespace: "default", Name: "nightly"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Phase != manifest.PhaseReconciling || r.LeaseOwner == "" {
		t.Fatalf("while the action runs: %s", describe([]*store.Resource{r}))
	}
	var pids []int
	for _, f := range []string{"shell.pid", "sleep.pid"} {
		data, err := os.ReadFile(filepath.Join(marks, f))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	t.Cleanup(func() {
		// Should the agent fail to stop them, leave nothing behind.
		for _, pid := range pids {
			if !gone(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})

	code, took := agent.stop()
	if code != 0 || took >= lease {
		t.Errorf("run exited %d, %v after its cancellation; want 0 within the lease duration, %v", code, took, lease)
	}
	t.Logf("run returned %v after its cancellation", took.Round(time.Millisecond))
	for _, pid := range pids {
		if !gone(pid) {
			t.Errorf("process %d of the action outlived the agent", pid)
		}
	}

	// Handed back as it was before the claim: pending, no lease, due.
	r, err = st.GetResource(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	reconciling := manifest.FindCondition(r.Conditions, manifest.ConditionReconciling)
	if r.Phase != manifest.PhasePending || r.LeaseOwner != "" || r.LeaseExpiresAt != nil || r.ObservedGeneration != 0 ||
		r.RetryCount != 0 || reconciling == nil || reconciling.Status != manifest.ConditionFalse || reconciling.Reason != "Interrupted" {
		t.Errorf("after the stop: %s, lease expires %v, retries %d, Reconciling %+v",
			describe([]*store.Resource{r}), r.LeaseExpiresAt, r.RetryCount, reconciling)
	}
	if r.NextReconcileAt != nil && time.Until(*r.NextReconcileAt) > time.Second {
		t.Errorf("after the stop, next reconcile at %v: not due", r.NextReconcileAt)
	}
	recs, err := st.ListReconcileRecords(t.Context(), r.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Success || !strings.Contains(recs[0].Error, "interrupted") || recs[0].Trigger != store.TriggerCreate {
		t.Errorf("history after the stop: %s", describeRecords(recs))
	}

	// Due again: the next agent takes it up at once.
	next := startAgent(t, url, "--config", cfgPath)
	waitFor(t, 30*time.Second, next, "the next agent to reconcile it", func() (bool, string) {
		r, err := st.GetResource(t.Context(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		return reconciled(r), describe([]*store.Resource{r})
	})
	if code, _ := next.stop(); code != 0 {
		t.Errorf("the next run exited %d", code)
	}
}

// TestRunRefusesBadActions: a mistake in an action instance stops run at
// start, before it touches the database, with exit 1 and a message naming
// actions.<name>; several mistakes are reported together.
func TestRunRefusesBadActions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name    string
		actions string
		want    []string
	}{
		{"unknown plugin", "deploy: {plugin: pulumi}",
			[]string{`actions.deploy: unknown plugin "pulumi" (known plugins: exec, github_actions, gitlab_pipelines, http, noop, terraform)`}},
		{"terraform without module", "deploy: {plugin: terraform, config: {binary: /no/such/tofu}}",
			[]string{"actions.deploy: binary: ", "install OpenTofu", "actions.deploy: module: required"}},
		{"exec bad timeout", "deploy: {plugin: exec, config: {command: [sh], timeout: soon}}",
			[]string{`actions.deploy: timeout: "soon" is not a duration`}},
		{"exec missing command", "deploy: {plugin: exec, config: {command: [./no-such-script.sh]}}",
			[]string{"actions.deploy: command: ", "no-such-script.sh"}},
		{"exec without command", "deploy: {plugin: exec, config: {timeout: 1m}}",
			[]string{"actions.deploy: command: required"}},
		{"exec unknown setting", "deploy: {plugin: exec, config: {command: [sh], cmd: [true]}}",
			[]string{`actions.deploy: unknown setting "cmd"`}},
		{"exec unset secret", "deploy: {plugin: exec, config: {command: [sh], passEnv: [NO8S_TEST_UNSET_SECRET]}}",
			[]string{"actions.deploy: passEnv: NO8S_TEST_UNSET_SECRET is not set in the agent's environment"}},
		{"http without url", "hook: {plugin: http, config: {timeout: 5s}}",
			[]string{"actions.hook: url: required"}},
		{"noop redeclared", "noop: {plugin: exec, config: {command: [sh]}}",
			[]string{"actions.noop: the instance noop is built in"}},
		{"two mistakes together", "a: {plugin: exec, config: {command: [sh], timeout: -1s}}\n  b: {plugin: nope}",
			[]string{"actions.a: timeout: must be positive", `actions.b: unknown plugin "nope"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".yaml")
			// The database does not exist: an error about it would mean run
			// got past the actions.
			cfg := "database: postgres://x@/y?host=/nonexistent\nsources:\n  - {name: a, dir: .}\nactions:\n  " + tt.actions + "\n"
			if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			code, _, errOut := runCLI(t, "run", "--config", path)
			if code != 1 {
				t.Errorf("exit %d, want 1; stderr %q", code, errOut)
			}
			for _, want := range tt.want {
				if !strings.Contains(errOut, want) {
					t.Errorf("stderr %q lacks %q", errOut, want)
				}
			}
			if strings.Contains(errOut, "postgres") || strings.Contains(errOut, "agent started") {
				t.Errorf("run went past the actions: %q", errOut)
			}
		})
	}
}
