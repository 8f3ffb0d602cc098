package reconcile_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/manifest"
)

// TestNewResourceStartsWhileWorkersAreBusy checks that a free worker claims
// a new resource at once, however many others run long actions, whether the
// controller gathers claims and completions or not.
func TestNewResourceStartsWhileWorkersAreBusy(t *testing.T) {
	t.Parallel()
	for _, noGather := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoGather=%v", noGather), func(t *testing.T) {
			t.Parallel()
			newResourceStartsWhileWorkersAreBusy(t, noGather)
		})
	}
}

func newResourceStartsWhileWorkersAreBusy(t *testing.T, noGather bool) {
	st, _ := openStore(t)
	release := make(chan struct{})
	defer close(release)
	long := &scripted{started: make(chan call, 8), apply: func(ctx context.Context, _ *action.Request) (*action.Result, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &action.Result{}, nil
	}}
	quick := &scripted{started: make(chan call, 1)}
	opts := options("agent-a")
	opts.Workers = 8
	opts.NoGather = noGather
	start(t, st, actionSet{"long": long, "quick": quick}, opts)

	for i := range 5 {
		apply(t, st, widget(fmt.Sprintf("long-%d", i), `{}`, "long"))
	}
	for range 5 {
		select {
		case <-long.started:
		case <-time.After(20 * time.Second):
			t.Fatal("the long actions did not all start")
		}
	}
	// Five of eight workers are busy for as long as the test runs: the new
	// resource must not wait for them.
	apply(t, st, widget("new", `{}`, "quick"))
	select {
	case c := <-quick.started:
		if c.name != "new" {
			t.Fatalf("started %s", c.name)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the new resource was not started while five of eight workers ran long actions")
	}
	waitPhase(t, st, "new", manifest.PhaseReady, 1)
}
