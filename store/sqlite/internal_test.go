package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// pragma reads one pragma on a connection of db.
func pragma(t *testing.T, db *sql.DB, name string) string {
	t.Helper()
	var v string
	if err := db.QueryRowContext(t.Context(), "PRAGMA "+name).Scan(&v); err != nil {
		t.Fatalf("PRAGMA %s: %v", name, err)
	}
	return v
}

// TestConnectionSettings checks the settings every connection runs with:
// the file in WAL mode, a busy timeout on writer and readers, a relaxed
// sync on the writer (safe in WAL mode: a crash loses at most the last
// transactions, never the file), and readers that cannot write.
func TestConnectionSettings(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "no8s.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		db          *sql.DB
		name, value string
	}{
		{s.wdb, "journal_mode", "wal"},
		{s.rdb, "journal_mode", "wal"},
		{s.wdb, "busy_timeout", "5000"},
		{s.rdb, "busy_timeout", "5000"},
		{s.wdb, "synchronous", "1"}, // NORMAL
		{s.wdb, "query_only", "0"},
		{s.rdb, "query_only", "1"},
	} {
		if got := pragma(t, c.db, c.name); !strings.EqualFold(got, c.value) {
			t.Errorf("PRAGMA %s = %s, want %s", c.name, got, c.value)
		}
	}
	if n := s.wdb.Stats().MaxOpenConnections; n != 1 {
		t.Errorf("the writer pool allows %d connections, want 1", n)
	}
	if _, err := s.rdb.ExecContext(t.Context(), "CREATE TABLE t (x)"); err == nil {
		t.Error("a read connection wrote")
	}
}

// TestQueuePlans checks that the queue's hot queries use their indexes:
// SQLite uses a partial index only when the query repeats its predicate,
// which an edit of either could silently break.
func TestQueuePlans(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "no8s.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, query, want string
		args              []any
	}{
		{"urgent claims", claimUrgent, "USING INDEX resources_urgent_idx", []any{1, 2}},
		{"scheduled claims", claimScheduled, "USING INDEX resources_next_reconcile_idx", []any{1, 2}},
		{"dependents", `SELECT resource_id FROM resource_dependencies WHERE kind = $1 AND name = $2`,
			"USING PRIMARY KEY", []any{"a", "b"}},
	} {
		rows, err := s.rdb.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+c.query, c.args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		if !strings.Contains(strings.Join(plan, "\n"), c.want) {
			t.Errorf("%s: plan %q does not use %s", c.name, plan, c.want)
		}
	}
}

// TestNotifiedAfterCommit checks that a transaction's notifications, its
// own and its status events, reach listeners only once the transaction
// committed: a listener that reads what it was told of must find it.
func TestNotifiedAfterCommit(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "no8s.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	notes, err := s.Listen(t.Context(), store.TopicResources, store.TopicStatus)
	if err != nil {
		t.Fatal(err)
	}
	committing := 0
	s.beforeCommit = func() {
		committing++
		select {
		case n := <-notes:
			t.Errorf("notification %+v before its transaction committed", n)
		case <-time.After(20 * time.Millisecond):
		}
	}
	err = s.InTx(t.Context(), func(ctx context.Context, tx store.Store) error {
		if _, err := tx.CreateResource(ctx, &manifest.Resource{Kind: "Widget", Name: "a", SpecHash: "h"},
			store.SourceRef{Name: "infra"}); err != nil {
			return err
		}
		return tx.Notify(ctx, store.TopicResources, "mine")
	})
	if err != nil {
		t.Fatal(err)
	}
	if committing != 1 {
		t.Fatalf("the commit hook ran %d times, want 1", committing)
	}
	for range 3 {
		select {
		case <-notes:
		case <-time.After(10 * time.Second):
			t.Fatal("the notifications did not come after the commit")
		}
	}
}
