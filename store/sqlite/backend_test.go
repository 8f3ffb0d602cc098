package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/migrations"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/sqlite"
)

// rawDB opens the file with the driver alone, as another tool would.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// query runs a one-row, one-column query.
func query[T any](t *testing.T, db *sql.DB, q string, args ...any) T {
	t.Helper()
	var v T
	if err := db.QueryRowContext(t.Context(), q, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

func knownMigrations(t *testing.T) []migrations.Migration {
	t.Helper()
	migs, err := migrations.Load(migrations.SQLite, "sqlite")
	if err != nil {
		t.Fatal(err)
	}
	return migs
}

func widget(name, spec string) *manifest.Resource {
	return &manifest.Resource{Kind: "Widget", Group: "example.com", Version: "v1", Name: name,
		Spec: json.RawMessage(spec), SpecHash: manifest.HashJSON([]byte(spec))}
}

var infra = store.SourceRef{Name: "infra", Path: "widgets.yaml"}

func TestExclusiveOpen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "no8s.db")
	first, err := sqlite.Open(t.Context(), path, sqlite.Options{Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := first.CreateResource(t.Context(), widget("a", `{}`), infra); err != nil {
		t.Fatal(err)
	}

	// A second agent is refused at once, and told who holds the file.
	start := time.Now()
	second, err := sqlite.Open(t.Context(), path, sqlite.Options{Exclusive: true})
	if !errors.Is(err, sqlite.ErrLocked) {
		second.Close()
		t.Fatalf("second exclusive Open: err = %v, want ErrLocked", err)
	}
	if time.Since(start) > time.Second {
		t.Errorf("the refusal took %v; it should not wait", time.Since(start))
	}
	for _, want := range []string{path, "process " + strconv.Itoa(os.Getpid())} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}

	// A read-only tool opens alongside and sees the agent's data.
	reader := open(t, path, sqlite.Options{})
	if err := reader.Ping(t.Context()); err != nil {
		t.Errorf("Ping of the non-exclusive store: %v", err)
	}
	if r, err := reader.GetResourceByName(t.Context(), manifest.ObjectRef{Kind: "Widget", Name: "a"}); err != nil || r.Generation != 1 {
		t.Errorf("non-exclusive read = %+v, %v", r, err)
	}
	if reader.Path() != path {
		t.Errorf("Path() = %q, want %q", reader.Path(), path)
	}

	// Once the first agent is gone, the next one gets the file.
	first.Close()
	third, err := sqlite.Open(t.Context(), path, sqlite.Options{Exclusive: true})
	if err != nil {
		t.Fatalf("exclusive Open after Close: %v", err)
	}
	third.Close()
}

func TestOpenCreatesPrivateFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state", "deeper", "no8s.db")
	open(t, path, sqlite.Options{})
	info, err := os.Stat(path)
	if err != nil {
		t.Fatalf("the database file was not created: %v", err)
	}
	if mode := info.Mode().Perm(); mode&0o077 != 0 {
		t.Errorf("file mode %v, want it private to its owner", mode)
	}
	// Characters a URI would take for its own are part of the name.
	odd := filepath.Join(t.TempDir(), "odd name?#%20.db")
	s := open(t, odd, sqlite.Options{})
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Dir(odd))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), filepath.Base(odd)) {
			t.Errorf("SQLite wrote %q instead of %q", e.Name(), filepath.Base(odd))
		}
	}
	if _, err := sqlite.Open(t.Context(), "", sqlite.Options{}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Open(\"\") = %v, want ErrInvalid", err)
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "no8s.db")
	s := open(t, path, sqlite.Options{})
	ctx := t.Context()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	migs := knownMigrations(t)
	if n := query[int](t, db, `SELECT count(*) FROM schema_migrations`); n != len(migs) {
		t.Errorf("schema_migrations has %d rows, want %d", n, len(migs))
	}
	if name := query[string](t, db, `SELECT name FROM schema_migrations WHERE version = 1`); name != "initial" {
		t.Errorf("version 1 recorded as %q, want initial", name)
	}
	objects := query[int](t, db, `SELECT count(*) FROM sqlite_schema`)
	applied := query[int64](t, db, `SELECT max(applied_at) FROM schema_migrations`)
	if _, err := s.CreateResource(ctx, widget("a", `{}`), infra); err != nil {
		t.Fatal(err)
	}

	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if n := query[int](t, db, `SELECT count(*) FROM schema_migrations`); n != len(migs) {
		t.Errorf("second Migrate: schema_migrations has %d rows, want %d", n, len(migs))
	}
	if got := query[int64](t, db, `SELECT max(applied_at) FROM schema_migrations`); got != applied {
		t.Errorf("second Migrate re-applied something: applied_at %d, was %d", got, applied)
	}
	if got := query[int](t, db, `SELECT count(*) FROM sqlite_schema`); got != objects {
		t.Errorf("second Migrate: %d schema objects, want %d", got, objects)
	}
	if got := query[int](t, db, `SELECT count(*) FROM resources`); got != 1 {
		t.Errorf("second Migrate: %d resources, want the 1 created before", got)
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping after Migrate: %v", err)
	}
}

func TestMigrateRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "no8s.db")
	s := open(t, path, sqlite.Options{})
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	future := len(knownMigrations(t)) + 1
	if _, err := rawDB(t, path).ExecContext(t.Context(),
		`INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, 'from_the_future', 0)`, future); err != nil {
		t.Fatal(err)
	}
	err := s.Migrate(t.Context())
	if !errors.Is(err, sqlite.ErrSchemaTooNew) {
		t.Fatalf("Migrate on a newer schema: err = %v, want ErrSchemaTooNew", err)
	}
	if !strings.Contains(err.Error(), "upgrade") {
		t.Errorf("error %q does not say what to do", err)
	}
	if err := s.Ping(t.Context()); !errors.Is(err, sqlite.ErrSchemaTooNew) {
		t.Errorf("Ping on a newer schema: err = %v, want ErrSchemaTooNew", err)
	}
}

func TestPingBeforeMigrate(t *testing.T) {
	t.Parallel()
	s := open(t, filepath.Join(t.TempDir(), "no8s.db"), sqlite.Options{})
	err := s.Ping(t.Context())
	if !errors.Is(err, sqlite.ErrMigrationsPending) {
		t.Fatalf("Ping before Migrate: err = %v, want ErrMigrationsPending", err)
	}
	if !strings.Contains(err.Error(), "migrate") {
		t.Errorf("error %q does not say what to do", err)
	}
	// Also inside a transaction, which still commits.
	err = s.InTx(t.Context(), func(ctx context.Context, tx store.Store) error {
		if err := tx.Ping(ctx); !errors.Is(err, sqlite.ErrMigrationsPending) {
			t.Errorf("Ping in tx before Migrate: err = %v, want ErrMigrationsPending", err)
		}
		return nil
	})
	if err != nil {
		t.Errorf("InTx: %v", err)
	}
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping after Migrate: %v", err)
	}
	err = s.InTx(t.Context(), func(ctx context.Context, tx store.Store) error {
		return tx.(*sqlite.Store).Migrate(ctx)
	})
	if !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Migrate inside a transaction = %v, want ErrInvalid", err)
	}
}

func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "no8s.db")
	ctx := t.Context()
	s, err := sqlite.Open(ctx, path, sqlite.Options{Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	created, err := s.CreateResource(ctx, widget("a", `{"size":1}`), infra)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := s.ClaimResources(ctx, store.ClaimParams{Owner: "agent", Limit: 1, Duration: time.Minute})
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim = %v, %v", cs, err)
	}
	s.Close()

	again := open(t, path, sqlite.Options{Exclusive: true})
	if err := again.Ping(ctx); err != nil {
		t.Fatalf("Ping after reopening: %v", err)
	}
	got, err := again.GetResource(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Spec) != `{"size":1}` || got.LeaseOwner != "agent" || got.LeaseToken != cs[0].Lease.Token ||
		got.Phase != manifest.PhaseReconciling || !got.CreatedAt.Equal(created.CreatedAt) {
		t.Errorf("after reopening: %+v", got)
	}
	// The lease taken before the restart is still honoured.
	if _, err := again.CompleteReconcile(ctx, cs[0], store.Completion{Status: store.StatusUpdate{
		Phase: manifest.PhaseReady, ObservedGeneration: 1}}); err != nil {
		t.Errorf("completing a claim made before the restart: %v", err)
	}
}

