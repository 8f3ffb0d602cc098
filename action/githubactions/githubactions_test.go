package githubactions_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/githubactions"
	"github.com/no8s/no8s-agent/action/githubactions/githubtest"
	"github.com/no8s/no8s-agent/githubapi"
	"github.com/no8s/no8s-agent/manifest"
)

const token = "ghp_pluginTestT0ken"

// newAction builds an instance against srv with fast polling; extra adds
// or overrides settings.
func newAction(t *testing.T, srv *githubtest.Server, extra string) action.Action {
	t.Helper()
	o := srv.Options()
	cfg := fmt.Sprintf(`{"owner": %q, "repo": %q, "workflow": %q, "tokenEnv": "GH_TOKEN", "apiURL": %q,
		"pollInterval": "5ms", "timeout": "20s", "findTimeout": "10s"%s}`, o.Owner, o.Repo, o.Workflow, srv.BaseURL(), extra)
	a, err := githubactions.New(action.Settings{Instance: "deploy", Config: json.RawMessage(cfg),
		Getenv: func(k string) (string, bool) { return token, k == "GH_TOKEN" }})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// reporter records what an operation reports.
type reporter struct {
	mu       gosync.Mutex
	progress []string
	conds    []manifest.Condition
}

func (r *reporter) SetCondition(c manifest.Condition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conds = append(r.conds, c)
}

func (r *reporter) Progress(m string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.progress = append(r.progress, m)
}

func (r *reporter) all() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, p := range r.progress {
		b.WriteString(p + "\n")
	}
	for _, c := range r.conds {
		fmt.Fprintf(&b, "%s %s %s %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

func request(name string, gen int64, rep action.Reporter) *action.Request {
	return &action.Request{Instance: "deploy", Trigger: "create", Reporter: rep, Resource: action.Resource{
		ID: 7, Kind: "DatabaseCluster", APIVersion: "infra.example.com/v1", Name: name, Generation: gen,
		Spec: json.RawMessage(`{"engine":"postgres","storage_gb":500}`), Source: "infra"}}
}

// outputsScript succeeds after polls with a no8s-outputs artifact naming
// the resource the dispatch was for.
func outputsScript(d githubtest.Dispatch) githubtest.Script {
	out := fmt.Sprintf(`{"endpoint": "%s.db.example.com", "resource": %q, "run_id": -1}`, d.Inputs["name"], d.Inputs["name"])
	return githubtest.Script{Conclusion: "success", Polls: 3,
		Jobs:      []githubtest.Job{{Name: "apply", Conclusion: "success", Steps: []string{"checkout", "terraform apply"}}},
		Artifacts: []githubtest.Artifact{{Name: "no8s-outputs", Files: map[string][]byte{"outputs.json": []byte(out)}}, {Name: "plan", Files: map[string][]byte{"plan.txt": []byte("1 to add")}}}}
}

func decodeOutputs(t *testing.T, res *action.Result) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(res.Outputs, &out); err != nil {
		t.Fatalf("outputs %s: %v", res.Outputs, err)
	}
	return out
}

func TestApplySucceeds(t *testing.T) {
	t.Parallel()
	srv := githubtest.New(t, githubtest.Options{Token: token, ReturnRunDetails: true, Script: outputsScript})
	a := newAction(t, srv, "")
	rep := &reporter{}
	res, err := a.Apply(t.Context(), request("production-pg", 3, rep))
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	ds := srv.Dispatches()
	if len(ds) != 1 {
		t.Fatalf("%d dispatches", len(ds))
	}
	in := ds[0].Inputs
	if in["operation"] != "apply" || in["kind"] != "DatabaseCluster" || in["name"] != "production-pg" || in["generation"] != "3" ||
		in["spec"] != `{"engine":"postgres","storage_gb":500}` || !strings.HasPrefix(in["correlation_id"], "databasecluster-production-pg-g3-apply-") ||
		ds[0].Ref != "main" {
		t.Errorf("dispatch = %+v", ds[0])
	}
	if v, sent := in["plugin_config"]; sent {
		t.Errorf("plugin_config %q sent for a resource without one: workflows that do not declare it would refuse the dispatch", v)
	}
	out := decodeOutputs(t, res)
	run, _ := srv.Run(ds[0].RunID)
	if out["endpoint"] != "production-pg.db.example.com" || out["conclusion"] != "success" || out["run_id"] != float64(ds[0].RunID) ||
		!strings.HasSuffix(out["run_url"].(string), fmt.Sprintf("/actions/runs/%d", ds[0].RunID)) || run.Status != "completed" {
		t.Errorf("outputs = %s", res.Outputs)
	}
	jobs, _ := out["jobs"].([]any)
	arts, _ := out["artifacts"].([]any)
	if len(jobs) != 1 || jobs[0].(map[string]any)["name"] != "apply" || jobs[0].(map[string]any)["conclusion"] != "success" ||
		jobs[0].(map[string]any)["started_at"] == nil || len(arts) != 2 || arts[0].(map[string]any)["size_in_bytes"].(float64) <= 0 {
		t.Errorf("jobs %v, artifacts %v", jobs, arts)
	}
	if !strings.Contains(rep.all(), "job apply, step checkout") || !strings.Contains(rep.all(), "WorkflowRun Unknown InProgress run http") {
		t.Errorf("progress reported:\n%s", rep.all())
	}
	if len(res.Conditions) != 1 || res.Conditions[0].Type != "WorkflowRun" || res.Conditions[0].Status != manifest.ConditionTrue {
		t.Errorf("conditions = %+v", res.Conditions)
	}
	for _, r := range srv.Requests() {
		if strings.Contains(r.Path, "/runs?") || strings.HasSuffix(r.Path, "/runs") {
			t.Errorf("with run details the runs were listed anyway: %s %s", r.Method, r.Path)
		}
	}
}

func TestFailedRun(t *testing.T) {
	t.Parallel()
	srv := githubtest.New(t, githubtest.Options{Token: token, ReturnRunDetails: true, Script: func(githubtest.Dispatch) githubtest.Script {
		return githubtest.Script{Conclusion: "failure", Polls: 1, Jobs: []githubtest.Job{
			{Name: "plan", Conclusion: "success", Steps: []string{"init"}},
			{Name: "terraform", Conclusion: "failure", Steps: []string{"init", "apply"}}}}
	}})
	_, err := newAction(t, srv, "").Apply(t.Context(), request("staging-pg", 1, &reporter{}))
	runID := srv.Dispatches()[0].RunID
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("/actions/runs/%d concluded failure", runID)) ||
		!strings.Contains(err.Error(), `job "terraform" failure at step "apply"`) {
		t.Fatalf("error = %v", err)
	}
	if strings.Contains(err.Error(), token) {
		t.Error("the error shows the token")
	}
}

// TestConcurrentDispatches runs 20 applies of one workflow at once; each
// must follow its own run, whether the server returns run details or the
// run is found by its name.
func TestConcurrentDispatches(t *testing.T) {
	t.Parallel()
	for _, details := range []bool{true, false} {
		t.Run(fmt.Sprintf("run details %v", details), func(t *testing.T) {
			t.Parallel()
			srv := githubtest.New(t, githubtest.Options{Token: token, ReturnRunDetails: details, ListDelay: 3, Script: outputsScript})
			a := newAction(t, srv, "")
			const n = 20
			type answer struct {
				name string
				out  map[string]any
				err  error
			}
			answers := make(chan answer, n)
			for i := range n {
				go func() {
					name := fmt.Sprintf("db-%02d", i)
					res, err := a.Apply(t.Context(), request(name, 1, &reporter{}))
					ans := answer{name: name, err: err}
					if err == nil {
						ans.out = decodeOutputs(t, res)
					}
					answers <- ans
				}()
			}
			runs := map[float64]bool{}
			for range n {
				ans := <-answers
				if ans.err != nil {
					t.Errorf("%s: %v", ans.name, ans.err)
					continue
				}
				if ans.out["resource"] != ans.name {
					t.Errorf("%s followed the run of %v", ans.name, ans.out["resource"])
				}
				runs[ans.out["run_id"].(float64)] = true
			}
			if len(runs) != n || len(srv.Dispatches()) != n {
				t.Errorf("%d distinct runs, %d dispatched; want %d", len(runs), len(srv.Dispatches()), n)
			}
			refused := 0
			for _, r := range srv.Requests() {
				if strings.HasSuffix(r.Path, "/dispatches") && r.Status == 422 {
					refused++
				}
			}
			if details && refused != 0 || !details && refused == 0 {
				t.Errorf("%d dispatches refused for return_run_details (server knows it: %v)", refused, details)
			}
		})
	}
}

// TestRateLimitsAndServerErrors injects GitHub's throttling and failures
// into every kind of call; the apply waits them out and succeeds.
func TestRateLimitsAndServerErrors(t *testing.T) {
	t.Parallel()
	srv := githubtest.New(t, githubtest.Options{Token: token, ReturnRunDetails: true, Script: outputsScript})
	srv.FailNext(githubtest.Match{Method: "POST", PathSuffix: "/dispatches"}, 1, githubtest.TooManyRequests(time.Second))
	srv.FailNext(githubtest.Match{Method: "GET", PathSuffix: "/jobs"}, 1, githubtest.SecondaryRateLimit(time.Second))
	srv.FailNext(githubtest.Match{Method: "GET", PathSuffix: "/artifacts"}, 2, githubtest.BadGateway())
	srv.FailNext(githubtest.Match{Method: "GET", PathSuffix: "/zip"}, 1, githubtest.PrimaryRateLimit(time.Now().Add(time.Second)))
	start := time.Now()
	res, err := newAction(t, srv, "").Apply(t.Context(), request("production-pg", 1, &reporter{}))
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if out := decodeOutputs(t, res); out["endpoint"] != "production-pg.db.example.com" {
		t.Errorf("outputs = %s", res.Outputs)
	}
	statuses := map[int]int{}
	for _, r := range srv.Requests() {
		statuses[r.Status]++
	}
	if statuses[429] != 1 || statuses[403] != 2 || statuses[502] != 2 || len(srv.Dispatches()) != 1 {
		t.Errorf("statuses %v, %d dispatches", statuses, len(srv.Dispatches()))
	}
	// Three waits of at least a second each: Retry-After twice, the reset once.
	if took := time.Since(start); took < 3*time.Second {
		t.Errorf("took %s: the rate limits were not waited out", took)
	}
}

// TestConfigErrorsAreNotRetried checks that bad credentials and a missing
// workflow fail at once, saying what to fix.
func TestConfigErrorsAreNotRetried(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		fault  *githubtest.Fault
		extra  string
		status int
		hint   string
	}{
		{"bad credentials", ptr(githubtest.BadCredentials()), "", 401, "token in tokenEnv is not valid"},
		{"unknown workflow", nil, `, "workflow": "nope.yml"`, 404, "owner, repo or workflow does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := githubtest.New(t, githubtest.Options{Token: token, ReturnRunDetails: true})
			if tt.fault != nil {
				srv.FailNext(githubtest.Match{}, 1, *tt.fault)
			}
			_, err := newAction(t, srv, tt.extra).Apply(t.Context(), request("x", 1, &reporter{}))
			var cfgErr *githubapi.ConfigError
			if !errors.As(err, &cfgErr) || cfgErr.Status != tt.status || !strings.Contains(err.Error(), tt.hint) {
				t.Fatalf("error = %v", err)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("%d requests: a configuration error was retried", n)
			}
			if strings.Contains(err.Error(), token) {
				t.Error("the error shows the token")
			}
		})
	}
}

