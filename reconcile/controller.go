// Package reconcile is the controller that makes the world match the stored
// desired state. It claims due resources from the store's work queue with a
// lease, runs their action (Apply, Destroy, or Plan for drift checks), and
// writes the outcome: status, conditions, outputs and one history record per
// attempt.
//
// The queue lives in the store, so several agents on one database share the
// work: a resource is leased to one worker at a time, a worker extends its
// lease while its action runs, and a worker that loses its lease has its
// action cancelled and its result discarded. The controller sleeps until the
// store notifies it of a change, its earliest scheduled retry or drift check
// comes, or a fallback poll; a commit is reconciled as soon as it is synced.
package reconcile

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	gosync "sync"
	"time"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/priority"
	"github.com/no8s/no8s-agent/store"
)

// Defaults of Options.
const (
	DefaultWorkers           = 8
	DefaultLeaseDuration     = 30 * time.Second
	DefaultBackoffInitial    = time.Minute
	DefaultBackoffMax        = 1024 * time.Minute
	DefaultDependencyRecheck = 30 * time.Second
)

// NoopInstance is the action instance of resources that name none.
const NoopInstance = "noop"

// Actions resolves action instances by name.
type Actions interface {
	Get(name string) (action.Instance, bool)
	Names() []string
}

// Options tune a Controller. Zero values take the defaults.
type Options struct {
	// AgentID identifies this agent as lease owner and in history records;
	// default: host name, process id and a random suffix.
	AgentID string
	// Workers is how many resources are reconciled at once.
	Workers int
	// LeaseDuration is how long a claim holds without a heartbeat. A crashed
	// agent's resources are taken over after it; heartbeats come three times
	// per duration.
	LeaseDuration time.Duration
	// BackoffInitial and BackoffMax bound the retry delay of failures:
	// initial x 2^(n-1) after the n-th consecutive failure, ±10%, capped.
	BackoffInitial, BackoffMax time.Duration
	// DependencyRecheck is how often a resource waiting on others looks
	// again, in case it missed the wake-up of the one it waits on.
	DependencyRecheck time.Duration
	// PollInterval is the longest the controller sleeps without looking at
	// the queue; default the lease duration, so that the leases of a crashed
	// agent are taken over promptly even when notifications are lost.
	PollInterval time.Duration
	// Version is the agent's build, recorded with its heartbeats.
	Version string
	// NoGather makes a freed worker claim at once and the completer write
	// at once, without waiting for other workers (see claimGather and
	// completionGather), and the completer queue one completion per
	// worker. It suits a store whose statements cost little whatever they
	// carry, such as the embedded one, where waiting only leaves it idle.
	NoGather bool
	// Work, when set, counts the claims, attempts and completions in
	// flight, so that the API's reads give way to them (see package
	// priority).
	Work *priority.Work
	// Logger receives the controller's logs; default slog.Default().
	Logger *slog.Logger
	// OnAttempt, when set, is called after every attempt whose history
	// record was written (metrics hook here). It must not block.
	OnAttempt func(Attempt)
}

// Attempt describes one finished reconcile attempt.
type Attempt struct {
	// Record is the history record written for it.
	Record *store.ReconcileRecord
	// Action is the action instance the resource is bound to ("noop" when none).
	Action string
	// Drift is true when a drift check found changes (and they were applied).
	Drift bool
}

