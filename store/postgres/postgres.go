// Package postgres is the PostgreSQL implementation of store.Store, built on
// pgx v5 and pgxpool. Several agents may share one database: writes that
// read before they write lock the rows they read, and migrations are
// serialized with an advisory lock.
//
// Round-trip conventions:
//   - Times come back in UTC with PostgreSQL's microsecond precision.
//   - Durations are stored as whole milliseconds.
//   - Specs, schemas and outputs are stored as json, byte for byte as given;
//     a nil or empty json.RawMessage is stored as NULL and comes back nil.
//   - Empty maps and slices (labels, annotations, dependsOn, conditions,
//     problems) come back nil, whether they were written nil or empty.
//   - Origin.File of a resource comes back as its Source.Path.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/no8s/no8s-agent/migrations"
	"github.com/no8s/no8s-agent/store"
)

// ErrMigrationsPending means the database schema is older than this binary
// needs; Migrate brings it up to date.
var ErrMigrationsPending = errors.New("database schema is not current: migrations are pending")

// ErrSchemaTooNew means the database was migrated by a newer binary than
// this one; running this binary against it could corrupt it.
var ErrSchemaTooNew = errors.New("database schema is newer than this binary supports")

// Advisory lock keys, two-int form: (lockClass, lockKind) for global locks
// and (lockClass+kind, hash) for per-object ones, so that the agent's locks
// cannot collide with each other or, realistically, with anyone else's.
const (
	lockClass        int32 = 0x6e6f3873 // "no8s"
	lockMigrate      int32 = 1
	lockClassTypeKey int32 = lockClass + 1
)

// querier is what the pool and a transaction have in common, so that every
// method runs unchanged in and out of InTx.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Store is a store.Store backed by PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	q    querier
	// tx is set when the Store is bound to a transaction by InTx.
	tx pgx.Tx
}

var _ store.Store = (*Store)(nil)

// Option tunes Open.
type Option func(*pgxpool.Config)

// WithPoolSize sizes the connection pool for n connections at once, unless
// the connection string says otherwise with pool_max_conns. pgxpool's own
// default, the number of cores and at least 4, is too small for an agent
// whose workers each renew a lease while its action runs: with 8 workers
// on 2 cores, renewals would queue behind each other and leases expire.
func WithPoolSize(n int) Option {
	return func(cfg *pgxpool.Config) {
		if n > int(cfg.MaxConns) {
			cfg.MaxConns = int32(n)
		}
	}
}

// Open connects to the database at url (a postgres:// URL or a key=value
// connection string; pgxpool settings such as pool_max_conns are honoured)
// and checks that it answers. It does not migrate: call Migrate.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse connection string: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		for _, opt := range opts {
			opt(cfg)
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: create pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect to %s/%s: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Database, unavailable(quietTLS{err}))
	}
	return &Store{pool: pool, q: classifying{pool}}, nil
}

// quietTLS leaves out of a connection error's text the attempt that found
// the server without TLS: with sslmode=prefer, the default, the attempt
// without TLS that follows says what went wrong (a password, a database
// that does not exist), and the line before it only misled.
type quietTLS struct{ err error }

func (e quietTLS) Error() string {
	msg := e.err.Error()
	var kept []string
	dropped := false
	for _, line := range strings.Split(msg, "\n") {
		if strings.Contains(line, "server refused TLS connection") {
			dropped = true
			continue
		}
		kept = append(kept, line)
	}
	// Only when another attempt remains to say why.
	if !dropped || len(kept) < 2 {
		return msg
	}
	return strings.Join(kept, "\n")
}

func (e quietTLS) Unwrap() error { return e.err }

// MaxConns is the size of the connection pool: pool_max_conns from the
// URL, else pgxpool's default (the number of cores, at least 4). The API
// sizes its read limit from it.
func (s *Store) MaxConns() int { return int(s.pool.Config().MaxConns) }

// Close closes the pool. On a Store bound to a transaction it does nothing.
func (s *Store) Close() {
	if s.tx == nil {
		s.pool.Close()
	}
}

// InTx runs fn in a transaction and commits when fn returns nil; otherwise,
// or if fn panics, it rolls back. Inside InTx, a nested InTx runs within the
// same transaction, as a savepoint that an error rolls back alone. As always
// in PostgreSQL, a statement that fails (a unique violation, say) aborts the
// transaction: fn should return the error rather than carry on.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context, tx store.Store) error) error {
	err := pgx.BeginFunc(ctx, s.q, func(tx pgx.Tx) error {
		return fn(ctx, &Store{pool: s.pool, q: classifying{tx}, tx: tx})
	})
	if err != nil {
		// Commit and rollback errors do not pass through classifying.
		return fmt.Errorf("postgres: transaction: %w", unavailable(err))
	}
	return nil
}

