package gitlabpipelines_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	gosync "sync"
	"testing"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/gitlabapi"
	"github.com/no8s/no8s-agent/gitlabapi/gitlabtest"
)

// recorder is a reporter that records handles, as the reconciler's does.
type recorder struct {
	reporter
	srv *gitlabtest.Server
	// fail, when set, is what RecordHandle answers.
	fail error

	hmu     gosync.Mutex
	handles []string
	// polled is how often each recorded pipeline had been read when
	// recorded.
	polled []int
}

func (r *recorder) RecordHandle(_ context.Context, handle string) error {
	if r.fail != nil {
		return r.fail
	}
	polls := -1
	if _, id, ok := strings.Cut(handle, "/"); ok {
		if n, err := strconv.ParseInt(id, 10, 64); err == nil {
			if st, ok := r.srv.Pipeline(n); ok {
				polls = st.Polls
			}
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

func handleOf(c gitlabtest.Creation) string {
	return fmt.Sprintf("%d/%d", c.ProjectID, c.PipelineID)
}

// TestHandleRecordedBeforeFollowing checks that the pipeline's project and
// id are recorded as soon as GitLab answers, before the pipeline is first
// read, whether GitLab's answer gave it or it was found by its name.
func TestHandleRecordedBeforeFollowing(t *testing.T) {
	t.Parallel()
	for _, lost := range []bool{false, true} {
		t.Run(fmt.Sprintf("creation answer lost %v", lost), func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, gitlabtest.Options{Script: outputsScript}, gitlabtest.ProjectOptions{})
			if lost {
				srv.FailNext(gitlabtest.Match{Method: "POST", PathSuffix: "/pipeline"}, 1, gitlabtest.Through(gitlabtest.BadGateway()))
			}
			rep := &recorder{srv: srv}
			if _, err := newAction(t, srv, "").Apply(t.Context(), request("pg", 2, rep)); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			handles, polled := rep.recorded()
			if want := handleOf(srv.Pipelines()[0]); len(handles) != 1 || handles[0] != want || polled[0] != 0 {
				t.Errorf("recorded %v (pipeline read %v times before), want [%s] before any read", handles, polled, want)
			}
		})
	}
}

// TestUnrecordedPipelineIsCancelled: a pipeline whose handle cannot be
// recorded would be lost to the next attempt; it is cancelled, and Apply
// fails.
func TestUnrecordedPipelineIsCancelled(t *testing.T) {
	t.Parallel()
	srv := newServer(t, gitlabtest.Options{Script: outputsScript}, gitlabtest.ProjectOptions{})
	rep := &recorder{srv: srv, fail: errors.New("database unreachable")}
	_, err := newAction(t, srv, "").Apply(t.Context(), request("pg", 2, rep))
	if err == nil || !strings.Contains(err.Error(), "database unreachable") {
		t.Fatalf("Apply = %v, want the recording error", err)
	}
	ps, c := srv.Pipelines(), srv.Cancels()
	if len(ps) != 1 || len(c) != 1 || c[0] != ps[0].PipelineID {
		t.Errorf("created %+v, cancelled %v: want the one pipeline cancelled", ps, c)
	}
}

// createPrior creates a pipeline as an earlier attempt of an agent that
// died would have, straight through the API, and returns it.
func createPrior(t *testing.T, srv *gitlabtest.Server, op string, gen int64) gitlabtest.Creation {
	t.Helper()
	c, err := gitlabapi.NewClient(srv.URL, token)
	if err != nil {
		t.Fatal(err)
	}
	inputs := gitlab.PipelineInputsOption{}
	for k, v := range map[string]string{"operation": op, "kind": "DatabaseCluster", "name": "pg",
		"generation": strconv.FormatInt(gen, 10), "spec": "{}", "correlation_id": "prior"} {
		inputs[k] = gitlab.NewPipelineInputValue(v)
	}
	if _, _, err := c.Pipelines.CreatePipeline(projectPath, &gitlab.CreatePipelineOptions{Ref: gitlab.Ptr("main"), Inputs: inputs}); err != nil {
		t.Fatal(err)
	}
	ps := srv.Pipelines()
	return ps[len(ps)-1]
}

// TestPriorPipeline runs an Apply of generation 3 that finds the pipeline
// of an earlier attempt: followed when it is the same operation and
// generation, otherwise cancelled and waited for until finished before a
// new one is created.
func TestPriorPipeline(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// op and gen are what the prior pipeline does; finish, when set,
		// ends it with that status before the Apply; manual leaves it
		// waiting for a manual job.
		op     string
		gen    int64
		finish string
		manual bool
		// handle overrides the recorded handle; the prior pipeline is
		// then one the handle does not name.
		handle string
		// wantFollow: no new pipeline, the prior pipeline's result;
		// otherwise one new pipeline, after the prior one finished.
		wantFollow bool
		wantCancel bool
		wantErr    string
	}{
		{name: "running, same generation: followed", op: "apply", gen: 3, wantFollow: true},
		{name: "succeeded, same generation: its outputs", op: "apply", gen: 3, finish: "success", wantFollow: true},
		{name: "failed, same generation: its failure", op: "apply", gen: 3, finish: "failed", wantFollow: true, wantErr: "failed"},
		{name: "canceled, same generation: created anew", op: "apply", gen: 3, finish: "canceled"},
		{name: "running, older generation: cancelled first", op: "apply", gen: 2, wantCancel: true},
		{name: "waiting for a manual job, older generation: cancelled first", op: "apply", gen: 2, manual: true, wantCancel: true},
		{name: "running, other operation: cancelled first", op: "destroy", gen: 3, wantCancel: true},
		{name: "finished, older generation: created anew", op: "apply", gen: 2, finish: "success"},
		{name: "unknown to GitLab: created anew", op: "apply", gen: 3, finish: "success", handle: "1/424242"},
		{name: "not a pipeline handle: created anew", op: "apply", gen: 3, finish: "success", handle: "424242"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var srv *gitlabtest.Server
			// The prior pipeline goes on until cancelled; a cancel takes a
			// few reads to finish, and a new pipeline must wait for it.
			var mu gosync.Mutex
			var priorID int64
			var createdWhilePriorRan []string
			script := func(c gitlabtest.Creation) gitlabtest.Script {
				if input(c, "correlation_id") == "prior" {
					s := outputsScript(c)
					switch {
					case tt.manual:
						s.Status, s.Polls = "manual", 0
					case tt.finish == "" && !tt.wantFollow:
						s.Never = true
					}
					return s
				}
				mu.Lock()
				defer mu.Unlock()
				if st, ok := srv.Pipeline(priorID); ok && !slices.Contains([]string{"success", "failed", "canceled", "skipped"}, st.Status) {
					createdWhilePriorRan = append(createdWhilePriorRan, st.Status)
				}
				return outputsScript(c)
			}
			srv = newServer(t, gitlabtest.Options{Script: script, CancelPolls: 3}, gitlabtest.ProjectOptions{})
			prior := createPrior(t, srv, tt.op, tt.gen)
			mu.Lock()
			priorID = prior.PipelineID
			mu.Unlock()
			if tt.manual {
				// Read it until it waits for its manual job.
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				c, _ := gitlabapi.NewClient(srv.URL, token)
				for {
					p, _, err := c.Pipelines.GetPipeline(projectPath, prior.PipelineID, gitlab.WithContext(ctx))
					if err != nil {
						t.Fatal(err)
					}
					if p.Status == "manual" {
						break
					}
				}
			}
			if tt.finish != "" && !srv.Finish(prior.PipelineID, tt.finish) {
				t.Fatal("Finish")
			}
			handle := handleOf(prior)
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
			ps := apiPipelines(srv)
			if tt.wantFollow {
				if len(ps) != 1 {
					t.Fatalf("%d pipelines, want the prior one alone", len(ps))
				}
				if handles, _ := rep.recorded(); len(handles) != 0 {
					t.Errorf("recorded %v, want the prior handle kept", handles)
				}
				if res != nil && decodeOutputs(t, res)["pipeline_id"] != float64(prior.PipelineID) {
					t.Errorf("outputs %s, want those of pipeline %d", res.Outputs, prior.PipelineID)
				}
			} else {
				if len(ps) != 2 {
					t.Fatalf("%d pipelines, want the prior one and one new", len(ps))
				}
				if out := decodeOutputs(t, res); out["pipeline_id"] != float64(ps[1].PipelineID) {
					t.Errorf("outputs %s, want those of the new pipeline %d", res.Outputs, ps[1].PipelineID)
				}
				if handles, _ := rep.recorded(); len(handles) != 1 || handles[0] != handleOf(ps[1]) {
					t.Errorf("recorded %v, want the new pipeline %s", handles, handleOf(ps[1]))
				}
			}
			cancelled := srv.Cancels()
			if tt.wantCancel {
				if len(cancelled) != 1 || cancelled[0] != prior.PipelineID {
					t.Errorf("cancelled %v, want the prior pipeline %d", cancelled, prior.PipelineID)
				}
				if st, _ := srv.Pipeline(prior.PipelineID); st.Status != "canceled" {
					t.Errorf("prior pipeline %+v, want it canceled", st)
				}
			} else if len(cancelled) != 0 {
				t.Errorf("cancelled %v, want none", cancelled)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(createdWhilePriorRan) > 0 {
				t.Errorf("created a pipeline while the prior one was %v: two pipelines at once", createdWhilePriorRan)
			}
		})
	}
}

// TestPriorPipelineUnreadable: when the prior pipeline cannot be looked up
// (here the token was revoked), nothing is created beside it, and the error
// says it may still run, so that the handle is kept for the next attempt.
func TestPriorPipelineUnreadable(t *testing.T) {
	t.Parallel()
	srv := newServer(t, gitlabtest.Options{}, gitlabtest.ProjectOptions{})
	prior := createPrior(t, srv, "apply", 3)
	srv.FailNext(gitlabtest.Match{Method: "GET", PathSuffix: "/pipelines/" + strconv.FormatInt(prior.PipelineID, 10)}, 1, gitlabtest.Unauthorized())
	req := request("pg", 3, &recorder{srv: srv})
	req.PriorHandle = &action.Handle{Value: handleOf(prior), Operation: action.OperationApply, Generation: 3}
	_, err := newAction(t, srv, "").Apply(t.Context(), req)
	if err == nil || !errors.Is(err, action.ErrStillRunning) || !strings.Contains(err.Error(), "does not accept the token in tokenEnv") {
		t.Fatalf("Apply = %v, want the token error marked ErrStillRunning", err)
	}
	if n := len(srv.Pipelines()); n != 1 {
		t.Errorf("%d pipelines, want the prior one alone", n)
	}
}
