// Package retention trims the history the store keeps: reconcile attempts
// per resource and sync attempts per source, by count and by age. It runs
// in the background of every agent, in batches of short transactions, so
// that reconciles and syncs writing history never wait long behind it.
// Agents sharing a database may trim at the same time: a row two of them
// pick is deleted once.
package retention

import (
	"context"
	"log/slog"
	"time"

	"github.com/no8s/no8s-agent/store"
)

const (
	// DefaultInterval is how often history is trimmed.
	DefaultInterval = 10 * time.Minute
	// DefaultBatch is how many rows one transaction deletes at most.
	DefaultBatch = 1000
)

// Trimmer trims the history of Store to Limits every Interval.
type Trimmer struct {
	Store  store.Store
	Limits store.HistoryLimits
	// Interval is the time between trims; DefaultInterval when zero. The
	// first trim runs at once.
	Interval time.Duration
	// Batch bounds one transaction; DefaultBatch when zero.
	Batch int
	// Logger receives what was trimmed and failures; nil discards them.
	Logger *slog.Logger
}

// Run trims until ctx is done.
func (t *Trimmer) Run(ctx context.Context) {
	interval := t.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	log := t.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if t.Limits.MaxPerResource == 0 && t.Limits.MaxAge == 0 {
		return // nothing is ever trimmed
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		start := time.Now()
		n, err := t.Trim(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("trimming history failed; trying again later", "trimmed", n, "error", err)
		case n > 0:
			log.Info("trimmed history", "records", n, "maxPerResource", t.Limits.MaxPerResource,
				"maxAge", t.Limits.MaxAge, "took", time.Since(start).Round(time.Millisecond))
		}
		timer.Reset(interval)
	}
}

// Trim deletes every record beyond the limits, a batch per transaction,
// and returns how many it deleted.
func (t *Trimmer) Trim(ctx context.Context) (int, error) {
	batch := t.Batch
	if batch <= 0 {
		batch = DefaultBatch
	}
	total := 0
	for ctx.Err() == nil {
		n, err := t.Store.TrimHistory(ctx, t.Limits, batch)
		total += n
		if err != nil || n < batch {
			return total, err
		}
	}
	return total, ctx.Err()
}
