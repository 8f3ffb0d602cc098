package reconcile_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/reconcile"
	"github.com/no8s/no8s-agent/store"
)

func TestApplyAndUpdate(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	act := &scripted{apply: func(_ context.Context, req *action.Request) (*action.Result, error) {
		return &action.Result{Outputs: json.RawMessage(`{"spec":` + string(req.Resource.Spec) + `}`), Created: 1,
			Conditions: []manifest.Condition{{Type: "example.com/Billing", Status: manifest.ConditionTrue, Reason: "Paid"}}}, nil
	}}
	start(t, st, actionSet{"widgets": act}, options("agent-a"))

	created := apply(t, st, widget("a", `{"size":1}`, "widgets"))
	r := waitPhase(t, st, "a", manifest.PhaseReady, 1)
	if string(r.Outputs) != `{"spec":{"size":1}}` {
		t.Errorf("outputs = %s", r.Outputs)
	}
	ready := condition(t, r, manifest.ConditionReady)
	if ready.Status != manifest.ConditionTrue || ready.Reason != reconcile.ReasonSucceeded || ready.ObservedGeneration != 1 {
		t.Errorf("Ready = %+v", ready)
	}
	if c := condition(t, r, manifest.ConditionReconciling); c.Status != manifest.ConditionFalse {
		t.Errorf("Reconciling = %+v", c)
	}
	if c := condition(t, r, manifest.ConditionDegraded); c.Status != manifest.ConditionFalse {
		t.Errorf("Degraded = %+v", c)
	}
	if c := condition(t, r, "example.com/Billing"); c.Reason != "Paid" {
		t.Errorf("plugin condition = %+v", c)
	}
	if r.RetryCount != 0 || r.NextReconcileAt != nil || r.LastReconcileTime == nil {
		t.Errorf("retry %d next %v last %v", r.RetryCount, r.NextReconcileAt, r.LastReconcileTime)
	}

	// The spec changes: generation 2 is applied with the new spec. Ready
	// was Unknown while generation 2 waited, and Reconciling True while it
	// was applied: both transitions are newer than generation 1's.
	reconciling := condition(t, r, manifest.ConditionReconciling)
	apply(t, st, widget("a", `{"size":2}`, "widgets"))
	r2 := waitPhase(t, st, "a", manifest.PhaseReady, 2)
	if string(r2.Outputs) != `{"spec":{"size":2}}` {
		t.Errorf("outputs after update = %s", r2.Outputs)
	}
	if got := condition(t, r2, manifest.ConditionReady); got.Status != manifest.ConditionTrue || !got.LastTransitionTime.After(ready.LastTransitionTime) {
		t.Errorf("Ready after generation 2 = %+v; want True since after %v", got, ready.LastTransitionTime)
	}
	if got := condition(t, r2, manifest.ConditionReconciling); got.Status != manifest.ConditionFalse ||
		!got.LastTransitionTime.After(reconciling.LastTransitionTime) {
		t.Errorf("Reconciling after generation 2 = %+v; want False since after %v, not back to generation 1's time", got, reconciling.LastTransitionTime)
	}
	calls := act.callsOf("a")
	if len(calls) != 2 || calls[0].spec != `{"size":1}` || calls[1].spec != `{"size":2}` ||
		calls[0].trigger != "create" || calls[1].trigger != "update" {
		t.Fatalf("calls = %+v", calls)
	}
	hist := history(t, st, created.ID)
	if len(hist) != 2 {
		t.Fatalf("history has %d records, want 2", len(hist))
	}
	for i, h := range hist {
		if !h.Success || h.Generation != int64(i+1) || h.Phase != "completed" || h.AgentID != "agent-a" ||
			h.SourceRevision != src.Revision || h.Created != 1 || h.Duration < 0 || h.FinishedAt.Before(h.StartedAt) {
			t.Errorf("history[%d] = %+v", i, h)
		}
	}
	if hist[0].Trigger != store.TriggerCreate || hist[1].Trigger != store.TriggerUpdate {
		t.Errorf("triggers = %s, %s", hist[0].Trigger, hist[1].Trigger)
	}
}

