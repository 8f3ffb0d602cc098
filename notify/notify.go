// Package notify tells people what the agent did: it routes the notices
// the store records (a resource failing or recovering, drift, a source
// failing, stalled or recovering, a revision applied or refused) to the configured
// providers (a signed webhook, Slack, GitHub commit statuses) and delivers
// them, retrying with backoff, from any agent sharing the store, each
// notice by one agent at a time.
//
// Delivery is at least once: a notice whose delivery succeeded is marked so
// in the store right after, and only an agent killed between the two sends
// it again. Webhook receivers can drop repeats by the X-No8s-Delivery
// header, the notice's id.
package notify

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	gosync "sync"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/redact"
	"github.com/no8s/no8s-agent/store"
)

// Event is a notice as providers send it: the JSON body of a webhook.
type Event struct {
	// ID is the notice's id, the same in every retry of its delivery.
	ID       int64     `json:"id"`
	Event    string    `json:"event"`
	Time     time.Time `json:"time"`
	Severity string    `json:"severity"`
	Source   string    `json:"source"`
	Revision string    `json:"revision"`
	// Resource is set when the event is about a resource.
	Resource *Resource `json:"resource,omitempty"`
	Message  string    `json:"message"`
}

// Resource names the resource an Event is about.
type Resource struct {
	Kind string `json:"kind"`
	// Namespace is empty for a resource of a cluster-scoped kind.
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	Generation int64  `json:"generation"`
}

