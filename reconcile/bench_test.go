package reconcile_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/reconcile"
	"github.com/no8s/no8s-agent/source/dir"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
	"github.com/no8s/no8s-agent/store/sqlite"
	"github.com/no8s/no8s-agent/sync"
)

// benchStore is a migrated store on a fresh database, for benchmarks.
func benchStore(b *testing.B) (*postgres.Store, string) {
	b.Helper()
	url := pgtest.URL(b)
	st, err := postgres.Open(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(st.Close)
	if err := st.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	return st, url
}

// BenchmarkReconcileNoop measures reconciles per second through the
// built-in noop action with 8 workers, on PostgreSQL and on SQLite: 10,000
// resources get a new generation in one sync, and the clock runs from its
// commit until every one is reconciled. Each reconcile is a share of a
// claim, an attempt and a share of a batch of completions with its history
// record. Attempts are counted as the controller reports them, so that
// counting adds no load on the database.
func BenchmarkReconcileNoop(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) store.Store
	}{
		{"postgres", func(b *testing.B) store.Store { st, _ := benchStore(b); return st }},
		{"sqlite", func(b *testing.B) store.Store {
			st, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "no8s.db"), sqlite.Options{Exclusive: true})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(st.Close)
			if err := st.Migrate(b.Context()); err != nil {
				b.Fatal(err)
			}
			return st
		}},
	}
	for _, sto := range stores {
		b.Run(fmt.Sprintf("store=%s/workers=8", sto.name), func(b *testing.B) {
			const n = 10_000
			st := sto.open(b)
			instances, err := action.NewRegistry().Build(nil, nil, quiet())
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var (
				gen      atomic.Int64
				finished atomic.Int64
				allDone  = make(chan struct{}, 1)
			)
			opts := reconcile.Options{AgentID: "bench", Workers: 8, Logger: quiet(),
				OnAttempt: func(a reconcile.Attempt) {
					if a.Record.Success && a.Record.Generation == gen.Load() && finished.Add(1) == n {
						allDone <- struct{}{}
					}
				}}
			go reconcile.New(st, instances, opts).Run(ctx)

			var elapsed time.Duration
			for g := int64(1); b.Loop(); g++ {
				b.StopTimer()
				rs := make([]*manifest.Resource, 0, n)
				for i := range n {
					rs = append(rs, widget(fmt.Sprintf("w%05d", i), fmt.Sprintf(`{"gen":%d}`, g), ""))
				}
				gen.Store(g)
				finished.Store(0)
				if _, err := st.ApplyResources(ctx, rs, src); err != nil {
					b.Fatal(err)
				}
				// The clock starts at the commit, which is also when the
				// controller hears of the new generations.
				b.StartTimer()
				begin := time.Now()
				select {
				case <-allDone:
				case <-time.After(5 * time.Minute):
					b.Fatalf("only %d of %d reconciled after 5 minutes", finished.Load(), n)
				}
				elapsed += time.Since(begin)
			}
			b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "reconciles/s")
		})
	}
}

// BenchmarkCommitToReconcileStart measures the latency from a file written
// in a watched folder to the start of its resource's action: the folder
// watch, the sync, the notification, the claim and the dispatch.
func BenchmarkCommitToReconcileStart(b *testing.B) {
	st, _ := benchStore(b)
	root := b.TempDir()
	write := func(name, content string) {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	write("types/widget.yaml", `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Widget}
spec:
  group: example.com
  action: widgets
  versions:
    - name: v1
      schema:
        type: object
        properties: {size: {type: integer}}
`)
	write("widgets/w.yaml", widgetManifest(0))
	src, err := dir.New(dir.Config{Name: "local", Path: root, Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	starts := make(chan call, 1)
	act := &scripted{started: starts}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runner := sync.NewRunner(sync.New(st, quiet()), []sync.Job{{
		Source: src, Target: sync.Target{Name: "local", Kind: store.SourceDir, Path: root, Prune: sync.Prune{Enabled: true}},
		Interval: time.Hour,
	}}, quiet())
	go runner.Run(ctx)
	opts := options("bench")
	go reconcile.New(st, actionSet{"widgets": act}, opts).Run(ctx)
	<-starts // the first sync and reconcile

	latencies := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		begin := time.Now()
		write("widgets/w.yaml", widgetManifest(i))
		select {
		case <-starts:
		case <-time.After(time.Minute):
			b.Fatalf("change %d was not reconciled within a minute", i)
		}
		latencies = append(latencies, time.Since(begin))
	}
	b.StopTimer()
	slices.Sort(latencies)
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(latencies[len(latencies)*95/100].Microseconds())/1000, "p95-ms")
}

func widgetManifest(size int) string {
	return fmt.Sprintf("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: %d}\n", size)
}
