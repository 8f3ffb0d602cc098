package gitlabapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	gitlab "gitlab.com/gitlab-org/api/client-go"
)

// Bounds of the retries of one call.
const (
	// maxServerErrors is how many 5xx answers or network errors in a row
	// one call tolerates by default.
	maxServerErrors = 6
	// defaultBackoff is the first wait after a server error, or a 429 that
	// names no wait, when Retrier.Backoff is zero.
	defaultBackoff = time.Second
	// defaultMaxBackoff bounds the doubling waits when Retrier.MaxBackoff
	// is zero.
	defaultMaxBackoff = time.Minute
)

// Retrier runs API calls with retries. The zero value is ready to use.
//
// A success that reports RateLimit-Remaining: 0 does not delay the next
// call: GitLab refuses a call over its limit with 429 and Retry-After
// without doing anything, so the next call learns the wait at no cost, and
// acting in advance would need state shared by every call and the server's
// clock.
type Retrier struct {
	// Backoff is the first wait after a server or network error (default
	// 1s); it doubles up to MaxBackoff (default 1m).
	Backoff, MaxBackoff time.Duration
	// ServerErrors is how many server or network errors in a row a call
	// tolerates: 0 means a default of 6, a negative number no limit (the
	// context bounds the call).
	ServerErrors int
	// NoServerRetry returns the first server or network error as a
	// *TransientError instead of retrying: for calls that are not
	// idempotent and whose first attempt may have taken effect (creating
	// a pipeline, a note). Rate limits are still waited out: GitLab did
	// nothing.
	NoServerRetry bool
}

// TransientError is a server or network error a NoServerRetry call did not
// retry: the request may or may not have taken effect, so the caller looks
// before it tries again.
type TransientError struct{ Err error }

// Error implements error.
func (e *TransientError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *TransientError) Unwrap() error { return e.Err }

// IsTransient reports whether err is, or wraps, a *TransientError.
func IsTransient(err error) bool {
	var te *TransientError
	return errors.As(err, &te)
}

// Call runs one API call, waiting out rate limits (429) and retrying server
// (5xx) and network errors with doubling backoff, until ctx is done. Other
// errors end it: a *ConfigError for 400, 401, 403 and 404, which retrying
// cannot mend, or the client's error as it is. do must pass ctx to the
// request (gitlab.WithContext(ctx)) so that cancelling ctx ends a request in
// flight too; the waits between attempts end with ctx regardless.
func (r Retrier) Call(ctx context.Context, do func() (*gitlab.Response, error)) error {
	backoff := cmp.Or(r.Backoff, defaultBackoff)
	maxBackoff := max(cmp.Or(r.MaxBackoff, defaultMaxBackoff), backoff)
	rateBackoff := backoff
	serverErrors := 0
	for {
		resp, err := do()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		var wait time.Duration
		switch kind, answer := classify(resp, err); kind {
		case rateLimited:
			var ok bool
			if wait, ok = rateLimitWait(answer.Header, time.Now()); !ok {
				wait = rateBackoff
				rateBackoff = min(rateBackoff*2, maxBackoff)
			}
		case serverError:
			if r.NoServerRetry {
				return &TransientError{Err: err}
			}
			serverErrors++
			if limit := cmp.Or(r.ServerErrors, maxServerErrors); limit > 0 && serverErrors > limit {
				return fmt.Errorf("giving up after %d failed attempts: %w", serverErrors, err)
			}
			wait = backoff
			backoff = min(backoff*2, maxBackoff)
		case configError:
			return newConfigError(answer, err)
		default:
			return err
		}
		if err := Sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// Sleep waits d, or until ctx is done, and then returns its cause.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

type errorKind int

const (
	otherError errorKind = iota
	rateLimited
	serverError
	configError
)

// classify tells what a failed call's error calls for, and returns the
// HTTP answer when there was one.
func classify(resp *gitlab.Response, err error) (errorKind, *http.Response) {
	var answer *http.Response
	if resp != nil && resp.Response != nil {
		answer = resp.Response
	} else if er := (*gitlab.ErrorResponse)(nil); errors.As(err, &er) && er.Response != nil {
		answer = er.Response
	}
	if answer == nil {
		// No answer: a network error is worth another try, an answer
		// that did not come within the HTTP client's timeouts among
		// them; an error client-go found before sending (an invalid id)
		// or a cancelled context is not.
		var netErr net.Error
		if errors.As(err, &netErr) && (transportTimeout(err) || !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)) {
			return serverError, nil
		}
		if errors.Is(err, gitlab.ErrNotFound) {
			return configError, nil
		}
		return otherError, nil
	}
	switch st := answer.StatusCode; {
	case st == http.StatusTooManyRequests:
		return rateLimited, answer
	case st >= 500:
		return serverError, answer
	case st == http.StatusBadRequest, st == http.StatusUnauthorized, st == http.StatusForbidden, st == http.StatusNotFound:
		// client-go answers 404 with the sentinel gitlab.ErrNotFound, the
		// others with an *ErrorResponse.
		return configError, answer
	}
	// Another status, or a 2xx whose body did not decode.
	return otherError, answer
}

// transportTimeout reports whether err is the HTTP client's own timeout
// (Transport.ResponseHeaderTimeout, Client.Timeout) rather than a
// context's end: net/http's timeout errors claim to be
// context.DeadlineExceeded, though no context ended.
func transportTimeout(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if _, wraps := e.(*url.Error); wraps {
			continue
		}
		if e == context.DeadlineExceeded || e == context.Canceled {
			return false
		}
		if ne, ok := e.(net.Error); ok && ne.Timeout() {
			return true
		}
	}
	return false
}