// withTx runs fn on a Store bound to a transaction: the current one when s
// is already in InTx, else a new one.
func (s *Store) withTx(ctx context.Context, fn func(s *Store) error) error {
	if s.tx != nil {
		return fn(s)
	}
	return unavailable(pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return fn(&Store{pool: s.pool, q: classifying{tx}, tx: tx})
	}))
}

// loadMigrations parses the embedded migrations once.
var loadMigrations = sync.OnceValues(func() ([]migrations.Migration, error) {
	return migrations.Load(migrations.Postgres, "postgres")
})

// Migrate applies the migrations the database lacks, each in its own
// transaction, and records each in schema_migrations. Agents that migrate at
// the same time wait for each other; a database that is current is left
// unchanged. A database migrated by a newer binary fails with ErrSchemaTooNew.
func (s *Store) Migrate(ctx context.Context) error {
	migs, err := loadMigrations()
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if s.tx != nil {
		return fmt.Errorf("postgres: migrate inside a transaction: %w", store.ErrInvalid)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: migrate: acquire connection: %w", err)
	}
	defer conn.Release()
	// A session lock, not a transaction one: it must span the transactions
	// of all the migrations.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1, $2)", lockClass, lockMigrate); err != nil {
		return fmt.Errorf("postgres: migrate: take lock: %w", err)
	}
	defer func() {
		unlockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(unlockCtx, "SELECT pg_advisory_unlock($1, $2)", lockClass, lockMigrate); err != nil {
			// Closing the session is the only other way to release the lock.
			conn.Conn().Close(unlockCtx)
		}
	}()

	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return fmt.Errorf("postgres: migrate: create schema_migrations: %w", err)
	}
	applied, err := appliedVersions(ctx, conn)
	if err != nil {
		return err
	}
	latest := len(migs)
	for v := range applied {
		if v > latest {
			return fmt.Errorf("postgres: migrate: %w: the database has migration %d, this binary knows up to %d; upgrade the agent",
				ErrSchemaTooNew, v, latest)
		}
	}
	for _, m := range migs {
		if applied[m.Version] {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name)
			return err
		})
		if err != nil {
			return fmt.Errorf("postgres: apply migration %04d_%s: %w", m.Version, m.Name, err)
		}
	}
	return nil
}

// appliedVersions reads schema_migrations.
func appliedVersions(ctx context.Context, q querier) (map[int]bool, error) {
	rows, err := q.Query(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("postgres: read schema_migrations: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("postgres: read schema_migrations: %w", err)
	}
	applied := make(map[int]bool, len(versions))
	for _, v := range versions {
		applied[int(v)] = true
	}
	return applied, nil
}

// Ping checks that the database answers and that its schema is the one this
// binary expects: ErrMigrationsPending when migrations are missing,
// ErrSchemaTooNew when the database is ahead.
func (s *Store) Ping(ctx context.Context) error {
	migs, err := loadMigrations()
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if s.tx == nil {
		if err := s.pool.Ping(ctx); err != nil {
			return fmt.Errorf("postgres: ping: %w", unavailable(err))
		}
	}
	// Checked first so that a missing table does not abort a caller's transaction.
	var exists bool
	if err := s.q.QueryRow(ctx, "SELECT to_regclass('schema_migrations') IS NOT NULL").Scan(&exists); err != nil {
		return fmt.Errorf("postgres: ping: %w", err)
	}
	applied := map[int]bool{}
	if exists {
		if applied, err = appliedVersions(ctx, s.q); err != nil {
			return err
		}
	}
	latest, pending := len(migs), 0
	for _, m := range migs {
		if !applied[m.Version] {
			pending++
		}
	}
	for v := range applied {
		if v > latest {
			return fmt.Errorf("postgres: %w: the database has migration %d, this binary knows up to %d; upgrade the agent",
				ErrSchemaTooNew, v, latest)
		}
	}
	if pending > 0 {
		return fmt.Errorf("postgres: %w: %d of %d migrations not applied; run the agent's migrate command",
			ErrMigrationsPending, pending, latest)
	}
	return nil
}

// mapErr turns driver errors into the store's domain errors, keeping both
// in the chain, and prefixes what the operation was about.
func mapErr(err error, what string) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	case errors.As(err, &pgErr) && pgErr.Code == "23505": // unique_violation
		return fmt.Errorf("%s already exists: %w: %w", what, store.ErrConflict, err)
	case errors.As(err, &pgErr) && (pgErr.Code == "23514" || pgErr.Code == "23502" || pgErr.Code == "22P02"):
		// check_violation, not_null_violation, invalid_text_representation (bad JSON)
		return fmt.Errorf("%s: %w: %w", what, store.ErrInvalid, err)
	}
	var ownerErr *store.OwnerConflictError
	if errors.As(err, &ownerErr) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) ||
		errors.Is(err, store.ErrInUse) || errors.Is(err, store.ErrInvalid) {
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}

// invalid returns an ErrInvalid error.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), store.ErrInvalid)
}
