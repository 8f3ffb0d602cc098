package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/no8s/no8s-agent/metrics"
	"github.com/no8s/no8s-agent/sync"
)

// TestSyncResult checks how sync attempts are counted: a revision refused
// before and skipped because nothing changed still counts as refused, not
// as already applied.
func TestSyncResult(t *testing.T) {
	t.Parallel()
	refusal := &sync.Error{Reason: sync.ReasonPruneLimitExceeded, Message: "over the limit"}
	tests := []struct {
		name string
		res  *sync.Result
		err  error
		want string
	}{
		{"applied", &sync.Result{}, nil, metrics.SyncApplied},
		{"already applied", &sync.Result{Skipped: true}, nil, metrics.SyncUnchanged},
		{"refused before, nothing changed", &sync.Result{Skipped: true, Refused: true}, nil, metrics.SyncRefused},
		{"refused", nil, fmt.Errorf("sync infra: %w", refusal), metrics.SyncRefused},
		{"store down", nil, errors.New("connection refused"), metrics.SyncFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := syncResult(tt.res, tt.err); got != tt.want {
				t.Errorf("syncResult = %q, want %q", got, tt.want)
			}
		})
	}
}