func TestFailureRetriesWithBackoff(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	fails := 2
	act := &scripted{apply: func(context.Context, *action.Request) (*action.Result, error) {
		if fails > 0 {
			fails--
			return nil, errors.New("quota exceeded")
		}
		return &action.Result{Message: "done"}, nil
	}}
	opts := options("agent-a")
	opts.Workers = 1 // one worker, so fails needs no lock
	start(t, st, actionSet{"widgets": act}, opts)
	created := apply(t, st, widget("a", `{}`, "widgets"))

	r := waitPhase(t, st, "a", manifest.PhaseReady, 1)
	if r.RetryCount != 0 || r.StatusMessage != "done" {
		t.Errorf("after recovery: retry %d message %q", r.RetryCount, r.StatusMessage)
	}
	hist := history(t, st, created.ID)
	if len(hist) != 3 {
		t.Fatalf("history has %d records, want 3 attempts", len(hist))
	}
	for i, want := range []store.Trigger{store.TriggerCreate, store.TriggerRetry, store.TriggerRetry} {
		if hist[i].Trigger != want {
			t.Errorf("attempt %d trigger %s, want %s", i+1, hist[i].Trigger, want)
		}
	}
	for i, h := range hist[:2] {
		if h.Success || h.Error != "quota exceeded" || h.Phase != "applying" {
			t.Errorf("failed attempt %d = %+v", i+1, h)
		}
	}
	// Each retry waited at least its backoff step less the jitter:
	// 200ms after the first failure, 400ms after the second.
	for i, min := range []time.Duration{180 * time.Millisecond, 360 * time.Millisecond} {
		if gap := hist[i+1].StartedAt.Sub(hist[i].FinishedAt); gap < min {
			t.Errorf("retry %d started %v after the failure, want at least %v", i+1, gap, min)
		}
	}
}

func TestFailedStateIsRecorded(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	act := &scripted{apply: func(context.Context, *action.Request) (*action.Result, error) {
		return nil, errors.New("bucket name taken")
	}}
	opts := options("agent-a")
	opts.BackoffInitial, opts.BackoffMax = time.Hour, time.Hour
	start(t, st, actionSet{"widgets": act}, opts)
	apply(t, st, widget("a", `{}`, "widgets"))
	r := waitPhase(t, st, "a", manifest.PhaseFailed, 0)
	if r.RetryCount != 1 || r.StatusMessage != "bucket name taken" || r.NextReconcileAt == nil {
		t.Fatalf("failed resource: retry %d message %q next %v", r.RetryCount, r.StatusMessage, r.NextReconcileAt)
	}
	if wait := time.Until(*r.NextReconcileAt); wait < 50*time.Minute || wait > 67*time.Minute {
		t.Errorf("next attempt in %v, want an hour ±10%%", wait)
	}
	for typ, want := range map[string]manifest.ConditionStatus{
		manifest.ConditionReady: manifest.ConditionFalse, manifest.ConditionDegraded: manifest.ConditionTrue,
		manifest.ConditionReconciling: manifest.ConditionFalse,
	} {
		c := condition(t, r, typ)
		if c.Status != want {
			t.Errorf("%s = %+v, want status %s", typ, c, want)
		}
		if typ != manifest.ConditionReconciling && c.Reason != reconcile.ReasonActionFailed {
			t.Errorf("%s reason %q, want %s", typ, c.Reason, reconcile.ReasonActionFailed)
		}
	}
	// A new generation does not wait for the retry.
	apply(t, st, widget("a", `{"fixed":true}`, "widgets"))
	waitFor(t, 20*time.Second, "generation 2 to be attempted", func() (bool, string) {
		return len(act.callsOf("a")) == 2, ""
	})
}

func TestUnknownActionFails(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	start(t, st, actionSet{"noop": &scripted{}, "widgets": &scripted{}}, options("agent-a"))
	apply(t, st, widget("a", `{}`, "wigdets"))
	r := waitPhase(t, st, "a", manifest.PhaseFailed, 0)
	c := condition(t, r, manifest.ConditionReady)
	if c.Reason != reconcile.ReasonActionNotFound || !strings.Contains(c.Message, `"wigdets"`) ||
		!strings.Contains(c.Message, "noop, widgets") {
		t.Fatalf("Ready = %+v", c)
	}
}

