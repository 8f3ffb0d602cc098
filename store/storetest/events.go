package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// nextStatus returns the next TopicStatus event, skipping other topics.
func nextStatus(t *testing.T, notes <-chan store.Notification) store.StatusEvent {
	t.Helper()
	ev, err := store.ParseStatusEvent(nextOn(t, notes, store.TopicStatus))
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// nextOn returns the payload of the next notification on topic, skipping
// other topics; a Resync fails the test, as what it stands for is lost.
func nextOn(t *testing.T, notes <-chan store.Notification, topic string) string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case n := <-notes:
			if n.Resync {
				t.Fatal("resync while listening")
			}
			if n.Topic == topic {
				return n.Payload
			}
		case <-deadline:
			t.Fatalf("nothing on %s within 10s", topic)
		}
	}
}

// testStatusEvents checks that every write that changes what a resource
// shows sends a StatusEvent, whichever method makes it, and that a lease
// renewal that changes nothing visible sends none.
func testStatusEvents(t *testing.T, s store.Store) {
	ctx := t.Context()
	notes, err := s.Listen(ctx, store.TopicStatus)
	if err != nil {
		t.Fatal(err)
	}
	src := gitSource("infra", "widgets/a.yaml")
	r, err := s.CreateResource(ctx, resource("a", `{"size":1}`), src)
	if err != nil {
		t.Fatal(err)
	}
	want := store.StatusEvent{ID: r.ID, Kind: "Widget", Name: "a", Source: "infra", Phase: manifest.PhasePending, Generation: 1}
	if got := nextStatus(t, notes); got != want {
		t.Fatalf("create: event %+v, want %+v", got, want)
	}

	cs := claim(t, s, "agent-a", 1)
	if len(cs) != 1 {
		t.Fatalf("claimed %d", len(cs))
	}
	want.Phase = manifest.PhaseReconciling
	if got := nextStatus(t, notes); got != want {
		t.Fatalf("claim: event %+v, want %+v", got, want)
	}
	// A bare renewal changes nothing anyone sees: no event. Progress does.
	if err := s.Heartbeat(ctx, cs[0], lease, nil); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("é", store.MaxStatusMessage+500)
	if err := s.Heartbeat(ctx, cs[0], lease, &store.Progress{Message: long}); err != nil {
		t.Fatal(err)
	}
	got := nextStatus(t, notes)
	if got.Message != strings.Repeat("é", store.MaxStatusMessage) {
		t.Fatalf("progress: message of %d characters, want it cut to %d", len([]rune(got.Message)), store.MaxStatusMessage)
	}
	complete(t, s, cs[0], ready(cs[0], true))
	want.Phase, want.Message, want.ObservedGeneration = manifest.PhaseReady, "applied", 1
	if got := nextStatus(t, notes); got != want {
		t.Fatalf("complete: event %+v, want %+v", got, want)
	}

	if _, _, err := s.ApplyResource(ctx, withSpec(resource("a", ""), `{"size":2}`), src); err != nil {
		t.Fatal(err)
	}
	// A new generation is pending from the moment it is stored.
	want.Generation, want.Phase, want.Message = 2, manifest.PhasePending, store.PendingMessage(2)
	if got := nextStatus(t, notes); got != want {
		t.Fatalf("new generation: event %+v, want %+v", got, want)
	}
	if err := s.DeleteResource(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	want.Deleted = true
	if got := nextStatus(t, notes); got != want {
		t.Fatalf("delete: event %+v, want %+v", got, want)
	}
}

// testStats checks the counts by phase and of the queue.
func testStats(t *testing.T, s store.Store) {
	ctx := t.Context()
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.ByPhase) != len(manifest.Phases()) || st.Due != 0 || st.Leased != 0 || st.Waiting != 0 {
		t.Fatalf("empty store: %+v", st)
	}
	src := gitSource("infra", "widgets.yaml")
	for _, name := range []string{"a", "b", "c", "d"} {
		if _, err := s.CreateResource(ctx, resource(name, `{}`), src); err != nil {
			t.Fatal(err)
		}
	}
	cs := claim(t, s, "agent-a", 2) // a and b
	complete(t, s, cs[0], ready(cs[0], false))
	// c waits on something; d stays due.
	cc := claim(t, s, "agent-a", 1)
	complete(t, s, cc[0], store.Completion{Status: store.StatusUpdate{Phase: manifest.PhasePending, Message: "waiting"},
		Waiting: true, WaitForReady: []manifest.ObjectRef{{Kind: "Widget", Name: "zz"}}, Requeue: true, RequeueAfter: time.Hour})
	st, err = s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[manifest.Phase]int{manifest.PhasePending: 2, manifest.PhaseReconciling: 1, manifest.PhaseReady: 1,
		manifest.PhaseFailed: 0, manifest.PhaseDeleting: 0}
	for p, n := range want {
		if st.ByPhase[p] != n {
			t.Errorf("ByPhase[%s] = %d, want %d (all: %v)", p, st.ByPhase[p], n, st.ByPhase)
		}
	}
	if st.Due != 1 || st.Leased != 1 || st.Waiting != 1 {
		t.Errorf("Due, Leased, Waiting = %d, %d, %d; want 1, 1, 1", st.Due, st.Leased, st.Waiting)
	}
	if n, err := s.CountResources(ctx); err != nil || n != 4 {
		t.Errorf("CountResources = %d, %v; want 4", n, err)
	}
}

// testStatusEventsOfBulkWrites creates and deletes many resources, each in
// one call, and checks that every row's event comes, once, in id order.
func testStatusEventsOfBulkWrites(t *testing.T, s store.Store) {
	ctx := t.Context()
	notes, err := s.Listen(ctx, store.TopicStatus)
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	var rs []*manifest.Resource
	for i := range n {
		rs = append(rs, resource(fmt.Sprintf("bulk-%03d", i), fmt.Sprintf(`{"size":%d}`, i)))
	}
	if _, err := s.ApplyResources(ctx, rs, gitSource("infra", "bulk.yaml")); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for i := range n {
		ev := nextStatus(t, notes)
		if ev.Name != fmt.Sprintf("bulk-%03d", i) || ev.Deleted || ev.Phase != manifest.PhasePending || ev.Generation != 1 {
			t.Fatalf("creation event %d: %+v", i, ev)
		}
		if len(ids) > 0 && ev.ID <= ids[len(ids)-1] {
			t.Fatalf("creation event %d: id %d after %d", i, ev.ID, ids[len(ids)-1])
		}
		ids = append(ids, ev.ID)
	}
	if err := s.DeleteResources(ctx, ids); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		ev := nextStatus(t, notes)
		if ev.ID != ids[i] || !ev.Deleted || ev.Name != fmt.Sprintf("bulk-%03d", i) {
			t.Fatalf("deletion event %d: %+v, want resource %d deleted", i, ev, ids[i])
		}
	}
	// Nothing more: a later event is the next one received.
	r, err := s.CreateResource(ctx, resource("after", `{}`), gitSource("infra", "after.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if ev := nextStatus(t, notes); ev.ID != r.ID {
		t.Fatalf("after the bulk writes got %+v, want the event of resource %d", ev, r.ID)
	}
}
