package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
	"github.com/no8s/no8s-agent/sync"
)

// BenchmarkGetResourceConcurrent measures GET /api/v1/resources/{id} with
// 200 clients at once against 10,000 stored resources, over real TCP, and
// reports latency percentiles.
func BenchmarkGetResourceConcurrent(b *testing.B) {
	const (
		resources = 10_000
		clients   = 200
	)
	ctx := b.Context()
	st, err := postgres.Open(ctx, pgtest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(st.Close)
	if err := st.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	rs := make([]*manifest.Resource, resources)
	for i := range rs {
		spec := fmt.Sprintf(`{"engine":"postgres","storage_gb":%d,"replicas":%d}`, 10+i, i%5)
		rs[i] = &manifest.Resource{Kind: "DatabaseCluster", Group: "infra.example.com", Version: "v1",
			Name: fmt.Sprintf("db-%05d", i), Labels: map[string]string{"team": fmt.Sprintf("t%d", i%10)},
			Spec: json.RawMessage(spec), SpecHash: fmt.Sprintf("sha256:%064d", i)}
	}
	applied, err := st.ApplyResources(ctx, rs, store.SourceRef{Name: "infra", Revision: "main@sha1:1"})
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]int64, len(applied))
	for i, a := range applied {
		ids[i] = a.ID
	}
	// It measures the API alone, without the read limit that keeps readers
	// from starving the reconciler.
	_, hs := serve(b, api.Options{Store: st, Syncer: sync.New(st, nil), MaxConcurrentReads: clients})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}}
	get := func(id int64) (time.Duration, error) {
		start := time.Now()
		resp, err := client.Get(fmt.Sprintf("%s/api/v1/resources/%d", hs.URL, id))
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return 0, err
		}
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("status %d", resp.StatusCode)
		}
		return time.Since(start), nil
	}
	// Warm the connections and the pool.
	for i := range clients {
		if _, err := get(ids[i]); err != nil {
			b.Fatal(err)
		}
	}

	latencies := make([]time.Duration, 0, b.N)
	var mu gosync.Mutex
	var wg gosync.WaitGroup
	work := make(chan struct{}, b.N)
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	b.ResetTimer()
	for range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
			var mine []time.Duration
			for range work {
				d, err := get(ids[rng.IntN(len(ids))])
				if err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, d)
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	b.StopTimer()
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[min(len(latencies)-1, int(p*float64(len(latencies))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.95), "p95-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(len(latencies))/b.Elapsed().Seconds(), "req/s")
}
