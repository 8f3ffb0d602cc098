package reconcile_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/reconcile"
	"github.com/no8s/no8s-agent/source/dir"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
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
// built-in noop action: 10,000 resources get a new generation in one sync,
// and the clock runs from its commit until every one is reconciled. Each reconcile is a claim
// share, an attempt and a completion with its history record.
func BenchmarkReconcileNoop(b *testing.B) {
	for _, workers := range []int{8, 16} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			const n = 10_000
			st, url := benchStore(b)
			instances, err := action.NewRegistry().Build(nil, nil, quiet())
			if err != nil {
				b.Fatal(err)
			}
			conn, err := pgx.Connect(context.Background(), url)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close(context.Background())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			opts := reconcile.Options{AgentID: "bench", Workers: workers, Logger: quiet()}
			go reconcile.New(st, instances, opts).Run(ctx)

			var elapsed time.Duration
			b.ResetTimer()
			for gen := 1; gen <= b.N; gen++ {
				b.StopTimer()
				rs := make([]*manifest.Resource, 0, n)
				for i := range n {
					rs = append(rs, widget(fmt.Sprintf("w%05d", i), fmt.Sprintf(`{"gen":%d}`, gen), ""))
				}
				if _, err := st.ApplyResources(ctx, rs, src); err != nil {
					b.Fatal(err)
				}
				// The clock starts at the commit, which is also when the
				// controller hears of the new generations.
				b.StartTimer()
				begin := time.Now()
				// Counting is a scan of every row: not so often that it slows the agent.
				tick := time.NewTicker(25 * time.Millisecond)
				deadline := time.Now().Add(5 * time.Minute)
				for {
					var done int
					if err := conn.QueryRow(ctx, `SELECT count(*) FROM resources WHERE observed_generation = $1`, gen).Scan(&done); err != nil {
						b.Fatal(err)
					}
					if done == n {
						break
					}
					if time.Now().After(deadline) {
						b.Fatalf("only %d of %d reconciled after 5 minutes", done, n)
					}
					<-tick.C
				}
				tick.Stop()
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