func (o *Options) setDefaults() {
	if o.AgentID == "" {
		o.AgentID = newAgentID()
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.BackoffInitial <= 0 {
		o.BackoffInitial = DefaultBackoffInitial
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = DefaultBackoffMax
	}
	if o.BackoffMax < o.BackoffInitial {
		o.BackoffMax = o.BackoffInitial
	}
	if o.DependencyRecheck <= 0 {
		o.DependencyRecheck = DefaultDependencyRecheck
	}
	if o.PollInterval <= 0 {
		o.PollInterval = o.LeaseDuration
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// newAgentID returns host-pid-random: readable in the dashboard, unique
// across restarts on one host.
func newAgentID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "agent"
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

// Controller reconciles resources from a store's work queue.
type Controller struct {
	store   store.Store
	actions Actions
	opts    Options
	log     *slog.Logger
	wake    chan struct{}
}

// New returns a controller over st that runs the instances of actions.
func New(st store.Store, actions Actions, opts Options) *Controller {
	opts.setDefaults()
	return &Controller{
		store:   st,
		actions: actions,
		opts:    opts,
		log:     opts.Logger.With("agent", opts.AgentID),
		wake:    make(chan struct{}, 1),
	}
}

// AgentID returns the lease owner name of this controller.
func (c *Controller) AgentID() string { return c.opts.AgentID }

// Wake makes the controller look at the queue now. Notifications from the
// store do the same; Wake is for in-process callers.
func (c *Controller) Wake() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Run reconciles until ctx is done. Then it cancels the running actions,
// hands their resources back to the queue, and returns once every worker has
// stopped and every completion is written. It returns nil after a
// cancellation; other errors do not stop it, they are logged and retried.
//
// Any free worker makes the controller claim: one claim at a time, for as
// many resources as workers are free when it starts, so that workers freed
// while a claim is in flight are served together by the next one. A worker
// freed while others are busy waits up to claimGather for them. Workers
// hand their completions to one completer, which writes those that come
// together in one batch.
func (c *Controller) Run(ctx context.Context) error {
	notes, err := c.store.Listen(ctx, store.TopicResources)
	if err != nil {
		// Polling still finds the work, only later.
		c.log.Warn("no store notifications; falling back to polling", "every", c.opts.PollInterval, "error", err)
	}
	beaten := make(chan struct{})
	go func() {
		defer close(beaten)
		c.beat(ctx)
	}()
	defer func() {
		<-beaten
		c.stopped()
	}()
	comp := newCompleter(c.store, c.opts.Workers, !c.opts.NoGather)
	compExited := make(chan struct{})
	go func() {
		defer close(compExited)
		comp.run(ctx)
	}()
	var (
		workers gosync.WaitGroup
		// jobs hands claims to the workers, which live as long as Run: a
		// goroutine per claim would grow a fresh stack for every attempt.
		// It has room for every worker, so handing out never blocks.
		jobs = make(chan *store.Claim, c.opts.Workers)
		// done carries the requested requeue delay of each worker that is
		// free again; it has room for every worker, so none blocks on it.
		done = make(chan time.Duration, c.opts.Workers)
		// claims asks the claimer for up to that many resources; claimed
		// carries its answer. One claim is in flight at a time.
		claims   = make(chan int, 1)
		claimed  = make(chan claimResult, 1)
		claiming bool
		busy     int
		drained  bool // the last claim found less than it asked for
		// poked is set when something may have become due while a claim
		// was in flight: that claim's answer may be out of date.
		poked bool
		// gather, when set, is when a claim for fewer than all workers
		// is made at the latest (see claimGather).
		gather  time.Time
		nextAt  time.Time
		timer   = time.NewTimer(0)
		errWait = 100 * time.Millisecond
	)
	defer timer.Stop()
	claimerExited := make(chan struct{})
	go func() {
		defer close(claimerExited)
		for limit := range claims {
			end := c.opts.Work.Begin()
			res := c.claim(ctx, limit)
			end()
			claimed <- res
		}
	}()
	for range c.opts.Workers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for cl := range jobs {
				var once gosync.Once
				free := func(d time.Duration) { once.Do(func() { done <- d }) }
				end := c.opts.Work.Begin()
				c.work(ctx, cl, comp, free)
				end()
				// work frees the slot as soon as it may; should it return
				// without doing so, its slot is free all the same.
				free(0)
			}
		}()
	}
	// Claims come back even with an error, and even when the agent began
	// to stop meanwhile: the workers hand those back.
	startWorkers := func(claimed []*store.Claim) {
		comp.expect(len(claimed))
		for _, cl := range claimed {
			busy++
			jobs <- cl
		}
	}
	for ctx.Err() == nil {
		wait := time.Until(nextAt)
		if !drained || wait > c.opts.PollInterval {
			wait = c.opts.PollInterval
		}
		if free := c.opts.Workers - busy; !claiming && !drained && free > 0 {
			// While other workers are busy, a freed worker waits a moment
			// for those that finish at about the same time, so that one
			// claim serves them all rather than one claim each.
			now := time.Now()
			if busy > 0 && gather.IsZero() && !c.opts.NoGather {
				gather = now.Add(claimGather)
			}
			if busy == 0 || !now.Before(gather) {
				claiming, poked, gather = true, false, time.Time{}
				claims <- free
			} else {
				wait = min(wait, gather.Sub(now))
			}
		}
		timer.Reset(max(wait, 0))
		select {
		case <-ctx.Done():
		case res := <-claimed:
			claiming = false
			startWorkers(res.claims)
			switch {
			case res.err != nil:
				if ctx.Err() != nil {
					break
				}
				c.log.Error("claiming due resources failed; retrying", "in", errWait, "error", res.err)
				nextAt = time.Now().Add(errWait)
				errWait = min(2*errWait, c.opts.PollInterval)
				drained = true
			case len(res.claims) < res.limit:
				errWait = 100 * time.Millisecond
				// A requeue handed in during the claim may be written
				// after the store answered: the sooner time stands.
				if !nextAt.After(time.Now()) || res.next.Before(nextAt) {
					nextAt = res.next
				}
				drained = !poked
			default:
				errWait = 100 * time.Millisecond
			}
		case d := <-done:
			busy--
			if d > 0 {
				if at := time.Now().Add(d); nextAt.IsZero() || at.Before(nextAt) {
					nextAt = at
				}
			}
		case n, ok := <-notes:
			if !ok {
				notes = nil
			}
			if n.Resync {
				c.log.Info("store notifications resumed; looking at the queue")
			}
			drained, poked = false, true
		case <-c.wake:
			drained, poked = false, true
		case <-timer.C:
			drained, poked = false, true
		}
		// Since Go 1.23 a stopped or reset timer never delivers a stale tick.
		timer.Stop()
	}
	close(claims)
	if claiming {
		// Its claims are held all the same: their workers hand them back.
		startWorkers((<-claimed).claims)
	}
	<-claimerExited
	close(jobs)
	workers.Wait()
	// Every worker has its result: nothing more comes to the completer.
	comp.close()
	<-compExited
	return nil
}

// claimResult is what one claim found: the claims, how many it asked
// for, and, when it found fewer, when the next scheduled work comes.
type claimResult struct {
	claims []*store.Claim
	limit  int
	next   time.Time
	err    error
}

// claim claims up to limit due resources and, when it finds fewer, asks
// when the next scheduled work comes. The claim is not cut short by ctx: a
// claim the database committed but the agent never heard of would hold its
// resources until the lease expired.
func (c *Controller) claim(ctx context.Context, limit int) claimResult {
	claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.LeaseDuration)
	defer cancel()
	claims, err := c.store.ClaimResources(claimCtx, store.ClaimParams{
		Owner: c.opts.AgentID, Limit: limit, Duration: c.opts.LeaseDuration,
	})
	res := claimResult{claims: claims, limit: limit, err: err}
	if err == nil && len(claims) < limit && ctx.Err() == nil {
		res.next = c.nextDue(ctx)
	}
	return res
}

// nextDue asks the store when the next scheduled work comes; without any,
// the poll interval from now.
func (c *Controller) nextDue(ctx context.Context) time.Time {
	d, ok, err := c.store.NextDue(ctx)
	// The store measured from before it answered: counting from now errs
	// late, never early.
	now := time.Now()
	if err != nil || !ok || d > c.opts.PollInterval {
		if err != nil && ctx.Err() == nil {
			c.log.Warn("reading the next due time failed", "error", err)
		}
		return now.Add(c.opts.PollInterval)
	}
	return now.Add(d)
}

// claimGather is how long a freed worker waits, while others are busy, for
// more workers to be freed before it claims: claims cost the store about as
// much for one resource as for several, and workers whose actions are quick
// tend to be freed together.
const claimGather = time.Millisecond

// errLeaseLost is the cancellation cause of an action whose lease is gone.
var errLeaseLost = errors.New("lease lost")
