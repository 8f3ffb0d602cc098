package sqlite_test

import (
	"fmt"
	"path/filepath"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/sqlite"
)

// BenchmarkClaimComplete measures the queue's throughput: 1,000 resources
// get a new generation, and 8 goroutines claim them one at a time and
// complete each as Ready with its history record, as the agent's workers
// do, until none is left. Only the claiming and completing are timed.
func BenchmarkClaimComplete(b *testing.B) {
	const (
		n       = 1000
		workers = 8
	)
	ctx := b.Context()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "no8s.db"), sqlite.Options{Exclusive: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	var elapsed time.Duration
	for gen := 1; b.Loop(); gen++ {
		b.StopTimer()
		rs := make([]*manifest.Resource, n)
		for i := range rs {
			rs[i] = widget(fmt.Sprintf("w%04d", i), fmt.Sprintf(`{"gen":%d}`, gen))
		}
		if _, err := s.ApplyResources(ctx, rs, infra); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		begin := time.Now()
		var (
			wg     gosync.WaitGroup
			mu     gosync.Mutex
			done   int
			failed error
		)
		for w := range workers {
			owner := fmt.Sprintf("bench-%d", w)
			wg.Go(func() {
				for {
					cs, err := s.ClaimResources(ctx, store.ClaimParams{Owner: owner, Limit: 1, Duration: time.Minute})
					if err != nil || len(cs) == 0 {
						if err != nil {
							mu.Lock()
							failed = err
							mu.Unlock()
						}
						return
					}
					c := cs[0]
					at := time.Now()
					if _, err := s.CompleteReconcile(ctx, c, store.Completion{
						Status: store.StatusUpdate{Phase: manifest.PhaseReady, Message: "applied", ObservedGeneration: c.Generation,
							Conditions: []manifest.Condition{{Type: manifest.ConditionReady, Status: manifest.ConditionTrue,
								Reason: "Succeeded", LastTransitionTime: at, ObservedGeneration: c.Generation}},
							LastReconcileTime: &at},
						Record: &store.ReconcileRecord{ResourceID: c.ID, Kind: c.Kind, Name: c.Name, Generation: c.Generation,
							Trigger: store.TriggerUpdate, Phase: "completed", Success: true, AgentID: owner,
							StartedAt: at, FinishedAt: at},
					}); err != nil {
						mu.Lock()
						failed = err
						mu.Unlock()
						return
					}
					mu.Lock()
					done++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		elapsed += time.Since(begin)
		if failed != nil {
			b.Fatal(failed)
		}
		if done != n {
			b.Fatalf("reconciled %d of %d", done, n)
		}
	}
	b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "reconciles/s")
}
