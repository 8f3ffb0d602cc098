package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("migrate", "migrate [--database URL|FILE]\n\nApplies the pending database migrations and exits. Applying them again changes nothing.\nWithout --database it migrates the embedded store at "+DefaultDatabase+". A PostgreSQL password\nmay come from PGPASSWORD or ~/.pgpass instead of the URL.", stdout, stderr)
	database := fs.String("database", "", "a postgres:// URL, or the embedded store's file (default "+DefaultDatabase+")")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	rest, code := parseFlags(ctx, fs, args)
	if code >= 0 {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "migrate: unexpected argument %q\n", rest[0])
		return exitError
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	st, err := openStore(ctx, *database, migrateStore, 0)
	if err != nil {
		fmt.Fprintf(stderr, "migrate: %v\n", err)
		return exitError
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		fmt.Fprintf(stderr, "migrate: %v\n", err)
		return exitError
	}
	if err := st.Ping(ctx); err != nil {
		fmt.Fprintf(stderr, "migrate: after migrating: %v\n", err)
		return exitError
	}
	fmt.Fprintln(stdout, "database schema is current")
	return exitOK
}
