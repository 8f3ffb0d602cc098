package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"github.com/no8s/no8s-agent/store"
)

// unavailable wraps err with store.ErrUnavailable when it says the
// database cannot be reached, so that callers can tell "try again later"
// from a bug or a bad request.
func unavailable(err error) error {
	if err == nil || errors.Is(err, store.ErrUnavailable) || !unreachable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
}

// unreachable reports whether err comes from not reaching the database:
// connecting failed, the connection broke, the pool is closed, or the
// server refuses sessions (shutting down, starting up, out of connections).
func unreachable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false // the caller gave up; that says nothing about the database
	}
	var connectErr *pgconn.ConnectError
	var pgErr *pgconn.PgError
	var opErr *net.OpError
	switch {
	case errors.As(err, &pgErr):
		// Class 08: connection exception; 57P01-57P03: admin or crash
		// shutdown, cannot connect now; 53300: too many connections.
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" ||
			pgErr.Code == "57P03" || pgErr.Code == "53300"
	case errors.As(err, &connectErr), errors.As(err, &opErr),
		errors.Is(err, puddle.ErrClosedPool), errors.Is(err, pgconn.ErrConnClosed), errors.Is(err, net.ErrClosed),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	return false
}

// classifying is a querier whose errors say when the database is
// unreachable. Every query of the Store goes through one, so no method
// has to remember to classify.
type classifying struct{ q querier }

func (c classifying) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := c.q.Exec(ctx, sql, args...)
	return tag, unavailable(err)
}

func (c classifying) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := c.q.Query(ctx, sql, args...)
	if err != nil {
		return rows, unavailable(err)
	}
	return classifyingRows{rows}, nil
}

func (c classifying) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return classifyingRow{c.q.QueryRow(ctx, sql, args...)}
}

func (c classifying) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := c.q.Begin(ctx)
	return tx, unavailable(err)
}

type classifyingRows struct{ pgx.Rows }

func (r classifyingRows) Err() error             { return unavailable(r.Rows.Err()) }
func (r classifyingRows) Scan(dest ...any) error { return unavailable(r.Rows.Scan(dest...)) }
func (r classifyingRow) Scan(dest ...any) error  { return unavailable(r.row.Scan(dest...)) }

type classifyingRow struct{ row pgx.Row }
