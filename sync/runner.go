package sync

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	gosync "sync"
	"time"

	"github.com/no8s/no8s-agent/source"
)

// Job is one source the Runner keeps in sync.
type Job struct {
	Source source.Source
	Target Target
	// Interval is how often the source is fetched; zero fetches only on a
	// watch event or a trigger. A tenth of it is added or taken at random,
	// so that many agents do not poll one remote in step.
	Interval time.Duration
	// Suspend is the source's suspend setting in the configuration.
	Suspend bool
}

// Runner keeps sources in sync: for each, fetch, sync, then wait for the
// next interval, a change the source reports, or a trigger. Failures to
// fetch or to write the store are retried with exponential backoff, and the
// store keeps the last applied state meanwhile. A refused revision (invalid,
// over the prune limit, in conflict) is not retried on a timer: it is
// recorded once and judged again only when something that could change the
// outcome happens, which the Syncer checks at each interval, change or
// trigger: an approval, another source applying a change (which also wakes
// refused sources at once), a forced sync, a new revision.
type Runner struct {
	syncer *Syncer
	jobs   []Job
	log    *slog.Logger

	// MinBackoff and MaxBackoff bound the wait after a failure; it doubles
	// with each failure in a row.
	MinBackoff, MaxBackoff time.Duration
	// OnSync, when set, is called after every attempt (for metrics and
	// tests), with how long the fetch and sync took.
	OnSync func(source string, res *Result, err error, took time.Duration)

	mu       gosync.Mutex
	triggers map[string]chan bool
	refused  map[string]bool // sources whose revision is refused
}

// NewRunner returns a Runner for jobs. Source names must be unique.
func NewRunner(s *Syncer, jobs []Job, log *slog.Logger) *Runner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Runner{syncer: s, jobs: jobs, log: log, MinBackoff: 5 * time.Second, MaxBackoff: 5 * time.Minute,
		triggers: map[string]chan bool{}, refused: map[string]bool{}}
	for _, j := range jobs {
		r.triggers[j.Target.Name] = make(chan bool, 1)
	}
	return r
}

// Trigger asks for a fetch and sync of the named source now (a webhook, the
// API); with force the revision is synced even if it was applied already.
// It reports whether the source is known. It never blocks: triggers that
// arrive while one is pending are merged.
func (r *Runner) Trigger(name string, force bool) bool {
	r.mu.Lock()
	ch, ok := r.triggers[name]
	r.mu.Unlock()
	if !ok {
		return false
	}
	for {
		select {
		case ch <- force:
			return true
		default:
		}
		// A trigger is pending: merge, keeping force if either asked for it.
		select {
		case pending := <-ch:
			force = force || pending
		default:
		}
	}
}

// Sources returns the names of the sources the runner serves.
func (r *Runner) Sources() []string {
	names := make([]string, len(r.jobs))
	for i, j := range r.jobs {
		names[i] = j.Target.Name
	}
	return names
}

// Run serves every job until ctx is done, then waits for their goroutines
// to end and returns ctx's error.
func (r *Runner) Run(ctx context.Context) error {
	var wg gosync.WaitGroup
	for _, j := range r.jobs {
		wg.Go(func() { r.serve(ctx, j) })
	}
	wg.Wait()
	return ctx.Err()
}

