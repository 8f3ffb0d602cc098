package pgtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

func TestURLGivesFreshDatabases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	seen := map[string]bool{}
	for range 3 {
		u := URL(t)
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatalf("connect to %s: %v", u, err)
		}
		var db string
		var tables int
		err = conn.QueryRow(ctx, `SELECT current_database(),
			(SELECT count(*) FROM pg_tables WHERE schemaname = 'public')`).Scan(&db, &tables)
		conn.Close(ctx)
		if err != nil {
			t.Fatalf("query: %v", err)
		}
		if tables != 0 {
			t.Errorf("database %s has %d tables, want 0", db, tables)
		}
		if seen[db] {
			t.Errorf("database %s handed out twice", db)
		}
		seen[db] = true
		if !strings.Contains(db, "urlgivesfreshdatabases") {
			t.Errorf("database name %q does not hint at the test", db)
		}
	}
}

func TestDatabaseDroppedOnCleanup(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("inner", func(t *testing.T) {
		conn, err := pgx.Connect(context.Background(), URL(t))
		if err != nil {
			t.Fatal(err)
		}
		name = conn.Config().Database
		conn.Close(context.Background())
	})
	conn, err := pgx.Connect(context.Background(), URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(context.Background(),
		`SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Errorf("database %s still exists after its test ended", name)
	}
}

func TestDBNameIsValid(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("Very/Long Test Name-", 10)
	n := dbName(long)
	if len(n) > 63 {
		t.Errorf("dbName(%q) = %q, longer than 63 bytes", long, n)
	}
	if unsafeRE.MatchString(n) {
		t.Errorf("dbName(%q) = %q has characters that need quoting", long, n)
	}
	if dbName("x") == dbName("x") {
		t.Error("dbName is not unique")
	}
}

func TestFindBinaries(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	root := t.TempDir()
	glob := filepath.Join(root, "*", "bin")

	_, err := findBinariesIn(glob)
	if err == nil || !strings.Contains(err.Error(), "apt-get install postgresql") {
		t.Fatalf("without binaries: err = %v, want one telling how to install them", err)
	}

	for _, v := range []string{"9.6", "16", "15"} {
		bin := filepath.Join(root, v, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"initdb", "postgres"} {
			if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A newer version lacking the server binary must not be chosen.
	if err := os.MkdirAll(filepath.Join(root, "17", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := findBinariesIn(glob)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "16", "bin"); got != want {
		t.Errorf("findBinariesIn = %s, want %s", got, want)
	}
}
