// Package sqlite is the embedded implementation of store.Store: one SQLite
// database file, through modernc.org/sqlite (pure Go, no cgo), for an agent
// that runs alone and needs no database server.
//
// One process owns the file (see Options.Exclusive), so the design leans
// on that:
//   - The database runs in WAL mode. All writes go through one connection,
//     in transactions begun IMMEDIATE, so writers queue in the process
//     instead of meeting SQLITE_BUSY, and read-modify-write methods need no
//     row locks: their transaction is the only writer. Reads outside InTx
//     use a pool of their own connections, which WAL lets read while the
//     writer writes.
//   - The agent's clock is the store's clock: every "now" (leases, due
//     times, timestamps) is passed in from Go.
//   - Notifications stay in the process. Listen subscribes to them; Notify
//     and the writes that notify (including the status events that
//     triggers write) are delivered when their transaction commits.
//
// Round-trip conventions:
//   - Times are stored as Unix milliseconds and come back in UTC, with
//     millisecond precision.
//   - Durations are stored as whole milliseconds.
//   - Specs, schemas and outputs are stored as JSON text, byte for byte as
//     given; a nil or empty json.RawMessage is stored as NULL and comes
//     back nil.
//   - Empty maps and slices (labels, annotations, dependsOn, conditions,
//     problems) come back nil, whether they were written nil or empty.
//   - Origin.File of a resource comes back as its Source.Path.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/no8s/no8s-agent/migrations"
	"github.com/no8s/no8s-agent/store"
)

// ErrLocked means another agent holds the database file (see
// Options.Exclusive).
var ErrLocked = errors.New("database file is locked by another agent")

// ErrMigrationsPending means the database schema is older than this binary
// needs; Migrate brings it up to date.
var ErrMigrationsPending = errors.New("database schema is not current: migrations are pending")

// ErrSchemaTooNew means the database was migrated by a newer binary than
// this one; running this binary against it could corrupt it.
var ErrSchemaTooNew = errors.New("database schema is newer than this binary supports")

// busyTimeout is how long a statement waits for a lock another process
// holds (a second, non-exclusive Open of the file) before it fails.
const busyTimeout = 5 * time.Second

// Options tune Open.
type Options struct {
	// Exclusive takes an advisory lock on the file path+".lock", held until
	// Close, so that only one agent runs on a database file: a second
	// Exclusive Open fails at once with an error wrapping ErrLocked that
	// names the file and the process that holds it. Read-only tools open
	// without it, alongside the agent.
	Exclusive bool
}

// querier is what a database and a transaction have in common, so that
// every method runs unchanged in and out of InTx.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// shared is what every Store value of one Open shares.
type shared struct {
	path string
	// wdb has exactly one connection: the writer.
	wdb *sql.DB
	// rdb is the pool of read-only connections.
	rdb *sql.DB
	// wstmts and rstmts are the prepared statements of wdb and rdb.
	wstmts, rstmts *stmtCache
	hub            *hub
	lock           *os.File
	once           sync.Once
	// beforeCommit, set by tests, runs just before a transaction commits,
	// to look at what others can see then.
	beforeCommit func()
}

// Store is a store.Store backed by an SQLite file. It is safe for
// concurrent use.
type Store struct {
	*shared
	// tx is set when the Store is bound to a transaction by InTx, and
	// txStmts with it.
	tx      *sql.Tx
	txStmts *txStmts
	// depth counts the InTx calls nested in the transaction, naming their
	// savepoints.
	depth int
}

var _ store.Store = (*Store)(nil)

