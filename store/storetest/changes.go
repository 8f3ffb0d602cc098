package storetest

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/store"
)

// nextChange returns the next TopicChanges payload, skipping other topics.
func nextChange(t *testing.T, notes <-chan store.Notification) string {
	t.Helper()
	return nextOn(t, notes, store.TopicChanges)
}

// testChangeNotifications checks that every change of a row a reader may
// keep a copy of is announced, on TopicStatus or TopicChanges, so that a
// copy kept from notifications alone stays current: a change that leaves
// the status alone (labels, a lease renewal), and any change of a source
// or a type.
func testChangeNotifications(t *testing.T, s store.Store) {
	ctx := t.Context()
	notes, err := s.Listen(ctx, store.TopicChanges)
	if err != nil {
		t.Fatal(err)
	}
	src := gitSource("infra", "widgets/a.yaml")
	r, err := s.CreateResource(ctx, resource("a", `{"size":1}`), src)
	if err != nil {
		t.Fatal(err)
	}
	// Labels alone: no new generation, no status event, but a change.
	relabelled := resource("a", `{"size":1}`)
	relabelled.Labels = map[string]string{"team": "blue"}
	if _, outcome, err := s.ApplyResource(ctx, relabelled, src); err != nil || outcome != store.Unchanged {
		t.Fatalf("ApplyResource with new labels: %v, %v", outcome, err)
	}
	want := store.ChangeResource + strconv.FormatInt(r.ID, 10)
	if got := nextChange(t, notes); got != want {
		t.Fatalf("relabel: change %q, want %q", got, want)
	}
	// A bare lease renewal shows a new expiry.
	cs := claim(t, s, "agent-a", 1)
	if len(cs) != 1 {
		t.Fatalf("claimed %d", len(cs))
	}
	if err := s.Heartbeat(ctx, cs[0], time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	if got := nextChange(t, notes); got != want {
		t.Fatalf("renewal: change %q, want %q", got, want)
	}

	if _, err := s.PutSource(ctx, &store.Source{Name: "infra", Kind: store.SourceGit, Phase: store.SourceReady}); err != nil {
		t.Fatal(err)
	}
	if got := nextChange(t, notes); got != store.ChangeSource+"infra" {
		t.Fatalf("source: change %q, want %q", got, store.ChangeSource+"infra")
	}
	typ, err := s.PutResourceType(ctx, widgetType("v9", "example.com", src))
	if err != nil {
		t.Fatal(err)
	}
	wantType := store.ChangeType + strconv.FormatInt(typ.ID, 10)
	if got := nextChange(t, notes); got != wantType {
		t.Fatalf("type: change %q, want %q", got, wantType)
	}
	if err := s.DeleteResourceType(ctx, "Widget", "v9"); err != nil {
		t.Fatal(err)
	}
	if got := nextChange(t, notes); got != wantType {
		t.Fatalf("type removed: change %q, want %q", got, wantType)
	}
}

// testFence checks that fences issue increasing versions, each announced
// after every change committed before it, and refuse to run inside a
// transaction (where the announcement would wait for a commit the caller
// controls).
func testFence(t *testing.T, s store.Store) {
	ctx := t.Context()
	notes, err := s.Listen(ctx, store.TopicChanges, store.TopicStatus)
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for i := range 3 {
		r, err := s.CreateResource(ctx, resource("fenced-"+strconv.Itoa(i), `{"size":1}`), gitSource("infra", "w.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		v, err := s.Fence(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if v <= last {
			t.Fatalf("fence %d issued %d after %d", i, v, last)
		}
		last = v
		// The creation is heard before the version.
		sawCreate := false
		deadline := time.After(10 * time.Second)
	wait:
		for {
			select {
			case n := <-notes:
				switch {
				case n.Topic == store.TopicStatus:
					ev, err := store.ParseStatusEvent(n.Payload)
					if err != nil {
						t.Fatal(err)
					}
					sawCreate = sawCreate || ev.ID == r.ID
				case n.Topic == store.TopicChanges && n.Payload == store.ChangeVersion+strconv.FormatInt(v, 10):
					break wait
				}
			case <-deadline:
				t.Fatalf("version %d not announced within 10s", v)
			}
		}
		if !sawCreate {
			t.Fatalf("version %d announced before the creation committed ahead of it", v)
		}
	}
	err = s.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		_, err := tx.Fence(ctx)
		return err
	})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Fence inside InTx: %v, want ErrInvalid", err)
	}
}