func TestNestedInTxIsASavepoint(t *testing.T) {
	t.Parallel()
	s := migrated(t)
	ctx := t.Context()
	inner := errors.New("inner failed")
	notes, err := s.Listen(ctx, store.TopicResources)
	if err != nil {
		t.Fatal(err)
	}
	err = s.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		if _, err := tx.CreateResource(ctx, widget("outer", `{}`), infra); err != nil {
			return err
		}
		err := tx.InTx(ctx, func(ctx context.Context, tx store.Store) error {
			if _, err := tx.CreateResource(ctx, widget("inner", `{}`), infra); err != nil {
				return err
			}
			return inner
		})
		if !errors.Is(err, inner) {
			t.Errorf("nested InTx = %v, want %v", err, inner)
		}
		// The outer transaction is still usable.
		_, err = tx.CreateResource(ctx, widget("after", `{}`), infra)
		return err
	})
	if err != nil {
		t.Fatalf("InTx: %v", err)
	}
	list, err := s.ListResources(ctx, store.ResourceFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range list {
		got = append(got, r.Name)
	}
	if strings.Join(got, ",") != "outer,after" {
		t.Errorf("resources = %v, want [outer after]", got)
	}
	// A write through the outer Store inside the transaction is refused
	// rather than left waiting for the writer its own transaction holds.
	err = s.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		_, err := s.CreateResource(ctx, widget("outside", `{}`), infra)
		return err
	})
	if !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a write through the outer Store inside InTx = %v, want ErrInvalid", err)
	}
	// The savepoint took its notification with it.
	for _, want := range []string{"Widget/outer", "Widget/after"} {
		if n := receive(t, notes); n.Payload != want {
			t.Errorf("notification %+v, want %s", n, want)
		}
	}
	expectNothing(t, notes)
}

// receive returns the next notification, failing after a while.
func receive(t *testing.T, notes <-chan store.Notification) store.Notification {
	t.Helper()
	select {
	case n, ok := <-notes:
		if !ok {
			t.Fatal("notification channel closed")
		}
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("no notification within 10s")
	}
	panic("unreachable")
}

