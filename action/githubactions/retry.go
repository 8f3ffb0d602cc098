package githubactions

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/google/go-github/v60/github"
)

// Bounds of the retries of one call.
const (
	// maxServerErrors is how many 5xx answers or network errors in a row
	// one call tolerates.
	maxServerErrors = 6
	// defaultRetryAfter is the wait for a secondary rate limit that names
	// none, as GitHub's documentation advises (at least a minute).
	defaultRetryAfter = time.Minute
)

// ConfigError is a failure that retrying cannot mend: bad credentials, a
// token without access, a repository or workflow that does not exist.
type ConfigError struct {
	Status int
	Err    error
}

// Error implements error.
func (e *ConfigError) Error() string {
	hint := ""
	switch e.Status {
	case http.StatusUnauthorized:
		hint = "the token in tokenEnv is not valid (expired or revoked?)"
	case http.StatusForbidden:
		hint = "the token in tokenEnv may not run this workflow: it needs actions: write on the repository"
	case http.StatusNotFound:
		hint = "owner, repo or workflow does not exist, or the token cannot see it"
	case http.StatusUnprocessableEntity:
		hint = "GitHub refused the request: check ref and that the workflow declares the inputs on workflow_dispatch"
	}
	return fmt.Sprintf("%s: %v", hint, e.Err)
}

// Unwrap returns the GitHub error.
func (e *ConfigError) Unwrap() error { return e.Err }

// call runs one API call, waiting out rate limits and retrying server and
// network errors with backoff, until ctx is done. Other errors end it: a
// *ConfigError for 401, 403, 404 and 422, which retrying cannot mend.
func (r *runner) call(ctx context.Context, do func() (*github.Response, error)) error {
	backoff := r.pollInterval
	serverErrors := 0
	for {
		resp, err := do()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		wait, retry := r.retryAfter(resp, err)
		if !retry {
			var er *github.ErrorResponse
			if errors.As(err, &er) && er.Response != nil {
				switch st := er.Response.StatusCode; st {
				case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusUnprocessableEntity:
					return &ConfigError{Status: st, Err: err}
				}
			}
			return err
		}
		if wait == 0 {
			serverErrors++
			if serverErrors > maxServerErrors {
				return fmt.Errorf("giving up after %d failed attempts: %w", serverErrors, err)
			}
			wait = backoff
			backoff = min(backoff*2, r.maxInterval)
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// retryAfter classifies an error: retry after the given wait (rate
// limits), retry with backoff (wait 0: server and network errors), or not.
func (r *runner) retryAfter(resp *github.Response, err error) (time.Duration, bool) {
	var (
		primary   *github.RateLimitError
		secondary *github.AbuseRateLimitError
		er        *github.ErrorResponse
		netErr    net.Error
	)
	switch {
	case errors.As(err, &primary):
		// Wait for the window to reset; a second more for clock skew.
		return max(time.Until(primary.Rate.Reset.Time)+time.Second, time.Second), true
	case errors.As(err, &secondary):
		if secondary.RetryAfter != nil {
			return max(*secondary.RetryAfter, time.Second), true
		}
		return defaultRetryAfter, true
	case errors.As(err, &er) && er.Response != nil:
		switch st := er.Response.StatusCode; {
		case st == http.StatusTooManyRequests:
			return retryAfterHeader(er.Response.Header), true
		case st >= 500:
			return 0, true
		}
		return 0, false
	case errors.As(err, &netErr):
		return 0, true
	}
	// Calls go-github does not check (the artifact download) report the
	// status only in the response.
	if resp != nil && resp.Response != nil {
		switch st := resp.StatusCode; {
		case st == http.StatusTooManyRequests,
			st == http.StatusForbidden && (resp.Header.Get("X-RateLimit-Remaining") == "0" || resp.Header.Get("Retry-After") != ""):
			return retryAfterHeader(resp.Header), true
		case st >= 500:
			return 0, true
		}
		return 0, false
	}
	// Errors without a response (a reset connection) are network errors too.
	if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return 0, true
	}
	return 0, false
}

// retryAfterHeader reads Retry-After (seconds or an HTTP date), or the
// rate limit's reset time; a minute when there is neither.
func retryAfterHeader(h http.Header) time.Duration {
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.Atoi(v); err == nil && s >= 0 {
			return max(time.Duration(s)*time.Second, time.Second)
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(time.Until(t), time.Second)
		}
	}
	if v := h.Get("X-RateLimit-Reset"); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil {
			return max(time.Until(time.Unix(s, 0))+time.Second, time.Second)
		}
	}
	return defaultRetryAfter
}
