package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	gosync "sync"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// progressEvery limits how often reported progress is written.
const progressEvery = time.Second

// keeper holds a claim's lease while its action runs: it sends heartbeats
// three times per lease duration, writes reported progress at most once a
// second, and cancels the attempt (cause errLeaseLost) when the store says
// the lease is gone or when no heartbeat succeeded for most of a lease
// duration, so that the action stops before another worker may take over.
// It is the action's Reporter.
//
// Progress is written at most once a second, the first time a second after
// the action started.
type keeper struct {
	st     store.Store
	cl     *store.Claim
	d      time.Duration
	cancel context.CancelCauseFunc
	log    *lazyLog

	mu      gosync.Mutex
	message string
	conds   []manifest.Condition // the controller's conditions for progress writes
	plugin  []manifest.Condition // conditions set by the action
	dirty   bool

	// start starts the goroutine, unless stopped first.
	start   *time.Timer
	changed chan struct{}
	quit    chan struct{}
	exited  chan struct{}
}

// startKeeper starts the keeper; stop ends it. Its goroutine starts only
// when there is something to do, the first heartbeat or the first progress
// write: an action done sooner costs no goroutine and no timers.
func startKeeper(ctx context.Context, st store.Store, cl *store.Claim, d time.Duration, cancel context.CancelCauseFunc, log *lazyLog) *keeper {
	k := &keeper{
		st: st, cl: cl, d: d, cancel: cancel, log: log,
		changed: make(chan struct{}, 1), quit: make(chan struct{}), exited: make(chan struct{}),
	}
	started := time.Now()
	k.start = time.AfterFunc(min(d/3, progressEvery), func() { k.run(ctx, started) })
	return k
}

// stop ends the keeper and waits for it; pending progress is dropped, since
// the completion that follows supersedes it.
func (k *keeper) stop() {
	if k.start.Stop() {
		// Its goroutine never started.
		return
	}
	select {
	case <-k.quit:
	default:
		close(k.quit)
	}
	<-k.exited
}

// run keeps the lease of a claim made at started.
func (k *keeper) run(ctx context.Context, started time.Time) {
	defer close(k.exited)
	// Heartbeats are due every third of the lease duration from the claim.
	beat := time.NewTimer(time.Until(started.Add(k.d / 3)))
	defer beat.Stop()
	// The local deadline is measured from when a heartbeat was sent, before
	// the store's clock started the new lease, and ends early, so the action
	// is cancelled while the lease surely still holds.
	deadline := started.Add(k.d * 5 / 6)
	expiry := time.NewTimer(time.Until(deadline))
	defer expiry.Stop()
	// Progress is first written a second in: an action that is done by then
	// costs no write beyond its completion.
	lastProgress := started
	var throttle <-chan time.Time
	for {
		send := false
		select {
		case <-ctx.Done():
			return
		case <-k.quit:
			return
		case <-expiry.C:
			k.log.get().Error("lease could not be renewed in time; cancelling the action")
			k.cancel(errLeaseLost)
			return
		case <-beat.C:
			beat.Reset(k.d / 3)
			send = true
		case <-k.changed:
			if wait := progressEvery - time.Since(lastProgress); wait > 0 {
				throttle = time.After(wait)
				continue
			}
			send = true
		case <-throttle:
			throttle = nil
			send = true
		}
		if !send {
			continue
		}
		sent := time.Now()
		p := k.takeProgress()
		if p != nil {
			lastProgress = sent
		}
		err := k.st.Heartbeat(ctx, k.cl, k.d, p)
		switch {
		case err == nil:
			deadline = sent.Add(k.d * 5 / 6)
			expiry.Reset(time.Until(deadline))
		case errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrNotFound):
			k.cancel(errLeaseLost)
			return
		case ctx.Err() != nil:
			return
		default:
			if p != nil {
				k.markDirty()
			}
			k.log.get().Warn("lease heartbeat failed", "error", err, "lease valid for", time.Until(deadline).Round(time.Millisecond))
		}
	}
}

// progress records the controller's own progress (message and conditions)
// and schedules its write.
func (k *keeper) progress(message string, conds []manifest.Condition) {
	k.mu.Lock()
	k.message = message
	k.conds = manifest.SetCondition(slices.Clone(conds), manifest.Condition{
		Type: manifest.ConditionReconciling, Status: manifest.ConditionTrue, Reason: ReasonProgressing,
		Message: message, LastTransitionTime: time.Now().UTC(), ObservedGeneration: k.cl.Generation,
	})
	k.mu.Unlock()
	k.markDirty()
}

// Progress implements action.Reporter.
func (k *keeper) Progress(message string) {
	k.mu.Lock()
	k.message = message
	k.mu.Unlock()
	k.markDirty()
}

// SetCondition implements action.Reporter.
func (k *keeper) SetCondition(c manifest.Condition) {
	if isStandardCondition(c.Type) || c.Type == "" {
		return
	}
	if c.LastTransitionTime.IsZero() {
		c.LastTransitionTime = time.Now().UTC()
	}
	k.mu.Lock()
	k.plugin = manifest.SetCondition(k.plugin, c)
	k.mu.Unlock()
	k.markDirty()
}

func (k *keeper) markDirty() {
	k.mu.Lock()
	k.dirty = true
	k.mu.Unlock()
	select {
	case k.changed <- struct{}{}:
	default:
	}
}

// takeProgress returns the progress to write, or nil when nothing changed.
func (k *keeper) takeProgress() *store.Progress {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.dirty {
		return nil
	}
	k.dirty = false
	conds := slices.Clone(k.conds)
	for _, c := range k.plugin {
		conds = manifest.SetCondition(conds, c)
	}
	return &store.Progress{Message: k.message, Conditions: conds}
}

// pluginConditions returns the conditions the action set while running.
func (k *keeper) pluginConditions() []manifest.Condition {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.plugin)
}

// attemptReporter is the Reporter of one operation: the keeper's, and a
// HandleRecorder that stores the operation's handle under the claim's lease.
type attemptReporter struct {
	*keeper
	instance string
	op       action.Operation
}

var _ action.HandleRecorder = attemptReporter{}

// RecordHandle implements action.HandleRecorder. It writes through to the
// store before it returns, so that an agent killed right after leaves the
// handle for the next claimant. A lost lease cancels the attempt, as a
// failed heartbeat does.
func (r attemptReporter) RecordHandle(ctx context.Context, handle string) error {
	k := r.keeper
	err := k.st.RecordHandle(ctx, k.cl, store.Handle{Value: handle, Action: r.instance, Operation: string(r.op), Generation: k.cl.Generation})
	if errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrNotFound) {
		k.cancel(errLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("record handle %q: %w", handle, err)
	}
	k.log.get().Debug("attempt handle recorded", "handle", handle, "operation", r.op)
	return nil
}
