package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/no8s/no8s-agent/manifest"
)

// TopicNotifications announces that notifications were recorded and wait
// to be routed and delivered.
const TopicNotifications = "no8s_notifications"

// The events a notification tells of.
const (
	EventResourceFailed    = "ResourceFailed"
	EventResourceRecovered = "ResourceRecovered"
	EventDriftDetected     = "DriftDetected"
	EventDestroyFailed     = "DestroyFailed"
	EventSourceFailed      = "SourceFailed"
	EventSourceStalled     = "SourceStalled"
	EventSourceRecovered   = "SourceRecovered"
	EventRevisionApplied   = "RevisionApplied"
	// EventRevisionRefused is a revision a source refused (invalid,
	// unsigned, in conflict, stalled on the prune guard), told once per
	// revision; its message starts with the refusal's reason.
	EventRevisionRefused = "RevisionRefused"
)

// Events lists every event, in the order above.
func Events() []string {
	return []string{EventResourceFailed, EventResourceRecovered, EventDriftDetected, EventDestroyFailed,
		EventSourceFailed, EventSourceStalled, EventSourceRecovered, EventRevisionApplied, EventRevisionRefused}
}

// Notice is something worth telling people, recorded by the store
// in the transaction of the change it tells of (a resource's first
// failure after a success, its recovery, drift, a source failing, stalled
// or recovering, a revision applied or refused), and its delivery to
// providers.
type Notice struct {
	ID       int64
	Event    string
	Severity string
	Source   string
	Revision manifest.Revision
	// Kind, Namespace, Name, Generation and Labels are those of the
	// resource the notification is about; empty for a source's.
	Kind       string
	Namespace  string
	Name       string
	Generation int64
	Labels     map[string]string
	Message    string
	CreatedAt  time.Time
	// Routed is true once an agent chose the providers to deliver it to.
	Routed bool
	// Pending are the providers it is still to be delivered to.
	Pending []string
	// Results are, by provider, how the deliveries went.
	Results       map[string]Delivery
	Attempts      int
	NextAttemptAt time.Time
	// DoneAt is when the last pending delivery succeeded or was given up.
	DoneAt *time.Time
	// LeaseOwner and LeaseToken fence the delivering agent's writes.
	LeaseOwner string
	LeaseToken int64
}

// Delivery is how the deliveries of a notification to one provider went.
type Delivery struct {
	// Result is delivered, failed (to be retried), gave-up, or waiting (a
	// provider that follows the change, such as a commit status, told it
	// has begun and looks again later).
	Result   string    `json:"result"`
	Error    string    `json:"error,omitempty"`
	Attempts int       `json:"attempts"`
	At       time.Time `json:"at"`
}

// MergeDeliveries returns old with the results of next in place of those
// of the same providers.
func MergeDeliveries(old, next map[string]Delivery) map[string]Delivery {
	out := make(map[string]Delivery, len(old)+len(next))
	for p, d := range old {
		out[p] = d
	}
	for p, d := range next {
		out[p] = d
	}
	return out
}

// Encode returns what a backend writes for the completion of a claimed
// notice: its results with those of c in their place, the providers still
// pending (never null), and whether it is done.
func (c NoticeCompletion) Encode(n *Notice) (results, pending []byte, done bool, err error) {
	if results, err = json.Marshal(MergeDeliveries(n.Results, c.Results)); err != nil {
		return nil, nil, false, err
	}
	pending, err = EncodeProviders(c.Pending)
	return results, pending, len(c.Pending) == 0, err
}

// EncodeProviders returns providers as a JSON array, never null.
func EncodeProviders(providers []string) ([]byte, error) {
	if providers == nil {
		providers = []string{}
	}
	return json.Marshal(providers)
}

// Delivery results.
const (
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
	DeliveryGaveUp    = "gave-up"
	DeliveryWaiting   = "waiting"
)

// NoticeCompletion is the outcome of delivering a claimed
// notification: the providers' results, those still pending, and when to
// try those again.
type NoticeCompletion struct {
	Results    map[string]Delivery
	Pending    []string
	RetryAfter time.Duration
}

// Notifier is the part of the store that keeps notices (the table
// notifications). Every
// Store is one.
type Notifier interface {
	// RouteNotices takes up to limit notifications not routed yet,
	// oldest first, skipping those another agent routes, sets the
	// providers route returns as pending (none: done at once) and returns
	// how many it routed.
	RouteNotices(ctx context.Context, limit int, route func(*Notice) []string) (int, error)
	// ClaimNotices leases up to limit routed notifications whose
	// next attempt has come and that no one holds, for d.
	ClaimNotices(ctx context.Context, owner string, limit int, d time.Duration) ([]*Notice, error)
	// CompleteNotice writes the outcome of delivering a claimed
	// notification and frees it; done when nothing is pending. It fails
	// with ErrLeaseLost when another agent claimed it since.
	CompleteNotice(ctx context.Context, n *Notice, c NoticeCompletion) error
	// ListNotices returns the newest notifications, of one source
	// when source is not empty, newest first.
	ListNotices(ctx context.Context, source string, limit int) ([]*Notice, error)
}
