package postgres_test

import (
	"testing"
	"time"

	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// TestListenReconnects kills the listener's connection on the server and
// checks that the listener comes back, says so with a Resync, and delivers
// what is sent afterwards.
func TestListenReconnects(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	notes, err := s.Listen(t.Context(), store.TopicResources)
	if err != nil {
		t.Fatal(err)
	}
	receive := func(what string) store.Notification {
		t.Helper()
		select {
		case n, ok := <-notes:
			if !ok {
				t.Fatalf("channel closed waiting for %s", what)
			}
			return n
		case <-time.After(15 * time.Second):
			t.Fatalf("timed out waiting for %s", what)
		}
		panic("unreachable")
	}
	if err := s.Notify(t.Context(), store.TopicResources, "before"); err != nil {
		t.Fatal(err)
	}
	if n := receive("the first notification"); n.Payload != "before" {
		t.Fatalf("got %+v", n)
	}
	killed := query[int64](t, url, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query ILIKE 'LISTEN%'`)
	if killed != 1 {
		t.Fatalf("terminated %d listening backends, want 1", killed)
	}
	// The drop is told at once, then the Resync once listening again.
	if n := receive("the interruption"); !n.Interrupted || n.Resync || n.Topic != "" {
		t.Fatalf("after the connection dropped got %+v, want Interrupted", n)
	}
	if n := receive("the resync"); !n.Resync || n.Topic != "" {
		t.Fatalf("after the connection dropped got %+v, want a Resync", n)
	}
	if err := s.Notify(t.Context(), store.TopicResources, "after"); err != nil {
		t.Fatal(err)
	}
	if n := receive("a notification after reconnecting"); n.Payload != "after" {
		t.Fatalf("got %+v", n)
	}
}
