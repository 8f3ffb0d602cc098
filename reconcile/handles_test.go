package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/manifest"
)

// priorHandles records the PriorHandle of every Apply.
type priorHandles struct {
	mu   gosync.Mutex
	seen []*action.Handle
}

func (p *priorHandles) add(req *action.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, req.PriorHandle)
}

func (p *priorHandles) all() []*action.Handle {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*action.Handle(nil), p.seen...)
}

// TestHandleOutlivesTheAttempt records a handle in an attempt that never
// completes (its agent loses its lease, or stops) and checks that the next
// attempt, on another agent, is offered it; and that once that attempt
// completed, the one after is offered none.
func TestHandleOutlivesTheAttempt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// lost cuts agent a off from the store, so that its lease runs
		// out; otherwise agent a is stopped, and hands the resource back.
		lost bool
	}{
		{name: "lease lost", lost: true},
		{name: "agent stopped", lost: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st, _ := openStore(t)
			cutOff := &partitionable{Store: st}
			recorded := make(chan error, 1)
			aAction := &scripted{started: make(chan call, 1), apply: func(ctx context.Context, req *action.Request) (*action.Result, error) {
				err := action.RecordHandle(ctx, req, "run-4711")
				recorded <- err
				if err != nil {
					return nil, err
				}
				if tt.lost {
					cutOff.cut.Store(true)
				}
				<-ctx.Done()
				return nil, ctx.Err()
			}}
			optsA := options("agent-a")
			optsA.LeaseDuration = time.Second
			stopA := start(t, cutOff, actionSet{"widgets": aAction}, optsA)
			r := apply(t, st, widget("a", `{}`, "widgets"))
			<-aAction.started
			if err := <-recorded; err != nil {
				t.Fatalf("RecordHandle: %v", err)
			}
			if !tt.lost {
				stopA()
			}

			var prior priorHandles
			bAction := &scripted{apply: func(_ context.Context, req *action.Request) (*action.Result, error) {
				prior.add(req)
				return &action.Result{Outputs: json.RawMessage(`{"by":"b"}`)}, nil
			}}
			optsB := options("agent-b")
			optsB.PollInterval = 200 * time.Millisecond // B learns of the expiry by polling
			start(t, st, actionSet{"widgets": bAction}, optsB)
			waitPhase(t, st, "a", manifest.PhaseReady, 1)

			want := action.Handle{Value: "run-4711", Operation: action.OperationApply, Generation: 1}
			if got := prior.all(); len(got) != 1 || got[0] == nil || *got[0] != want {
				t.Fatalf("agent b was offered %s, want %+v", describe(got), want)
			}
			// B's attempt completed: its outcome clears the handle.
			if _, err := st.RequestReconcile(t.Context(), r.ID); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, "a second attempt by agent b", func() (bool, string) {
				got := prior.all()
				return len(got) == 2, describe(got)
			})
			if got := prior.all(); got[1] != nil {
				t.Errorf("the attempt after a completion was offered %+v, want none", *got[1])
			}
		})
	}
}

// TestHandleOfAnotherInstanceIsNotOffered: a handle means something only to
// the instance that recorded it.
func TestHandleOfAnotherInstanceIsNotOffered(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	recorded := make(chan error, 1)
	aAction := &scripted{started: make(chan call, 1), apply: func(ctx context.Context, req *action.Request) (*action.Result, error) {
		recorded <- action.RecordHandle(ctx, req, "run-1")
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	stopA := start(t, st, actionSet{"widgets": aAction}, options("agent-a"))
	apply(t, st, widget("a", `{}`, "widgets"))
	<-aAction.started
	if err := <-recorded; err != nil {
		t.Fatalf("RecordHandle: %v", err)
	}
	stopA()

	var prior priorHandles
	other := &scripted{apply: func(_ context.Context, req *action.Request) (*action.Result, error) {
		prior.add(req)
		return &action.Result{}, nil
	}}
	apply(t, st, widget("a", `{"v":2}`, "gadgets"))
	start(t, st, actionSet{"gadgets": other}, options("agent-b"))
	waitPhase(t, st, "a", manifest.PhaseReady, 2)
	if got := prior.all(); len(got) != 1 || got[0] != nil {
		t.Errorf("instance gadgets was offered %s, want no handle", describe(got))
	}
}

func describe(hs []*action.Handle) string {
	out := fmt.Sprintf("%d attempts:", len(hs))
	for _, h := range hs {
		if h == nil {
			out += " none"
			continue
		}
		out += fmt.Sprintf(" %+v", *h)
	}
	return out
}

// TestHandleKeptWhileWorkMayRun: a failure the action marks with
// action.ErrStillRunning keeps the handle for the retry; any other failure
// clears it.
func TestHandleKeptWhileWorkMayRun(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	var prior priorHandles
	act := &scripted{apply: func(ctx context.Context, req *action.Request) (*action.Result, error) {
		prior.add(req)
		switch n := len(prior.all()); n {
		case 1:
			if err := action.RecordHandle(ctx, req, "run-1"); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("run-1 timed out and is being cancelled: %w", action.ErrStillRunning)
		case 2:
			return nil, fmt.Errorf("run-1 ended cancelled")
		default:
			return &action.Result{}, nil
		}
	}}
	start(t, st, actionSet{"widgets": act}, options("agent-a"))
	apply(t, st, widget("a", `{}`, "widgets"))
	waitPhase(t, st, "a", manifest.PhaseReady, 1)
	got := prior.all()
	want := action.Handle{Value: "run-1", Operation: action.OperationApply, Generation: 1}
	if len(got) != 3 || got[0] != nil || got[1] == nil || *got[1] != want || got[2] != nil {
		t.Errorf("attempts were offered %s, want none, %+v, none", describe(got), want)
	}
}