// Open opens the database file at path, creating it (readable by its owner
// only) and its parent folder when missing, and checks that it answers. It
// does not migrate: call Migrate.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("sqlite: open: %w", invalid("no database path"))
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return nil, fmt.Errorf("sqlite: open %s: create folder: %w", path, err)
	}
	sh := &shared{path: path, hub: newHub()}
	if opts.Exclusive {
		if sh.lock, err = lockFile(path); err != nil {
			return nil, err
		}
	}
	fail := func(err error) (*Store, error) {
		sh.close()
		return nil, err
	}
	// Created here rather than by SQLite so that the file (and the WAL and
	// shared-memory files, which copy its mode) is private: outputs may
	// hold what actions consider secrets.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fail(fmt.Errorf("sqlite: open %s: %w", path, err))
	}
	f.Close()

	busy := fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds())
	sh.wdb, err = sql.Open("sqlite", dsn(abs, url.Values{
		"_txlock": {"immediate"},
		"_pragma": {busy, "journal_mode(WAL)", "synchronous(NORMAL)"},
	}))
	if err != nil {
		return fail(fmt.Errorf("sqlite: open %s: %w", path, err))
	}
	// One writer: transactions queue for the connection in the process.
	sh.wdb.SetMaxOpenConns(1)
	sh.wdb.SetMaxIdleConns(1)
	sh.wdb.SetConnMaxLifetime(0)
	sh.wdb.SetConnMaxIdleTime(0)
	// The first connection switches the file to WAL before any reader
	// connects.
	var mode string
	if err := sh.wdb.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fail(fmt.Errorf("sqlite: open %s: %w", path, err))
	}
	if !strings.EqualFold(mode, "wal") {
		return fail(fmt.Errorf("sqlite: open %s: journal mode is %q, not WAL; is the file on a network file system?", path, mode))
	}

	readers := max(4, runtime.GOMAXPROCS(0))
	sh.rdb, err = sql.Open("sqlite", dsn(abs, url.Values{
		"_pragma": {busy, "query_only(1)"},
	}))
	if err != nil {
		return fail(fmt.Errorf("sqlite: open %s: %w", path, err))
	}
	sh.rdb.SetMaxOpenConns(readers)
	sh.rdb.SetMaxIdleConns(readers)
	sh.rdb.SetConnMaxLifetime(0)
	sh.rdb.SetConnMaxIdleTime(0)
	if err := sh.rdb.PingContext(ctx); err != nil {
		return fail(fmt.Errorf("sqlite: open %s: %w", path, err))
	}
	sh.wstmts, sh.rstmts = newStmtCache(sh.wdb, true), newStmtCache(sh.rdb, false)
	return &Store{shared: sh}, nil
}

// dsn returns the driver's name for the file at abs with params: a file:
// URI, so that any character of the path survives (a plain name would end
// at its first '?').
func dsn(abs string, params url.Values) string {
	p := filepath.ToSlash(abs)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows drive letter
	}
	return (&url.URL{Scheme: "file", Path: p, RawQuery: params.Encode()}).String()
}

// Path returns the database file's path as given to Open.
func (s *Store) Path() string { return s.path }

// Close closes the database and releases the lock, and ends the
// subscriptions of Listen. On a Store bound to a transaction it does
// nothing.
func (s *Store) Close() {
	if s.tx == nil {
		s.close()
	}
}

func (sh *shared) close() {
	sh.once.Do(func() {
		sh.hub.close()
		if sh.wstmts != nil {
			sh.wstmts.close()
			sh.rstmts.close()
		}
		if sh.rdb != nil {
			sh.rdb.Close()
		}
		if sh.wdb != nil {
			sh.wdb.Close()
		}
		if sh.lock != nil {
			unlockFile(sh.lock)
		}
	})
}

// q returns what reads go through: the transaction when bound to one, so
// that it sees its own writes, else the read pool.
func (s *Store) q() querier {
	if s.tx != nil {
		return s.tx
	}
	return s.rdb
}

// inTx marks the context InTx gives fn, so that a write through the outer
// Store with it fails instead of waiting forever for the writer's
// connection, which fn's own transaction holds.
type inTx struct{ sh *shared }

// InTx runs fn in a write transaction and commits when fn returns nil;
// otherwise, or if fn panics, it rolls back. Notifications made in it are
// delivered after the commit. Inside InTx, a nested InTx runs within the
// same transaction, as a savepoint that an error rolls back alone.
//
// The transaction holds the one writer: other writes wait until it ends.
// Reads through the outer Store do not wait, and do not see fn's writes;
// writes through it with the context given to fn fail with ErrInvalid.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context, tx store.Store) error) error {
	if s.tx != nil {
		if err := s.savepoint(ctx, func(s *Store) error { return fn(ctx, s) }); err != nil {
			return fmt.Errorf("sqlite: transaction: %w", err)
		}
		return nil
	}
	err := s.withTx(ctx, func(s *Store) error {
		return fn(context.WithValue(ctx, inTx{s.shared}, true), s)
	})
	if err != nil {
		return fmt.Errorf("sqlite: transaction: %w", err)
	}
	return nil
}

