package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/no8s/no8s-agent/store/postgres"
)

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("migrate", "migrate --database URL\n\nApplies the pending database migrations and exits. Applying them again changes nothing.\nThe password may come from PGPASSWORD or ~/.pgpass instead of the URL.", stderr)
	database := fs.String("database", "", "PostgreSQL URL, e.g. postgres://no8s@localhost:5432/no8s")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	rest, code := parseFlags(fs, args)
	if code >= 0 {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "migrate: unexpected argument %q\n", rest[0])
		return exitError
	}
	if *database == "" {
		fmt.Fprintln(stderr, "migrate: --database is required (a postgres:// URL)")
		return exitError
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	st, err := postgres.Open(ctx, *database)
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