// TestCancelledRunIsCancelled checks that a run still going when the
// operation times out or is cancelled is cancelled through the API.
func TestCancelledRunIsCancelled(t *testing.T) {
	t.Parallel()
	never := func(githubtest.Dispatch) githubtest.Script {
		return githubtest.Script{Never: true, Jobs: []githubtest.Job{{Name: "apply", Steps: []string{"sleep"}}}}
	}
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		srv := githubtest.New(t, githubtest.Options{Token: token, ReturnRunDetails: true, Script: never})
		_, err := newAction(t, srv, `, "timeout": "300ms"`).Apply(t.Context(), request("slow", 1, &reporter{}))
		if err == nil || !strings.Contains(err.Error(), "did not complete within the timeout") || !strings.Contains(err.Error(), "cancelled") {
			t.Fatalf("error = %v", err)
		}
		// The run may go on until GitHub completes the cancel: the next
		// attempt must be told of it.
		if !errors.Is(err, action.ErrStillRunning) {
			t.Errorf("error %v is not ErrStillRunning", err)
		}
		if got := srv.Cancelled(); len(got) != 1 || got[0] != srv.Dispatches()[0].RunID {
			t.Errorf("cancelled runs %v", got)
		}
	})
	t.Run("operation cancelled", func(t *testing.T) {
		t.Parallel()
		srv := githubtest.New(t, githubtest.Options{Token: token, ReturnRunDetails: true, Script: never})
		ctx, cancel := context.WithCancelCause(t.Context())
		rep := &reporter{}
		done := make(chan error, 1)
		go func() {
			_, err := newAction(t, srv, "").Apply(ctx, request("slow", 1, rep))
			done <- err
		}()
		// Cancel once the run is being followed.
		deadline := time.After(10 * time.Second)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for !strings.Contains(rep.all(), "in progress") {
			select {
			case <-deadline:
				t.Fatal("the run was never followed")
			case <-tick.C:
			}
		}
		cancel(errors.New("lease lost"))
		if err := <-done; err == nil || !strings.Contains(err.Error(), "lease lost") {
			t.Fatalf("error = %v", err)
		}
		if len(srv.Cancelled()) != 1 {
			t.Errorf("cancelled runs %v", srv.Cancelled())
		}
	})
}

