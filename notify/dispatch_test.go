package notify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/notify"
	"github.com/no8s/no8s-agent/notify/notifytest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/sqlite"
)

// failures records a ResourceFailed notice for each of n resources.
func failures(t *testing.T, st store.Store, n int) {
	t.Helper()
	for i := range n {
		r := &manifest.Resource{Kind: "Widget", Group: "example.com", Version: "v1", Name: fmt.Sprintf("w-%d", i),
			Spec: json.RawMessage(`{}`), SpecHash: "sha256:x"}
		got, _, err := st.ApplyResource(t.Context(), r, store.SourceRef{Name: "infra", Path: "w.yaml"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.SetResourceStatus(t.Context(), got.ID, store.StatusUpdate{Phase: manifest.PhaseFailed, Message: "boom"}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDispatcherRateLimit delivers fifteen failures to a provider allowed
// a burst of ten and then next to nothing: ten are delivered at once, the
// other five wait for their turn as failed deliveries to retry, and the
// receiver never gets more than the limit.
func TestDispatcherRateLimit(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	failures(t, st, 15)
	hook := notifytest.NewReceiver(t, "rate-secret-1")
	d := notify.New(st, notify.Options{Owner: "a1", PerSecond: 0.001, Poll: 50 * time.Millisecond,
		Providers: map[string]notify.Provider{"hook": &notify.Webhook{URL: hook.URL, Secret: "rate-secret-1"}},
		Alerts:    []notify.Alert{{Providers: []string{"hook"}}}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	limited := func() (int, int) {
		ns, err := st.ListNotices(t.Context(), "", 100)
		if err != nil {
			t.Fatal(err)
		}
		delivered, waiting := 0, 0
		for _, n := range ns {
			switch r := n.Results["hook"]; {
			case r.Result == store.DeliveryDelivered:
				delivered++
			case r.Result == store.DeliveryFailed && r.Error == "rate limited":
				waiting++
			}
		}
		return delivered, waiting
	}
	// The outcome shows in the store only: look until it is there.
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		delivered, waiting := limited()
		if delivered == 10 && waiting == 5 {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("after 30s: %d delivered, %d waiting for the rate limit; want 10 and 5", delivered, waiting)
		case <-tick.C:
		}
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Run = %v", err)
	}
	if got := len(hook.Accepted()); got != 10 {
		t.Errorf("the receiver got %d deliveries, want the burst of 10", got)
	}
}

// blocking is a provider that blocks until its call is cancelled.
type blocking struct{ called chan struct{} }

func (b *blocking) Deliver(ctx context.Context, _ *store.Notice, _ store.Delivery) (bool, time.Duration, error) {
	close(b.called)
	<-ctx.Done()
	return false, 0, ctx.Err()
}

// TestDispatcherStopsMidNotice stops the dispatcher while a notice's second
// provider is being called: the first provider's delivery is recorded, so
// it is not sent again, and the second stays pending.
func TestDispatcherStopsMidNotice(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	failures(t, st, 1)
	hook := notifytest.NewReceiver(t, "stop-secret-1")
	slow := &blocking{called: make(chan struct{})}
	d := notify.New(st, notify.Options{Owner: "a1", Poll: 50 * time.Millisecond,
		Providers: map[string]notify.Provider{"a-hook": &notify.Webhook{URL: hook.URL, Secret: "stop-secret-1"}, "b-slow": slow},
		Alerts:    []notify.Alert{{Providers: []string{"a-hook", "b-slow"}}}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case <-slow.called:
	case <-time.After(30 * time.Second):
		t.Fatal("the second provider was never called")
	}
	cancel()
	<-done
	ns, err := st.ListNotices(t.Context(), "", 10)
	if err != nil || len(ns) != 1 {
		t.Fatalf("notices: %+v %v", ns, err)
	}
	n := ns[0]
	if n.Results["a-hook"].Result != store.DeliveryDelivered || len(n.Pending) != 1 || n.Pending[0] != "b-slow" || n.DoneAt != nil {
		t.Errorf("after the stop: results %+v, pending %v", n.Results, n.Pending)
	}
	if got := len(hook.Accepted()); got != 1 {
		t.Errorf("the hook got %d deliveries, want 1", got)
	}
}

// openStore opens a migrated embedded store in the test's folder, closed
// when the test ends.
func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "no8s.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st
}