// configTaker is a scripted action that reads plugin configuration.
type configTaker struct {
	*scripted
	mu   gosync.Mutex
	seen []string
}

func (c *configTaker) TakesPluginConfig() string { return "in the request" }

func (c *configTaker) Apply(ctx context.Context, req *action.Request) (*action.Result, error) {
	c.mu.Lock()
	c.seen = append(c.seen, string(req.Resource.PluginConfig))
	c.mu.Unlock()
	return c.scripted.Apply(ctx, req)
}

// TestPluginConfig: an action that reads plugin configuration gets the
// resource's; one that would ignore it is never called, and the resource
// fails saying why.
func TestPluginConfig(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	ignorer, taker := &scripted{}, &configTaker{scripted: &scripted{}}
	start(t, st, actionSet{"noop": &scripted{}, "ignorer": ignorer, "taker": taker}, options("agent-a"))
	for _, name := range []string{"ignorer", "taker"} {
		r := widget(name, `{}`, name)
		r.PluginConfig = json.RawMessage(`{"ref":"main"}`)
		apply(t, st, r)
	}
	failed := waitPhase(t, st, "ignorer", manifest.PhaseFailed, 0)
	if c := condition(t, failed, manifest.ConditionReady); !strings.Contains(c.Message, "action ignorer (plugin test) takes no plugin configuration") {
		t.Errorf("Ready = %+v", c)
	}
	waitPhase(t, st, "taker", manifest.PhaseReady, 1)
	taker.mu.Lock()
	defer taker.mu.Unlock()
	if len(taker.seen) != 1 || taker.seen[0] != `{"ref":"main"}` {
		t.Errorf("the taker saw plugin configuration %q", taker.seen)
	}
	if n := len(ignorer.callsOf("ignorer")); n != 0 {
		t.Errorf("the action that ignores plugin configuration was called %d times", n)
	}
}

