package githubactions_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	gosync "sync"
	"testing"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/githubactions/githubtest"
)

// recorder is a reporter that records handles, as the reconciler's does.
type recorder struct {
	reporter
	srv *githubtest.Server
	// fail, when set, is what RecordHandle answers.
	fail error

	hmu     gosync.Mutex
	handles []string
	// polled is how often each recorded run had been read when recorded.
	polled []int
}

func (r *recorder) RecordHandle(_ context.Context, handle string) error {
	if r.fail != nil {
		return r.fail
	}
	polls := -1
	if id, err := strconv.ParseInt(handle, 10, 64); err == nil {
		if run, ok := r.srv.Run(id); ok {
			polls = run.Polls
		}
	}
	r.hmu.Lock()
	defer r.hmu.Unlock()
	r.handles = append(r.handles, handle)
	r.polled = append(r.polled, polls)
	return nil
}

func (r *recorder) recorded() ([]string, []int) {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	return slices.Clone(r.handles), slices.Clone(r.polled)
}

// TestHandleRecordedBeforeFollowing checks that the run id is recorded as
// soon as the run is known, before it is first polled, whether the
// dispatch returns it or the run is found by its name.
func TestHandleRecordedBeforeFollowing(t *testing.T) {
	t.Parallel()
	for _, details := range []bool{true, false} {
		t.Run(fmt.Sprintf("return_run_details=%v", details), func(t *testing.T) {
			t.Parallel()
			srv := githubtest.New(t, githubtest.Options{Token: token, ReturnRunDetails: details, Script: outputsScript})
			rep := &recorder{srv: srv}
			if _, err := newAction(t, srv, "").Apply(t.Context(), request("pg", 2, rep)); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			handles, polled := rep.recorded()
			want := strconv.FormatInt(srv.Dispatches()[0].RunID, 10)
			if len(handles) != 1 || handles[0] != want || polled[0] != 0 {
				t.Errorf("recorded %v (run read %v times before), want [%s] before any read", handles, polled, want)
			}
		})
	}
}

// TestUnrecordedRunIsCancelled: a run whose handle cannot be recorded
// would be lost to the next attempt; it is cancelled, and Apply fails.
func TestUnrecordedRunIsCancelled(t *testing.T) {
	t.Parallel()
	srv := githubtest.New(t, githubtest.Options{Token: token, ReturnRunDetails: true, Script: outputsScript})
	rep := &recorder{srv: srv, fail: errors.New("database unreachable")}
	_, err := newAction(t, srv, "").Apply(t.Context(), request("pg", 2, rep))
	if err == nil || !strings.Contains(err.Error(), "database unreachable") {
		t.Fatalf("Apply = %v, want the recording error", err)
	}
	if ds, c := srv.Dispatches(), srv.Cancelled(); len(ds) != 1 || len(c) != 1 || c[0] != ds[0].RunID {
		t.Errorf("dispatched %+v, cancelled %v: want the one run cancelled", ds, c)
	}
}

