package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestMigrate(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	for i := 0; i < 2; i++ {
		code, out, errOut := runCLI(t, "migrate", "--database", url)
		if code != 0 || !strings.Contains(out, "database schema is current") {
			t.Fatalf("run %d: exit %d, stdout %q, stderr %q", i+1, code, out, errOut)
		}
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var applied int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM schema_migrations").Scan(&applied); err != nil {
		t.Fatal(err)
	}
	var tables int
	if err := conn.QueryRow(context.Background(),
		"SELECT count(*) FROM information_schema.tables WHERE table_name IN ('resources', 'resource_types', 'reconcile_history', 'sources', 'sync_history')").Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if applied < 1 || tables != 5 {
		t.Errorf("%d migrations recorded, %d tables", applied, tables)
	}
}

// TestMigrateEmbedded migrates an embedded store file, creating it and its
// folder, twice.
func TestMigrateEmbedded(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "data", "state.db")
	for range 2 {
		code, out, errOut := runCLI(t, "migrate", "--database", path)
		if code != 0 || !strings.Contains(out, "database schema is current") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}

func TestMigrateErrors(t *testing.T) {
	t.Parallel()
	nowhere := "postgres://no8s@/no8s?host=" + filepath.Join(t.TempDir(), "no-server")
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"embedded file in a file", []string{"migrate", "--database", filepath.Join(os.Args[0], "state.db")}, "migrate:"},
		{"unreachable", []string{"migrate", "--database", nowhere}, "postgres: connect to"},
		{"not a URL", []string{"migrate", "--database", "postgres://%zz"}, "parse connection string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, _, errOut := runCLI(t, tt.args...)
			if code != 1 || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("exit %d, stderr %q, want 1 and %q", code, errOut, tt.wantErr)
			}
		})
	}
}

// TestDatabaseKinds checks which settings select PostgreSQL, which the
// embedded store, and which are refused.
func TestDatabaseKinds(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in       string
		postgres bool
		path     string
		err      bool
	}{
		{"", false, DefaultDatabase, false},
		{"postgres://no8s@localhost/no8s", true, "", false},
		{"POSTGRESQL://no8s@localhost/no8s", true, "", false},
		{"host=/var/run/postgresql dbname=no8s", true, "", false},
		{"data/state.db", false, "data/state.db", false},
		{"sqlite://data/state.db", false, "data/state.db", false},
		{"file:/srv/no8s.db", false, "/srv/no8s.db", false},
		{"mysql://x@y/z", false, "", true},
	} {
		if got := isPostgres(tt.in); got != tt.postgres {
			t.Errorf("isPostgres(%q) = %v", tt.in, got)
		}
		if tt.postgres {
			continue
		}
		path, err := embeddedPath(tt.in)
		if (err != nil) != tt.err || path != tt.path {
			t.Errorf("embeddedPath(%q) = %q, %v", tt.in, path, err)
		}
	}
}
