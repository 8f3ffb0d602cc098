package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
	"github.com/no8s/no8s-agent/store/sqlite"
)

// DefaultDatabase is the embedded store's file when the configuration and
// the flags name no database.
const DefaultDatabase = ".no8s/state.db"

// agentStore is a store the agent can also migrate.
type agentStore interface {
	store.Store
	Migrate(ctx context.Context) error
}

// storeMode says how a command uses the store.
type storeMode int

const (
	// readStore opens an existing store; an embedded file must exist.
	readStore storeMode = iota
	// runStore creates the embedded file when missing and holds it alone.
	runStore
	// migrateStore creates the embedded file when missing.
	migrateStore
)

// isPostgres tells a PostgreSQL connection string from an embedded
// store's path: a postgres:// or postgresql:// URL (any case), or a
// key=value string such as "host=/run/postgresql dbname=no8s".
func isPostgres(database string) bool {
	lower := strings.ToLower(database)
	if strings.HasPrefix(lower, "postgres://") || strings.HasPrefix(lower, "postgresql://") {
		return true
	}
	return strings.Contains(database, "=") && !strings.Contains(database, "://") && !strings.HasPrefix(lower, "file:")
}

// embeddedPath is the file an embedded database setting names: a path,
// optionally written sqlite://path or file:path. Another URL scheme is a
// mistake, not a file name.
func embeddedPath(database string) (string, error) {
	lower := strings.ToLower(database)
	for _, prefix := range []string{"sqlite://", "file:"} {
		if strings.HasPrefix(lower, prefix) {
			database = database[len(prefix):]
			lower = lower[len(prefix):]
		}
	}
	if strings.Contains(lower, "://") {
		return "", fmt.Errorf("database %q: want a postgres:// URL, or the embedded store's file (a path, or sqlite://path)", database)
	}
	if database == "" {
		return DefaultDatabase, nil
	}
	return database, nil
}

// openStore opens the store that database names: a postgres:// URL, or else
// the embedded store's file (DefaultDatabase when empty). conns is how
// many connections the agent may use at once (PostgreSQL only; zero for
// the driver's default).
func openStore(ctx context.Context, database string, mode storeMode, conns int) (agentStore, error) {
	if isPostgres(database) {
		return postgres.Open(ctx, database, postgres.WithPoolSize(conns))
	}
	path, err := embeddedPath(database)
	if err != nil {
		return nil, err
	}
	if mode == readStore {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no database at %s: start the agent there first, or pass --database (a file, or a postgres:// URL)", path)
		}
	}
	st, err := sqlite.Open(ctx, path, sqlite.Options{Exclusive: mode == runStore})
	if errors.Is(err, sqlite.ErrLocked) {
		return nil, fmt.Errorf("%w; stop that agent first, or give this one its own --database", err)
	}
	return st, err
}

// describeStore says where the data lives, for the log: the file, or the
// PostgreSQL host and database (never the password).
func describeStore(database string) []any {
	if !isPostgres(database) {
		path, _ := embeddedPath(database)
		return []any{"store", "embedded", "path", path}
	}
	cfg, err := pgx.ParseConfig(database)
	if err != nil {
		return []any{"store", "postgres"}
	}
	return []any{"store", "postgres", "host", cfg.Host, "database", cfg.Database}
}

// logStore logs which store the agent uses.
func logStore(log *slog.Logger, database string) {
	log.Info("using store", describeStore(database)...)
}