// TestDestroyFromScratch checks that a fresh instance, knowing nothing of
// earlier runs, destroys with operation=destroy.
func TestDestroyFromScratch(t *testing.T) {
	t.Parallel()
	srv := githubtest.New(t, githubtest.Options{Token: token, ReturnRunDetails: true})
	req := request("old-pg", 4, &reporter{})
	req.Resource.PluginConfig = json.RawMessage(`{"ref":"release"}`)
	if _, err := newAction(t, srv, `, "inputs": {"operation": "op"}`).Destroy(t.Context(), req); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	in := srv.Dispatches()[0].Inputs
	if in["op"] != "destroy" || in["name"] != "old-pg" || in["generation"] != "4" || in["operation"] != "" ||
		in["plugin_config"] != `{"ref":"release"}` {
		t.Errorf("inputs = %v", in)
	}
}

func ptr[T any](v T) *T { return &v }

// TestDispatchNotRepeatedBlindly checks that a dispatch answered with a
// server error is not simply sent again: when GitHub started the run all
// the same, that run is found and followed; when it did not, the workflow
// is dispatched once more. Either way exactly one run exists.
func TestDispatchNotRepeatedBlindly(t *testing.T) {
	t.Parallel()
	for _, details := range []bool{true, false} {
		t.Run(fmt.Sprintf("started anyway, run details %v", details), func(t *testing.T) {
			t.Parallel()
			srv := githubtest.New(t, githubtest.Options{Token: token, ReturnRunDetails: details, Script: outputsScript})
			// A proxy that lets the first dispatch through to GitHub but
			// answers it 502, as a gateway timing out does.
			target, _ := url.Parse(srv.URL)
			rp := httputil.NewSingleHostReverseProxy(target)
			var once gosync.Once
			proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/dispatches") {
					first := false
					once.Do(func() { first = true })
					if first {
						rec := httptest.NewRecorder()
						rp.ServeHTTP(rec, r)
						if rec.Code < 300 {
							http.Error(w, "<html>unicorn</html>", http.StatusBadGateway)
							return
						}
						for k, v := range rec.Header() {
							w.Header()[k] = v
						}
						w.WriteHeader(rec.Code)
						w.Write(rec.Body.Bytes())
						return
					}
				}
				rp.ServeHTTP(w, r)
			}))
			t.Cleanup(proxy.Close)
			o := srv.Options()
			cfg := fmt.Sprintf(`{"owner": %q, "repo": %q, "workflow": %q, "tokenEnv": "GH_TOKEN", "apiURL": %q,
				"pollInterval": "5ms", "timeout": "20s", "findTimeout": "10s"}`, o.Owner, o.Repo, o.Workflow, proxy.URL+"/")
			a, err := githubactions.New(action.Settings{Instance: "deploy", Config: json.RawMessage(cfg),
				Getenv: func(k string) (string, bool) { return token, k == "GH_TOKEN" }})
			if err != nil {
				t.Fatal(err)
			}
			res, err := a.Apply(t.Context(), request("production-pg", 1, &reporter{}))
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if n := len(srv.Dispatches()); n != 1 {
				t.Errorf("%d runs started, want 1", n)
			}
			if out := decodeOutputs(t, res); out["run_id"] != float64(srv.Dispatches()[0].RunID) {
				t.Errorf("followed run %v, started %d", out["run_id"], srv.Dispatches()[0].RunID)
			}
		})
	}
	t.Run("not started", func(t *testing.T) {
		t.Parallel()
		srv := githubtest.New(t, githubtest.Options{Token: token, ReturnRunDetails: true, Script: outputsScript})
		srv.FailNext(githubtest.Match{Method: "POST", PathSuffix: "/dispatches"}, 1, githubtest.BadGateway())
		if _, err := newAction(t, srv, `, "findTimeout": "100ms"`).Apply(t.Context(), request("production-pg", 1, &reporter{})); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		if n := len(srv.Dispatches()); n != 1 {
			t.Errorf("%d runs started, want 1", n)
		}
	})
}