// savepoint runs fn in a savepoint of the current transaction.
func (s *Store) savepoint(ctx context.Context, fn func(s *Store) error) error {
	inner := &Store{shared: s.shared, tx: s.tx, txStmts: s.txStmts, depth: s.depth + 1}
	name := fmt.Sprintf("no8s_%d", inner.depth)
	if _, err := s.tx.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return err
	}
	done := false
	defer func() {
		if done {
			return
		}
		// An error or a panic: undo the savepoint's work, and its
		// notifications with it, and leave the outer transaction usable.
		undoCtx := context.WithoutCancel(ctx)
		s.tx.ExecContext(undoCtx, "ROLLBACK TO "+name)
		s.tx.ExecContext(undoCtx, "RELEASE "+name)
	}()
	if err := fn(inner); err != nil {
		return err
	}
	if _, err := s.tx.ExecContext(ctx, "RELEASE "+name); err != nil {
		return err
	}
	done = true
	return nil
}

// withTx runs fn on a Store bound to a write transaction: the current one
// when s is already in InTx, else a new one, which it commits when fn
// returns nil and then publishes the transaction's notifications.
func (s *Store) withTx(ctx context.Context, fn func(s *Store) error) error {
	if s.tx != nil {
		return fn(s)
	}
	if ctx.Value(inTx{s.shared}) != nil {
		return invalid("write through the outer Store inside InTx: it would wait for the transaction it is part of; use the transaction's Store")
	}
	// The writer's connection is free until BeginTx: the time to prepare
	// the statements the last transactions ran unprepared.
	s.wstmts.prepareWanted(ctx)
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			tx.Rollback()
		}
	}()
	bound := &Store{shared: s.shared, tx: tx, txStmts: &txStmts{stmts: map[string]*sql.Stmt{}}}
	if err := fn(bound); err != nil {
		return err
	}
	notes, err := bound.drainOutbox(ctx)
	if err != nil {
		return err
	}
	if s.beforeCommit != nil {
		s.beforeCommit()
	}
	if len(notes) == 0 {
		committed = true
		return tx.Commit()
	}
	// Held from the commit to the publication, so that listeners hear
	// transactions in the order they committed: the next transaction can
	// begin as soon as this one commits, and could otherwise publish first.
	s.hub.order.Lock()
	defer s.hub.order.Unlock()
	committed = true
	if err := tx.Commit(); err != nil {
		return err
	}
	s.hub.publish(notes)
	return nil
}

// drainOutbox reads and empties the notifications a transaction made, in
// the order it made them. Like PostgreSQL, it drops repeats of a (topic,
// payload) pair within the transaction.
func (s *Store) drainOutbox(ctx context.Context) ([]store.Notification, error) {
	rows, err := s.query(ctx, `SELECT topic, payload FROM notify_outbox ORDER BY id`)
	if err != nil {
		// Before Migrate there is no outbox, and so nothing to drain: a
		// transaction that only looked (say, Ping) still commits.
		var tables int
		if qerr := s.queryRow(ctx, `SELECT count(*) FROM sqlite_schema WHERE name = 'notify_outbox'`).Scan(&tables); qerr == nil && tables == 0 {
			return nil, nil
		}
		return nil, err
	}
	defer rows.Close()
	var (
		notes []store.Notification
		seen  map[store.Notification]bool
	)
	for rows.Next() {
		var n store.Notification
		if err := rows.Scan(&n.Topic, &n.Payload); err != nil {
			return nil, err
		}
		if seen[n] {
			continue
		}
		if seen == nil {
			seen = map[store.Notification]bool{}
		}
		seen[n] = true
		notes = append(notes, n)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	if len(seen) > 0 {
		if _, err := s.exec(ctx, `DELETE FROM notify_outbox`); err != nil {
			return nil, err
		}
	}
	return notes, nil
}

// loadMigrations parses the embedded migrations once.
var loadMigrations = sync.OnceValues(func() ([]migrations.Migration, error) {
	return migrations.Load(migrations.SQLite, "sqlite")
})

// createSchemaMigrations creates the table that records applied migrations.
const createSchemaMigrations = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	name       TEXT NOT NULL,
	applied_at INTEGER NOT NULL
) STRICT`

// Migrate applies the migrations the database lacks, each in its own
// transaction, and records each in schema_migrations. A database that is
// current is left unchanged. A database migrated by a newer binary fails
// with ErrSchemaTooNew.
func (s *Store) Migrate(ctx context.Context) error {
	migs, err := loadMigrations()
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	if s.tx != nil || ctx.Value(inTx{s.shared}) != nil {
		return fmt.Errorf("sqlite: migrate inside a transaction: %w", store.ErrInvalid)
	}
	latest := len(migs)
	err = s.rawTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, createSchemaMigrations); err != nil {
			return fmt.Errorf("sqlite: migrate: create schema_migrations: %w", err)
		}
		applied, err := appliedVersions(ctx, tx)
		if err != nil {
			return err
		}
		return tooNew(applied, latest)
	})
	if err != nil {
		return err
	}
	for _, m := range migs {
		// Each migration checks again in its own write transaction: a
		// second process migrating the same file waits for it, then finds
		// the work done.
		err := s.rawTx(ctx, func(tx *sql.Tx) error {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = $1`, m.Version).Scan(&n); err != nil || n > 0 {
				return err
			}
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
				m.Version, m.Name, clock().UnixMilli())
			return err
		})
		if err != nil {
			return fmt.Errorf("sqlite: apply migration %04d_%s: %w", m.Version, m.Name, err)
		}
	}
	return nil
}

