package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// maxCachedStmts bounds a cache: the store's statements are a fixed set
// but for list filters, whose combinations could keep growing.
const maxCachedStmts = 256

// stmtCache keeps the prepared statements of one database. Parsing a
// statement (and compiling the triggers it fires) costs SQLite more than
// running it, so every query is prepared once per connection and reused.
type stmtCache struct {
	db *sql.DB
	// lazy is set for the writer's one connection, which a transaction
	// holds: preparing on the database then would wait for the connection
	// forever. Statements are then only noted while a transaction runs,
	// and prepared by the next transaction before it begins.
	lazy bool

	mu     sync.Mutex
	stmts  map[string]*sql.Stmt
	wanted map[string]bool
	closed bool
}

func newStmtCache(db *sql.DB, lazy bool) *stmtCache {
	return &stmtCache{db: db, lazy: lazy, stmts: map[string]*sql.Stmt{}, wanted: map[string]bool{}}
}

// get returns the prepared statement of query, or nil when it is not
// prepared (yet): the caller then runs the query text.
func (c *stmtCache) get(ctx context.Context, query string) *sql.Stmt {
	c.mu.Lock()
	st, ok := c.stmts[query]
	full := len(c.stmts)+len(c.wanted) >= maxCachedStmts
	if ok || c.closed || full {
		c.mu.Unlock()
		return st
	}
	if c.lazy {
		c.wanted[query] = true
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	// Prepared without the lock: another goroutine may prepare the same
	// query meanwhile, and then one of the two is kept.
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		// Such as a table that a migration has yet to create: the query
		// text will fail or succeed by itself.
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.stmts[query]; ok || c.closed {
		st.Close()
		return prev
	}
	c.stmts[query] = st
	return st
}

// prepareWanted prepares the statements noted since it last ran. It must
// not be called while the caller holds a connection of c.db.
func (c *stmtCache) prepareWanted(ctx context.Context) {
	c.mu.Lock()
	if len(c.wanted) == 0 || c.closed {
		c.mu.Unlock()
		return
	}
	queries := make([]string, 0, len(c.wanted))
	for q := range c.wanted {
		queries = append(queries, q)
	}
	clear(c.wanted)
	c.mu.Unlock()
	for _, q := range queries {
		st, err := c.db.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		c.mu.Lock()
		if _, ok := c.stmts[q]; ok || c.closed {
			st.Close()
		} else {
			c.stmts[q] = st
		}
		c.mu.Unlock()
	}
}

// close closes the statements; get returns nil from then on.
func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for q, st := range c.stmts {
		st.Close()
		delete(c.stmts, q)
	}
}

// txStmts are the statements a transaction has bound or prepared, so
// that a batch pays for each once, not once a row.
type txStmts struct {
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
}

// stmt returns the statement of query for s's transaction: the writer's
// prepared one, bound to the transaction, or else one prepared on the
// transaction (the writer's is noted, for transactions to come). It
// returns nil when query does not prepare, so that running its text
// reports why.
func (s *Store) stmt(ctx context.Context, query string) *sql.Stmt {
	s.txStmts.mu.Lock()
	defer s.txStmts.mu.Unlock()
	if st, ok := s.txStmts.stmts[query]; ok {
		return st
	}
	var st *sql.Stmt
	if shared := s.wstmts.get(ctx, query); shared != nil {
		st = s.tx.StmtContext(ctx, shared)
	} else {
		var err error
		if st, err = s.tx.PrepareContext(ctx, query); err != nil {
			return nil
		}
	}
	// Closed with the transaction.
	s.txStmts.stmts[query] = st
	return st
}

// query runs a query that returns rows: in the transaction when s is bound
// to one, else on the read pool.
func (s *Store) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if s.tx != nil {
		if st := s.stmt(ctx, query); st != nil {
			return st.QueryContext(ctx, args...)
		}
		return s.tx.QueryContext(ctx, query, args...)
	}
	if st := s.rstmts.get(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return s.rdb.QueryContext(ctx, query, args...)
}

// queryRow runs a query that returns at most one row, like query.
func (s *Store) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	if s.tx != nil {
		if st := s.stmt(ctx, query); st != nil {
			return st.QueryRowContext(ctx, args...)
		}
		return s.tx.QueryRowContext(ctx, query, args...)
	}
	if st := s.rstmts.get(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return s.rdb.QueryRowContext(ctx, query, args...)
}

// exec runs a statement in s's transaction.
func (s *Store) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := s.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return s.tx.ExecContext(ctx, query, args...)
}