// TestLongGitHubOutageWaitedOut checks that polls keep trying through a
// run of server errors longer than one call's usual patience.
func TestLongGitHubOutageWaitedOut(t *testing.T) {
	t.Parallel()
	srv := githubtest.New(t, githubtest.Options{Token: token, ReturnRunDetails: true, Script: outputsScript})
	srv.FailNext(githubtest.Match{Method: "GET", PathSuffix: fmt.Sprintf("/runs/%d", int64(10000000001))}, 12, githubtest.BadGateway())
	if _, err := newAction(t, srv, `, "pollInterval": "1ms"`).Apply(t.Context(), request("production-pg", 1, &reporter{})); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if len(srv.Cancelled()) != 0 {
		t.Errorf("runs cancelled: %v", srv.Cancelled())
	}
	bad := 0
	for _, r := range srv.Requests() {
		if r.Status == http.StatusBadGateway {
			bad++
		}
	}
	if bad != 12 {
		t.Errorf("%d server errors answered, want the 12 injected", bad)
	}
}

// TestNamespacesNotConfused checks that the same kind and name in two
// namespaces reach the workflow as two resources: with only kind and name,
// a workflow that keys its state or concurrency group by them (as the
// example does) would apply or destroy one team's infrastructure for the
// other's resource. The default namespace's dispatch stays as before, so
// workflows that declare no namespace input keep working for it.
func TestNamespacesNotConfused(t *testing.T) {
	t.Parallel()
	srv := githubtest.New(t, githubtest.Options{Token: token, ReturnRunDetails: true})
	a := newAction(t, srv, "")
	for _, ns := range []string{"team-a", "team-b", manifest.DefaultNamespace} {
		req := request("pg", 1, &reporter{})
		req.Resource.Namespace = ns
		if _, err := a.Destroy(t.Context(), req); err != nil {
			t.Fatalf("Destroy in %s: %v", ns, err)
		}
	}
	ds := srv.Dispatches()
	if len(ds) != 3 {
		t.Fatalf("%d dispatches", len(ds))
	}
	a0, b0, d0 := ds[0].Inputs, ds[1].Inputs, ds[2].Inputs
	if a0["namespace"] != "team-a" || b0["namespace"] != "team-b" {
		t.Errorf("team-a's and team-b's DatabaseCluster/pg dispatched with inputs %v and %v: the workflow cannot tell them apart", a0, b0)
	}
	if v, sent := d0["namespace"]; sent {
		t.Errorf("namespace %q sent for the default namespace: workflows that do not declare it would refuse the dispatch", v)
	}
}