// serve keeps one source in sync until ctx is done.
func (r *Runner) serve(ctx context.Context, j Job) {
	name := j.Target.Name
	var changed <-chan struct{}
	if w, ok := j.Source.(source.Watcher); ok {
		ch, err := w.Watch(ctx)
		if err != nil {
			r.log.Warn("cannot watch source; falling back to its interval", "source", name, "error", err)
		} else {
			changed = ch
		}
	}
	trigger := r.triggers[name]
	failures := 0
	force := false
	wasSuspended := false
	for {
		suspended, err := r.syncer.Suspended(ctx, j.Target, j.Suspend)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			r.log.Warn("cannot tell whether the source is suspended", "source", name, "error", err)
			failures++
			if !r.wait(ctx, backoff(r.MinBackoff, r.MaxBackoff, failures), trigger, &changed, &force) {
				return
			}
			continue
		}
		if suspended != wasSuspended {
			if suspended {
				r.log.Info("source suspended: not fetching or syncing it until it is resumed", "source", name)
			} else {
				r.log.Info("source resumed", "source", name)
			}
			wasSuspended = suspended
		}
		if suspended {
			if r.OnSync != nil {
				r.OnSync(name, &Result{Source: name, Skipped: true, Suspended: true}, nil, 0)
			}
			// Webhooks, watch events and the interval wake it only to look
			// again; a resume through this agent's API triggers it.
			if !r.wait(ctx, jitter(j.Interval), trigger, &changed, &force) {
				return
			}
			continue
		}
		start := time.Now()
		res, err := r.attempt(ctx, j, force)
		if ctx.Err() != nil {
			return
		}
		if r.OnSync != nil {
			r.OnSync(name, res, err, time.Since(start))
		}
		var (
			wait  time.Duration
			serr  *Error
			isRef = errors.As(err, &serr) || (res != nil && res.Refused)
		)
		r.setRefused(name, isRef)
		switch {
		case isRef:
			// Judging the same revision again would refuse it again; the
			// Syncer knows when something changed that could change that.
			failures, force = 0, false
			wait = jitter(j.Interval)
		case err != nil:
			// The remote or the store may be back after a while. A forced
			// attempt stays forced.
			failures++
			wait = backoff(r.MinBackoff, r.MaxBackoff, failures)
		default:
			failures, force = 0, false
			wait = jitter(j.Interval)
			if res != nil && res.Plan != nil && (res.Plan.Changes() > 0 || len(res.Plan.Types) > 0) {
				r.wakeRefused(name)
			}
		}
		if !r.wait(ctx, wait, trigger, &changed, &force) {
			return
		}
	}
}

// wait waits for d (forever when zero), a trigger (merged into force) or a
// change the source reports, and reports false when ctx is done.
func (r *Runner) wait(ctx context.Context, d time.Duration, trigger <-chan bool, changed *<-chan struct{}, force *bool) bool {
	var (
		timer   *time.Timer
		expired <-chan time.Time
	)
	if d > 0 {
		timer = time.NewTimer(d)
		expired = timer.C
		defer timer.Stop()
	}
	select {
	case <-ctx.Done():
		return false
	case <-expired:
	case f := <-trigger:
		*force = *force || f
	case _, ok := <-*changed:
		if !ok {
			*changed = nil // the watch ended; the interval remains
		}
	}
	return true
}

// setRefused records whether the named source's revision is refused.
func (r *Runner) setRefused(name string, refused bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if refused {
		r.refused[name] = true
	} else {
		delete(r.refused, name)
	}
}

// wakeRefused asks every refused source but the named one for a sync: a
// change applied by one source (a type, a resource given up) may let another
// source's refused revision through. The Syncer judges it again only if
// something it depends on changed.
func (r *Runner) wakeRefused(changed string) {
	r.mu.Lock()
	var names []string
	for name := range r.refused {
		if name != changed {
			names = append(names, name)
		}
	}
	r.mu.Unlock()
	for _, name := range names {
		r.Trigger(name, false)
	}
}

// attempt fetches and syncs once.
func (r *Runner) attempt(ctx context.Context, j Job, force bool) (*Result, error) {
	// The fetch is work too: a commit that changes many files is read,
	// hashed and parsed before its sync has anything to apply.
	defer r.syncer.work.Begin()()
	// What the sync is judged against is read while the fetch runs.
	pre := r.syncer.Judge(ctx, j.Target)
	snap, err := j.Source.Fetch(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		r.log.Warn("fetch failed", "source", j.Target.Name, "error", err)
		if rerr := r.syncer.RecordFetchFailure(ctx, j.Target, err); rerr != nil && ctx.Err() == nil {
			r.log.Error("cannot record fetch failure", "source", j.Target.Name, "error", rerr)
		}
		return nil, err
	}
	res, err := r.syncer.SyncJudged(ctx, j.Target, snap, force, pre)
	var serr *Error
	if err != nil && !errors.As(err, &serr) && ctx.Err() == nil {
		r.log.Error("sync failed", "source", j.Target.Name, "revision", string(snap.Revision), "error", err)
	}
	return res, err
}

// backoff is min * 2^(failures-1), capped at max, with ±10% jitter.
func backoff(min, max time.Duration, failures int) time.Duration {
	d := min
	for i := 1; i < failures && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	return jitter(d)
}

// jitter returns d changed by up to ±10% at random; zero stays zero.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	spread := int64(d) / 10
	if spread == 0 {
		return d
	}
	return d + time.Duration(rand.Int64N(2*spread+1)-spread)
}