// dispatchPrior starts a run as an earlier attempt of an agent that died
// would have, straight through the API, and returns its id.
func dispatchPrior(t *testing.T, srv *githubtest.Server, op string, gen int64) int64 {
	t.Helper()
	o := srv.Options()
	body, err := json.Marshal(map[string]any{"ref": "main", "return_run_details": true, "inputs": map[string]string{
		"operation": op, "kind": "DatabaseCluster", "name": "pg", "generation": strconv.FormatInt(gen, 10),
		"spec": "{}", "correlation_id": "prior"}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost,
		fmt.Sprintf("%srepos/%s/%s/actions/workflows/%s/dispatches", srv.BaseURL(), o.Owner, o.Repo, o.Workflow), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var details struct {
		ID int64 `json:"workflow_run_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&details); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("dispatch: %s, %v", resp.Status, err)
	}
	return details.ID
}

// TestPriorRun runs an Apply of generation 3 that finds the run of an
// earlier attempt: followed when it is the same operation and generation,
// otherwise cancelled and waited for until completed before dispatching.
func TestPriorRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// op and gen are what the prior run does; finish, when set,
		// completes it with that conclusion before the Apply.
		op     string
		gen    int64
		finish string
		// handle overrides the recorded handle (the prior run's id); the
		// prior run is then one the handle does not name.
		handle string
		// wantFollow: no new dispatch, the prior run's result; otherwise
		// one new dispatch, after the prior run completed.
		wantFollow bool
		wantCancel bool
		wantErr    string
	}{
		{name: "running, same generation: followed", op: "apply", gen: 3, wantFollow: true},
		{name: "succeeded, same generation: its outputs", op: "apply", gen: 3, finish: "success", wantFollow: true},
		{name: "failed, same generation: its failure", op: "apply", gen: 3, finish: "failure", wantFollow: true, wantErr: "concluded failure"},
		{name: "cancelled, same generation: dispatched", op: "apply", gen: 3, finish: "cancelled"},
		{name: "running, older generation: cancelled first", op: "apply", gen: 2, wantCancel: true},
		{name: "running, other operation: cancelled first", op: "destroy", gen: 3, wantCancel: true},
		{name: "completed, older generation: dispatched", op: "apply", gen: 2, finish: "success"},
		{name: "unknown to GitHub: dispatched", op: "apply", gen: 3, finish: "success", handle: "424242"},
		{name: "not a run id: dispatched", op: "apply", gen: 3, finish: "success", handle: "pipeline/7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var srv *githubtest.Server
			// The prior run goes on until cancelled; when a cancel takes
			// a few reads to complete it, a new dispatch must wait for it.
			var priorID int64
			var dispatchedWhilePriorRan []string
			var mu gosync.Mutex
			script := func(d githubtest.Dispatch) githubtest.Script {
				if d.Inputs["correlation_id"] == "prior" {
					s := outputsScript(d)
					if tt.finish == "" && !tt.wantFollow {
						s.Never = true
					}
					return s
				}
				mu.Lock()
				defer mu.Unlock()
				if run, ok := srv.Run(priorID); ok && run.Status != "completed" {
					dispatchedWhilePriorRan = append(dispatchedWhilePriorRan, run.Status)
				}
				return outputsScript(d)
			}
			srv = githubtest.New(t, githubtest.Options{Token: token, ReturnRunDetails: true, Script: script, CancelPolls: 3})
			id := dispatchPrior(t, srv, tt.op, tt.gen)
			mu.Lock()
			priorID = id
			mu.Unlock()
			if tt.finish != "" && !srv.Finish(id, tt.finish) {
				t.Fatal("Finish")
			}
			handle := strconv.FormatInt(id, 10)
			if tt.handle != "" {
				handle = tt.handle
			}
			rep := &recorder{srv: srv}
			req := request("pg", 3, rep)
			req.PriorHandle = &action.Handle{Value: handle, Operation: action.Operation(tt.op), Generation: tt.gen}
			res, err := newAction(t, srv, "").Apply(t.Context(), req)

			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Apply = %v, want an error with %q", err, tt.wantErr)
				}
			case err != nil:
				t.Fatalf("Apply: %v", err)
			}
			ds := srv.Dispatches()
			if tt.wantFollow {
				if len(ds) != 1 {
					t.Fatalf("%d dispatches, want the prior run's alone", len(ds))
				}
				if handles, _ := rep.recorded(); len(handles) != 0 {
					t.Errorf("recorded %v, want the prior handle kept", handles)
				}
				if res != nil && decodeOutputs(t, res)["run_id"] != float64(id) {
					t.Errorf("outputs %s, want those of run %d", res.Outputs, id)
				}
			} else {
				if len(ds) != 2 {
					t.Fatalf("%d dispatches, want the prior one and one new", len(ds))
				}
				if out := decodeOutputs(t, res); out["run_id"] != float64(ds[1].RunID) {
					t.Errorf("outputs %s, want those of the new run %d", res.Outputs, ds[1].RunID)
				}
				if handles, _ := rep.recorded(); len(handles) != 1 || handles[0] != strconv.FormatInt(ds[1].RunID, 10) {
					t.Errorf("recorded %v, want the new run %d", handles, ds[1].RunID)
				}
			}
			cancelled := srv.Cancelled()
			if tt.wantCancel {
				if len(cancelled) != 1 || cancelled[0] != id {
					t.Errorf("cancelled %v, want the prior run %d", cancelled, id)
				}
				if run, _ := srv.Run(id); run.Conclusion != "cancelled" {
					t.Errorf("prior run %+v, want it cancelled", run)
				}
			} else if len(cancelled) != 0 {
				t.Errorf("cancelled %v, want none", cancelled)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(dispatchedWhilePriorRan) > 0 {
				t.Errorf("dispatched while the prior run was %v: two runs at once", dispatchedWhilePriorRan)
			}
		})
	}
}

// TestPriorRunUnreadable: when the prior run cannot be looked up (here the
// token was revoked), nothing is dispatched beside it, and the error says
// it may still run, so that the handle is kept for the next attempt.
func TestPriorRunUnreadable(t *testing.T) {
	t.Parallel()
	srv := githubtest.New(t, githubtest.Options{Token: token, ReturnRunDetails: true, Script: outputsScript})
	id := dispatchPrior(t, srv, "apply", 3)
	srv.FailNext(githubtest.Match{Method: "GET", PathSuffix: "/runs/" + strconv.FormatInt(id, 10)}, 1, githubtest.BadCredentials())
	req := request("pg", 3, &recorder{srv: srv})
	req.PriorHandle = &action.Handle{Value: strconv.FormatInt(id, 10), Operation: action.OperationApply, Generation: 3}
	_, err := newAction(t, srv, "").Apply(t.Context(), req)
	if err == nil || !errors.Is(err, action.ErrStillRunning) || !strings.Contains(err.Error(), "token in tokenEnv is not valid") {
		t.Fatalf("Apply = %v, want the token error marked ErrStillRunning", err)
	}
	if n := len(srv.Dispatches()); n != 1 {
		t.Errorf("%d dispatches, want the prior one alone", n)
	}
}
