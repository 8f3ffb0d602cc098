package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres"
)

// TestUnreachableIsErrUnavailable checks that every way of not reaching
// the database comes back as store.ErrUnavailable, which callers answer
// with "retry later", and that other failures do not.
func TestUnreachableIsErrUnavailable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	// Nothing listens on a port just closed: connections are refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if _, err := postgres.Open(ctx, fmt.Sprintf("postgres://no8s@%s/db?sslmode=disable&connect_timeout=5", addr)); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Open with the connection refused: %v, want store.ErrUnavailable", err)
	}

	// A closed pool, for reads, writes, transactions and Ping.
	s := migrated(t)
	s.Close()
	calls := map[string]func() error{
		"read": func() error { _, err := s.ListResources(ctx, store.ResourceFilter{}); return err },
		"get":  func() error { _, err := s.GetSource(ctx, "infra"); return err },
		"write": func() error {
			_, err := s.PutSource(ctx, &store.Source{Name: "infra", Kind: store.SourceDir})
			return err
		},
		"tx":   func() error { return s.InTx(ctx, func(context.Context, store.Store) error { return nil }) },
		"ping": func() error { return s.Ping(ctx) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s on a closed pool: %v, want store.ErrUnavailable", name, err)
		}
	}

	// A store that answers: not found is not unavailable, nor is a
	// cancelled context.
	live := migrated(t)
	if _, err := live.GetSource(ctx, "nope"); !errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("missing source: %v", err)
	}
	done, stop := context.WithCancel(ctx)
	stop()
	if _, err := live.ListResources(done, store.ResourceFilter{}); err == nil || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("cancelled context: %v, want an error that is not store.ErrUnavailable", err)
	}
}
