package gitlabpipelines_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/gitlabapi/gitlabtest"
)

var createMatch = gitlabtest.Match{Method: "POST", PathSuffix: "/pipeline"}

// TestCreationWithoutAnswer: GitLab created the pipeline, but its answer
// never came before the operation timed out or was cancelled. The pipeline
// must not be left to run unknown: it is found by its name, recorded as
// the handle and cancelled, and the error says it may still run.
func TestCreationWithoutAnswer(t *testing.T) {
	t.Parallel()
	never := func(gitlabtest.Creation) gitlabtest.Script {
		return gitlabtest.Script{Never: true, Jobs: []gitlabtest.Job{{Name: "apply", Stage: "deploy"}}}
	}
	for _, how := range []string{"timeout", "operation cancelled"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, gitlabtest.Options{Script: never}, gitlabtest.ProjectOptions{})
			srv.FailNext(createMatch, 1, gitlabtest.Through(gitlabtest.Hang()))
			extra := ""
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			if how == "timeout" {
				extra = `, "timeout": "300ms"`
			} else {
				go func() {
					wait, stop := context.WithTimeout(t.Context(), 10*time.Second)
					defer stop()
					_ = srv.WaitFor(wait, func() bool { return len(srv.Pipelines()) == 1 })
					cancel(errors.New("lease lost"))
				}()
			}
			rep := &recorder{srv: srv}
			_, err := newAction(t, srv, extra).Apply(ctx, request("pg", 1, rep))
			if err == nil || !errors.Is(err, action.ErrStillRunning) {
				t.Fatalf("Apply = %v, want an error saying the pipeline may still run", err)
			}
			ps := srv.Pipelines()
			if len(ps) != 1 {
				t.Fatalf("%d pipelines, want the one created behind the missing answer", len(ps))
			}
			if handles, _ := rep.recorded(); len(handles) != 1 || handles[0] != handleOf(ps[0]) {
				t.Errorf("recorded %v, want %s: the next attempt would not know of the pipeline", handles, handleOf(ps[0]))
			}
			if c := srv.Cancels(); len(c) != 1 || c[0] != ps[0].PipelineID {
				t.Errorf("cancelled %v, want pipeline %d", c, ps[0].PipelineID)
			}
		})
	}
}

// TestCreationAnswerWithoutPipeline: GitLab (or a proxy before it) created
// the pipeline but answered 201 with no usable id, or 200 with a page that
// is no JSON. The handle must name the pipeline that exists, so that the
// next attempt finds it; it is looked for by its name and followed.
func TestCreationAnswerWithoutPipeline(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, body string }{
		{"id 0", `{"id": 0, "project_id": 0, "status": "pending", "web_url": ""}`},
		{"negative id", `{"id": -5, "project_id": -1, "status": "pending"}`},
		{"no project", `{"id": 12, "status": "pending"}`},
		{"html", `<html><body>Signed in</body></html>`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, gitlabtest.Options{Script: outputsScript}, gitlabtest.ProjectOptions{})
			srv.FailNext(createMatch, 1, gitlabtest.Through(gitlabtest.Fault{Status: http.StatusCreated, Body: tt.body}))
			rep := &recorder{srv: srv}
			res, err := newAction(t, srv, "").Apply(t.Context(), request("pg", 1, rep))
			ps := srv.Pipelines()
			if len(ps) != 1 {
				t.Fatalf("%d pipelines, want 1", len(ps))
			}
			if handles, _ := rep.recorded(); len(handles) == 0 || handles[0] != handleOf(ps[0]) {
				t.Errorf("recorded %v, want %s", handles, handleOf(ps[0]))
			}
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if out := decodeOutputs(t, res); out["pipeline_id"] != float64(ps[0].PipelineID) {
				t.Errorf("outputs %s", res.Outputs)
			}
		})
	}
}