func TestNoActionMeansNoop(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	noop := &scripted{}
	start(t, st, actionSet{"noop": noop}, options("agent-a"))
	apply(t, st, widget("a", `{}`, ""))
	waitPhase(t, st, "a", manifest.PhaseReady, 1)
	if n := len(noop.callsOf("a")); n != 1 {
		t.Fatalf("noop called %d times", n)
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	act := &scripted{timeout: 100 * time.Millisecond, apply: func(ctx context.Context, _ *action.Request) (*action.Result, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	opts := options("agent-a")
	opts.BackoffInitial, opts.BackoffMax = time.Hour, time.Hour
	start(t, st, actionSet{"widgets": act}, opts)
	apply(t, st, widget("a", `{}`, "widgets"))
	r := waitPhase(t, st, "a", manifest.PhaseFailed, 0)
	c := condition(t, r, manifest.ConditionReady)
	if c.Reason != reconcile.ReasonTimeout || !strings.Contains(c.Message, "timed out after 100ms") {
		t.Fatalf("Ready = %+v", c)
	}
}

func TestPanicIsAFailure(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	act := &scripted{apply: func(context.Context, *action.Request) (*action.Result, error) { panic("nil map") }}
	opts := options("agent-a")
	opts.BackoffInitial, opts.BackoffMax = time.Hour, time.Hour
	start(t, st, actionSet{"widgets": act}, opts)
	apply(t, st, widget("a", `{}`, "widgets"))
	r := waitPhase(t, st, "a", manifest.PhaseFailed, 0)
	if !strings.Contains(r.StatusMessage, "panicked: nil map") {
		t.Fatalf("message = %q", r.StatusMessage)
	}
}

func TestSpecChangeWhileApplying(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	release := make(chan struct{})
	act := &scripted{started: make(chan call, 4), apply: func(ctx context.Context, req *action.Request) (*action.Result, error) {
		if req.Resource.Generation == 1 {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return &action.Result{Outputs: json.RawMessage(req.Resource.Spec)}, nil
	}}
	start(t, st, actionSet{"widgets": act}, options("agent-a"))
	created := apply(t, st, widget("a", `{"v":1}`, "widgets"))
	<-act.started
	apply(t, st, widget("a", `{"v":2}`, "widgets"))
	close(release)
	waitPhase(t, st, "a", manifest.PhaseReady, 2)
	hist := history(t, st, created.ID)
	if len(hist) != 2 || hist[0].Generation != 1 || hist[1].Generation != 2 || string(hist[1].Outputs) != `{"v":2}` {
		t.Fatalf("history = %+v", hist)
	}
	if calls := act.callsOf("a"); len(calls) != 2 || calls[1].spec != `{"v":2}` {
		t.Fatalf("calls = %+v", calls)
	}
}

func TestDeletion(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	act := &scripted{}
	start(t, st, actionSet{"widgets": act}, options("agent-a"))
	kept := widget("kept", `{}`, "widgets")
	kept.Annotations = map[string]string{manifest.AnnotationPrune: "disabled"}
	a, k := apply(t, st, widget("a", `{}`, "widgets")), apply(t, st, kept)
	waitPhase(t, st, "a", manifest.PhaseReady, 1)
	waitPhase(t, st, "kept", manifest.PhaseReady, 1)
	if err := st.RequestDeletions(t.Context(), []int64{a.ID, k.ID}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*store.Resource{a, k} {
		waitFor(t, 20*time.Second, r.Name+" to be removed", func() (bool, string) {
			_, err := st.GetResource(t.Context(), r.ID)
			return errors.Is(err, store.ErrNotFound), ""
		})
		hist := history(t, st, r.ID)
		if last := hist[len(hist)-1]; last.Trigger != store.TriggerDelete || !last.Success {
			t.Errorf("%s: last history record %+v", r.Name, last)
		}
	}
	if calls := act.callsOf("a"); len(calls) != 2 || calls[1].op != action.OperationDestroy || calls[1].trigger != "delete" {
		t.Errorf("calls for a = %+v, want apply then destroy", calls)
	}
	if calls := act.callsOf("kept"); len(calls) != 1 {
		t.Errorf("destroy ran for a resource annotated %s: disabled: %+v", manifest.AnnotationPrune, calls)
	}
}

func TestDestroyFailureRetries(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	fail := true
	act := &scripted{destroy: func(context.Context, *action.Request) (*action.Result, error) {
		if fail {
			fail = false
			return nil, errors.New("bucket not empty")
		}
		return &action.Result{}, nil
	}}
	opts := options("agent-a")
	opts.Workers = 1
	start(t, st, actionSet{"widgets": act}, opts)
	r := apply(t, st, widget("a", `{}`, "widgets"))
	waitPhase(t, st, "a", manifest.PhaseReady, 1)
	if _, err := st.RequestDeletion(t.Context(), r.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the destroy to be retried and the row removed", func() (bool, string) {
		got, err := st.GetResource(t.Context(), r.ID)
		if err != nil {
			return errors.Is(err, store.ErrNotFound), err.Error()
		}
		return false, fmt.Sprintf("phase %s retries %d next %v message %q", got.Phase, got.RetryCount, got.NextReconcileAt, got.StatusMessage)
	})
	hist := history(t, st, r.ID)
	if len(hist) != 3 || hist[1].Success || hist[1].Error != "destroy: bucket not empty" || hist[1].Phase != "destroying" ||
		!hist[2].Success || hist[2].Trigger != store.TriggerDelete {
		t.Fatalf("history = %+v", hist)
	}
}

func TestDependsOn(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	releaseDB := make(chan struct{})
	act := &scripted{apply: func(ctx context.Context, req *action.Request) (*action.Result, error) {
		if req.Resource.Name == "db" {
			select {
			case <-releaseDB:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return &action.Result{}, nil
	}}
	// The recheck is an hour: only the wake-up from db can let app go on.
	start(t, st, actionSet{"widgets": act}, options("agent-a"))
	apply(t, st, widget("app", `{}`, "widgets", "db", "cache"))
	apply(t, st, widget("db", `{}`, "widgets"))
	apply(t, st, widget("cache", `{}`, "widgets"))
	waitPhase(t, st, "cache", manifest.PhaseReady, 1)
	// Once cache is ready, app is woken and waits for db alone.
	var app *store.Resource
	waitFor(t, 20*time.Second, "app to wait for db alone", func() (bool, string) {
		app = waitPhase(t, st, "app", manifest.PhasePending, 0)
		c := condition(t, app, manifest.ConditionReady)
		return c.Reason == reconcile.ReasonDependencyNotReady && c.Message == "waiting for Widget/db is not ready (reconciling)", c.Message
	})
	if len(act.callsOf("app")) != 0 {
		t.Fatal("app was applied before its dependency was ready")
	}
	close(releaseDB)
	waitPhase(t, st, "app", manifest.PhaseReady, 1)
	if h := history(t, st, app.ID); len(h) != 1 {
		t.Errorf("app has %d history records, want 1: waiting is not an attempt", len(h))
	}
}

func TestDependencyCycle(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	act := &scripted{}
	start(t, st, actionSet{"widgets": act}, options("agent-a"))
	// One sync declares the three at once.
	cycle := []*manifest.Resource{widget("a", `{}`, "widgets", "b"), widget("b", `{}`, "widgets", "c"), widget("c", `{}`, "widgets", "a")}
	if _, err := st.ApplyResources(t.Context(), cycle, src); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c"} {
		r := waitPhase(t, st, name, manifest.PhaseFailed, 0)
		c := condition(t, r, manifest.ConditionReady)
		if c.Reason != reconcile.ReasonDependencyCycle || !strings.Contains(c.Message, "Widget/"+name+" -> ") {
			t.Errorf("%s: Ready = %+v", name, c)
		}
	}
	a, _ := st.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Widget", Name: "a"})
	if msg := condition(t, a, manifest.ConditionReady).Message; msg != "dependency cycle: Widget/a -> Widget/b -> Widget/c -> Widget/a" {
		t.Errorf("cycle message = %q", msg)
	}
	if len(act.calls) != 0 {
		t.Errorf("actions ran inside a cycle: %+v", act.calls)
	}
}

func TestDependentsAreDestroyedFirst(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	releaseApp := make(chan struct{})
	act := &scripted{started: make(chan call, 16), destroy: func(ctx context.Context, req *action.Request) (*action.Result, error) {
		if req.Resource.Name == "app" {
			select {
			case <-releaseApp:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return &action.Result{}, nil
	}}
	start(t, st, actionSet{"widgets": act}, options("agent-a"))
	db := apply(t, st, widget("db", `{}`, "widgets"))
	app := apply(t, st, widget("app", `{}`, "widgets", "db"))
	waitPhase(t, st, "app", manifest.PhaseReady, 1)
	if err := st.RequestDeletions(t.Context(), []int64{db.ID, app.ID}); err != nil {
		t.Fatal(err)
	}
	// While app's destroy runs, db waits for it, and says so.
	waitFor(t, 20*time.Second, "db to wait for its dependent", func() (bool, string) {
		r, err := st.GetResource(t.Context(), db.ID)
		if err != nil {
			return false, err.Error()
		}
		c := manifest.FindCondition(r.Conditions, manifest.ConditionReconciling)
		return c != nil && c.Reason == reconcile.ReasonDependentsExist && strings.Contains(c.Message, "Widget/app"),
			fmt.Sprintf("%+v", r.Conditions)
	})
	for _, c := range act.callsOf("db") {
		if c.op == action.OperationDestroy {
			t.Fatal("db was destroyed while app, which depends on it, still existed")
		}
	}
	close(releaseApp)
	// Once app is gone, db is woken and destroyed (the recheck is an hour).
	waitFor(t, 20*time.Second, "db to be destroyed", func() (bool, string) {
		_, err := st.GetResource(t.Context(), db.ID)
		return errors.Is(err, store.ErrNotFound), fmt.Sprint(err)
	})
}

func TestDriftChecks(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	if _, err := st.PutResourceType(t.Context(), &store.ResourceType{Name: "Widget", Version: "v1", Group: "example.com",
		DriftInterval: 100 * time.Millisecond, Schema: json.RawMessage(`{"type":"object"}`), Source: src}); err != nil {
		t.Fatal(err)
	}
	plans := make(chan bool, 8) // the changes the next plans report
	plans <- false
	plans <- true
	observer := &planning{scripted: &scripted{}, plan: func(context.Context, *action.Request) (*action.Plan, error) {
		select {
		case changes := <-plans:
			return &action.Plan{Changes: changes, Summary: "1 to change", Output: "~ size"}, nil
		default:
			return &action.Plan{Summary: "up to date"}, nil
		}
	}}
	blind := &scripted{}
	start(t, st, actionSet{"observer": observer, "blind": blind}, options("agent-drift"))
	o := apply(t, st, widget("o", `{}`, "observer"))
	b := apply(t, st, widget("b", `{}`, "blind"))

	// The observer is planned, finds no drift, is planned again, finds
	// drift and is applied again.
	waitFor(t, 20*time.Second, "a drift re-apply", func() (bool, string) {
		return len(history(t, st, o.ID)) >= 3, ""
	})
	hist := history(t, st, o.ID)
	if hist[0].Trigger != store.TriggerCreate || hist[1].Trigger != store.TriggerDrift || hist[2].Trigger != store.TriggerDrift {
		t.Fatalf("triggers = %s %s %s", hist[0].Trigger, hist[1].Trigger, hist[2].Trigger)
	}
	if hist[1].Phase != "completed" || hist[1].PlanOutput != "~ size" || !hist[1].Success {
		t.Errorf("no-drift check = %+v", hist[1])
	}
	var ops []action.Operation
	for _, c := range observer.callsOf("o")[:4] {
		ops = append(ops, c.op)
	}
	if want := []action.Operation{"apply", "plan", "plan", "apply"}; !equalOps(ops, want) {
		t.Errorf("observer operations %v, want %v", ops, want)
	}
	// An action that cannot observe is not scheduled again.
	br := waitPhase(t, st, "b", manifest.PhaseReady, 1)
	if br.NextReconcileAt != nil {
		t.Errorf("a resource whose action has no Plan is scheduled at %v", br.NextReconcileAt)
	}
	if n := len(history(t, st, b.ID)); n != 1 {
		t.Errorf("blind resource has %d attempts, want 1", n)
	}
}

func equalOps(a, b []action.Operation) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestManualReconcile(t *testing.T) {
	t.Parallel()
	st, _ := openStore(t)
	act := &scripted{}
	start(t, st, actionSet{"widgets": act}, options("agent-a"))
	r := apply(t, st, widget("a", `{}`, "widgets"))
	waitPhase(t, st, "a", manifest.PhaseReady, 1)
	if _, err := st.RequestReconcile(t.Context(), r.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the manual reconcile", func() (bool, string) {
		h := history(t, st, r.ID)
		return len(h) == 2 && h[1].Trigger == store.TriggerManual, ""
	})
	got := waitPhase(t, st, "a", manifest.PhaseReady, 1)
	if got.ReconcileRequestedAt != nil {
		t.Errorf("request not cleared: %v", got.ReconcileRequestedAt)
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		n        int
		initial  time.Duration
		max      time.Duration
		lo, want time.Duration
	}{
		{1, time.Minute, 1024 * time.Minute, 54 * time.Second, time.Minute},
		{2, time.Minute, 1024 * time.Minute, 108 * time.Second, 2 * time.Minute},
		{11, time.Minute, 1024 * time.Minute, 1024 * time.Minute * 9 / 10, 1024 * time.Minute},
		{40, time.Minute, 1024 * time.Minute, 1024 * time.Minute * 9 / 10, 1024 * time.Minute},
		{0, time.Second, time.Minute, 900 * time.Millisecond, time.Second},
	}
	for _, tt := range tests {
		seen := map[time.Duration]bool{}
		for range 50 {
			d := reconcile.Backoff(tt.n, tt.initial, tt.max)
			hi := min(tt.want*11/10, tt.max)
			if d < tt.lo || d > hi {
				t.Errorf("Backoff(%d, %v, %v) = %v, want within [%v, %v]", tt.n, tt.initial, tt.max, d, tt.lo, hi)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Errorf("Backoff(%d) gave %d distinct values in 50 draws: no jitter", tt.n, len(seen))
		}
	}
}
