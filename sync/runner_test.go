package sync_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/source"
	"github.com/no8s/no8s-agent/source/dir"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/sync"
)

type attempt struct {
	res *sync.Result
	err error
}

// startRunner runs r until the test ends and returns its attempts.
func startRunner(t *testing.T, r *sync.Runner) <-chan attempt {
	t.Helper()
	attempts := make(chan attempt, 100)
	r.OnSync = func(_ string, res *sync.Result, err error, _ time.Duration) { attempts <- attempt{res, err} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("runner did not stop within 10s of cancellation")
		}
	})
	return attempts
}

func next(t *testing.T, attempts <-chan attempt, within time.Duration) attempt {
	t.Helper()
	select {
	case a := <-attempts:
		return a
	case <-time.After(within):
		t.Fatalf("no sync within %s", within)
	}
	return attempt{}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRunnerSyncsFolderOnChange shows that writing a file syncs the folder
// at once: the interval is an hour, so only the change event can do it.
func TestRunnerSyncsFolderOnChange(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	root := t.TempDir()
	write(t, filepath.Join(root, "types.yaml"), widgetType)
	src, err := dir.New(dir.Config{Name: "local", Path: root})
	if err != nil {
		t.Fatal(err)
	}
	tg := sync.Target{Name: "local", Kind: store.SourceDir, Path: root, Prune: sync.Prune{Enabled: true, AllowEmpty: true}}
	r := sync.NewRunner(sync.New(st, nil), []sync.Job{{Source: src, Target: tg, Interval: time.Hour}}, nil)
	attempts := startRunner(t, r)
	if a := next(t, attempts, 10*time.Second); a.err != nil || a.res.Skipped {
		t.Fatalf("first sync: %+v", a)
	}

	write(t, filepath.Join(root, "team", "widgets.yaml"), widget("a", "{size: 1}"))
	a := next(t, attempts, time.Second)
	if a.err != nil || a.res.Plan == nil || len(a.res.Plan.Creates) != 1 {
		t.Fatalf("sync after writing a file: %+v", a)
	}
	if r := get(t, st, "Widget", "a"); r.Generation != 1 || r.Source.Path != "team/widgets.yaml" {
		t.Errorf("resource %+v", r.Source)
	}

	// A broken edit is refused and leaves the resource; the fix applies.
	write(t, filepath.Join(root, "team", "widgets.yaml"), widget("a", "{size: 0}"))
	a = next(t, attempts, time.Second)
	var serr *sync.Error
	if !errors.As(a.err, &serr) || serr.Reason != sync.ReasonValidationFailed {
		t.Fatalf("broken edit: %+v", a)
	}
	write(t, filepath.Join(root, "team", "widgets.yaml"), widget("a", "{size: 2}"))
	for {
		a = next(t, attempts, 2*time.Second)
		if a.err == nil {
			break
		}
	}
	if r := get(t, st, "Widget", "a"); r.Generation != 2 {
		t.Errorf("after the fix: generation %d", r.Generation)
	}
}

// failingSource fails its first fetches, then serves a snapshot.
type failingSource struct {
	fails int
	snap  *source.Snapshot
}

func (f *failingSource) Name() string     { return "flaky" }
func (f *failingSource) Kind() string     { return source.KindGit }
func (f *failingSource) Location() string { return "https://git.example.com/flaky.git" }
func (f *failingSource) Path() string     { return "" }
func (f *failingSource) Fetch(context.Context) (*source.Snapshot, error) {
	if f.fails > 0 {
		f.fails--
		return nil, errors.New("dial tcp 192.0.2.1:443: connection refused")
	}
	return f.snap, nil
}

// TestRunnerRetriesUnreachableSource shows that a source that cannot be
// fetched gets a clear status, keeps what it applied, and is retried.
func TestRunnerRetriesUnreachableSource(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	s := sync.New(st, nil)
	tg := sync.Target{Name: "flaky", Kind: store.SourceGit, URL: "https://git.example.com/flaky.git", Prune: sync.Prune{Enabled: true}}
	first := snapshot(map[string]string{"types.yaml": widgetType, "w.yaml": widget("a", "{size: 1}")})
	mustSync(t, s, tg, first)

	src := &failingSource{fails: 2, snap: snapshot(map[string]string{"types.yaml": widgetType, "w.yaml": widget("a", "{size: 7}")})}
	r := sync.NewRunner(s, []sync.Job{{Source: src, Target: tg, Interval: time.Hour}}, nil)
	r.MinBackoff, r.MaxBackoff = 10*time.Millisecond, 20*time.Millisecond
	attempts := startRunner(t, r)

	if a := next(t, attempts, 5*time.Second); a.err == nil {
		t.Fatal("first fetch should fail")
	}
	got, err := st.GetSource(t.Context(), "flaky")
	if err != nil {
		t.Fatal(err)
	}
	if got.Phase != store.SourceFailed || got.LastAppliedRevision != first.Revision ||
		got.Message != "FetchFailed: dial tcp 192.0.2.1:443: connection refused" {
		t.Errorf("status after a failed fetch: phase %s applied %s message %q", got.Phase, got.LastAppliedRevision, got.Message)
	}
	if r := get(t, st, "Widget", "a"); r.Generation != 1 {
		t.Errorf("a failed fetch changed the resource: generation %d", r.Generation)
	}
	next(t, attempts, 5*time.Second) // second failure
	if a := next(t, attempts, 5*time.Second); a.err != nil || len(a.res.Plan.Updates) != 1 {
		t.Fatalf("after the remote came back: %+v", a)
	}
	got, _ = st.GetSource(t.Context(), "flaky")
	if got.Phase != store.SourceReady {
		t.Errorf("phase %s after recovery", got.Phase)
	}
}

// TestRunnerTrigger shows that a trigger fetches at once, and that a forced
// trigger syncs a revision already applied.
func TestRunnerTrigger(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	src := &failingSource{snap: snapshot(map[string]string{"types.yaml": widgetType})}
	tg := sync.Target{Name: "flaky", Kind: store.SourceGit, Prune: sync.Prune{Enabled: true}}
	r := sync.NewRunner(sync.New(st, nil), []sync.Job{{Source: src, Target: tg}}, nil)
	attempts := startRunner(t, r)
	next(t, attempts, 5*time.Second)
	if !r.Trigger("flaky", false) {
		t.Fatal("unknown source")
	}
	if a := next(t, attempts, 5*time.Second); a.err != nil || !a.res.Skipped {
		t.Errorf("plain trigger of the same revision: %+v", a)
	}
	r.Trigger("flaky", true)
	if a := next(t, attempts, 5*time.Second); a.err != nil || a.res.Skipped {
		t.Errorf("forced trigger: %+v", a)
	}
	if r.Trigger("nope", false) {
		t.Error("trigger of an unknown source succeeded")
	}
}
