package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	gosync "sync"
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

// Latencies are the outcome of a read load.
type Latencies struct {
	sorted   []time.Duration // of 200 answers
	took     time.Duration
	Rejected int // 503 answers
	Failed   int // other answers and errors
	FirstErr error
}

// Pct is the p-th quantile (0 to 1) of the answered reads.
func (l *Latencies) Pct(p float64) time.Duration {
	if len(l.sorted) == 0 {
		return 0
	}
	return l.sorted[min(len(l.sorted)-1, int(p*float64(len(l.sorted))))]
}

// Rate is answered reads per second.
func (l *Latencies) Rate() float64 { return float64(len(l.sorted)) / l.took.Seconds() }

// String summarises the load.
func (l *Latencies) String() string {
	s := fmt.Sprintf("%d answered, p50 %v, p99 %v, %.0f/s, %d 503, %d failed", len(l.sorted),
		l.Pct(0.5).Round(10*time.Microsecond), l.Pct(0.99).Round(10*time.Microsecond), l.Rate(), l.Rejected, l.Failed)
	if l.FirstErr != nil {
		s += fmt.Sprintf(" (first: %v)", l.FirstErr)
	}
	return s
}

// reader makes one client's next request path from its previous answer
// (nil for the first request).
type reader func(rng *rand.Rand, prev *http.Response) string

// GetByID is a reader of resources by id, picked at random among ids.
func GetByID(ids []int64) reader {
	return func(rng *rand.Rand, _ *http.Response) string {
		return fmt.Sprintf("/api/v1/resources/%d", ids[rng.IntN(len(ids))])
	}
}

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

// Load runs clients concurrent readers against the agent until ctx is
// done, each sending its next request as soon as the previous one is
// answered (a 503 waits its Retry-After, as a polite client does, capped at
// a second), and returns the latencies of the answered ones.
func Load(ctx context.Context, a *Agent, clients int, next reader) *Latencies {
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}}
	defer hc.CloseIdleConnections()
	var (
		mu  gosync.Mutex
		all = &Latencies{}
		wg  gosync.WaitGroup
	)
	start := time.Now()
	for range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
			var lat []time.Duration
			rejected, failed := 0, 0
			var clientErr error
			var prev *http.Response
			for ctx.Err() == nil {
				path := next(rng, prev)
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.Base+path, nil)
				if err != nil {
					clientErr = err
					break
				}
				t0 := time.Now()
				resp, err := hc.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						failed++
						clientErr = firstErr(clientErr, err)
					}
					prev = nil
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				d := time.Since(t0)
				if ctx.Err() != nil {
					break
				}
				prev = resp
				switch resp.StatusCode {
				case http.StatusOK:
					lat = append(lat, d)
				case http.StatusServiceUnavailable:
					rejected++
					select {
					case <-ctx.Done():
					case <-time.After(time.Second):
					}
				default:
					failed++
					clientErr = firstErr(clientErr, fmt.Errorf("GET %s: %s", path, resp.Status))
				}
			}
			mu.Lock()
			all.sorted = append(all.sorted, lat...)
			all.Rejected += rejected
			all.Failed += failed
			all.FirstErr = firstErr(all.FirstErr, clientErr)
			mu.Unlock()
		})
	}
	wg.Wait()
	all.took = time.Since(start)
	slices.Sort(all.sorted)
	return all
}

func firstErr(first, next error) error {
	if first != nil {
		return first
	}
	return next
}

// LoadFor runs Load for d.
func LoadFor(ctx context.Context, a *Agent, clients int, d time.Duration, next reader) *Latencies {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return Load(ctx, a, clients, next)
}

// LoadDuring runs Load from now until during returns, at least least long,
// and returns both outcomes.
func LoadDuring(ctx context.Context, a *Agent, clients int, least time.Duration, next reader, during func() error) (*Latencies, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var lat *Latencies
	done := make(chan struct{})
	go func() {
		defer close(done)
		lat = Load(ctx, a, clients, next)
	}()
	floor := time.NewTimer(least)
	defer floor.Stop()
	err := during()
	if err == nil {
		select {
		case <-floor.C:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	cancel()
	<-done
	if err == nil && len(lat.sorted) == 0 {
		err = errors.New("no read was answered")
	}
	return lat, err
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
