package retention_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/reconcile"
	"github.com/no8s/no8s-agent/retention"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var src = store.SourceRef{Name: "infra", Path: "w.yaml", Revision: "main@sha1:0123456789abcdef0123456789abcdef01234567"}

// 10,000 records over the limit are trimmed in batches while a resource
// goes on being reconciled: its attempts, which write history too, keep
// completing during the trim.
func TestTrimDoesNotBlockReconciles(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := postgres.Open(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	instances, err := action.NewRegistry().Build(nil, nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	attempts := make(chan time.Time, 1000)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		reconcile.New(st, instances, reconcile.Options{AgentID: "trim-test", Workers: 2, Logger: quiet,
			OnAttempt: func(reconcile.Attempt) { attempts <- time.Now() }}).Run(runCtx)
	}()
	t.Cleanup(func() { stop(); <-done })

	spec := `{}`
	sum := sha256.Sum256([]byte(spec))
	busy, _, err := st.ApplyResource(ctx, &manifest.Resource{Kind: "Widget", Group: "example.com", Version: "v1", Name: "busy",
		Spec: json.RawMessage(spec), SpecHash: "sha256:" + hex.EncodeToString(sum[:]), Action: "noop"}, src)
	if err != nil {
		t.Fatal(err)
	}
	wait := func(what string) time.Time {
		t.Helper()
		select {
		case at := <-attempts:
			return at
		case <-time.After(10 * time.Second):
			t.Fatalf("no attempt of %s within 10s", what)
			return time.Time{}
		}
	}
	wait("the first reconcile")

	// A resource long gone left 10,100 attempts.
	const gone = 424242
	now := time.Now()
	if err := st.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		for range 10_100 {
			if _, err := tx.AddReconcileRecord(ctx, &store.ReconcileRecord{ResourceID: gone, Kind: "Widget", Name: "gone",
				Generation: 1, Trigger: store.TriggerDrift, Phase: "completed", Success: true, StartedAt: now, FinishedAt: now}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	tr := retention.Trimmer{Store: st, Limits: store.HistoryLimits{MaxPerResource: 100}, Batch: 50}
	type result struct {
		n   int
		err error
		at  time.Time
	}
	trimmed := make(chan result, 1)
	go func() {
		n, err := tr.Trim(ctx)
		trimmed <- result{n, err, time.Now()}
	}()
	var during int
	var res result
loop:
	for {
		if _, err := st.RequestReconcile(ctx, busy.ID); err != nil {
			t.Fatal(err)
		}
		at := wait("a reconcile during the trim")
		select {
		case res = <-trimmed:
			if at.Before(res.at) {
				during++
			}
			break loop
		default:
			during++
		}
	}
	// The busy resource's own attempts past 100 go as well.
	if res.err != nil || res.n < 10_000 {
		t.Fatalf("trimmed %d, %v; want at least 10000", res.n, res.err)
	}
	if during == 0 {
		t.Error("no reconcile completed while the trim ran")
	}
	left, err := st.ListReconcileRecords(ctx, gone, 0)
	if err != nil || len(left) != 100 {
		t.Errorf("%d records left, %v; want 100", len(left), err)
	}
	if mine, err := st.ListReconcileRecords(ctx, busy.ID, 0); err != nil || len(mine) > 100+during {
		t.Errorf("the busy resource keeps %d records, %v", len(mine), err)
	}
	t.Logf("%d reconciles completed during the trim of %d records", during, res.n)
}
