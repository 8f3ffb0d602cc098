package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"time"
)

// WaitFor calls check every interval until it reports done, and returns
// the time it first did. It fails, naming what, when timeout passes or the
// agent exits first; the error carries check's last state.
func WaitFor(ctx context.Context, a *Agent, what string, timeout, interval time.Duration, check func(context.Context) (bool, string)) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		done, state := check(ctx)
		if done {
			return time.Now(), nil
		}
		select {
		case <-a.Exited():
			return time.Time{}, fmt.Errorf("%s: the agent exited; last state: %s\nagent log:\n%s", what, state, a.LogTail())
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%s: not done within %v; last state: %s", what, timeout, state)
		case <-tick.C:
		}
	}
}

// Applied is a check that the source has applied the commit.
func Applied(a *Agent, commit string) func(context.Context) (bool, string) {
	return func(ctx context.Context) (bool, string) {
		s, err := a.Source(ctx)
		if err != nil {
			return false, err.Error()
		}
		ok := len(s.LastAppliedRevision) >= len(commit) && s.LastAppliedRevision[len(s.LastAppliedRevision)-len(commit):] == commit
		return ok, fmt.Sprintf("phase %s, applied %q, message %q", s.Phase, s.LastAppliedRevision, s.Message)
	}
}

// WaitReconciled waits until at least n reconciles have succeeded and
// returns the time it saw that. A scrape of /metrics costs the agent tens
// of milliseconds of CPU (its gauges are counted in the database), so it is
// not polled at a fixed pace: at most once a second, and more often only as
// the end comes near, at half the time the rate so far says is left, down
// to every 20 ms.
func WaitReconciled(ctx context.Context, a *Agent, what string, n int64, timeout time.Duration) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	const fastest, slowest = 20 * time.Millisecond, time.Second
	var first Counts
	start := time.Now()
	for i := 0; ; i++ {
		c, err := a.Counts(ctx)
		state := fmt.Sprintf("%d of %d reconciled, %d ready, %d running", c.Reconciled, n, c.Ready, c.Running)
		if err != nil {
			state = err.Error()
		} else if c.Reconciled >= n {
			return time.Now(), nil
		}
		if i == 0 {
			first = c
		}
		// Until there is a rate, back off from the fastest pace: a fast
		// agent may be done before a slow pace would look.
		wait := min(slowest, max(fastest, time.Since(start)/2))
		if done := c.Reconciled - first.Reconciled; err == nil && done > 0 {
			left := time.Duration(float64(time.Since(start)) * float64(n-c.Reconciled) / float64(done))
			wait = min(slowest, max(fastest, left/2))
		}
		select {
		case <-a.Exited():
			return time.Time{}, fmt.Errorf("%s: the agent exited; last state: %s\nagent log:\n%s", what, state, a.LogTail())
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%s: not done within %v; last state: %s", what, timeout, state)
		case <-time.After(wait):
		}
	}
}

// CommitTimes are the moments one commit reached, after its trigger.
type CommitTimes struct {
	// Stored is when the resource was first seen at its new generation.
	Stored time.Duration
	// Reconciled is when it was first seen ready at that generation.
	Reconciled time.Duration
}

// pollInterval is how often a single resource is read while a commit is
// timed.
const pollInterval = 2 * time.Millisecond

// TimeCommit triggers a sync and reads resource id every 2 ms until it is
// ready at generation gen, returning when it was stored and reconciled,
// counted from the trigger.
func TimeCommit(ctx context.Context, a *Agent, id, gen int64, timeout time.Duration) (CommitTimes, error) {
	var t CommitTimes
	start := time.Now()
	if err := a.TriggerSync(ctx); err != nil {
		return t, err
	}
	_, err := WaitFor(ctx, a, fmt.Sprintf("resource %d at generation %d and ready", id, gen), timeout, pollInterval,
		func(ctx context.Context) (bool, string) {
			r, err := a.Resource(ctx, id)
			if err != nil {
				return false, err.Error()
			}
			if r.Generation >= gen && t.Stored == 0 {
				t.Stored = time.Since(start)
			}
			if r.Reconciled(gen) {
				t.Reconciled = time.Since(start)
				return true, ""
			}
			return false, fmt.Sprintf("%+v", r)
		})
	return t, err
}

// reader makes the next request path of a pager from its previous answer
// (nil for the first request).
type reader func(rng *rand.Rand, prev *http.Response) string

var nextLink = regexp.MustCompile(`<([^>]+)>;\s*rel="next"`)

// ListPages is a reader that pages through every resource, limit per page,
// following the next-page link (or X-Next-After) and starting over at the
// end.
func ListPages(limit int) reader {
	first := fmt.Sprintf("/api/v1/resources?limit=%d", limit)
	return func(_ *rand.Rand, prev *http.Response) string {
		if prev == nil || prev.StatusCode != http.StatusOK {
			return first
		}
		if m := nextLink.FindStringSubmatch(prev.Header.Get("Link")); m != nil {
			if u, err := url.Parse(m[1]); err == nil {
				return u.RequestURI()
			}
		}
		if after := prev.Header.Get("X-Next-After"); after != "" {
			return first + "&after=" + url.QueryEscape(after)
		}
		return first
	}
}

// best keeps the lower wall and the lower CPU time of so far and t; first
// says so far holds nothing yet.
func best(so Timing, t Timing, first bool) Timing {
	if first || t.Wall < so.Wall {
		so.Wall = t.Wall
	}
	if first || t.CPU < so.CPU {
		so.CPU = t.CPU
	}
	return so
}

func firstErr(first, next error) error {
	if first != nil {
		return first
	}
	return next
}
