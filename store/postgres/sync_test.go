package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/store/postgres/pgtest"
)

// TestLockSourceSerializes shows that a second transaction's LockSource
// waits for the first transaction to end, and that other sources do not.
func TestLockSourceSerializes(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	holding := make(chan struct{})
	release := make(chan struct{})
	firstDone := make(chan error, 1)
	go func() {
		firstDone <- s.InTx(ctx, func(ctx context.Context, tx store.Store) error {
			if err := tx.LockSource(ctx, "infra"); err != nil {
				return err
			}
			close(holding)
			<-release
			return nil
		})
	}()
	<-holding

	// Another source's lock is independent.
	if err := s.InTx(ctx, func(ctx context.Context, tx store.Store) error { return tx.LockSource(ctx, "other") }); err != nil {
		t.Fatal(err)
	}

	secondDone := make(chan error, 1)
	go func() {
		secondDone <- s.InTx(ctx, func(ctx context.Context, tx store.Store) error { return tx.LockSource(ctx, "infra") })
	}()
	// Wait until PostgreSQL shows the second transaction waiting for the lock.
	for {
		waiting := query[int64](t, url, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`)
		if waiting == 1 {
			break
		}
		select {
		case err := <-secondDone:
			t.Fatalf("second LockSource returned while the first held the lock: %v", err)
		case <-ctx.Done():
			t.Fatal("the second transaction never waited for the lock")
		case <-time.After(10 * time.Millisecond):
		}
	}
	close(release)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	if err := <-secondDone; err != nil {
		t.Fatal(err)
	}
}

// TestNotifyOnCommitOnly shows that a notification inside a transaction is
// delivered when it commits and never when it rolls back.
func TestNotifyOnCommitOnly(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := open(t, url)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	listener, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(context.Background())
	if _, err := listener.Exec(ctx, "LISTEN "+store.TopicResources); err != nil {
		t.Fatal(err)
	}
	rollback := errors.New("roll back")
	err = s.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		if err := tx.Notify(ctx, store.TopicResources, "rolled-back"); err != nil {
			return err
		}
		return rollback
	})
	if !errors.Is(err, rollback) {
		t.Fatal(err)
	}
	if err := s.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		return tx.Notify(ctx, store.TopicResources, "committed")
	}); err != nil {
		t.Fatal(err)
	}
	n, err := listener.WaitForNotification(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Notifications arrive in commit order, so the first one proves the
	// rolled-back one was never sent.
	if n.Channel != store.TopicResources || n.Payload != "committed" {
		t.Errorf("notification %s %q, want %s committed", n.Channel, n.Payload, store.TopicResources)
	}
}
