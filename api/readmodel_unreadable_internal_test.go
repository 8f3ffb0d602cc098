package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/no8s/no8s-agent/store"
)

// unreachableStore is a store whose every listen fails with an error that
// names where the database is, as a driver's error does.
type unreachableStore struct {
	store.Store
}

func (unreachableStore) Listen(context.Context, ...string) (<-chan store.Notification, error) {
	return nil, fmt.Errorf("write unix @->/tmp/no8s-pg-secret/.s.PGSQL.5432: write: broken pipe: %w", store.ErrUnavailable)
}

// TestReadModelDoesNotNameTheStore shows what a read is told while the
// store cannot be read: that much, and nothing of the store's own error,
// which names its socket, host or user.
func TestReadModelDoesNotNameTheStore(t *testing.T) {
	t.Parallel()
	m := newReadModel(unreachableStore{}, slog.New(slog.DiscardHandler), time.Second)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := m.await(t.Context(), 0)
		if err == nil {
			m.mu.RUnlock()
			t.Fatal("the read model is ready on a store that cannot be read")
		}
		var nr errModelNotReady
		if errors.As(err, &nr) && nr.why != "" && !strings.Contains(nr.why, "being built") {
			if strings.Contains(nr.why, "/tmp/") || strings.Contains(nr.why, "PGSQL") || nr.why != errStoreUnreadable {
				t.Fatalf("a read is told %q", nr.why)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no refusal for the unreadable store, last: %v", err)
		}
	}
}