// minRateWait is the shortest wait after a 429, so that a server answering
// Retry-After: 0 again and again is not hammered.
const minRateWait = time.Second

// maxRateWait is the longest wait after a 429, so that a server asking for
// hours or years (or a RateLimit-Reset in milliseconds) does not hold a
// call whose context has no deadline for that long. GitLab's throttles
// count over periods of a minute, a few over ten; a wait cut short costs
// one more request, answered 429 with the time left.
const maxRateWait = 10 * time.Minute

// rateLimitWait reads how long a 429 asks to wait: Retry-After (seconds, as
// GitLab sends it, or an HTTP date), else RateLimit-Reset (unix seconds;
// a second more for clock skew), held between minRateWait and
// maxRateWait. ok is false when neither is usable.
func rateLimitWait(h http.Header, now time.Time) (time.Duration, bool) {
	// Seconds are compared before they become a Duration, which holds
	// under 300 years of them.
	const maxSecs = int64(maxRateWait / time.Second)
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
			return clampRateWait(time.Duration(min(s, maxSecs)) * time.Second), true
		}
		if t, err := http.ParseTime(v); err == nil {
			return clampRateWait(t.Sub(now)), true
		}
	}
	if v := h.Get("RateLimit-Reset"); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil && s > 0 {
			if s-now.Unix() > maxSecs {
				return maxRateWait, true
			}
			return clampRateWait(time.Unix(s, 0).Sub(now) + time.Second), true
		}
	}
	return 0, false
}

func clampRateWait(d time.Duration) time.Duration {
	return min(max(d, minRateWait), maxRateWait)
}

// CallOnce runs a call that must not take effect twice, such as creating a
// note or a commit status. look runs first and reports whether what do
// would achieve holds already (it may mend it itself, by an edit that is
// safe to repeat); only then does do run, without retries on server
// errors. After a server or network error, which may have taken effect,
// look runs again before another try, up to r.ServerErrors times, with
// the backoff of Call. Rate limits are waited out as by Call.
func (r Retrier) CallOnce(ctx context.Context, look func() (done bool, err error), do func() (*gitlab.Response, error)) error {
	backoff := cmp.Or(r.Backoff, defaultBackoff)
	maxBackoff := max(cmp.Or(r.MaxBackoff, defaultMaxBackoff), backoff)
	limit := cmp.Or(r.ServerErrors, maxServerErrors)
	once := r
	once.NoServerRetry = true
	for attempt := 1; ; attempt++ {
		done, err := look()
		if err != nil || done {
			return err
		}
		err = once.Call(ctx, do)
		if !IsTransient(err) || limit > 0 && attempt > limit {
			return err
		}
		if err := Sleep(ctx, backoff); err != nil {
			return err
		}
		backoff = min(backoff*2, maxBackoff)
	}
}