// rawTx runs fn in a write transaction of its own, without the outbox,
// which may not exist yet.
func (s *Store) rawTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// appliedVersions reads schema_migrations.
func appliedVersions(ctx context.Context, q querier) (map[int]bool, error) {
	rows, err := q.QueryContext(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("sqlite: read schema_migrations: %w", err)
	}
	defer rows.Close()
	applied := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("sqlite: read schema_migrations: %w", err)
		}
		applied[v] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: read schema_migrations: %w", err)
	}
	return applied, nil
}

// tooNew fails with ErrSchemaTooNew when applied holds a version after latest.
func tooNew(applied map[int]bool, latest int) error {
	for v := range applied {
		if v > latest {
			return fmt.Errorf("sqlite: %w: the database has migration %d, this binary knows up to %d; upgrade the agent",
				ErrSchemaTooNew, v, latest)
		}
	}
	return nil
}

// Ping checks that the database answers and that its schema is the one this
// binary expects: ErrMigrationsPending when migrations are missing,
// ErrSchemaTooNew when the database is ahead.
func (s *Store) Ping(ctx context.Context) error {
	migs, err := loadMigrations()
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	if s.tx == nil {
		if err := s.wdb.PingContext(ctx); err != nil {
			return fmt.Errorf("sqlite: ping: %w", err)
		}
		if err := s.rdb.PingContext(ctx); err != nil {
			return fmt.Errorf("sqlite: ping: %w", err)
		}
	}
	var exists bool
	if err := s.q().QueryRowContext(ctx,
		`SELECT count(*) > 0 FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&exists); err != nil {
		return fmt.Errorf("sqlite: ping: %w", err)
	}
	applied := map[int]bool{}
	if exists {
		if applied, err = appliedVersions(ctx, s.q()); err != nil {
			return err
		}
	}
	latest, pending := len(migs), 0
	for _, m := range migs {
		if !applied[m.Version] {
			pending++
		}
	}
	if err := tooNew(applied, latest); err != nil {
		return err
	}
	if pending > 0 {
		return fmt.Errorf("sqlite: %w: %d of %d migrations not applied; run the agent's migrate command",
			ErrMigrationsPending, pending, latest)
	}
	return nil
}

// clock is the store's clock: the current time at the precision it stores.
func clock() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

// mapErr turns driver errors into the store's domain errors, keeping both
// in the chain, and prefixes what the operation was about.
func mapErr(err error, what string) error {
	if err == nil {
		return nil
	}
	var se *sqlitedriver.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%s already exists: %w: %w", what, store.ErrConflict, err)
		case sqlite3.SQLITE_CONSTRAINT_CHECK, sqlite3.SQLITE_CONSTRAINT_NOTNULL, sqlite3.SQLITE_CONSTRAINT_DATATYPE:
			return fmt.Errorf("%s: %w: %w", what, store.ErrInvalid, err)
		}
	}
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	var ownerErr *store.OwnerConflictError
	if errors.As(err, &ownerErr) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) ||
		errors.Is(err, store.ErrInUse) || errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrLeaseLost) {
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}

// invalid returns an ErrInvalid error.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), store.ErrInvalid)
}