// expectNothing fails if a notification comes soon.
func expectNothing(t *testing.T, notes <-chan store.Notification) {
	t.Helper()
	select {
	case n := <-notes:
		t.Errorf("unexpected notification %+v", n)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestListenDeliversCommitted checks that a transaction's notifications,
// its own and the status events its writes cause, arrive when it commits
// and never when it rolls back.
func TestListenDeliversCommitted(t *testing.T) {
	t.Parallel()
	s := migrated(t)
	ctx := t.Context()
	notes, err := s.Listen(ctx, store.TopicResources, store.TopicStatus)
	if err != nil {
		t.Fatal(err)
	}
	inTx, committed := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- s.InTx(ctx, func(ctx context.Context, tx store.Store) error {
			if _, err := tx.CreateResource(ctx, widget("a", `{}`), infra); err != nil {
				return err
			}
			if err := tx.Notify(ctx, store.TopicResources, "mine"); err != nil {
				return err
			}
			close(inTx)
			<-committed
			return nil
		})
	}()
	<-inTx
	expectNothing(t, notes)
	close(committed)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 3 {
		n := receive(t, notes)
		got = append(got, n.Topic+" "+n.Payload)
	}
	if !strings.HasPrefix(got[0], store.TopicStatus+" ") || got[1] != store.TopicResources+" Widget/a" ||
		got[2] != store.TopicResources+" mine" {
		t.Errorf("notifications in order %q, want the status event, the creation, then mine", got)
	}

	boom := errors.New("boom")
	err = s.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		if _, err := tx.CreateResource(ctx, widget("b", `{}`), infra); err != nil {
			return err
		}
		if err := tx.Notify(ctx, store.TopicResources, "rolled back"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx = %v", err)
	}
	// A panic rolls back too.
	func() {
		defer func() { recover() }()
		s.InTx(ctx, func(ctx context.Context, tx store.Store) error {
			if err := tx.Notify(ctx, store.TopicResources, "panicked"); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	expectNothing(t, notes)

	// The status event of a claim made by another goroutine, with the
	// phase the claim wrote.
	go func() {
		_, err := s.ClaimResources(ctx, store.ClaimParams{Owner: "elsewhere", Limit: 1, Duration: time.Minute})
		errc <- err
	}()
	for {
		n := receive(t, notes)
		if n.Topic != store.TopicStatus {
			continue
		}
		ev, err := store.ParseStatusEvent(n.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Name != "a" || ev.Phase != manifest.PhaseReconciling {
			t.Errorf("status event of the claim = %+v", ev)
		}
		break
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestSlowListener checks that a listener that does not read holds up no
// writer, and that when it falls too far behind it is told to resync.
func TestSlowListener(t *testing.T) {
	t.Parallel()
	s := migrated(t)
	ctx := t.Context()
	slow, err := s.Listen(ctx, store.TopicResources)
	if err != nil {
		t.Fatal(err)
	}
	const sent = 100_000 // more than a listener may fall behind
	done := make(chan error, 1)
	go func() {
		for i := range sent {
			if err := s.Notify(ctx, store.TopicResources, strconv.Itoa(i)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Notify blocked on a listener that does not read")
	}
	var (
		resync   bool
		received int
		last     string
	)
	for last != strconv.Itoa(sent-1) {
		n := receive(t, slow)
		received++
		if n.Resync {
			resync = true
		} else {
			last = n.Payload
		}
	}
	if !resync || received >= sent {
		t.Errorf("received %d of %d notifications, resync %v: want a resync in place of the backlog", received, sent, resync)
	}
}

func TestListenEnds(t *testing.T) {
	t.Parallel()
	s := migrated(t)
	ctx, cancel := context.WithCancel(t.Context())
	byCtx, err := s.Listen(ctx, store.TopicResources)
	if err != nil {
		t.Fatal(err)
	}
	byClose, err := s.Listen(t.Context(), store.TopicResources)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Listen(t.Context()); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Listen without topics = %v, want ErrInvalid", err)
	}
	err = s.InTx(t.Context(), func(ctx context.Context, tx store.Store) error {
		_, err := tx.Listen(ctx, store.TopicResources)
		return err
	})
	if !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Listen inside a transaction = %v, want ErrInvalid", err)
	}
	cancel()
	waitClosed(t, byCtx)
	s.Close()
	waitClosed(t, byClose)
	if _, err := s.Listen(t.Context(), store.TopicResources); err == nil {
		t.Error("Listen on a closed store succeeded")
	}
}

func waitClosed(t *testing.T, notes <-chan store.Notification) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-notes:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("channel not closed")
		}
	}
}

// TestClaimersNeverShare has 8 goroutines claim and complete 200 resources
// in several rounds, each round a new generation of all of them: no
// resource may be held by two claimers at once, and each is reconciled
// exactly once per round.
func TestClaimersNeverShare(t *testing.T) {
	t.Parallel()
	s := migrated(t)
	ctx := t.Context()
	const (
		n        = 200
		claimers = 8
		rounds   = 4
	)
	for round := 1; round <= rounds; round++ {
		rs := make([]*manifest.Resource, n)
		for i := range rs {
			rs[i] = widget(fmt.Sprintf("w%03d", i), fmt.Sprintf(`{"round":%d}`, round))
		}
		if _, err := s.ApplyResources(ctx, rs, infra); err != nil {
			t.Fatal(err)
		}
		var (
			mu     gosync.Mutex
			held   = map[int64]string{}
			done   = map[int64]int{}
			wg     gosync.WaitGroup
			failed = make(chan error, claimers)
		)
		for w := range claimers {
			owner := fmt.Sprintf("w%d", w)
			wg.Go(func() {
				for {
					cs, err := s.ClaimResources(ctx, store.ClaimParams{Owner: owner, Limit: 1 + w%4, Duration: time.Minute})
					if err != nil {
						failed <- err
						return
					}
					if len(cs) == 0 {
						return
					}
					mu.Lock()
					for _, c := range cs {
						if other, ok := held[c.ID]; ok {
							mu.Unlock()
							failed <- fmt.Errorf("resource %d leased to %s while %s held it", c.ID, owner, other)
							return
						}
						held[c.ID] = owner
					}
					mu.Unlock()
					for _, c := range cs {
						if _, err := s.CompleteReconcile(ctx, c, store.Completion{Status: store.StatusUpdate{
							Phase: manifest.PhaseReady, ObservedGeneration: c.Generation}}); err != nil {
							failed <- err
							return
						}
						// Released only once the completion committed: until
						// then, nobody else may have it.
						mu.Lock()
						delete(held, c.ID)
						done[c.ID]++
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		close(failed)
		for err := range failed {
			t.Fatalf("round %d: %v", round, err)
		}
		if len(done) != n {
			t.Fatalf("round %d: reconciled %d distinct resources, want %d", round, len(done), n)
		}
		for id, times := range done {
			if times != 1 {
				t.Errorf("round %d: resource %d reconciled %d times", round, id, times)
			}
		}
	}
}

func TestErrorsNameTheRecord(t *testing.T) {
	t.Parallel()
	s := migrated(t)
	ctx := t.Context()
	_, err := s.GetResource(ctx, 42)
	if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "resource 42") {
		t.Errorf("GetResource(42) = %v, want ErrNotFound naming resource 42", err)
	}
	if _, err := s.CreateResource(ctx, widget("a", `{}`), infra); err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateResource(ctx, widget("a", `{}`), infra)
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "Widget/a") {
		t.Errorf("duplicate CreateResource = %v, want ErrConflict naming Widget/a", err)
	}
	_, err = s.CreateResource(ctx, &manifest.Resource{Kind: "Widget", Name: "b", SpecHash: "h", Spec: []byte("{not json")}, infra)
	if !errors.Is(err, store.ErrInvalid) {
		t.Errorf("CreateResource with a broken spec = %v, want ErrInvalid", err)
	}
	_, err = s.PutSource(ctx, &store.Source{Name: "x", Kind: "svn"})
	if !errors.Is(err, store.ErrInvalid) {
		t.Errorf("PutSource of an unknown kind = %v, want ErrInvalid", err)
	}
	_, err = s.ApplyResources(ctx, []*manifest.Resource{widget("c", `{}`), widget("c", `{}`)}, infra)
	if !errors.Is(err, store.ErrInvalid) {
		t.Errorf("ApplyResources with a resource twice = %v, want ErrInvalid", err)
	}
}

// TestDependentsFollowDependsOn checks that the dependents index follows
// every change of dependsOn: creation, rewrite and removal.
func TestDependentsFollowDependsOn(t *testing.T) {
	t.Parallel()
	s := migrated(t)
	ctx := t.Context()
	db := manifest.ObjectRef{Kind: "Widget", Name: "db"}
	cache := manifest.ObjectRef{Kind: "Widget", Name: "cache"}
	dependents := func(ref manifest.ObjectRef) string {
		t.Helper()
		rs, err := s.ListResources(ctx, store.ResourceFilter{DependsOn: &ref})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range rs {
			names = append(names, r.Name)
		}
		return strings.Join(names, ",")
	}
	app := widget("app", `{}`)
	app.DependsOn = []manifest.ObjectRef{db, cache}
	api := widget("api", `{}`)
	api.DependsOn = []manifest.ObjectRef{db}
	if _, err := s.ApplyResources(ctx, []*manifest.Resource{app, api}, infra); err != nil {
		t.Fatal(err)
	}
	if got := dependents(db); got != "app,api" && got != "api,app" {
		t.Errorf("dependents of db = %q", got)
	}
	moved := widget("app", `{}`)
	moved.DependsOn = []manifest.ObjectRef{cache}
	if _, _, err := s.ApplyResource(ctx, moved, infra); err != nil {
		t.Fatal(err)
	}
	if got := dependents(db); got != "api" {
		t.Errorf("dependents of db after app moved = %q, want api", got)
	}
	if got := dependents(cache); got != "app" {
		t.Errorf("dependents of cache = %q, want app", got)
	}
	r, err := s.GetResourceByName(ctx, manifest.ObjectRef{Kind: "Widget", Name: "api"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteResource(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if got := dependents(db); got != "" {
		t.Errorf("dependents of db after api went = %q, want none", got)
	}
}
