package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s-agent/manifest"
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

// TestStatusEventsOfOneStatement updates many rows in one statement, some
// of them with messages too long to share a notification, and checks that
// the listener hands out one status event per changed row, in id order,
// each with its own message cut as events cut it, and none for a row whose
// status did not change.
func TestStatusEventsOfOneStatement(t *testing.T) {
	t.Parallel()
	const n = 120
	url, notes := widgetsHeard(t, n, "w%03d")
	first := query[int64](t, url, `SELECT min(id) FROM resources`)
	// Every seventh row gets a message of 1500 two-byte characters (an
	// event of over 2000 bytes); the last row is left as it was.
	exec(t, url, `UPDATE resources SET status_message = CASE WHEN (id - $1) % 7 = 3 THEN repeat('é', 1500)
		WHEN id = $1 + $2 - 1 THEN status_message ELSE 'message of ' || id END`, first, n)
	for i := range n - 1 {
		id := first + int64(i)
		want := fmt.Sprintf("message of %d", id)
		if i%7 == 3 {
			want = strings.Repeat("é", store.MaxStatusMessage)
		}
		select {
		case note := <-notes:
			ev, err := store.ParseStatusEvent(note.Payload)
			if err != nil {
				t.Fatalf("event %d: %v", i, err)
			}
			if ev.ID != id || ev.Message != want || ev.Name != fmt.Sprintf("w%03d", i) {
				t.Fatalf("event %d: got id %d name %s message %.20q, want id %d message %.20q", i, ev.ID, ev.Name, ev.Message, id, want)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("event %d of %d did not come", i, n-1)
		}
	}
	// A later event is the next one received: none came for the last row.
	exec(t, url, `UPDATE resources SET status_message = 'after' WHERE id = $1`, first)
	select {
	case note := <-notes:
		if ev, err := store.ParseStatusEvent(note.Payload); err != nil || ev.ID != first || ev.Message != "after" {
			t.Fatalf("after the statement got %q (%v), want the event of resource %d", note.Payload, err, first)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the event after the statement did not come")
	}
}

// TestStatusEventsOfALargeStatementAfterAOneRowStatement updates thousands
// of rows on a connection whose first status event came from a one-row
// update: the status trigger's plan, made for that first statement and
// kept by the connection, must not make the large one quadratic (it took
// over ten seconds for 4,000 rows, against a fraction of one).
func TestStatusEventsOfALargeStatementAfterAOneRowStatement(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const n = 4000
	url, notes := widgetsHeard(t, n, "w%04d")
	// The plan is the database's to choose; what keeps it from nested
	// loops is the function's own setting.
	if conf := query[[]string](t, url, `SELECT proconfig FROM pg_proc WHERE proname = 'no8s_notify_status_updates'`); !slices.Contains(conf, "enable_nestloop=off") {
		t.Fatalf("the status trigger's function is configured %q: nested loops are allowed", conf)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `UPDATE resources SET status_message = 'one' WHERE id = (SELECT min(id) FROM resources)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE resources SET status_message = 'all of ' || id`); err != nil {
		t.Fatal(err)
	}
	// Every row's event comes, after the first statement's one.
	seen := map[int64]bool{}
	deadline := time.After(30 * time.Second)
	for len(seen) < n {
		select {
		case note := <-notes:
			ev, err := store.ParseStatusEvent(note.Payload)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(ev.Message, "all of ") {
				seen[ev.ID] = true
			}
		case <-deadline:
			t.Fatalf("%d of %d events came", len(seen), n)
		}
	}
}

// widgetsHeard stores n widgets named by format on a fresh database and
// listens for status events, which it returns with the database's URL.
func widgetsHeard(t *testing.T, n int, format string) (string, <-chan store.Notification) {
	t.Helper()
	url := pgtest.URL(t)
	s := open(t, url)
	ctx := t.Context()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	rs := make([]*manifest.Resource, n)
	for i := range rs {
		rs[i] = &manifest.Resource{Kind: "Widget", Group: "example.com", Version: "v1",
			Name: fmt.Sprintf(format, i), SpecHash: "sha256:0"}
	}
	if _, err := s.ApplyResources(ctx, rs, store.SourceRef{Name: "infra", Path: "w.yaml"}); err != nil {
		t.Fatal(err)
	}
	notes, err := s.Listen(ctx, store.TopicStatus)
	if err != nil {
		t.Fatal(err)
	}
	return url, notes
}
