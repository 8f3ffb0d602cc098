package postgres_test

import (
	"context"
	"errors"
	"strings"
	gosync "sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/migrations"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
	"github.com/no8s/no8s-agent/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// open returns an unmigrated store on a fresh database, closed when t ends.
func open(t *testing.T, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// migrated returns a migrated store on a fresh database.
func migrated(t *testing.T) *postgres.Store {
	t.Helper()
	s := open(t, pgtest.URL(t))
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return migrated(t) })
}

func knownMigrations(t *testing.T) []migrations.Migration {
	t.Helper()
	migs, err := migrations.Load(migrations.Postgres, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	return migs
}

// query runs a one-row, one-column query on a separate connection.
func query[T any](t *testing.T, url, sql string, args ...any) T {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var v T
	if err := conn.QueryRow(t.Context(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

func exec(t *testing.T, url, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

const schemaObjects = `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname = 'public'`

func TestMigrateRecordsAndIsIdempotent(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	ctx := t.Context()
	migs := knownMigrations(t)

	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	rows := query[int64](t, url, `SELECT count(*) FROM schema_migrations`)
	if rows != int64(len(migs)) {
		t.Errorf("schema_migrations has %d rows, want %d", rows, len(migs))
	}
	name := query[string](t, url, `SELECT name FROM schema_migrations WHERE version = 1`)
	if name != "initial" {
		t.Errorf("version 1 recorded as %q, want initial", name)
	}
	appliedAt := query[bool](t, url, `SELECT bool_and(applied_at > now() - interval '1 hour') FROM schema_migrations`)
	if !appliedAt {
		t.Error("applied_at not recorded")
	}
	objects := query[int64](t, url, schemaObjects)
	maxApplied := query[string](t, url, `SELECT max(applied_at)::text FROM schema_migrations`)

	if _, err := s.CreateResource(ctx, &manifest.Resource{Kind: "Widget", Name: "a", SpecHash: "sha256:x"},
		store.SourceRef{Name: "infra"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if got := query[int64](t, url, `SELECT count(*) FROM schema_migrations`); got != rows {
		t.Errorf("second Migrate: schema_migrations has %d rows, want %d", got, rows)
	}
	if got := query[string](t, url, `SELECT max(applied_at)::text FROM schema_migrations`); got != maxApplied {
		t.Errorf("second Migrate re-applied something: applied_at %s, was %s", got, maxApplied)
	}
	if got := query[int64](t, url, schemaObjects); got != objects {
		t.Errorf("second Migrate: %d schema objects, want %d", got, objects)
	}
	if got := query[int64](t, url, `SELECT count(*) FROM resources`); got != 1 {
		t.Errorf("second Migrate: %d resources, want the 1 created before", got)
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping after Migrate: %v", err)
	}
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	stores := []*postgres.Store{open(t, url), open(t, url), open(t, url)}
	var (
		wg    gosync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, len(stores))
	)
	for i, s := range stores {
		wg.Go(func() {
			<-start
			errs[i] = s.Migrate(t.Context())
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Migrate %d: %v", i, err)
		}
	}
	if got, want := query[int64](t, url, `SELECT count(*) FROM schema_migrations`), int64(len(knownMigrations(t))); got != want {
		t.Errorf("schema_migrations has %d rows, want %d", got, want)
	}
}

func TestMigrateRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	future := len(knownMigrations(t)) + 1
	exec(t, url, `INSERT INTO schema_migrations (version, name) VALUES ($1, 'from_the_future')`, future)

	err := s.Migrate(t.Context())
	if !errors.Is(err, postgres.ErrSchemaTooNew) {
		t.Fatalf("Migrate on a newer schema: err = %v, want ErrSchemaTooNew", err)
	}
	if !strings.Contains(err.Error(), "upgrade") {
		t.Errorf("error %q does not say what to do", err)
	}
	if err := s.Ping(t.Context()); !errors.Is(err, postgres.ErrSchemaTooNew) {
		t.Errorf("Ping on a newer schema: err = %v, want ErrSchemaTooNew", err)
	}
}

func TestPingBeforeMigrate(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	err := s.Ping(t.Context())
	if !errors.Is(err, postgres.ErrMigrationsPending) {
		t.Fatalf("Ping before Migrate: err = %v, want ErrMigrationsPending", err)
	}
	if !strings.Contains(err.Error(), "migrate") {
		t.Errorf("error %q does not say what to do", err)
	}
	// Also inside a transaction, where the check must not abort the transaction.
	err = s.InTx(t.Context(), func(ctx context.Context, tx store.Store) error {
		if err := tx.Ping(ctx); !errors.Is(err, postgres.ErrMigrationsPending) {
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
}

func TestOpenFailsClearly(t *testing.T) {
	t.Parallel()
	_, err := postgres.Open(t.Context(), "postgres://nobody@/nodb?host=/nonexistent-dir&connect_timeout=2")
	if err == nil || !strings.Contains(err.Error(), "postgres: connect") {
		t.Fatalf("Open(unreachable) = %v, want a connect error", err)
	}
	_, err = postgres.Open(t.Context(), "postgres://%zz")
	if err == nil {
		t.Fatal("Open(bad URL) succeeded")
	}
}

func TestNestedInTxIsASavepoint(t *testing.T) {
	t.Parallel()
	s := migrated(t)
	ctx := t.Context()
	inner := errors.New("inner failed")
	src := store.SourceRef{Name: "infra"}
	err := s.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		if _, err := tx.CreateResource(ctx, &manifest.Resource{Kind: "Widget", Name: "outer", SpecHash: "h"}, src); err != nil {
			return err
		}
		err := tx.InTx(ctx, func(ctx context.Context, tx store.Store) error {
			if _, err := tx.CreateResource(ctx, &manifest.Resource{Kind: "Widget", Name: "inner", SpecHash: "h"}, src); err != nil {
				return err
			}
			return inner
		})
		if !errors.Is(err, inner) {
			t.Errorf("nested InTx = %v, want %v", err, inner)
		}
		// The outer transaction is still usable.
		_, err = tx.CreateResource(ctx, &manifest.Resource{Kind: "Widget", Name: "after", SpecHash: "h"}, src)
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
}

func TestErrorsNameTheRecord(t *testing.T) {
	t.Parallel()
	s := migrated(t)
	ctx := t.Context()
	_, err := s.GetResource(ctx, 42)
	if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "resource 42") {
		t.Errorf("GetResource(42) = %v, want ErrNotFound naming resource 42", err)
	}
	src := store.SourceRef{Name: "infra"}
	if _, err := s.CreateResource(ctx, &manifest.Resource{Kind: "Widget", Name: "a", SpecHash: "h"}, src); err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateResource(ctx, &manifest.Resource{Kind: "Widget", Name: "a", SpecHash: "h"}, src)
	if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "Widget/a") {
		t.Errorf("duplicate CreateResource = %v, want ErrConflict naming Widget/a", err)
	}
	_, err = s.CreateResource(ctx, &manifest.Resource{Kind: "Widget", Name: "b", SpecHash: "h", Spec: []byte("{not json")}, src)
	if !errors.Is(err, store.ErrInvalid) {
		t.Errorf("CreateResource with a broken spec = %v, want ErrInvalid", err)
	}
}

// TestPoolSize checks that WithPoolSize grows the pool for the agent's
// workers, never shrinks it below the driver's default, and gives way to a
// pool_max_conns in the connection string.
func TestPoolSize(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	plain := open(t, url)
	defaultSize := plain.MaxConns()
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	tests := []struct {
		name string
		url  string
		size int
		want int
	}{
		{"grown for the workers", url, defaultSize + 10, defaultSize + 10},
		{"never below the default", url, 1, defaultSize},
		{"the connection string decides", url + sep + "pool_max_conns=3", defaultSize + 10, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := postgres.Open(t.Context(), tt.url, postgres.WithPoolSize(tt.size))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := s.MaxConns(); got != tt.want {
				t.Errorf("pool of %d connections, want %d", got, tt.want)
			}
		})
	}
}