// Ref names the resource as messages write it (see manifest.ObjectRef.String).
func (r *Resource) Ref() manifest.ObjectRef {
	return manifest.ObjectRef{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
}

// NewEvent returns the event of a notice.
func NewEvent(n *store.Notice) Event {
	e := Event{ID: n.ID, Event: n.Event, Time: n.CreatedAt, Severity: n.Severity, Source: n.Source,
		Revision: string(n.Revision), Message: n.Message}
	if n.Kind != "" {
		e.Resource = &Resource{Kind: n.Kind, Namespace: n.Namespace, Name: n.Name, Generation: n.Generation}
	}
	return e
}

// Subject is a one-line summary of an event, for chat messages.
func (e Event) Subject() string {
	if e.Resource != nil {
		return e.Event + " " + e.Resource.Ref().String() + " (source " + e.Source + ")"
	}
	return e.Event + " source " + e.Source
}

// Provider sends notices somewhere.
type Provider interface {
	// Deliver sends the notice. prev is how its last delivery to this
	// provider went (zero the first time). It returns done when there is
	// nothing more to send; a provider that follows what the notice began
	// (a commit status waiting for the revision's resources to settle)
	// returns not done and when to look again. An error is retried with
	// backoff unless Permanent says otherwise.
	Deliver(ctx context.Context, n *store.Notice, prev store.Delivery) (done bool, again time.Duration, err error)
}

// PermanentError is a delivery error that retrying cannot mend (a 4xx
// answer other than 408 and 429): the notice is given up for that provider.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// DefaultEvents are the events an alert that names none sends: the
// failures and the recoveries.
var DefaultEvents = []string{store.EventResourceFailed, store.EventResourceRecovered, store.EventDestroyFailed,
	store.EventSourceFailed, store.EventSourceStalled, store.EventSourceRecovered}

// Alert sends some events to some providers. Empty filters match all.
type Alert struct {
	Providers []string
	// Events are the events sent; empty means DefaultEvents.
	Events  []string
	Sources []string
	Kinds   []string
	// Namespaces select events about resources in these namespaces: events
	// about sources, and about cluster-scoped resources, never match an
	// alert with namespaces.
	Namespaces []string
	// Labels must all be on the resource (events about sources never
	// match an alert with labels).
	Labels map[string]string
}

// matches reports whether the alert sends n.
func (a Alert) matches(n *store.Notice) bool {
	events := a.Events
	if len(events) == 0 {
		events = DefaultEvents
	}
	if !slices.Contains(events, n.Event) {
		return false
	}
	if len(a.Sources) > 0 && !slices.Contains(a.Sources, n.Source) {
		return false
	}
	if len(a.Kinds) > 0 && !slices.Contains(a.Kinds, n.Kind) {
		return false
	}
	if len(a.Namespaces) > 0 && (n.Namespace == "" || !slices.Contains(a.Namespaces, n.Namespace)) {
		return false
	}
	for k, v := range a.Labels {
		if got, ok := n.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Options configures a Dispatcher.
type Options struct {
	// Owner names the agent in the leases it takes on notices.
	Owner string
	// Providers are the configured providers by name.
	Providers map[string]Provider
	// Alerts route events to providers.
	Alerts []Alert
	// Commits are the names of the commit-status providers: each gets
	// every RevisionApplied and RevisionRefused of the sources it follows
	// (Follows).
	Commits []string
	// Follows reports whether the commit-status provider follows the
	// source; nil follows every source.
	Follows func(provider, source string) bool
	// OnDelivery is called after each delivery attempt with its result
	// (a store.Delivery result), for metrics.
	OnDelivery func(provider, result string)
	// GiveUpAfter is how long a notice is retried; zero means a day.
	GiveUpAfter time.Duration
	// Backoff bounds the wait before a failed delivery is tried again; it
	// doubles with each attempt. Zero means 2s and 2m.
	MinBackoff, MaxBackoff time.Duration
	// Poll is how often the store is looked at without a notification;
	// zero means 5s.
	Poll time.Duration
	// PerSecond limits each provider's deliveries (with a burst of ten);
	// zero means 1.
	PerSecond float64
	// Masker hides secrets in the delivery errors recorded; nil keeps them.
	Masker *redact.Masker
	Logger *slog.Logger
}

// Dispatcher routes and delivers notices until its context ends.
type Dispatcher struct {
	store    store.Store
	opts     Options
	log      *slog.Logger
	limiters map[string]*limiter
}

// New returns a Dispatcher of the notices in st.
func New(st store.Store, opts Options) *Dispatcher {
	if opts.GiveUpAfter <= 0 {
		opts.GiveUpAfter = 24 * time.Hour
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 2 * time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 2 * time.Minute
	}
	if opts.Poll <= 0 {
		opts.Poll = 5 * time.Second
	}
	if opts.PerSecond <= 0 {
		opts.PerSecond = 1
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Dispatcher{store: st, opts: opts, log: opts.Logger, limiters: map[string]*limiter{}}
	for name := range opts.Providers {
		d.limiters[name] = newLimiter(opts.PerSecond, 10)
	}
	return d
}

// Route returns the providers a notice goes to, in name order.
func (d *Dispatcher) Route(n *store.Notice) []string {
	var out []string
	for _, a := range d.opts.Alerts {
		if a.matches(n) {
			out = append(out, a.Providers...)
		}
	}
	if n.Event == store.EventRevisionApplied || n.Event == store.EventRevisionRefused {
		for _, c := range d.opts.Commits {
			if d.opts.Follows == nil || d.opts.Follows(c, n.Source) {
				out = append(out, c)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// lease is how long a delivering agent holds a notice: longer than its
// deliveries take (each is bounded by deliveryTimeout).
const (
	lease           = 2 * time.Minute
	deliveryTimeout = 30 * time.Second
	batch           = 20
)

// Run routes and delivers until ctx is done, and returns ctx's error. A
// provider that is down delays its own notices only: sync and reconcile
// never wait for notices.
func (d *Dispatcher) Run(ctx context.Context) error {
	notes, err := d.store.Listen(ctx, store.TopicNotifications)
	if err != nil {
		d.log.Warn("cannot listen for notices; polling", "error", err)
	}
	tick := time.NewTicker(d.opts.Poll)
	defer tick.Stop()
	for {
		d.round(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		case _, ok := <-notes:
			if !ok {
				notes = nil
			}
		}
	}
}

// round routes what is new and delivers what is due, until nothing is left.
func (d *Dispatcher) round(ctx context.Context) {
	for ctx.Err() == nil {
		n, err := d.store.RouteNotices(ctx, 100, d.Route)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("cannot route notices", "error", err)
			}
			return
		}
		if n == 0 {
			break
		}
	}
	for ctx.Err() == nil {
		claimed, err := d.store.ClaimNotices(ctx, d.opts.Owner, batch, lease)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("cannot claim notices", "error", err)
			}
			return
		}
		if len(claimed) == 0 {
			return
		}
		var wg gosync.WaitGroup
		for _, n := range claimed {
			wg.Go(func() { d.deliver(ctx, n) })
		}
		wg.Wait()
	}
}

// deliver sends a claimed notice to its pending providers and records how
// it went.
func (d *Dispatcher) deliver(ctx context.Context, n *store.Notice) {
	c := store.NoticeCompletion{Results: map[string]store.Delivery{}}
	var again time.Duration
	for i, name := range n.Pending {
		prev := n.Results[name]
		res, wait := d.deliverTo(ctx, n, name, prev)
		if ctx.Err() != nil {
			// The agent stops: what was delivered is recorded, so that it
			// is not sent again; this provider and the rest stay pending
			// for the next agent, at once.
			c.Pending = append(c.Pending, n.Pending[i:]...)
			again = 0
			break
		}
		res.Error = d.opts.Masker.Mask(res.Error)
		c.Results[name] = res
		if d.opts.OnDelivery != nil {
			d.opts.OnDelivery(name, res.Result)
		}
		if res.Result == store.DeliveryDelivered || res.Result == store.DeliveryGaveUp {
			continue
		}
		c.Pending = append(c.Pending, name)
		if again == 0 || wait < again {
			again = wait
		}
	}
	c.RetryAfter = again
	if err := d.store.CompleteNotice(context.WithoutCancel(ctx), n, c); err != nil {
		d.log.Warn("cannot record a notice's delivery", "notice", n.ID, "error", err)
	}
}

// deliverTo sends n to one provider and returns the result and, when it is
// to be sent again, after how long.
func (d *Dispatcher) deliverTo(ctx context.Context, n *store.Notice, name string, prev store.Delivery) (store.Delivery, time.Duration) {
	res := store.Delivery{Attempts: prev.Attempts + 1, At: time.Now().UTC()}
	p, ok := d.opts.Providers[name]
	if !ok {
		// Another agent sharing the store may have it: left for a later
		// try, here or there, until the notice is given up.
		res.Result, res.Error = store.DeliveryFailed, "no provider "+strconv.Quote(name)+" in this agent's configuration"
		if time.Since(n.CreatedAt) > d.opts.GiveUpAfter {
			res.Result = store.DeliveryGaveUp
		}
		return res, d.backoff(res.Attempts)
	}
	if err := d.limiters[name].wait(ctx); err != nil {
		res.Result, res.Error = store.DeliveryFailed, "rate limited"
		return res, d.opts.MinBackoff
	}
	callCtx, cancel := context.WithTimeout(ctx, deliveryTimeout)
	done, wait, err := p.Deliver(callCtx, n, prev)
	cancel()
	var perm *PermanentError
	switch {
	case err == nil && done:
		res.Result = store.DeliveryDelivered
		d.log.Info("notice delivered", "notice", n.ID, "event", n.Event, "provider", name)
		return res, 0
	case err == nil:
		res.Result = store.DeliveryWaiting
		return res, wait
	case errors.As(err, &perm):
		res.Result, res.Error = store.DeliveryGaveUp, err.Error()
	case time.Since(n.CreatedAt) > d.opts.GiveUpAfter:
		res.Result, res.Error = store.DeliveryGaveUp, "given up after "+d.opts.GiveUpAfter.String()+": "+err.Error()
	default:
		res.Result, res.Error = store.DeliveryFailed, err.Error()
	}
	d.log.Warn("notice not delivered", "notice", n.ID, "event", n.Event, "provider", name, "attempt", res.Attempts,
		"result", res.Result, "error", err)
	return res, d.backoff(res.Attempts)
}

// backoff is MinBackoff doubled for each attempt after the first, up to MaxBackoff.
func (d *Dispatcher) backoff(attempts int) time.Duration {
	b := d.opts.MinBackoff
	for i := 1; i < attempts && b < d.opts.MaxBackoff; i++ {
		b *= 2
	}
	return min(b, d.opts.MaxBackoff)
}
