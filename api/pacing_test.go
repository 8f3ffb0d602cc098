package api_test

import (
	"fmt"
	"net/http"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/api"
	"github.com/no8s/no8s-agent/priority"
)

// TestReadsGiveWayToWork shows that while the agent's own work is in
// flight, reads of the read model go at the configured pace, each in its
// turn and none refused, and that without work they are not held.
func TestReadsGiveWayToWork(t *testing.T) {
	t.Parallel()
	var work priority.Work
	const perSecond = 20 // a turn every 50 ms
	e := newEnv(t, func(o *api.Options) { o.Work, o.ReadsWhileWorking = &work, perSecond })
	byID := fmt.Sprintf("/api/v1/resources/%d", e.gitRes.ID)
	read := func(n int, path string) time.Duration {
		t.Helper()
		start := time.Now()
		var wg gosync.WaitGroup
		statuses := make(chan int, n)
		for range n {
			wg.Go(func() {
				status, _, _ := e.call(http.MethodGet, path, "", "")
				statuses <- status
			})
		}
		wg.Wait()
		close(statuses)
		for s := range statuses {
			if s != http.StatusOK {
				t.Fatalf("GET %s answered %d", path, s)
			}
		}
		return time.Since(start)
	}

	end := work.Begin()
	if took := read(20, byID); took < 19*time.Second/perSecond {
		t.Errorf("20 reads by id while working went in %v, faster than %d a second", took, perSecond)
	}
	// A page of 500 costs 51 reads: the read after it waits its turns.
	read(1, "/api/v1/resources?limit=500")
	if took := read(1, byID); took < 45*time.Second/perSecond {
		t.Errorf("a read after a page waited only %v", took)
	}
	end()
	// Once the work has lingered its while, nothing is held: paced, 100
	// reads would take 5 s.
	time.Sleep(priority.Linger)
	if took := read(100, byID); took >= 99*time.Second/perSecond {
		t.Errorf("100 reads with no work in flight took %v", took)
	}
}
