package gitlabpipelines_test

import (
	"context"
	"errors"
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
