package githubactions_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/action/githubactions/githubtest"
)

var dispatchMatch = githubtest.Match{Method: "POST", PathSuffix: "/dispatches"}

// TestDispatchWithoutAnswer: GitHub started the run, but the dispatch's
// answer never came before the operation timed out or was cancelled (a
// lost lease). The run must not be left to go on unknown, beside the one
// the next attempt would dispatch: it is found by its name, recorded as
// the handle and cancelled, and the error says it may still run.
func TestDispatchWithoutAnswer(t *testing.T) {
	t.Parallel()
	never := func(githubtest.Dispatch) githubtest.Script {
		return githubtest.Script{Never: true, Jobs: []githubtest.Job{{Name: "apply", Steps: []string{"sleep"}}}}
	}
	for _, how := range []string{"timeout", "operation cancelled"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			srv := githubtest.New(t, githubtest.Options{Token: token, ReturnRunDetails: true, Script: never})
			srv.FailNext(dispatchMatch, 1, githubtest.Through(githubtest.Hang()))
			extra := ""
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			if how == "timeout" {
				extra = `, "timeout": "300ms"`
			} else {
				go func() {
					wait, stop := context.WithTimeout(t.Context(), 10*time.Second)
					defer stop()
					_ = srv.WaitFor(wait, func() bool { return len(srv.Dispatches()) == 1 })
					cancel(errors.New("lease lost"))
				}()
			}
			rep := &recorder{srv: srv}
			_, err := newAction(t, srv, extra).Apply(ctx, request("pg", 1, rep))
			if err == nil || !errors.Is(err, action.ErrStillRunning) {
				t.Fatalf("Apply = %v, want an error saying the run may still go on", err)
			}
			ds := srv.Dispatches()
			if len(ds) != 1 {
				t.Fatalf("%d runs, want the one started behind the missing answer", len(ds))
			}
			want := strconv.FormatInt(ds[0].RunID, 10)
			if handles, _ := rep.recorded(); len(handles) != 1 || handles[0] != want {
				t.Errorf("recorded %v, want %s: the next attempt would not know of the run", handles, want)
			}
			if c := srv.Cancelled(); len(c) != 1 || c[0] != ds[0].RunID {
				t.Errorf("cancelled %v, want run %d", c, ds[0].RunID)
			}
		})
	}
}

// TestDispatchAnswerWithoutRun: GitHub (or a proxy before it) started the
// run but answered 200 with no usable run id, or with a page that is no
// JSON. The handle must name the run that exists, so that the next attempt
// finds it: the run is looked for by its name and followed.
func TestDispatchAnswerWithoutRun(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, body string }{
		{"id 0", `{"workflow_run_id": 0, "run_url": "", "html_url": ""}`},
		{"no id", `{}`},
		{"negative id", `{"workflow_run_id": -5, "run_url": "x", "html_url": "y"}`},
		{"id as a string", `{"workflow_run_id": "10000000001"}`},
		{"html", `<html><body>Signed in</body></html>`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := githubtest.New(t, githubtest.Options{Token: token, ReturnRunDetails: true, Script: outputsScript})
			srv.FailNext(dispatchMatch, 1, githubtest.Through(githubtest.Fault{Status: http.StatusOK, Body: tt.body}))
			rep := &recorder{srv: srv}
			res, err := newAction(t, srv, "").Apply(t.Context(), request("pg", 1, rep))
			ds := srv.Dispatches()
			if len(ds) != 1 {
				t.Fatalf("%d runs, want 1", len(ds))
			}
			want := strconv.FormatInt(ds[0].RunID, 10)
			if handles, _ := rep.recorded(); len(handles) == 0 || handles[0] != want {
				t.Errorf("recorded %v, want %s", handles, want)
			}
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if out := decodeOutputs(t, res); out["run_id"] != float64(ds[0].RunID) {
				t.Errorf("outputs %s", res.Outputs)
			}
			if c := srv.Cancelled(); len(c) != 0 {
				t.Errorf("cancelled %v", c)
			}
		})
	}
}
